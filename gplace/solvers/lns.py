"""Large-neighbourhood search with CP-SAT: the exact solver at scale.

:func:`lns` -> :class:`LNSResult`: from an incumbent placement and order,
repeatedly free a window (a connected region of ops, the ops of a device
pair, a span of the schedule), re-solve its devices and order exactly
(:mod:`gplace.solvers.lns_model`), score the candidate with
``gplace.simulate`` in its own order and keep it when it is not worse.
Reports ``gplace.lower_bound`` (or a tighter bound passed in) and the gap.
"""

from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

from gplace import baselines
from gplace.errors import PlacementError, ScheduleError, SearchError, is_int
from gplace.graphs.graph import Graph
from gplace.graphs.placement import check_placements
from gplace.sim.bounds import lower_bound
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, cost_table
from gplace.solvers.cpsat import check_arguments
from gplace.solvers.lns_model import (Context, Static, make_static,
                                      solve_window)
from gplace.solvers.placer import HINT_BASELINES

#: Ops freed per window at the start, and the range it adapts in.
DEFAULT_WINDOW = 24
MIN_WINDOW = 2
MAX_WINDOW = 256
#: A window's span of the order holds at most this many times its freed ops.
CONTEXT_FACTOR = 3
#: CP-SAT's limit per window in wall seconds, and DETERMINISTIC_PER_S
#: deterministic seconds per second of it (what binds with max_iterations,
#: so that a run is reproducible; one worker did about 0.1 per wall second
#: on two loaded CPU cores). Short: a window's gain comes early, and one
#: that runs out of time costs its whole limit, so many short windows beat
#: fewer long ones (1,103-op gnmt2 on 1 CPU + 4 acc., 30 s from HEFT, mean
#: of seeds 0-2: -4.8% at 1 s per window, -6.4% at 0.5, -6.2% at 0.25,
#: -9.2% at 0.125, -7.6% at 0.0625; experiments/results/lns_window).
DEFAULT_SOLVE_S = 0.125
DETERMINISTIC_PER_S = 0.1
#: A window proven optimal within this share of its limit grows by GROW;
#: one that runs out of time shrinks by SHRINK.
FAST_SHARE = 0.5
GROW = 1.25
SHRINK = 0.7
#: The neighbourhoods, in turn.
NEIGHBOURHOODS = ("region", "device_pair", "time_window")
#: Share of windows centred on an op of the incumbent's critical path.
CRITICAL_SHARE = 0.5
#: Default seconds of :func:`lns_placer`.
PLACER_TIME_S = 30.0


class LNSResult(NamedTuple):
  """What :func:`lns` found.

  Attributes:
    placement: ``[N]`` int32 device per node.
    order: ``[N]`` int32 op order it runs in (``gplace.simulate(...,
      order=order)`` gives ``runtime_s``).
    runtime_s: simulated seconds in ``order``.
    start_runtime_s: the start's, in its order.
    bound_s: the proven lower bound (``gplace.lower_bound``, or the
      ``bound_s`` passed in when larger).
    gap: ``runtime_s / bound_s - 1``.
    oom: the placement runs out of memory (only when the start did and no
      window found a fitting one).
    iterations: windows solved.
    accepted: candidates kept (not worse, and different).
    improved: candidates strictly better.
    window_size: the adapted window size at the end.
    history: ``[H, 2]`` float64 ``(wall_s, best runtime_s)`` at the start
      and after each iteration.
    wall_s: seconds spent.
  """

  placement: np.ndarray
  order: np.ndarray
  runtime_s: float
  start_runtime_s: float
  bound_s: float
  gap: float
  oom: bool
  iterations: int
  accepted: int
  improved: int
  window_size: int
  history: np.ndarray
  wall_s: float


class _Scored(NamedTuple):
  """A placement and order scored by the simulator."""
  placement: np.ndarray
  order: np.ndarray
  runtime_s: float
  oom: bool
  excess_bytes: float
  finish_s: np.ndarray
  start_s: np.ndarray

  @property
  def key(self):
    return (self.oom, self.excess_bytes if self.oom else 0.0, self.runtime_s)


