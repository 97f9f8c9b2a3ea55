"""Choosing :func:`gplace.optimize`'s winner: measured on this machine when
the topology is the local one, and a simpler plan on a tie.

:func:`candidates_to_measure` orders the candidates to measure (the
simulated winner, the best single device, the best baseline, then the next
fastest); :func:`measure` runs them with the executor in interleaved rounds
within a time budget; :func:`choose` returns the fastest candidate, or a
simpler one (fewer devices, clusters, transfers) when the fastest is not
faster by more than the noise: the measurements' own spread, or without
measurements the simulator's error on the topology. Host-side.
"""

from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from gplace.autoplace.candidates import CHAIN, Candidate, best_of
from gplace.execution.executor import place
from gplace.execution.timing import Measurement
from gplace.execution.timing import measure as measure_placed
from gplace.graphs.graph import NODE_OP, Graph
from gplace.sim.clusters import count_clusters, count_copies
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

#: Relative tie of simulated runtimes on a preset topology: the simulator is
#: the model of those devices, so only float rounding is noise.
PRESET_TIE = 1e-6
#: Relative tie on this machine's devices without measurements: the
#: uncalibrated local topology's guesses were 2.4x off on a flax LM (issue
#: 46); a calibrated one (``gplace.profile``) ranks within about 10%.
UNCALIBRATED_TIE = 0.5
CALIBRATED_TIE = 0.10
#: Timed calls per candidate per round, and rounds at most.
CALLS_PER_ROUND = 5
MAX_ROUNDS = 4
#: Candidates measured at most (the mandatory ones first).
MAX_MEASURED = 5


class Complexity(NamedTuple):
  """How much a placement splits a program: devices it uses, the
  executor's clusters, and values copied between devices. Compared as a
  tuple: fewer devices first."""
  devices: int
  clusters: int
  transfers: int


def schedule_of(graph: Graph, topology: Topology, costs,
                candidate: Candidate) -> np.ndarray:
  """``[N]`` int32 op order ``candidate`` was simulated in (its own
  order, or the default schedule's)."""
  if candidate.order is not None:
    return np.asarray(candidate.order, np.int32)
  result = simulate(graph, candidate.placement, topology, costs,
                    return_schedule=True)
  return np.asarray(result.order, np.int32)


def complexity(graph: Graph, topology: Topology, costs,
               candidate: Candidate) -> Complexity:
  """:class:`Complexity` of ``candidate`` in its schedule."""
  placement = np.asarray(candidate.placement, np.int64)
  order = schedule_of(graph, topology, costs, candidate)
  clusters = count_clusters(graph, placement[None], order[None],
                            topology.n_devices)
  copies = count_copies(graph, placement[None], topology.n_devices)
  ops = graph.kind == NODE_OP
  used = np.unique(placement[ops] if ops.any() else placement)
  return Complexity(int(used.size), int(clusters.sum()), int(copies.sum()))


def candidates_to_measure(tried: Sequence[Candidate],
                          limit: int = MAX_MEASURED) -> list[Candidate]:
  """The feasible candidates worth measuring, mandatory ones first: the
  simulated winner, the best single device, the best baseline (a label
  without ``from``, ``policy``, ``solver``, nor gplace's critical chain),
  then the next fastest by
  simulated runtime; each placement once."""
  feasible = sorted((c for c in tried if math.isfinite(c.runtime_s)),
                    key=lambda c: c.runtime_s)
  singles = [c for c in feasible if c.label.startswith("single_device")]
  classical = [c for c in feasible if not any(
      word in c.label for word in ("from ", "policy", "solver", "GO",
                                   "pretrained", CHAIN))]
  order = feasible[:1] + singles[:1] + classical[:1] + feasible[1:]
  out, seen = [], set()
  for candidate in order:
    key = (np.asarray(candidate.placement).tobytes(),
           None if candidate.order is None
           else np.asarray(candidate.order).tobytes())
    if key not in seen:
      seen.add(key)
      out.append(candidate)
  return out[:limit]


def first_build_s(fn: Callable, args: tuple, graph: Graph,
                  topology: Topology, costs, candidate: Candidate, *,
                  devices=None,
                  clock: Callable[[], float] = time.perf_counter) -> float:
  """Seconds to build ``candidate`` of ``fn`` (compile its clusters) and run
  it once; the compiled clusters stay in the executor's cache, so measuring
  it later does not compile them again. A placement that fails: ``inf``."""
  start = clock()
  schedule = schedule_of(graph, topology, costs, candidate)
  placed = place(fn, graph, candidate.placement, devices, schedule=schedule)
  run = measure_placed(placed, *args, repeats=1, warmup=0)
  return math.inf if run.failed else clock() - start


