"""A run's directory: what identifies the run, and resuming only that run.

:func:`prepare_workdir` refuses checkpoints of another run
(:func:`check_resume` lists the differing fields), deletes them with
``settings.train.resume=False``, and writes :func:`run_record`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from gplace.errors import ConfigError, WorkdirBusyError, first_line
from gplace.graphs.graph import Graph
from gplace.rl import checkpoint
from gplace.rl import metrics
from gplace.rl import run_outputs
from gplace.rl.fields import flatten
from gplace.rl.settings import (PolicySettings, TrainSettings,
                                free_on_resume, to_record)


def _digest(*arrays: Optional[np.ndarray]) -> str:
  h = hashlib.blake2b(digest_size=8)
  for array in arrays:
    if array is None:
      h.update(b"none")
      continue
    array = np.ascontiguousarray(array)
    h.update(f"{array.dtype.str}{array.shape}".encode())
    h.update(array.tobytes())
  return h.hexdigest()


def graph_fingerprint(graph: Graph, costs: Optional[np.ndarray] = None
                      ) -> str:
  """A hash of what the simulator reads of ``graph`` (kinds, costs, edges,
  device constraints; not the names) and of measured ``costs``."""
  return _digest(graph.kind, graph.flops, graph.bytes_accessed,
                 graph.out_bytes, graph.edge_src, graph.edge_dst,
                 graph.edge_bytes, graph.allowed_devices, graph.colocation,
                 costs)


def run_record(settings: TrainSettings, policy: PolicySettings, topology,
               graphs: Sequence[Any]) -> dict:
  """What ``config.json`` holds: the settings (sectioned as a config), the
  policy, the topology (name, devices, fingerprint) and per graph its name,
  size and fingerprint (``graphs``: anything with ``name``, ``graph`` and
  ``costs``)."""
  record = to_record(settings)
  record["policy"] = policy.record()
  record["topology"] = {"name": topology.name,
                        "devices": list(topology.device_names),
                        "fingerprint": hashlib.blake2b(
                            repr(topology).encode(),
                            digest_size=8).hexdigest()}
  record["graphs"] = [{"name": g.name, "nodes": g.graph.n_nodes,
                       "edges": g.graph.n_edges,
                       "fingerprint": graph_fingerprint(g.graph, g.costs)}
                      for g in graphs]
  return record


def record_differences(saved: Mapping, record: Mapping
                       ) -> list[tuple[str, Any, Any]]:
  """``(field, saved value, new value)`` for every field that differs
  between a saved ``config.json`` and ``record``, except the fields free on
  resume (a field only one side has: ``"(missing)"``)."""
  old, new = flatten(saved), flatten(json.loads(json.dumps(
      metrics.json_safe(record))))
  free = set(free_on_resume())
  diffs = []
  for path in sorted(set(old) | set(new)):
    if path in free:
      continue
    before, after = old.get(path, "(missing)"), new.get(path, "(missing)")
    if before != after:
      diffs.append((path, before, after))
  return diffs


_FRESH_START = ("use a new --workdir, or --config.train.resume=False to "
                "discard its checkpoints and start over there")


def check_resume(record: Mapping, workdir: str, checkpoint_step: int,
                 settings: TrainSettings) -> None:
  """Refuses to resume a run whose checkpoints another run wrote:
  ``workdir/config.json`` must equal ``record`` in every field not free on
  resume, and the newest checkpoint must not lie past the run's last step.

  Raises:
    ConfigError: the fields that differ (saved -> new) and the fix.
  """
  path = os.path.join(workdir, run_outputs.CONFIG_FILE)
  try:
    saved = metrics.read_json(path)
  except (OSError, ValueError) as err:
    raise ConfigError(
        f"{workdir} holds checkpoints (step {checkpoint_step}) but its "
        f"{run_outputs.CONFIG_FILE} cannot be read ({first_line(err)}), so "
        f"nothing says they come from this run; {_FRESH_START}.") from err
  if not isinstance(saved, Mapping):
    raise ConfigError(f"{path} does not hold a run record; {_FRESH_START}.")
  diffs = record_differences(saved, record)
  if diffs:
    listed = "; ".join(f"{p}: {json.dumps(a)} -> {json.dumps(b)}"
                       for p, a, b in diffs)
    raise ConfigError(
        f"{workdir} holds a run (checkpoint at step {checkpoint_step}) "
        f"trained with different settings or graphs; resuming would mix "
        f"two runs. Fields that differ (saved -> new): {listed}. To "
        f"continue that run, drop those changes; otherwise {_FRESH_START}. "
        f"(Fields free to change on resume: "
        f"{', '.join(free_on_resume())}.)")
  if checkpoint_step > settings.total_steps:
    raise ConfigError(
        f"{workdir} holds a checkpoint at step {checkpoint_step}, past this "
        f"run's last step {settings.total_steps} (warm_start.steps + "
        f"train.num_steps); use --config.train.num_steps="
        f"{checkpoint_step - settings.warm_steps} or more, or "
        f"{_FRESH_START}.")


def write_probe(directory: str) -> Optional[OSError]:
  """Creates ``directory`` and writes a file there: None, or the error."""
  try:
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, ".gplace_write_test")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as err:
    return err
  return None


def check_workdir(workdir: str) -> None:
  """Creates ``workdir`` and writes a probe file there.

  Raises:
    ConfigError: it cannot be written.
  """
  err = write_probe(workdir)
  if err is not None:
    raise ConfigError(f"Cannot write to workdir {workdir!r}: {err}. Pass a "
                      "writable --workdir.") from err


#: The lock file of a workdir (:class:`WorkdirLock`).
LOCK_FILE = "run.lock"

try:
  import fcntl  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover  (Windows: the pid check alone)
  fcntl = None


def _process_alive(pid: int) -> bool:
  """Whether a process ``pid`` runs on this host."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process
    return True
  except OSError:
    return False
  return True