def _score(graph, topology, costs, placement, order) -> _Scored:
  result = simulate(graph, placement, topology, costs, order=order,
                    return_schedule=True)
  excess = float(np.max(np.asarray(result.peak_bytes, np.float64)
                        - np.asarray(topology.memory_bytes, np.float64)))
  return _Scored(np.asarray(placement, np.int32), np.asarray(order, np.int32),
                 float(result.runtime_s), bool(result.oom), max(excess, 0.0),
                 np.asarray(result.finish_s, np.float64),
                 np.asarray(result.start_s, np.float64))


def _positive_seconds(value) -> bool:
  return (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(value) and value > 0)


def _check_settings(window_size, max_window_size, solve_time_s,
                    max_iterations, bound_s, stall_s) -> None:
  if not is_int(window_size) or window_size < MIN_WINDOW:
    raise SearchError(
        f"window_size must be an integer >= {MIN_WINDOW} (ops freed per "
        f"window), got {window_size!r}; pass e.g. "
        f"window_size={DEFAULT_WINDOW}.")
  if not is_int(max_window_size) or max_window_size < window_size:
    raise SearchError(
        f"max_window_size must be an integer >= window_size "
        f"({window_size!r}), got {max_window_size!r}; pass e.g. "
        f"max_window_size={MAX_WINDOW}.")
  if not _positive_seconds(solve_time_s):
    raise SearchError(
        f"solve_time_s must be a positive number of seconds (CP-SAT's "
        f"limit per window), got {solve_time_s!r}; pass e.g. "
        f"solve_time_s={DEFAULT_SOLVE_S}.")
  if max_iterations is not None and (not is_int(max_iterations)
                                     or max_iterations < 1):
    raise SearchError(
        f"max_iterations must be None or an integer >= 1, got "
        f"{max_iterations!r}; pass e.g. max_iterations=50.")
  if bound_s is not None and (isinstance(bound_s, bool) or not isinstance(
      bound_s, (int, float)) or not bound_s >= 0):
    raise SearchError(f"bound_s must be None or a number of seconds >= 0 "
                      f"(a proven lower bound), got {bound_s!r}.")
  if stall_s is not None and not _positive_seconds(stall_s):
    raise SearchError(
        f"stall_s must be None or a positive number of seconds (stop once "
        f"the best has not improved for that long), got {stall_s!r}; pass "
        "e.g. stall_s=5.0.")


def _start(graph, topology, costs, start, start_order, start_priority,
           seed) -> _Scored:
  """The start placement in its order (see :func:`lns`)."""
  if start is None:
    candidates = [np.asarray(baselines.get(name)(graph, topology, costs=costs,
                                                 seed=seed), np.int32)
                  for name in HINT_BASELINES]
    scored = [simulate(graph, p, topology, costs, return_schedule=True)
              for p in candidates]
    best = min(range(len(scored)), key=lambda i: (bool(scored[i].oom),
                                                  float(scored[i].runtime_s)))
    start = candidates[best]
  placement = check_placements(start, graph, topology.n_devices,
                               device_names=topology.device_names,
                               batched=False).astype(np.int32)
  if start_order is not None and start_priority is not None:
    raise ScheduleError("lns takes start_order or start_priority, not both; "
                        "pass the one the start was scored in.")
  if start_order is not None:
    order = np.asarray(start_order)
    if order.shape != (graph.n_nodes,) or not np.array_equal(
        np.sort(order), np.arange(graph.n_nodes)):
      raise ScheduleError(
          f"start_order must be a permutation of the {graph.n_nodes} node "
          f"ids (an [N] topological op order), got shape {order.shape}; "
          "pass the order the start was simulated in, or None.")
  else:
    order = simulate(graph, placement, topology, costs,
                     priority=start_priority, return_schedule=True).order
  return _score(graph, topology, costs, placement, np.asarray(order, np.int32))


