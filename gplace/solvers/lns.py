"""Large-neighbourhood search with CP-SAT: the exact solver at scale.

:func:`lns` -> :class:`LNSResult`: from an incumbent placement and order,
repeatedly free a window (a connected region of ops, the ops of a device
pair, a span of the schedule), re-solve its devices and order exactly
(:mod:`gplace.solvers.lns_model`), score the candidate with
``gplace.simulate`` in its own order and keep it when it is not worse.
Reports ``gplace.lower_bound`` (or a tighter bound passed in) and the gap.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import os
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

from gplace import baselines
from gplace.errors import PlacementError, ScheduleError, SearchError, is_int
from gplace.graphs.graph import Graph
from gplace.graphs.placement import check_placements
from gplace.sim.bounds import lower_bound
from gplace.sim.cache import freeze
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, cost_table
from gplace.solvers.cpsat import check_arguments
from gplace.solvers import lns_windows
from gplace.solvers.lns_kicks import Kicker
from gplace.solvers.lns_model import make_static
from gplace.solvers.lns_windows import (EXPLORE, MIN_WINDOW, NEIGHBOURHOODS,
                                        Incumbent, Scored, Search, score)
from gplace.solvers.placer import HINT_BASELINES

#: Ops freed per window at the start, and the range it adapts in.
DEFAULT_WINDOW = 24
MAX_WINDOW = 256
#: CP-SAT's limit per window in wall seconds (and
#: lns_windows.DETERMINISTIC_PER_S deterministic seconds per second of it).
#: Short: a window's gain comes early, and one
#: that runs out of time costs its whole limit, so many short windows beat
#: fewer long ones (1,103-op gnmt2 on 1 CPU + 4 acc., 30 s from HEFT, mean
#: of seeds 0-2: -4.8% at 1 s per window, -6.4% at 0.5, -6.2% at 0.25,
#: -9.2% at 0.125, -7.6% at 0.0625; experiments/results/lns_window).
DEFAULT_SOLVE_S = 0.125
#: Windows solved at once by default: at most this many, and no more than
#: the cores this process may use. CP-SAT releases the GIL, so on two
#: cores one window's model is built (Python) while another's is solved.
#: Three or four in flight on two cores solve 20-50% more windows but end
#: no faster (gnmt2 small, 1 CPU + 2 acc., 45 s from HEFT, seeds 0-4:
#: means 7.138 / 7.171 against 7.178 ms; experiments/results/lns_window/
#: workers45_gnmt2_2acc_2026-12-07).
MAX_DEFAULT_WORKERS = 2
#: Every this many windows, when they made the incumbent less than
#: ``lns_kicks.MIN_GAIN`` faster, a memory kick
#: (:mod:`gplace.solvers.lns_kicks`) restarts the search from a placement
#: that makes room for a blocked critical op, or with none blocked moves a
#: critical op's weight group to its fastest device (tight memory only).
#: From ``optimize``'s LNS phase at 60 s (captured state, seeds 0-3 / 0-2):
#: resnet50 tiny, 1 CPU + 4 acc., 0.828 ms mean after 100 against 0.849
#: after 300 (0.858 never); gnmt2 small 7.187 against 7.214 on 2 acc.,
#: 5.950 against 5.921 on 4 acc. (inside the seeds' spread).
KICK_AFTER = 100
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
    neighbourhoods: ``{name: (windows solved, windows that improved,
      runtime_s they saved)}`` per neighbourhood
      (``lns_windows.NEIGHBOURHOODS``; saved while the placement fits).
    kicks: memory kicks the search restarted from (see ``kick_after``).
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
  neighbourhoods: Optional[dict] = None
  kicks: int = 0


def _positive_seconds(value) -> bool:
  return (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(value) and value > 0)


def default_workers() -> int:
  """Windows :func:`lns` solves at once by default: the cores this process
  may use, at most :data:`MAX_DEFAULT_WORKERS`."""
  try:
    cores = len(os.sched_getaffinity(0))
  except AttributeError:         # not on Linux
    cores = os.cpu_count() or 1
  return max(1, min(MAX_DEFAULT_WORKERS, cores))


def _check_settings(window_size, max_window_size, solve_time_s,
                    max_iterations, bound_s, stall_s, workers,
                    explore, kick_after=None, target_s=None) -> None:
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
  if workers is not None and (not is_int(workers) or workers < 1):
    raise SearchError(
        f"workers must be None or an integer >= 1 (windows solved at once), "
        f"got {workers!r}; pass e.g. workers=2.")
  if isinstance(explore, bool) or not isinstance(
      explore, (int, float)) or not 0 <= explore <= 1:
    raise SearchError(
        f"explore must be a share in [0, 1] (of windows whose neighbourhood "
        f"is drawn evenly), got {explore!r}; pass e.g. explore=0.3 "
        "(1: evenly, the default; 0: by recent gains alone).")
  if kick_after is not None and (not is_int(kick_after) or kick_after < 1):
    raise SearchError(
        f"kick_after must be None or an integer >= 1 (windows between "
        f"checks for a memory kick), got {kick_after!r}; pass e.g. "
        f"kick_after={KICK_AFTER}, or None for no kicks.")
  if target_s is not None and not _positive_seconds(target_s):
    raise SearchError(
        f"target_s must be None or a positive number of seconds (stop once "
        f"the best runs in at most that long), got {target_s!r}; pass e.g. "
        "target_s=0.005.")


def _start(graph, topology, costs, start, start_order, start_priority,
           seed) -> Scored:
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
  return score(graph, topology, costs, placement, np.asarray(order, np.int32))


def lns(graph: Graph, topology: Topology, *, costs=None, start=None,
        start_order=None, start_priority=None, time_limit_s: float = 30.0,
        seed: int = 0, window_size: int = DEFAULT_WINDOW,
        max_window_size: int = MAX_WINDOW,
        solve_time_s: float = DEFAULT_SOLVE_S,
        max_iterations: Optional[int] = None,
        bound_s: Optional[float] = None,
        stall_s: Optional[float] = None,
        workers: Optional[int] = None,
        explore: float = EXPLORE,
        target_s: Optional[float] = None,
        kick_after: Optional[int] = KICK_AFTER,
        progress_fn: Optional[Callable[[int, float], None]] = None
        ) -> LNSResult:
  """Large-neighbourhood search over placement and order with CP-SAT.

  Each iteration frees a window of at most ``window_size`` ops around a
  pivot op (on the incumbent's critical path half the time), in one of
  the neighbourhoods (``gplace.solvers.lns_windows.NEIGHBOURHOODS``): a
  connected region (breadth first over the graph's edges), the ops of two
  devices (the pivot's and another), or a span of the incumbent's order.
  Each window's is drawn, ``explore`` of the time evenly (by default
  always) and else by what each has gained lately (adaptive LNS). Every
  other op keeps its device; the ops before and after the span keep their
  order and those inside may be reordered. CP-SAT re-solves the window
  (``solve_time_s`` per window, the incumbent as hint; the model's size
  grows with the span and its boundary, not with the graph); the candidate
  is scored with ``gplace.simulate`` in its own order and kept when it is
  not worse (one that fits in memory beats one that does not). The window
  grows when CP-SAT proves it optimal fast and shrinks when it runs out of
  time.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds (default: the roofline).
    start: ``[N]`` start placement; default the best of
      ``gplace.solvers.HINT_BASELINES`` in the default schedule.
    start_order: ``[N]`` order the start runs in; or ``start_priority``
      (``[N]`` priorities, the default schedule's otherwise). Where memory
      is tight, LNS goes on from that order with the graph's inputs moved
      late (``lns_windows.late_inputs``) when that is not slower.
    time_limit_s: wall-clock seconds for the search.
    seed: seeds the choice of windows and CP-SAT.
    window_size: ops freed per window at first (``>= 2``).
    max_window_size: the most it grows to.
    solve_time_s: CP-SAT's wall seconds per window (one worker), and
      ``lns_windows.DETERMINISTIC_PER_S`` deterministic seconds per second
      of it.
    max_iterations: stop after this many windows. Windows, CP-SAT (one
      worker, deterministic time) and the simulator are reproducible, so
      with ``workers=1`` a run the wall clock does not cut short is the
      same for a seed.
    bound_s: a proven lower bound to report when above
      ``gplace.lower_bound`` (e.g. ``gplace.solvers.solve``'s).
    stall_s: stop when the best has not improved for this many seconds.
    target_s: stop as soon as the best fits in memory and runs in at most
      this many seconds (e.g. a rival plan's runtime, to test a start).
    workers: windows solved at once, each by one CP-SAT worker in a
      thread; default :func:`default_workers`, or 1 with
      ``max_iterations``. A window that finishes after another improved
      the incumbent is merged into it.
    explore: share of windows whose neighbourhood is drawn evenly
      (``lns_windows.choose_neighbourhood``); 1 ignores their gains.
    kick_after: every this many windows, when they made the incumbent
      less than 0.5% faster and a device's memory is nearly full, go on
      from a memory kick of the best (``gplace.solvers.lns_kicks``: room
      for a critical op blocked by memory, else a critical op's weight
      group moved to its fastest device); the best is kept whatever the
      search finds from there. None: never.
    progress_fn: called as ``progress_fn(iteration, best runtime_s)``.

  Returns:
    :class:`LNSResult`, never slower than the start in its order.

  Raises:
    SearchError: a bad time limit, seed, window size, ``solve_time_s``,
      ``max_iterations``, ``bound_s``, ``stall_s``, ``workers``,
      ``explore``, ``kick_after`` or ``target_s``.
    PlacementError: an empty graph or a bad ``start``.
    ScheduleError: a bad ``start_order`` or ``start_priority``, or both.
    TopologyError: a bad topology or cost table.
  """
  began = time.perf_counter()
  limit = check_arguments(graph, topology, time_limit_s, 1, seed=seed)
  _check_settings(window_size, max_window_size, solve_time_s,
                  max_iterations, bound_s, stall_s, workers, explore,
                  kick_after, target_s)
  if workers is None:
    workers = 1 if max_iterations is not None else default_workers()
  if graph.n_nodes == 0:
    raise PlacementError(f"graph {graph.name!r} has no nodes; there is "
                         "nothing to place.")
  # A copy of its own, frozen: every candidate is scored with it.
  table = freeze(np.array(cost_table(graph, topology, costs), np.float64))
  best = _start(graph, topology, table, start, start_order, start_priority,
                seed)
  bound = max(lower_bound(graph, topology, table), float(bound_s or 0.0))
  reference = max(best.runtime_s if math.isfinite(best.runtime_s) else 0.0,
                  bound)
  start_runtime = best.runtime_s
  static = make_static(graph, topology, table, reference)
  search = Search(
      static, Incumbent(static, best),
      functools.partial(score, graph, topology, table), seed=seed,
      window=window_size, max_window=max_window_size,
      solve_time_s=solve_time_s, explore=explore)
  rng = np.random.default_rng(seed)
  kicker = (None if kick_after is None else
            Kicker(graph, topology, table, kick_after, seed))
  n = graph.n_nodes
  if search.tight:   # a weight's copies hold memory from its position
    late = score(graph, topology, table, best.placement,
                 lns_windows.late_inputs(graph, best.order,
                                         lns_windows.INPUT_LEAD))
    if late.key <= best.key:
      best = late
      search.incumbent = Incumbent(static, best)
  history = [(time.perf_counter() - began, best.runtime_s)]
  last_gain = time.perf_counter()
  stopped = n < 2
  reached = False         # the best met target_s
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    while search.pending or not stopped:
      now = time.perf_counter()
      stopped = stopped or (
          (max_iterations is not None
           and search.submitted >= max_iterations)
          or now - began >= limit or reached
          or (stall_s is not None and now - last_gain >= stall_s))
      while not stopped and len(search.pending) < workers and (
          max_iterations is None or search.submitted < max_iterations):
        wall = solve_time_s if max_iterations is None else limit
        search.submit(pool, rng, topology.n_devices,
                      min(wall, max(limit - (now - began), 1e-3)))
      if not search.pending:
        continue
      done, _ = concurrent.futures.wait(
          search.pending, return_when=concurrent.futures.FIRST_COMPLETED)
      for future in done:
        if search.take(future):
          last_gain = time.perf_counter()
        so_far = search.incumbent.scored
        if kicker is not None:
          so_far = kicker.observe(so_far)
        history.append((time.perf_counter() - began, so_far.runtime_s))
        reached = reached or (target_s is not None and not so_far.oom
                              and so_far.runtime_s <= target_s)
        if progress_fn is not None:
          progress_fn(search.iterations, so_far.runtime_s)
      if kicker is not None and not stopped:
        kicker.maybe_kick(search)
  best = (search.incumbent.scored if kicker is None
          else kicker.final(search))
  iterations, accepted, improved = (search.iterations, search.accepted,
                                    search.improved)
  window = search.window
  gap = (best.runtime_s / bound - 1.0 if bound > 0 else
         (0.0 if best.runtime_s <= 0 else math.inf))
  by_kind = {name: (int(search.windows[k]), int(search.improved_by[k]),
                    float(search.saved_s[k]))
             for k, name in enumerate(NEIGHBOURHOODS)}
  return LNSResult(best.placement, best.order, best.runtime_s, start_runtime,
                   bound, gap, best.oom, iterations, accepted, improved,
                   window, np.asarray(history, np.float64),
                   time.perf_counter() - began, by_kind,
                   0 if kicker is None else kicker.kicks)


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
