"""Training across processes with ``jax.distributed``.

:func:`initialize` (from :mod:`gplace.processes`) starts a multi-process run;
:func:`gplace.rl.train` then splits its global batch of samples over every
device of every process, and only process 0 (:func:`is_primary`) writes the
workdir. See docs/guide.md, "How to launch".
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Optional, TypeVar

import jax

from gplace.errors import DistributedError
# The generic process helpers, public here too (gplace.rl.distributed.X).
from gplace.processes import (COORDINATOR_ENV, NUM_PROCESSES_ENV,
                              PEER_LOST_STATUS, PROCESS_ID_ENV, SLURM_ENV,
                              ProcessLayout, agree, allgather, broadcast,
                              exit_when_a_peer_is_lost, initialize,
                              is_distributed, is_primary, process_count,
                              process_index, resolve_layout)

T = TypeVar("T")

__all__ = [
    "COORDINATOR_ENV", "NUM_PROCESSES_ENV", "PEER_LOST_STATUS",
    "PROCESS_ID_ENV", "SLURM_ENV", "ProcessLayout", "agree", "allgather",
    "broadcast", "check_single_process", "entered_on_primary",
    "exit_when_a_peer_is_lost", "first_on_primary", "initialize",
    "is_distributed",
    "is_primary", "local_share", "parallel_devices", "process_count",
    "process_index", "resolve_layout", "silent",
]


def parallel_devices(count: int) -> list:
  """The ``count`` devices a run's update is split over: every device of
  every process in a multi-process run, else the first local ones."""
  if is_distributed():
    devices = jax.devices()
    if count != len(devices):
      raise DistributedError(
          f"a multi-process run splits its update over all "
          f"{len(devices)} devices of its {jax.process_count()} processes, "
          f"not {count}.")
    return devices
  return jax.local_devices()[:count]


def local_share(count: int) -> int:
  """How many of :func:`parallel_devices` ``(count)`` are this process's
  (the leading size of its share of a ``pmap`` argument)."""
  return jax.local_device_count() if is_distributed() else count


def first_on_primary(fn: Callable[[], T],
                     default: Optional[Callable[[], T]] = None
                     ) -> Optional[T]:
  """``fn()`` on process 0 (``default()`` elsewhere, None without one), and
  every process learns whether process 0 failed, instead of waiting for it
  in the next collective.

  Raises:
    Exception: process 0's own error, on process 0.
    DistributedError: on the other processes, when process 0 failed.
  """
  if not is_distributed():
    return fn()
  error, value = None, None
  if is_primary():
    try:
      value = fn()
    except Exception as err:  # pylint: disable=broad-except
      error = err  # raised below, once every process knows
  elif default is not None:
    value = default()
  if agree(error is not None):
    if error is not None:
      raise error
    raise DistributedError(
        f"process 0 of this run stopped with an error before training "
        f"(process {jax.process_index()} saw no details); read process 0's "
        "output, fix it and start every process again.")
  return value


@contextlib.contextmanager
def entered_on_primary(context):
  """Enters ``context`` on process 0 (:func:`first_on_primary`: every
  process learns if it failed), exits it there at the end."""
  first_on_primary(context.__enter__)
  try:
    yield
  finally:
    if is_primary():
      context.__exit__(*sys.exc_info())


def check_single_process(what: str) -> None:
  """Refuses ``what`` in a multi-process run.

  Raises:
    DistributedError: this process is one of several.
  """
  if is_distributed():
    raise DistributedError(
        f"{what} runs in one process, but this is process "
        f"{jax.process_index()} of {jax.process_count()}; start it without "
        "--num_processes / jax.distributed (gplace.rl.train splits over "
        "processes).")


def silent(_: Any) -> None:
  """A ``log`` that drops its line (the processes other than 0)."""