class _Incumbent:
  """The current solution and what windows need of it (host-side).

  ``tail`` is valid for positions ``>= tail_from``; the rest is recomputed
  on demand, so an accepted window costs a pass over what follows it only
  once a later window needs it.
  """

  def __init__(self, static: Static, scored: _Scored):
    self.static = static
    self.set(scored, 0)

  def set(self, scored: _Scored, changed_upto: int) -> None:
    """Takes ``scored``, whose op order differs from the last one's only
    up to position ``changed_upto`` (the tails after it still hold)."""
    static = self.static
    n = scored.placement.size
    fresh = not hasattr(self, "scored")
    self.scored = scored
    self.position = np.empty(n, np.int64)
    self.position[scored.order] = np.arange(n)
    self.finish = np.floor(scored.finish_s / static.tick_s).astype(np.int64)
    self.finish[~static.executed] = 0
    ops = scored.order[static.executed[scored.order]]
    group = static.device_group[scored.placement[ops]]
    self.next_same = np.full(n, -1, np.int64)
    self.prev_same = np.full(n, -1, np.int64)
    for g in np.unique(group):
      members = ops[group == g]
      self.next_same[members[:-1]] = members[1:]
      self.prev_same[members[1:]] = members[:-1]
    if fresh:
      self.tail = np.zeros(n, np.int64)
      self.tail_from = n
    else:
      self.tail_from = max(self.tail_from, changed_upto + 1)
    self._critical = None

  def tails_after(self, hi: int) -> np.ndarray:
    """``tail`` valid for every position ``> hi``."""
    static, scored = self.static, self.scored
    for p in range(self.tail_from - 1, hi, -1):
      v = int(scored.order[p])
      here = int(scored.placement[v])
      best = int(self.tail[self.next_same[v]]) if self.next_same[v] >= 0 \
          else 0
      for w in static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]]:
        if static.executed[w]:
          best = max(best, int(static.transfer[v, here, scored.placement[w]])
                     + int(self.tail[w]))
      self.tail[v] = int(static.duration[v, here]) + best
    self.tail_from = min(self.tail_from, hi + 1)
    return self.tail

  def critical(self) -> np.ndarray:
    """Node ids on a critical path of the simulated schedule: back from
    the last finish, each time to the producer or device predecessor that
    finished last."""
    if self._critical is None:
      static, scored = self.static, self.scored
      v = int(np.argmax(scored.finish_s))
      path = [v]
      while scored.start_s[v] > 0:
        options = static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]]
        if self.prev_same[v] >= 0:
          options = np.append(options, self.prev_same[v])
        if not options.size:
          break
        v = int(options[np.argmax(scored.finish_s[options])])
        path.append(v)
      self._critical = np.asarray(path, np.int64)
    return self._critical


def _pivot(rng, incumbent: _Incumbent, n: int) -> int:
  """A node: on the critical path (:data:`CRITICAL_SHARE`), else any."""
  if rng.random() < CRITICAL_SHARE:
    path = incumbent.critical()
    return int(path[rng.integers(path.size)])
  return int(rng.integers(n))