def _describe_holder(holder: Mapping) -> str:
  """``"process 123 on host h since 2026-01-01 10:00:00 (python run.py
  ...)"``."""
  text = (f"process {holder.get('pid', '?')} on host "
          f"{holder.get('host', '?')} since {holder.get('since', '?')}")
  if holder.get("command"):
    text += f" ({holder['command']})"
  return text


class WorkdirLock:
  """Holds ``workdir`` for one run: an OS lock (``fcntl.flock``) on
  ``workdir/run.lock``, which also records the holder (pid, host, since
  when, command) for the message another run gets. The OS drops the lock
  when the process ends, however it ends; a record left by a process that
  no longer holds the lock (a run that crashed or was killed) is taken over,
  and the log says so.

  Use as a context manager (:meth:`acquire` on entry, :meth:`release` on
  exit).

  Raises (on entry):
    WorkdirBusyError: another live process holds the workdir (the message
      names it).
    ConfigError: ``workdir`` cannot be written.
  """

  def __init__(self, workdir: str, log: Callable[[str], None] = print):
    self.workdir = os.path.abspath(workdir)
    self.path = os.path.join(self.workdir, LOCK_FILE)
    self.log = log
    self._fd: Optional[int] = None

  def _read(self, fd: int) -> dict:
    try:
      os.lseek(fd, 0, os.SEEK_SET)
      text = os.read(fd, 65536).decode("utf-8", "replace")
      holder = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
      return {}
    return holder if isinstance(holder, dict) else {}

  def _busy(self, holder: Mapping) -> WorkdirBusyError:
    who = (_describe_holder(holder) if holder else
           "another process (it has not written its pid yet)")
    return WorkdirBusyError(
        f"workdir {self.workdir} is in use by another gplace run: {who}. "
        "Two runs in one workdir would overwrite each other's checkpoints "
        "and metrics. Wait for that run to end (or stop it), or pass "
        f"another --workdir. (Lock file: {self.path}.)")

  def acquire(self) -> "WorkdirLock":
    check_workdir(self.workdir)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      holder = self._lock(fd)
    except BaseException:
      os.close(fd)
      raise
    self._fd = fd
    host = socket.gethostname()
    if holder and holder.get("pid") != os.getpid():
      state = ""
      if holder.get("host") == host and isinstance(holder.get("pid"), int):
        state = ("; that process is no longer running"
                 if not _process_alive(holder["pid"])
                 else "; it no longer holds the lock")
      self.log(f"[gplace] took over the lock of {self.workdir} left by "
               f"{_describe_holder(holder)}{state} (a run that crashed or "
               "was killed)")
    record = {"pid": os.getpid(), "host": host,
              "since": time.strftime("%Y-%m-%d %H:%M:%S"),
              "since_unix_s": round(time.time(), 3),
              "command": " ".join(sys.argv)[:200]}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(record).encode())
    os.fsync(fd)
    return self

  def _lock(self, fd: int) -> dict:
    """Locks ``fd``; returns the record found there (empty if none).

    Raises:
      WorkdirBusyError: another process holds it.
    """
    if fcntl is not None:
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return self._read(fd)
      except BlockingIOError as err:
        raise self._busy(self._read(fd)) from err
      except OSError:
        pass  # no flock on this filesystem: the recorded pid decides
    holder = self._read(fd)
    pid = holder.get("pid")
    if (isinstance(pid, int) and pid != os.getpid()
        and holder.get("host") == socket.gethostname()
        and _process_alive(pid)):
      raise self._busy(holder)
    return holder

  def release(self) -> None:
    """Clears the record and drops the lock (a clean end: the next run
    takes the workdir without a word)."""
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    try:
      os.ftruncate(fd, 0)
    except OSError:
      pass
    finally:
      os.close(fd)  # drops the flock

  def __enter__(self) -> "WorkdirLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()


def locked(workdir: Optional[str], log: Callable[[str], None] = print):
  """A :class:`WorkdirLock` on ``workdir`` (a context manager), or one that
  does nothing for ``workdir=None``."""
  if workdir is None:
    return contextlib.nullcontext()
  return WorkdirLock(workdir, log)


def prepare_workdir(workdir: str, record: Mapping, settings: TrainSettings,
                    log: Callable[[str], None]) -> str:
  """Decides what becomes of a run already in ``workdir``, then writes
  ``record`` as ``config.json``; returns the checkpoint directory.

  With checkpoints there, ``train.resume=False`` deletes them (the run
  starts over); otherwise the run resumes only if the saved record matches
  (:func:`check_resume`). A refused run leaves ``config.json`` as it was.

  Raises:
    ConfigError: ``workdir`` cannot be written, or holds another run.
  """
  check_workdir(workdir)
  directory = os.path.join(workdir, run_outputs.CHECKPOINT_DIR)
  steps = checkpoint.saved_steps(directory)
  if steps and not settings.train.resume:
    checkpoint.discard(directory)
    log(f"[gplace] train.resume=False: deleted the checkpoints of steps "
        f"{', '.join(map(str, steps))} in {directory}; starting over")
  elif steps:
    check_resume(record, workdir, steps[-1], settings)
  metrics.write_json(os.path.join(workdir, run_outputs.CONFIG_FILE), record)
  return directory
