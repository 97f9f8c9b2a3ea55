"""The one place gplace talks to orbax: save and restore training states.

A small wrapper around ``orbax.checkpoint.CheckpointManager`` with an absolute
directory, ``StandardSave`` / ``StandardRestore`` of a whole pytree (the
``gplace.rl.state.TrainState``), restores against an abstract target (shapes and
dtypes of a freshly initialised state), and the train step as the checkpoint
step. Saving is asynchronous; :meth:`Checkpointer.close` waits for it.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import jax
import orbax.checkpoint as ocp

from gplace.errors import CheckpointError


class Checkpointer:
  """Saves and restores one pytree per step under ``directory``.

  Args:
    directory: where checkpoints go (made absolute; created if missing).
    max_to_keep: how many recent checkpoints to keep.
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int = 3):
    self.directory = os.path.abspath(os.fspath(directory))
    try:
      os.makedirs(self.directory, exist_ok=True)
      self._manager = ocp.CheckpointManager(
          self.directory,
          options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                               create=True))
    except OSError as err:
      raise CheckpointError(f"Cannot use checkpoint directory "
                            f"{self.directory}: {err}") from err

  def latest_step(self) -> Optional[int]:
    """The newest saved step, or None."""
    return self._manager.latest_step()

  def save(self, step: int, state: Any) -> None:
    """Starts saving ``state`` (a pytree of arrays) as ``step``."""
    self._manager.save(int(step), args=ocp.args.StandardSave(state))

  def restore(self, target: Any, step: Optional[int] = None) -> Any:
    """Restores ``step`` (default: the latest) with the structure, shapes and
    dtypes of ``target`` (concrete arrays or ``jax.ShapeDtypeStruct`` s).

    Raises:
      CheckpointError: nothing to restore, or it does not match ``target``.
    """
    step = self.latest_step() if step is None else step
    if step is None:
      raise CheckpointError(f"No checkpoint in {self.directory}.")
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    try:
      return self._manager.restore(
          int(step), args=ocp.args.StandardRestore(abstract))
    except (ValueError, KeyError, TypeError) as err:
      raise CheckpointError(
          f"Checkpoint {step} in {self.directory} does not match this run's "
          f"training state ({err}); was it written with another config? Use a "
          "fresh workdir.") from err

  def wait_until_finished(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    """Waits for pending saves and releases the manager."""
    self._manager.wait_until_finished()
    self._manager.close()