def _neighbourhood(kind, rng, incumbent: _Incumbent, window: int,
                   n_devices: int):
  """``(lo, hi, free)``: a span of positions and the nodes freed in it."""
  static, order = incumbent.static, incumbent.scored.order
  position, placement = incumbent.position, incumbent.scored.placement
  n = order.size
  reach = max(window, CONTEXT_FACTOR * window) // 2
  seed_node = _pivot(rng, incumbent, n)
  p0 = int(position[seed_node])
  if kind == "region":
    chosen, queue, seen = [], [seed_node], {seed_node}
    while queue and len(chosen) < window:
      v = queue.pop(0)
      chosen.append(v)
      near = np.concatenate([
          static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]],
          static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]]])
      for w in rng.permutation(near).tolist():
        if w not in seen and abs(int(position[w]) - p0) <= reach:
          seen.add(w)
          queue.append(w)
    free = np.asarray(chosen, np.int64)
  elif kind == "device_pair" and n_devices > 1:
    first = int(placement[seed_node])
    second = int((first + 1 + rng.integers(n_devices - 1)) % n_devices)
    lo, hi = max(0, p0 - reach), min(n - 1, p0 + reach)
    nodes = order[lo:hi + 1]
    mine = nodes[np.isin(placement[nodes], (first, second))]
    distance = np.abs(position[mine] - p0)
    free = mine[np.argsort(distance, kind="stable")[:window]]
  else:
    lo = int(np.clip(p0 - window // 2, 0, max(n - window, 0)))
    free = np.asarray(order[lo:lo + window], np.int64)
  if free.size < 2:                  # too few: the span around the pivot
    lo = int(np.clip(p0 - window // 2, 0, max(n - window, 0)))
    free = np.asarray(order[lo:lo + window], np.int64)
  return int(position[free].min()), int(position[free].max()), free


def lns(graph: Graph, topology: Topology, *, costs=None, start=None,
        start_order=None, start_priority=None, time_limit_s: float = 30.0,
        seed: int = 0, window_size: int = DEFAULT_WINDOW,
        max_window_size: int = MAX_WINDOW,
        solve_time_s: float = DEFAULT_SOLVE_S,
        max_iterations: Optional[int] = None,
        bound_s: Optional[float] = None,
        stall_s: Optional[float] = None,
        progress_fn: Optional[Callable[[int, float], None]] = None
        ) -> LNSResult:
  """Large-neighbourhood search over placement and order with CP-SAT.

  Each iteration frees a window of at most ``window_size`` ops, taking
  :data:`NEIGHBOURHOODS` in turn around a pivot op (on the incumbent's
  critical path half the time): a connected region (breadth first over
  the graph's edges), the ops of two devices (the pivot's and another), or
  a span of the incumbent's order. Every other op keeps its device; the
  ops before and after the span keep their order and those inside may be
  reordered. CP-SAT re-solves the window (``solve_time_s`` per window,
  the incumbent as hint; the model's size grows with the span and its
  boundary, not with the graph); the candidate is scored with
  ``gplace.simulate`` in its own order and kept when it is not worse (one
  that fits in memory beats one that does not). The window grows when
  CP-SAT proves it optimal fast and shrinks when it runs out of time.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds (default: the roofline).
    start: ``[N]`` start placement; default the best of
      ``gplace.solvers.HINT_BASELINES`` in the default schedule.
    start_order: ``[N]`` order the start runs in; or ``start_priority``
      (``[N]`` priorities, the default schedule's otherwise).
    time_limit_s: wall-clock seconds for the search.
    seed: seeds the choice of windows and CP-SAT.
    window_size: ops freed per window at first (``>= 2``).
    max_window_size: the most it grows to.
    solve_time_s: CP-SAT's wall seconds per window (one worker), and
      :data:`DETERMINISTIC_PER_S` deterministic seconds per second of it.
    max_iterations: stop after this many windows. Windows, CP-SAT (one
      worker, deterministic time) and the simulator are reproducible, so
      a run the wall clock does not cut short is the same for a seed.
    bound_s: a proven lower bound to report when above
      ``gplace.lower_bound`` (e.g. ``gplace.solvers.solve``'s).
    stall_s: stop when the best has not improved for this many seconds.
    progress_fn: called as ``progress_fn(iteration, best runtime_s)``.

  Returns:
    :class:`LNSResult`, never slower than the start in its order.

  Raises:
    SearchError: a bad time limit, seed, window size, ``solve_time_s``,
      ``max_iterations``, ``bound_s`` or ``stall_s``.
    PlacementError: an empty graph or a bad ``start``.
    ScheduleError: a bad ``start_order`` or ``start_priority``, or both.
    TopologyError: a bad topology or cost table.
  """
  began = time.perf_counter()
  limit = check_arguments(graph, topology, time_limit_s, 1, seed=seed)
  _check_settings(window_size, max_window_size, solve_time_s,
                  max_iterations, bound_s, stall_s)
  if graph.n_nodes == 0:
    raise PlacementError(f"graph {graph.name!r} has no nodes; there is "
                         "nothing to place.")
  table = cost_table(graph, topology, costs)
  best = _start(graph, topology, table, start, start_order, start_priority,
                seed)
  bound = max(lower_bound(graph, topology, table), float(bound_s or 0.0))
  reference = max(best.runtime_s if math.isfinite(best.runtime_s) else 0.0,
                  bound)
  static = make_static(graph, topology, table, reference)
  incumbent = _Incumbent(static, best)
  rng = np.random.default_rng(seed)
  n, window = graph.n_nodes, min(window_size, max(graph.n_nodes, 2))
  start_runtime = best.runtime_s
  history = [(time.perf_counter() - began, best.runtime_s)]
  iterations = accepted = improved = 0
  last_gain = time.perf_counter()
  while n >= 2:
    now = time.perf_counter()
    if max_iterations is not None and iterations >= max_iterations:
      break
    if now - began >= limit or (stall_s is not None
                                and now - last_gain >= stall_s):
      break
    kind = NEIGHBOURHOODS[iterations % len(NEIGHBOURHOODS)]
    lo, hi, free = _neighbourhood(kind, rng, incumbent, window,
                                  topology.n_devices)
    ctx = Context(best.placement, best.order, incumbent.position,
                  incumbent.finish, incumbent.tails_after(hi), lo, hi, free)
    wall = solve_time_s if max_iterations is None else limit
    solution = solve_window(
        static, ctx, limit_s=min(wall, max(limit - (now - began), 1e-3)),
        deterministic_s=solve_time_s * DETERMINISTIC_PER_S, seed=(seed + iterations) % 2**31,
        memory=not best.oom)
    iterations += 1
    if solution.status == "OPTIMAL" and (
        solution.deterministic_s
        <= FAST_SHARE * DETERMINISTIC_PER_S * solve_time_s):
      window = min(max_window_size, n, max(window + 1, int(window * GROW)))
    elif solution.status != "OPTIMAL":
      window = max(MIN_WINDOW, int(window * SHRINK))
    for placement, order in _candidates(solution, best):
      candidate = _score(graph, topology, table, placement, order)
      if candidate.key <= best.key:
        accepted += 1
        if candidate.key < best.key:
          improved += 1
          last_gain = time.perf_counter()
        best = candidate
        incumbent.set(best, hi)
        break
    history.append((time.perf_counter() - began, best.runtime_s))
    if progress_fn is not None:
      progress_fn(iterations, best.runtime_s)
  gap = (best.runtime_s / bound - 1.0 if bound > 0 else
         (0.0 if best.runtime_s <= 0 else math.inf))
  return LNSResult(best.placement, best.order, best.runtime_s, start_runtime,
                   bound, gap, best.oom, iterations, accepted, improved,
                   window, np.asarray(history, np.float64),
                   time.perf_counter() - began)


def _candidates(solution, best: _Scored) -> list:
  """``(placement, order)`` to score from a window's solution: its devices
  in its order, then in the incumbent's order (the model's links serve
  transfers in any order, the simulator's in the order's, so the model's
  reordering can lose what its devices gain); none that equal the
  incumbent."""
  if solution.placement is None:
    return []
  out = [(solution.placement, solution.order)]
  if not np.array_equal(solution.order, best.order):
    out.append((solution.placement, best.order))
  return [(p, o) for p, o in out if not (np.array_equal(p, best.placement)
                                         and np.array_equal(o, best.order))]


def lns_placer(graph: Graph, topology: Topology, *, costs=None, seed: int = 0,
               time_limit_s: float = PLACER_TIME_S) -> np.ndarray:
  """:func:`lns` as a placer (baseline interface): ``[N]`` int32.

  A placement alone runs in the simulator's default schedule, not in the
  order LNS found for it, so the answer is LNS's placement or its start
  (the best of ``HINT_BASELINES``), whichever is faster in the default
  schedule (fitting in memory first).
  """
  result = lns(graph, topology, costs=costs, seed=seed,
               time_limit_s=time_limit_s)
  start = _start(graph, topology, cost_table(graph, topology, costs), None,
                 None, None, seed).placement
  keys = []
  for placement in (result.placement, start):
    scored = simulate(graph, placement, topology, costs)
    keys.append((bool(scored.oom), float(scored.runtime_s)))
  return result.placement if keys[0] <= keys[1] else start
