"""The one place gplace talks to orbax: save and restore training states.

:class:`Checkpointer` saves the :class:`~gplace.rl.state.TrainState` at the
train step, asynchronously; :meth:`Checkpointer.restore_latest` refuses a
step written by another run and moves corrupted steps aside, falling back to
the newest intact one.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import types
from typing import Any, Callable, NamedTuple, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp

from gplace.errors import CheckpointError, first_line


def saved_steps(directory: str | os.PathLike) -> list[int]:
  """The steps saved in ``directory`` (ascending; none if it is missing),
  without opening it: orbax renames a step's directory to its number only
  once the step is complete."""
  directory = os.fspath(directory)
  if not os.path.isdir(directory):
    return []
  return sorted(int(name) for name in os.listdir(directory)
                if name.isdigit()
                and os.path.isdir(os.path.join(directory, name)))


def discard(directory: str | os.PathLike) -> None:
  """Deletes ``directory`` and every checkpoint in it."""
  shutil.rmtree(os.fspath(directory), ignore_errors=True)


def root_cause(err: BaseException, limit: int = 240) -> str:
  """The first line of the innermost cause of ``err`` (orbax wraps
  tensorstore's "DATA_LOSS: ..." in a generic message), cut to ``limit``."""
  while err.__cause__ is not None:
    err = err.__cause__
  text = first_line(err)
  return text if len(text) <= limit else text[:limit - 3] + "..."


class StepProblem(NamedTuple):
  """Why a step cannot be restored.

  Attributes:
    corrupted: True: its files cannot be read; False: it holds a training
      state of another shape (another config).
    reason: one line.
  """
  corrupted: bool
  reason: str


def _shapes(flat: dict) -> dict:
  """``{path: (shape, dtype)}`` of the array leaves of a flat dict."""
  return {path: (tuple(leaf.shape), np.dtype(leaf.dtype))
          for path, leaf in flat.items() if hasattr(leaf, "shape")}


def tree_difference(saved: dict, wanted: dict, limit: int = 3) -> str:
  """Up to ``limit`` differences between two ``{path: (shape, dtype)}``
  dicts, as text (empty when they match)."""
  lines = []
  for path in sorted(set(saved) | set(wanted)):
    name = "/".join(path)
    if path not in saved:
      lines.append(f"{name} missing from the checkpoint")
    elif path not in wanted:
      lines.append(f"{name} not in this run's state")
    elif saved[path] != wanted[path]:
      (s_shape, s_dtype), (w_shape, w_dtype) = saved[path], wanted[path]
      lines.append(f"{name} is {s_dtype}{list(s_shape)} there, "
                   f"{w_dtype}{list(w_shape)} here")
  more = f" and {len(lines) - limit} more" if len(lines) > limit else ""
  return "; ".join(lines[:limit]) + more


def _is_abandoned_read(unraisable) -> bool:
  """An "Exception ignored" report of a read orbax gave up on: its coroutine
  collected, or its callback hitting orbax's closed event loop."""
  return isinstance(unraisable.object, types.CoroutineType) or (
      isinstance(unraisable.exc_value, RuntimeError)
      and str(unraisable.exc_value) == "Event loop is closed")


def _silence_abandoned_reads() -> None:
  """When one array of a step cannot be read, orbax returns the error but
  leaves the other reads behind; their callbacks (during the restore and
  after) and their collection print tracebacks that say nothing new (the
  step's problem is reported). Installed before the first restore,
  ``sys.unraisablehook`` drops exactly those (:func:`_is_abandoned_read`)
  and passes anything else on."""
  previous = sys.unraisablehook
  if getattr(previous, "gplace_silences_abandoned_reads", False):
    return

  def hook(unraisable):
    if not _is_abandoned_read(unraisable):
      previous(unraisable)

  hook.gplace_silences_abandoned_reads = True
  sys.unraisablehook = hook


class Checkpointer:
  """Saves and restores one pytree per step under ``directory``.

  In a multi-process run only process 0 makes one (the others share its
  state, :mod:`gplace.rl.distributed`): orbax is told that process 0 alone
  takes part, so it waits for no other process.

  Args:
    directory: where checkpoints go (made absolute; created if missing).
    max_to_keep: how many recent checkpoints to keep.
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int = 3):
    self.directory = os.path.abspath(os.fspath(directory))
    processes = {}
    if jax.process_count() > 1:
      alone = ocp.options.MultiprocessingOptions(
          primary_host=jax.process_index(),
          active_processes={jax.process_index()})
      processes = dict(multiprocessing_options=alone)
    try:
      os.makedirs(self.directory, exist_ok=True)
      self._manager = ocp.CheckpointManager(
          self.directory, item_handlers=ocp.StandardCheckpointHandler(),
          options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                               create=not processes,
                                               **processes))
    except OSError as err:
      raise CheckpointError(f"Cannot use checkpoint directory "
                            f"{self.directory}: {err}") from err

  def latest_step(self) -> Optional[int]:
    """The newest saved step, or None."""
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """Every saved step, ascending."""
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any) -> None:
    """Starts saving ``state`` (a pytree of arrays) as ``step``."""
    self._manager.save(int(step), args=ocp.args.StandardSave(state))

  def _try_restore(self, step: int, target: Any
                   ) -> tuple[Optional[Any], Optional[StepProblem]]:
    """``(state, None)``, or ``(None, StepProblem)``."""
    wanted = _shapes(ocp.tree.to_flat_dict(
        ocp.tree.serialize_tree(target, keep_empty_nodes=True)))
    try:
      metadata = self._manager.item_metadata(step)
      saved = _shapes(ocp.tree.to_flat_dict(metadata.tree))
    except Exception as err:  # pylint: disable=broad-except
      # orbax raises JSON, tensorstore and plain Exceptions alike here.
      return None, StepProblem(True, f"unreadable metadata: "
                                     f"{root_cause(err)}")
    difference = tree_difference(saved, wanted)
    if difference:
      return None, StepProblem(False, difference)
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    _silence_abandoned_reads()
    try:
      return self._manager.restore(
          int(step), args=ocp.args.StandardRestore(abstract)), None
    except Exception as err:  # pylint: disable=broad-except
      problem = StepProblem(True, f"unreadable arrays: {root_cause(err)}")
    gc.collect()  # the abandoned reads, now rather than in a later step
    return None, problem

  def _error(self, step: int, problem: StepProblem) -> CheckpointError:
    if problem.corrupted:
      return CheckpointError(
          f"Checkpoint {step} in {self.directory} is corrupted or incomplete "
          f"({problem.reason}); restore an older step, or delete it.")
    return CheckpointError(
        f"Checkpoint {step} in {self.directory} does not match this run's "
        f"training state ({problem.reason}); was it written with another "
        "config? Use a fresh workdir.")

  def restore(self, target: Any, step: Optional[int] = None) -> Any:
    """Restores ``step`` (default: the latest) with the structure, shapes and
    dtypes of ``target`` (concrete arrays or ``jax.ShapeDtypeStruct`` s).

    Raises:
      CheckpointError: nothing to restore, the step is corrupted, or it does
        not match ``target``.
    """
    step = self.latest_step() if step is None else step
    if step is None:
      raise CheckpointError(f"No checkpoint in {self.directory}.")
    state, problem = self._try_restore(int(step), target)
    if problem is not None:
      raise self._error(int(step), problem)
    return state

  def restore_latest(self, target: Any,
                     log: Callable[[str], None] = print) -> Optional[Any]:
    """The newest intact step restored like :meth:`restore`, or None when
    there is no checkpoint. Newer corrupted steps are skipped (``log`` says
    which and why) and moved to ``<directory>.corrupted/`` so that the run
    can save those steps again.

    Raises:
      CheckpointError: a step holds another config's state, or no step is
        intact (the message lists each step's problem and the fix).
    """
    skipped = []
    for step in reversed(self.all_steps()):
      state, problem = self._try_restore(step, target)
      if problem is None:
        for bad_step, reason in skipped:
          log(f"[gplace] skipped checkpoint step {bad_step}, corrupted "
              f"({reason}); moved to {self._quarantine(bad_step)}")
        if skipped:
          self._manager.reload()
        return state
      if not problem.corrupted:
        raise self._error(step, problem)
      skipped.append((step, problem.reason))
    if skipped:
      listed = "; ".join(f"step {s}: {reason}" for s, reason in skipped)
      raise CheckpointError(
          f"No intact checkpoint in {self.directory} ({listed}). Delete "
          "that directory, or pass --config.train.resume=False, to start "
          "over; or use a fresh workdir.")
    return None

  def _quarantine(self, step: int) -> str:
    """Moves ``step``'s directory into ``<directory>.corrupted/``."""
    parent = self.directory + ".corrupted"
    os.makedirs(parent, exist_ok=True)
    target, n = os.path.join(parent, str(step)), 1
    while os.path.exists(target):
      target, n = os.path.join(parent, f"{step}.{n}"), n + 1
    shutil.move(os.path.join(self.directory, str(step)), target)
    return target

  def wait_until_finished(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    """Waits for pending saves and releases the manager."""
    self._manager.wait_until_finished()
    self._manager.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