def measure(fn: Callable, args: tuple, graph: Graph, topology: Topology,
            costs, candidates: Sequence[Candidate], *, time_s: float,
            devices=None,
            clock: Callable[[], float] = time.perf_counter
            ) -> dict[str, Measurement]:
  """Measures ``candidates`` of ``fn`` in their schedules on the local
  devices, in interleaved rounds (each round times every candidate
  ``CALLS_PER_ROUND`` times), until ``time_s`` is spent or ``MAX_ROUNDS``
  rounds ran; the first round also builds (compiles) every placement.

  The first three candidates (the mandatory ones) are always measured
  once; later ones join only while the first round fits in ``time_s``.

  Returns:
    ``{label: Measurement}`` pooling every round's calls (a failed
    placement: ``failed=True``, ``runtime_s=inf``).
  """
  start = clock()
  placed, pooled, failed = {}, {}, {}
  for i, candidate in enumerate(candidates):
    if i >= 3 and clock() - start > 0.5 * time_s:
      break
    schedule = schedule_of(graph, topology, costs, candidate)
    placed[candidate.label] = place(fn, graph, candidate.placement, devices,
                                    schedule=schedule)
    first = measure_placed(placed[candidate.label], *args,
                           repeats=CALLS_PER_ROUND, warmup=1)
    if first.failed:
      failed[candidate.label] = first
      del placed[candidate.label]
    else:
      pooled[candidate.label] = [first]
  rounds = 1
  while rounds < MAX_ROUNDS and placed:
    per_round = (clock() - start) / rounds
    if clock() - start + per_round > time_s:
      break
    for label, function in placed.items():
      pooled[label].append(measure_placed(function, *args,
                                          repeats=CALLS_PER_ROUND, warmup=0))
    rounds += 1
  out = dict(failed)
  for label, runs in pooled.items():
    out[label] = _pooled(runs)
  return out


def _pooled(runs: Sequence[Measurement]) -> Measurement:
  """One :class:`Measurement` of several runs of the same placement."""
  if any(run.failed for run in runs):
    return next(run for run in runs if run.failed)
  times = [t for run in runs for t in run.times_s]
  q1, q3 = np.percentile(times, [25, 75])
  return runs[0]._replace(
      runtime_s=float(np.median(times)), min_s=min(times), max_s=max(times),
      iqr_s=float(q3 - q1), std_s=float(np.std(times)), times_s=tuple(times))


class Choice(NamedTuple):
  """What :func:`choose` decided.

  Attributes:
    winner: the chosen candidate.
    fastest: the fastest candidate (measured, or simulated).
    reason: one line: why the winner, e.g. ``"measured fastest"`` or
      ``"single_device: as fast within the measurement spread (0.4 ms),
      and simpler"``.
  """
  winner: Candidate
  fastest: Candidate
  reason: str


def choose(tried: Sequence[Candidate], graph: Graph, topology: Topology,
           costs, *, measured: Optional[dict[str, Measurement]] = None,
           tie: float = PRESET_TIE) -> Optional[Choice]:
  """The winner: the fastest candidate, unless a simpler one
  (:class:`Complexity`) is as fast within the noise.

  With ``measured`` (some candidates timed on this machine) only those
  compete, by median; two are as fast when their medians differ by no more
  than the larger of their interquartile ranges. Without, all feasible
  candidates compete by simulated runtime, as fast within ``tie`` (relative).

  Returns:
    A :class:`Choice`, or None when no candidate is feasible.
  """
  if measured:
    pool = [c for c in tried if c.label in measured
            and not measured[c.label].failed]
    runtime = {c.label: measured[c.label].runtime_s for c in pool}
    noise = {c.label: measured[c.label].iqr_s for c in pool}
    if pool:
      fastest = min(pool, key=lambda c: runtime[c.label])
      close = [c for c in pool if runtime[c.label] - runtime[fastest.label]
               <= max(noise[c.label], noise[fastest.label])]
      return _simplest(close, fastest, graph, topology, costs, runtime,
                       "measured")
  fastest = best_of(tried)
  if fastest is None:
    return None
  pool = [c for c in tried if math.isfinite(c.runtime_s)]
  close = [c for c in pool
           if c.runtime_s <= fastest.runtime_s * (1 + tie)]
  return _simplest(close, fastest, graph, topology, costs,
                   {c.label: c.runtime_s for c in pool}, "simulated")


def _simplest(close: list[Candidate], fastest: Candidate, graph, topology,
              costs, runtime: dict, kind: str) -> Choice:
  if len(close) == 1:
    return Choice(fastest, fastest, f"{kind} fastest")
  ranked = sorted(close, key=lambda c: (
      complexity(graph, topology, costs, c), runtime[c.label]))
  winner = ranked[0]
  if winner.label == fastest.label:
    return Choice(fastest, fastest, f"{kind} fastest")
  gap = runtime[winner.label] - runtime[fastest.label]
  return Choice(winner, fastest, (
      f"{winner.label}: {kind} within the noise of {fastest.label} "
      f"({gap:.3g} s slower) and simpler"))
