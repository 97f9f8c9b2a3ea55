"""Timing placed programs: :func:`measure` and :func:`measure_placements`.

Wall-clock medians with ``block_until_ready``; a placement that cannot be
built or run comes back as a failed :class:`Measurement` with its reason,
so an RL loop can penalize it instead of crashing.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, NamedTuple, Sequence

import jax
import numpy as np

from gplace.errors import (BuildError, CaptureError, GplaceError,
                           PlacementError, ScheduleError, first_line)
from gplace.execution import inputs
from gplace.execution import partition
from gplace.execution.executor import PlacedFunction, default_devices, place
from gplace.graphs.graph import Graph
from gplace.graphs.placement import check_placements
from gplace.sim.simulator import SimResult
from gplace.sim.topology import Topology


class Measurement(NamedTuple):
  """Wall-clock timing of one placed (or plain jitted) function.

  Attributes:
    runtime_s: median seconds per call (inf if failed).
    min_s, max_s: fastest and slowest call.
    iqr_s: interquartile range of the call times.
    std_s: their standard deviation.
    times_s: every timed call.
    n_clusters: executables per call (1 for a plain ``jax.jit``).
    n_transfers: device-to-device copies per call.
    build_s: seconds to trace, partition and compile (incl. ``compile_s``).
    compile_s: seconds compiling.
    failed: true if the placement could not be built or run.
    reason: why it failed ("" otherwise).
  """
  runtime_s: float
  min_s: float = float("inf")
  max_s: float = float("inf")
  iqr_s: float = 0.0
  std_s: float = 0.0
  times_s: tuple[float, ...] = ()
  n_clusters: int = 0
  n_transfers: int = 0
  build_s: float = 0.0
  compile_s: float = 0.0
  failed: bool = False
  reason: str = ""


def _is_runtime_failure(err: BaseException) -> bool:
  if isinstance(err, (BuildError, jax.errors.JaxRuntimeError, MemoryError)):
    return True
  text = str(err)
  return "RESOURCE_EXHAUSTED" in text or "Out of memory" in text


def _failed(reason: str, **fields) -> Measurement:
  return Measurement(runtime_s=float("inf"), failed=True, reason=reason,
                     **fields)


def measure(placed_or_fn, *args, repeats: int = 10, warmup: int = 2,
            **kwargs) -> Measurement:
  """Times a :class:`PlacedFunction` (or a plain function, as ``jax.jit``).

  Arguments are first put where they live (each parameter on the device of
  its input node), then the function is called ``warmup`` times untimed and
  ``repeats`` times timed, each call waited for with ``block_until_ready``.

  Returns:
    A :class:`Measurement`. A placement that cannot be built or run (out of
    device memory, a compile error) gives ``failed=True`` and its ``reason``
    instead of raising, so a search loop can penalize it. Bad input still
    raises a ``GplaceError``: ``CaptureError`` (not a function, or arguments
    it cannot be traced with), ``ExecutionError`` (``repeats`` or
    ``warmup`` not a count, arguments of other shapes than the placed
    function's).
  """
  inputs.check_fn(placed_or_fn, "gplace.measure",
                  "a PlacedFunction (gplace.place(...)) or a jittable "
                  "function")
  repeats = inputs.check_count(repeats, "repeats", 1)
  warmup = inputs.check_count(warmup, "warmup", 0)
  if isinstance(placed_or_fn, PlacedFunction):
    placed = placed_or_fn
    try:
      placed.build(*args, **kwargs)
      call_args, call_kwargs = placed.stage_args(*args, **kwargs)
    except Exception as err:  # pylint: disable=broad-except
      if not _is_runtime_failure(err):
        raise
      return _failed(first_line(err))
    call = placed
    build_s, compile_s = placed.build_s, placed.compile_s
    n_clusters, n_transfers = placed.n_clusters, placed.n_transfers
  else:
    start = time.perf_counter()
    jitted = jax.jit(placed_or_fn)
    try:
      jitted = jitted.lower(*args, **kwargs).compile()
    except GplaceError:
      raise
    except Exception as err:  # pylint: disable=broad-except
      if not _is_runtime_failure(err):
        raise CaptureError(
            f"gplace.measure could not trace "
            f"{getattr(placed_or_fn, '__name__', 'fn')!r} with the given "
            f"arguments: {first_line(err)}. Pass the arguments fn takes, as "
            "for jax.jit(fn)(*args).") from err
      return _failed(first_line(err))
    build_s = compile_s = time.perf_counter() - start
    call, call_args, call_kwargs = jitted, args, kwargs
    n_clusters, n_transfers = 1, 0
  fields = dict(n_clusters=n_clusters, n_transfers=n_transfers,
                build_s=build_s, compile_s=compile_s)
  times = []
  try:
    for i in range(warmup + repeats):
      start = time.perf_counter()
      jax.block_until_ready(call(*call_args, **call_kwargs))
      if i >= warmup:
        times.append(time.perf_counter() - start)
  except Exception as err:  # pylint: disable=broad-except
    if not _is_runtime_failure(err):
      raise
    return _failed(first_line(err), **fields)
  q1, q3 = np.percentile(times, [25, 75])
  return Measurement(
      runtime_s=float(statistics.median(times)), min_s=min(times),
      max_s=max(times), iqr_s=float(q3 - q1), std_s=float(np.std(times)),
      times_s=tuple(times), **fields)


def measure_placements(fn: Callable, graph: Graph, placements, args: tuple,
                       kwargs: dict | None = None, *, devices=None,
                       mode: str = "cluster", schedules=None,
                       topology: Topology | None = None, repeats: int = 5,
                       warmup: int = 1, penalty_s: float = float("inf"),
                       ) -> np.ndarray:
  """Measures ``K`` placements of one program; a host reward function.

  Args:
    fn, graph: as for :func:`place`.
    placements: ``[K, N]`` device indices.
    args, kwargs: the arguments to run ``fn`` on.
    devices, mode, topology: as for :func:`place`.
    schedules: ``[K, N]`` int topological orders, a ``SimResult`` of these
      ``K`` placements (``simulate(..., return_schedule=True)``),
      ``"device_greedy"``, or None: the simulator's default schedule of each
      placement on ``topology``, simulated for all ``K`` in one call.
    repeats, warmup: as for :func:`measure`.
    penalty_s: runtime reported for a placement that fails.

  Returns:
    ``[K]`` float64 median seconds per call (``penalty_s`` where failed).
    Warns (:class:`~gplace.execution.inputs.SingleDeviceWarning`) when
    several placements are measured on one device.

  Raises:
    PlacementError: placements not ``[K, N]`` integers in range.
    ScheduleError: schedules of the wrong shape or not topological.
    CaptureError, ExecutionError: ``fn`` not callable, ``args`` not a tuple
      or ``kwargs`` not a dict, ``devices`` not distinct ``jax.Device`` s,
      an unknown ``mode``, ``repeats`` / ``warmup`` / ``penalty_s`` of the
      wrong kind.
  """
  inputs.check_fn(fn, "measure_placements")
  args, kwargs = inputs.check_call(args, kwargs, ("args", "kwargs"))
  devices = (inputs.check_devices(devices, "measure_placements")
             if devices is not None else default_devices())
  mode = inputs.check_mode(mode)
  repeats = inputs.check_count(repeats, "repeats", 1)
  warmup = inputs.check_count(warmup, "warmup", 0)
  penalty_s = inputs.check_penalty(penalty_s)
  checked = check_placements(placements, graph, len(devices))  # [K, N]
  if np.ndim(placements) != 2:
    raise PlacementError(
        f"placements must be [K, N], one placement per row, got shape "
        f"{np.shape(placements)}; for one placement pass placement[None].")
  placements = checked
  k_placements = placements.shape[0]
  inputs.warn_if_single_device(devices, k_placements)
  if k_placements == 0:
    return np.zeros(0, np.float64)
  if isinstance(schedules, SimResult):
    schedules = partition.schedule_orders(schedules)
  if schedules is None:
    schedules = partition.default_schedules(graph, placements, devices,
                                            topology)
  if not isinstance(schedules, str):
    schedules = np.asarray(schedules)
    if schedules.ndim != 2 or schedules.shape[0] != k_placements:
      raise ScheduleError(
          f"schedules must hold one order per placement, [{k_placements}, "
          f"{graph.n_nodes}], got shape {schedules.shape}.")
  runtime_s = np.empty(k_placements, np.float64)
  for k, placement in enumerate(placements):
    schedule = schedules if isinstance(schedules, str) else schedules[k]
    placed = place(fn, graph, placement, devices, mode, schedule=schedule,
                   topology=topology)
    result = measure(placed, *args, repeats=repeats, warmup=warmup, **kwargs)
    runtime_s[k] = penalty_s if result.failed else result.runtime_s
  return runtime_s


def fastest_in_rounds(placed: Sequence[Callable], *args, rounds: int,
                      repeats: int, warmup: int,
                      rng: np.random.Generator) -> np.ndarray:
  """``float64 [len(placed)]``: each function's fastest call over
  ``rounds`` interleaved rounds of :func:`measure` (``repeats`` calls after
  ``warmup``, the functions in a fresh random order each round, so a burst
  of load on a shared machine hits them alike); inf where every round
  failed."""
  fastest = np.full(len(placed), np.inf)
  for _ in range(rounds):
    for i in rng.permutation(len(placed)):
      timing = measure(placed[i], *args, repeats=repeats, warmup=warmup)
      if not timing.failed:
        fastest[i] = min(fastest[i], timing.min_s)
  return fastest
