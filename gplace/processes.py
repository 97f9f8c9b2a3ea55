"""Processes of a multi-process run (``jax.distributed``): who this process
is, and the small collectives that keep processes in step.

:func:`initialize` joins a run (arguments, ``JAX_*`` environment variables,
or SLURM); :func:`broadcast`, :func:`agree` and :func:`allgather` share
values between processes. Training (:mod:`gplace.rl.distributed`) and the
searches (:mod:`gplace.search.rounds`) build on it. See docs/guide.md, "How
to launch".
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
from typing import Callable, Iterator, Mapping, NamedTuple, Optional, TypeVar

import jax
import numpy as np

from gplace.errors import DistributedError, ProcessLostError, is_int

T = TypeVar("T")

#: Environment variables read when an argument is None (JAX itself reads
#: only the first; the other two are gplace's, named as JAX names it).
COORDINATOR_ENV = "JAX_COORDINATOR_ADDRESS"
NUM_PROCESSES_ENV = "JAX_NUM_PROCESSES"
PROCESS_ID_ENV = "JAX_PROCESS_ID"
#: Set in every task of a SLURM job step (JAX's own detection reads them).
SLURM_ENV = ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID",
             "SLURM_STEP_NODELIST")


class ProcessLayout(NamedTuple):
  """Who this process is in the run.

  Attributes:
    coordinator_address: ``host:port`` of process 0's coordinator, or None
      (one process, or SLURM, where JAX derives it from the node list).
    num_processes: processes in the run (1: not distributed).
    process_id: this process, ``0 <= process_id < num_processes``.
    source: where the layout came from: ``"arguments"``, ``"environment"``,
      ``"slurm"`` or ``"single"``.
  """
  coordinator_address: Optional[str]
  num_processes: int
  process_id: int
  source: str


def _as_count(value, name: str, where: str) -> int:
  """``value`` (an int, or the text of an environment variable) as an int."""
  if isinstance(value, str):
    try:
      value = int(value.strip())
    except ValueError:
      raise DistributedError(
          f"{where} {name}={value!r} is not an integer; set it to e.g. "
          f"{'2' if name == 'num_processes' else '0'}.") from None
  if not is_int(value):
    raise DistributedError(f"{name} must be an integer, got "
                           f"{type(value).__name__} {value!r}.")
  return int(value)


def _check_address(address) -> str:
  """``host:port`` with a port in 1..65535."""
  if not isinstance(address, str) or ":" not in address:
    raise DistributedError(
        f"coordinator_address={address!r} is not host:port; pass process "
        "0's address and a free port, e.g. --coordinator_address="
        "10.0.0.1:12345 (127.0.0.1:12345 for processes on one host).")
  host, port = address.rsplit(":", 1)
  if not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise DistributedError(
        f"coordinator_address={address!r}: the port must be a number in "
        "1..65535 after the host, e.g. 10.0.0.1:12345.")
  return address


def resolve_layout(coordinator_address: Optional[str] = None,
                   num_processes: Optional[int] = None,
                   process_id: Optional[int] = None, *,
                   environ: Optional[Mapping[str, str]] = None
                   ) -> ProcessLayout:
  """The layout the arguments describe, each None argument read from
  :data:`COORDINATOR_ENV`, :data:`NUM_PROCESSES_ENV`,
  :data:`PROCESS_ID_ENV`, and then from SLURM's variables (``SLURM_NTASKS``,
  ``SLURM_PROCID``) inside a SLURM job step. Host-side, starts nothing.

  Raises:
    DistributedError: a count that is not a positive integer, a process id
      out of range or missing, or several processes and no coordinator
      (outside SLURM).
  """
  env = os.environ if environ is None else environ
  source = "arguments"
  if coordinator_address is None and num_processes is None and (
      process_id is None):
    source = "environment"
  where = {}
  if coordinator_address is None and COORDINATOR_ENV in env:
    coordinator_address = env[COORDINATOR_ENV]
  if num_processes is None and NUM_PROCESSES_ENV in env:
    num_processes, where["num_processes"] = (env[NUM_PROCESSES_ENV],
                                             f"${NUM_PROCESSES_ENV}:")
  if process_id is None and PROCESS_ID_ENV in env:
    process_id, where["process_id"] = (env[PROCESS_ID_ENV],
                                       f"${PROCESS_ID_ENV}:")
  slurm = all(name in env for name in SLURM_ENV)
  if slurm and num_processes is None:
    num_processes, where["num_processes"] = env["SLURM_NTASKS"], "SLURM:"
    source = "slurm"
  if slurm and process_id is None:
    process_id, where["process_id"] = env["SLURM_PROCID"], "SLURM:"
  if num_processes is None:
    if process_id is not None or coordinator_address is not None:
      raise DistributedError(
          "num_processes is missing: a multi-process run needs all three "
          "of coordinator_address, num_processes and process_id (or their "
          f"${COORDINATOR_ENV}, ${NUM_PROCESSES_ENV}, ${PROCESS_ID_ENV}); "
          "pass e.g. --num_processes=2.")
    return ProcessLayout(None, 1, 0, "single")
  num_processes = _as_count(num_processes, "num_processes",
                            where.get("num_processes", ""))
  if num_processes < 1:
    raise DistributedError(f"num_processes={num_processes} must be at least "
                           "1 (the processes of the run, all hosts together).")
  if process_id is None:
    if num_processes == 1:
      return ProcessLayout(None, 1, 0, "single")
    raise DistributedError(
        f"process_id is missing for a run of {num_processes} processes; "
        f"give each process its own id 0..{num_processes - 1} "
        f"(--process_id or ${PROCESS_ID_ENV}); process 0 runs the "
        "coordinator.")
  process_id = _as_count(process_id, "process_id",
                         where.get("process_id", ""))
  if not 0 <= process_id < num_processes:
    raise DistributedError(
        f"process_id={process_id} is out of range for num_processes="
        f"{num_processes}; use 0..{num_processes - 1}, one id per process.")
  if num_processes == 1:
    return ProcessLayout(None, 1, 0, "single")
  if coordinator_address is None and source != "slurm":
    raise DistributedError(
        f"coordinator_address is missing for a run of {num_processes} "
        "processes; pass process 0's host and a free port to every process "
        f"(--coordinator_address=10.0.0.1:12345 or ${COORDINATOR_ENV}), or "
        "launch inside a SLURM job step (srun), where JAX finds it.")
  if coordinator_address is not None:
    coordinator_address = _check_address(coordinator_address)
  return ProcessLayout(coordinator_address, num_processes, process_id,
                       source)


def initialize(coordinator_address: Optional[str] = None,
               num_processes: Optional[int] = None,
               process_id: Optional[int] = None, *,
               heartbeat_timeout_s: int = 100,
               initialization_timeout_s: int = 300,
               shutdown_timeout_s: int = 300,
               environ: Optional[Mapping[str, str]] = None
               ) -> ProcessLayout:
  """Joins this process to a multi-process run (``jax.distributed``); a
  no-op for one process. Call it first, before anything runs on a device.

  CPU devices communicate through gloo (set here). If another process dies,
  a survivor's next collective fails, and :func:`exit_when_a_peer_is_lost`
  stops it with a :class:`~gplace.errors.ProcessLostError` line and
  :data:`PEER_LOST_STATUS`; failing that, JAX ends it within about
  ``heartbeat_timeout_s`` seconds (status 134, "the JAX distributed service
  detected fatal errors ... another task died") instead of letting it hang.

  Args:
    coordinator_address, num_processes, process_id: as
      :func:`resolve_layout` (None: the environment, or SLURM).
    heartbeat_timeout_s: seconds without a heartbeat after which a process
      counts as dead.
    initialization_timeout_s: how long to wait for every process to join.
    shutdown_timeout_s: how long a finished process waits at exit for the
      others to finish.
    environ: the environment to read (``os.environ``).

  Returns:
    The :class:`ProcessLayout`.

  Raises:
    DistributedError: a bad layout (:func:`resolve_layout`), JAX already
      running in this process (or initialized with another layout), or
      processes that did not all join in time.
  """
  layout = resolve_layout(coordinator_address, num_processes, process_id,
                          environ=environ)
  if layout.num_processes == 1:
    return layout
  if jax.distributed.is_initialized():
    if (jax.process_count(), jax.process_index()) == (layout.num_processes,
                                                      layout.process_id):
      return layout
    raise DistributedError(
        f"jax.distributed is already initialized as process "
        f"{jax.process_index()} of {jax.process_count()}, not "
        f"{layout.process_id} of {layout.num_processes}; initialize once "
        "per process.")
  for name, value in (("heartbeat_timeout_s", heartbeat_timeout_s),
                      ("initialization_timeout_s", initialization_timeout_s),
                      ("shutdown_timeout_s", shutdown_timeout_s)):
    if not is_int(value) or value < 1:
      raise DistributedError(f"{name}={value!r} must be a whole number of "
                             "seconds, at least 1.")
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  try:
    jax.distributed.initialize(
        coordinator_address=layout.coordinator_address,
        num_processes=layout.num_processes, process_id=layout.process_id,
        initialization_timeout=int(initialization_timeout_s),
        heartbeat_timeout_seconds=int(heartbeat_timeout_s),
        shutdown_timeout_seconds=int(shutdown_timeout_s))
  except Exception as err:  # pylint: disable=broad-except
    text = " ".join(str(err).split())[:300]
    if "backend" in text.lower() or "before" in text.lower():
      fix = ("call gplace.processes.initialize first, before any JAX "
             "computation (or jax.devices()) in this process")
    else:
      fix = (f"check that all {layout.num_processes} processes start with "
             f"the same coordinator_address ({layout.coordinator_address}) "
             "and num_processes, distinct process ids, and that process 0 "
             "can bind the port")
    raise DistributedError(
        f"jax.distributed.initialize failed for process "
        f"{layout.process_id} of {layout.num_processes}: {text}; {fix}."
    ) from err
  return layout


# -- inside a run ------------------------------------------------------------


def is_distributed() -> bool:
  """Whether this process is one of several."""
  return jax.process_count() > 1


def process_count() -> int:
  """Processes in the run (1: not distributed)."""
  return jax.process_count()


def process_index() -> int:
  """This process's index, ``0 <= process_index() < process_count()``."""
  return jax.process_index()


def is_primary() -> bool:
  """Whether this process writes the run's outputs (process 0)."""
  return jax.process_index() == 0


def broadcast(tree: T) -> T:
  """Process 0's ``tree`` (arrays) on every process; identity for one."""
  if not is_distributed():
    return tree
  # pylint: disable=g-import-not-at-top
  from jax.experimental import multihost_utils
  return multihost_utils.broadcast_one_to_all(tree)


def agree(flag: bool) -> bool:
  """Process 0's ``flag`` on every process (one tiny collective), so that
  every process takes the same branch (a decision to stop)."""
  if not is_distributed():
    return bool(flag)
  return bool(broadcast(np.asarray(bool(flag))))


def allgather(tree: T) -> T:
  """Every process's ``tree`` (numpy arrays of the same shapes and dtypes on
  every process), stacked on a new leading axis of size
  :func:`process_count`, in process order; for one process, ``tree`` with
  that axis of size 1. 64-bit leaves travel bit for bit (as int32 pairs),
  whatever ``jax_enable_x64`` says."""
  if not is_distributed():
    return jax.tree.map(lambda x: np.asarray(x)[None], tree)
  # pylint: disable=g-import-not-at-top
  from jax.experimental import multihost_utils
  leaves, treedef = jax.tree.flatten(tree)
  leaves = [np.ascontiguousarray(leaf) for leaf in leaves]
  sent = [leaf.reshape(leaf.shape + (1,)).view(np.int32)
          if leaf.dtype.itemsize == 8 else leaf for leaf in leaves]
  got = multihost_utils.process_allgather(sent, tiled=False)
  out = [np.ascontiguousarray(np.asarray(g)).view(leaf.dtype).reshape(
      (-1,) + leaf.shape) if leaf.dtype.itemsize == 8 else np.asarray(g)
         for g, leaf in zip(got, leaves)]
  return jax.tree.unflatten(treedef, out)


def broadcast_object(value: T) -> T:
  """Process 0's ``value`` (any picklable object) on every process; the
  value itself for one process. Every process of the run must call it."""
  if not is_distributed():
    return value
  data = pickle.dumps(value) if is_primary() else b""
  size = int(broadcast(np.asarray(len(data), np.int32)))
  buffer = (np.frombuffer(data, np.uint8) if is_primary()
            else np.zeros(size, np.uint8))
  return pickle.loads(np.asarray(broadcast(buffer), np.uint8).tobytes())


# -- when another process dies ---------------------------------------------------

#: Exit status of a process whose peer stopped responding (``EX_TEMPFAIL``
#: of sysexits.h: try again, i.e. restart every process to resume).
PEER_LOST_STATUS = 75

# What a collective's error says when a peer is gone: gloo's "Connection
# closed / reset by peer" or "Read error" (the peer's sockets closed with
# it), the coordination service's "Socket closed" (process 0 gone) or
# missed heartbeats.
_PEER_LOSS_SIGNS = ("gloo", "connection closed by peer",
                    "connection reset by peer", "socket closed",
                    "heartbeat", "another task died")


def is_peer_loss(err: BaseException) -> bool:
  """Whether ``err`` (from a collective of a multi-process run) says that
  another process is gone; always False for one process."""
  if not is_distributed():
    return False
  text = str(err).lower()
  return any(sign in text for sign in _PEER_LOSS_SIGNS)


def lost_peer_message(err: BaseException, what_survives: str) -> str:
  """One line naming the process that stopped, what is left
  (``what_survives``, e.g. the last checkpoint) and the fix."""
  me, count = process_index(), process_count()
  if count == 2:
    who = f"process {1 - me} of 2" + (" (the coordinator)" if me else "")
  elif me and "socket closed" in str(err).lower():
    who = f"process 0 of {count} (the coordinator)"
  else:
    who = f"a process of this run's {count} (not {me}, this one)"
  return (f"gplace: {who} stopped responding (killed or crashed); "
          f"{what_survives}; restart all {count} processes with the same "
          "command to resume.")


@contextlib.contextmanager
def exit_when_a_peer_is_lost(what_survives: Callable[[], str]
                             ) -> Iterator[None]:
  """Turns a collective failing because another process died
  (:func:`is_peer_loss`) into one line on stderr, ``ProcessLostError:
  gplace: process 1 of 2 stopped responding ...`` (with
  ``what_survives()``, called after the exception has passed every
  ``finally`` inside: pending checkpoints are written), and exits with
  :data:`PEER_LOST_STATUS`. Other errors pass unchanged.

  It exits at once (``os._exit``) instead of raising: the process cannot
  go on (JAX's coordination service ends it within its heartbeat timeout,
  with a C++ abort), and a normal exit would run JAX's own shutdown, whose
  barrier waits for the dead process and then aborts with a trace. jax
  0.10.2 has no hook that could say this in Python instead: the client's
  ``missed_heartbeat_callback`` cannot receive its status (the call fails
  with ``std::bad_cast`` and terminates), and ``jax.distributed.initialize``
  passes none. When the coordinator (process 0) dies, JAX's error poll
  learns it as the collective does and aborts at once: the collective's
  line has come first in the tests, but it is a race, and a survivor in
  host work then ends in JAX's abort (docs/guide.md, "How to launch").
  """
  try:
    yield
  except Exception as err:  # pylint: disable=broad-except
    if not is_peer_loss(err):
      raise
    try:
      survives = what_survives()
    except Exception as note_error:  # pylint: disable=broad-except
      survives = f"(what was saved is unknown: {note_error})"
    message = lost_peer_message(err, survives)
    sys.stdout.flush()
    sys.stderr.write(f"{ProcessLostError.__name__}: {message}\n")
    sys.stderr.flush()
    os._exit(PEER_LOST_STATUS)  # pylint: disable=protected-access
