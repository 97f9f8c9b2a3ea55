"""Exact placement + scheduling with OR-tools CP-SAT, and what it proves.

:func:`solve` -> :class:`SolverResult`: the best placement and order (scored
by ``gplace.simulate``) and a bound below ``gplace.simulate`` of every
memory-feasible placement and order. Above ``max_nodes`` it solves a
coarsened graph and reports ``gplace.lower_bound`` (``coarsened=True``).
"""

from __future__ import annotations

import math
import numbers
import time
from typing import NamedTuple

import numpy as np
from ortools.sat.python import cp_model

from gplace.errors import SearchError, TopologyError, check_seed
from gplace.graphs.coarsening import coarsen, expand
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.graphs.placement import check_placements
from gplace.sim.bounds import lower_bound
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, cost_table
from gplace.solvers.model import (build_model, canonical_placement,
                                  interchangeable_devices, scale_problem)

# Above this many nodes :func:`solve` works on a coarsened graph.
MAX_EXACT_NODES = 2000
COARSE_GROUPS = 256
# Relative margin taken off the model's bound: the simulator computes in
# float32 (relative error ~ sqrt(path length) * 6e-8).
BOUND_SLACK = 1e-5
# Up to this many nodes a placement without an order is also tried in the
# simulator's dynamic schedule (list scheduling, O(N^2) per placement).
DYNAMIC_MAX_NODES = 20000


class SolverResult(NamedTuple):
  """What :func:`solve` found and proved.

  Attributes:
    placement: ``[N]`` int32 device per node.
    order: ``[N]`` int32 topological order; each compute group runs its
      nodes in it (``gplace.simulate(..., order=order)``).
    runtime_s: simulated seconds of ``placement`` in ``order``.
    solver_makespan_s: the model's makespan of its best solution (no link
      contention, rounded durations); NaN when it found none.
    bound_s: proven lower bound on the simulated runtime of every
      memory-feasible placement and order (see the module docstring).
    status: ``"OPTIMAL"`` (the model's optimum was proven), ``"FEASIBLE"``
      (time ran out with a solution) or ``"UNKNOWN"`` (no solution in time:
      the placement is the hint's, or all on one device).
    gap: ``runtime_s / bound_s - 1``.
    wall_s: host seconds spent, model building and evaluation included.
    oom: the simulator finds ``placement`` over some device's memory.
    coarsened: solved on a coarsened graph (``bound_s`` is then
      ``gplace.lower_bound``).
  """

  placement: np.ndarray
  order: np.ndarray
  runtime_s: float
  solver_makespan_s: float
  bound_s: float
  status: str
  gap: float
  wall_s: float
  oom: bool = False
  coarsened: bool = False


def check_arguments(graph, topology, time_limit_s, num_workers, *,
                    seed=0, max_nodes=0, **flags):
  """Validates the arguments every solver entry point shares; returns the
  time limit as a float. ``flags`` are bool switches (``memory``,
  ``links``, ``log``) by name."""
  if not isinstance(graph, Graph):
    raise SearchError(f"graph must be a gplace.Graph, got "
                      f"{type(graph).__name__}.")
  if not isinstance(topology, Topology):
    raise TopologyError(f"topology must be a gplace.Topology, got "
                        f"{type(topology).__name__}.")
  try:  # a number, not a string ("60") or a bool
    limit = (float(time_limit_s) if isinstance(time_limit_s, numbers.Real)
             and not isinstance(time_limit_s, bool) else float("nan"))
  except (TypeError, ValueError, OverflowError):
    limit = float("nan")
  if not limit > 0 or not math.isfinite(limit):
    raise SearchError(
        f"time_limit_s must be a positive, finite number of seconds, got "
        f"{time_limit_s!r}; pass e.g. time_limit_s=60.0.")
  if isinstance(num_workers, bool) or not isinstance(
      num_workers, (int, np.integer)) or not 1 <= num_workers < 2**31:
    raise SearchError(
        f"num_workers must be an integer >= 1 (CP-SAT search threads), got "
        f"{num_workers!r}; pass e.g. num_workers=2.")
  check_seed(seed, "gplace.solvers", SearchError)
  if isinstance(max_nodes, bool) or not isinstance(
      max_nodes, (int, np.integer)) or max_nodes < 0:
    raise SearchError(
        f"max_nodes must be an integer >= 0 (larger graphs are solved "
        f"coarsened), got {max_nodes!r}; pass e.g. "
        f"max_nodes={MAX_EXACT_NODES}.")
  for name, value in flags.items():
    if not isinstance(value, (bool, np.bool_)):
      raise SearchError(f"{name} must be True or False, got {value!r}.")
  return limit


def _order_from_times(start, finish) -> np.ndarray:
  """``[N]`` int32 topological order by start, then finish (zero-length
  producers before their consumers at the same time), then node id."""
  ids = np.arange(len(start))
  return np.lexsort((ids, finish, start)).astype(np.int32)


def _integer_schedule(graph, scaled, groups, placement, order, links):
  """The model's schedule of a placement run in ``order`` as early as
  possible, links serving transfers in producer order (as the simulator
  does): a feasible hint for every variable.

  Returns:
    ``(start, end, sent)``: ``[N]`` int64 ticks and ``{(u, d): tick}``
    transfer starts of ``u``'s output to device ``d`` (with ``links``).
  """
  n = graph.n_nodes
  start = np.zeros(n, np.int64)
  end = np.zeros(n, np.int64)
  ready = np.zeros(n, np.int64)
  group_free: dict[int, int] = {}
  link_free: dict[tuple[int, int], int] = {}
  sent: dict[tuple[int, int], int] = {}
  succ_start = np.searchsorted(graph.edge_src, np.arange(n + 1))
  for v in order.tolist():
    here = int(placement[v])
    if scaled.executed[v]:
      g = int(groups[here])
      start[v] = max(ready[v], group_free.get(g, 0))
      end[v] = start[v] + scaled.duration[v, here]
      group_free[g] = int(end[v])
    arrival = {here: int(end[v])}
    for e in range(succ_start[v], succ_start[v + 1]):
      w = int(graph.edge_dst[e])
      there = int(placement[w])
      if there not in arrival:
        begin = int(end[v])
        if links:
          begin = max(begin, link_free.get((here, there), 0))
          sent[(v, there)] = begin
        arrival[there] = begin + int(scaled.transfer[v, here, there])
        if links:
          link_free[(here, there)] = arrival[there]
      ready[w] = max(ready[w], arrival[there])
  return start, end, sent


def _list_order(graph, scaled, groups, placement, links) -> np.ndarray:
  """``[N]`` int32 dispatch order of greedy list scheduling in the model:
  repeatedly start, among nodes whose producers have started, the one that
  can start earliest (ties: longest path to a sink first)."""
  n = graph.n_nodes
  here = np.asarray(placement)
  duration = scaled.duration[np.arange(n), here]
  level = duration.astype(np.float64).copy()          # bottom level
  for e in range(graph.n_edges - 1, -1, -1):
    u, w = graph.edge_src[e], graph.edge_dst[e]
    level[u] = max(level[u], duration[u] + level[w])
  missing = graph.in_degree.astype(np.int64).copy()
  succ_start = np.searchsorted(graph.edge_src, np.arange(n + 1))
  ready = np.zeros(n, np.int64)
  group_free: dict[int, int] = {}
  link_free: dict[tuple[int, int], int] = {}
  frontier = set(np.flatnonzero(missing == 0).tolist())
  order = []
  while frontier:
    def earliest(v):
      if not scaled.executed[v]:
        return 0
      return max(int(ready[v]), group_free.get(int(groups[here[v]]), 0))
    v = min(frontier, key=lambda v: (earliest(v), -level[v], v))
    frontier.remove(v)
    order.append(v)
    begin = earliest(v)
    end = begin + int(duration[v]) if scaled.executed[v] else 0
    if scaled.executed[v]:
      group_free[int(groups[here[v]])] = end
    arrival = {int(here[v]): end}
    for e in range(succ_start[v], succ_start[v + 1]):
      w = int(graph.edge_dst[e])
      there = int(here[w])
      if there not in arrival:
        start = max(end, link_free.get((int(here[v]), there), 0)) if links \
            else end
        arrival[there] = start + int(scaled.transfer[v, here[v], there])
        if links:
          link_free[(int(here[v]), there)] = arrival[there]
      ready[w] = max(ready[w], arrival[there])
      missing[w] -= 1
      if missing[w] == 0:
        frontier.add(w)
  return np.asarray(order, np.int32)


def _add_hint(model, var, graph, topology, scaled, placement, orders, links):
  """Hints every variable with the schedule of ``placement`` in the best of
  ``orders`` (in the model)."""
  best = None
  for order in orders:
    schedule = _integer_schedule(graph, scaled, topology.compute_group,
                                 placement, order, links)
    makespan = int(schedule[1][scaled.sink].max(initial=0))
    if best is None or makespan < best[0]:
      best = (makespan, schedule)
  start, end, sent = best[1]
  for v in range(graph.n_nodes):
    for dev in range(topology.n_devices):
      model.add_hint(var.on[v][dev], int(placement[v] == dev))
      if var.send_start[v][dev] is not None:
        model.add_hint(var.send_start[v][dev], sent.get((v, dev), int(end[v])))
    if scaled.executed[v]:
      model.add_hint(var.start[v], int(start[v]))
      model.add_hint(var.end[v], int(end[v]))
  for (u, s, dev), literal in var.send_on.items():
    model.add_hint(literal, int(placement[u] == s and (u, dev) in sent))
  for literal, i, dev in var.prefix_used:
    model.add_hint(literal, int(np.any(placement[:i + 1] == dev)))
  model.add_hint(var.makespan, int(end[scaled.sink].max(initial=0)))


def _simulated(graph, topology, costs, placement, order=None):
  """``(runtime_s, oom, order)`` of one placement in ``order``; when it is
  None, the better (fitting in memory first, then faster) of node-id order
  and the ``schedule="dynamic"`` dispatch order (graphs up to
  ``DYNAMIC_MAX_NODES``). ``SimResult.order`` reproduces its result."""
  # Every call returns its schedule: one compiled simulator for all.
  schedules = ([{"order": order}] if order is not None else
               [{}] + ([{"schedule": "dynamic"}]
                       if graph.n_nodes <= DYNAMIC_MAX_NODES else []))
  best = None
  for schedule in schedules:
    result = simulate(graph, placement, topology, costs,
                      return_schedule=True, **schedule)
    key = (bool(result.oom), float(result.runtime_s))
    if best is None or key < best[0]:
      best = (key, np.asarray(result.order, np.int32))
  (oom, runtime), order = best
  return runtime, oom, order


def _best_candidate(graph, topology, costs, candidates):
  """The fastest of ``(placement, order or None)`` candidates in the
  simulator, placements that fit in memory first."""
  best = None
  for placement, order in candidates:
    runtime, oom, used = _simulated(graph, topology, costs, placement, order)
    key = (oom, runtime)
    if best is None or key < best[0]:
      best = (key, np.asarray(placement, np.int32), used)
  (oom, runtime), placement, order = best
  return placement, order, runtime, oom


def _fallback_placement(graph, topology, costs) -> np.ndarray:
  """Everything on the device with the least total op time."""
  return np.full(graph.n_nodes, int(np.argmin(costs.sum(0))), np.int32)


def _gap(runtime, bound):
  if bound > 0:
    return runtime / bound - 1.0
  return 0.0 if runtime <= 0 else math.inf


def _run_model(graph, topology, costs, *, limit_s, num_workers, seed,
               hint, memory, links, log=False):
  """Builds and solves the model once.

  Returns:
    ``(status, placement or None, start, end, makespan_s, bound_s)``; the
    bound is the model's (not yet combined with ``lower_bound``).
  """
  began = time.perf_counter()
  reference = lower_bound(graph, topology, costs)
  scaled = scale_problem(graph, topology, costs, reference)
  classes = interchangeable_devices(topology, costs, graph.allowed_devices)
  floor_ticks = int(math.floor(reference / scaled.tick_s * (1.0 - 1e-9)))
  model, var = build_model(graph, topology, scaled, classes, memory=memory,
                           links=links, floor_ticks=floor_ticks)
  if hint is not None:
    hint = canonical_placement(hint, classes)
    _, _, simulated_order = _simulated(graph, topology, costs, hint)
    orders = [simulated_order, _list_order(graph, scaled,
                                           topology.compute_group, hint,
                                           links)]
    _add_hint(model, var, graph, topology, scaled, hint, orders, links)
  solver = cp_model.CpSolver()
  spent = time.perf_counter() - began
  solver.parameters.max_time_in_seconds = max(limit_s - spent,
                                              0.1 * limit_s)
  solver.parameters.num_workers = int(num_workers)
  solver.parameters.random_seed = int(seed)
  solver.parameters.log_search_progress = bool(log)
  code = solver.solve(model)
  status = solver.status_name(code)
  if status == "MODEL_INVALID":
    raise SearchError(
        "gplace built a CP-SAT model that OR-tools rejects ("
        f"{model.validate()}); please report this with the graph.")
  if status not in ("OPTIMAL", "FEASIBLE"):
    bound = (solver.best_objective_bound * scaled.tick_s
             if status == "UNKNOWN" else 0.0)
    return status, None, None, None, math.nan, max(bound, 0.0)
  n = graph.n_nodes
  placement = np.zeros(n, np.int32)
  start = np.zeros(n, np.int64)
  end = np.zeros(n, np.int64)
  for v in range(n):
    placement[v] = next(dev for dev in range(topology.n_devices)
                        if solver.boolean_value(var.on[v][dev]))
    if scaled.executed[v]:
      start[v] = solver.value(var.start[v])
      end[v] = solver.value(var.end[v])
  makespan_s = solver.objective_value * scaled.tick_s
  bound_s = (solver.objective_value if status == "OPTIMAL"
             else solver.best_objective_bound) * scaled.tick_s
  return status, placement, start, end, makespan_s, bound_s


def solve(graph: Graph, topology: Topology, costs=None, *,
          time_limit_s: float = 60.0, num_workers: int = 2, hint=None,
          seed: int = 0, memory: bool = True, links: bool = True,
          max_nodes: int = MAX_EXACT_NODES, log: bool = False
          ) -> SolverResult:
  """Best placement + order CP-SAT finds in the time, and a proven bound.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds (default: the roofline).
    time_limit_s: seconds for the search (model building counts against
      it; the simulator's evaluation of the answer comes on top).
    num_workers: CP-SAT search threads.
    hint: optional ``[N]`` placement (e.g. the best baseline's) to start
      from; it is also a candidate answer (in the best of node-id order and
      the dispatch orders of the default and dynamic schedules), so the
      answer is never slower than the hint in those.
    seed: CP-SAT's random seed.
    memory: add the memory conditions (the bound then holds for placements
      that fit; without them for every placement).
    max_nodes: solve graphs above this size on a coarsened graph.
    log: print CP-SAT's search log.

  Returns:
    :class:`SolverResult`. If the memory conditions admit no placement, the
    model is solved again without them (``oom`` is then True).

  Raises:
    SearchError: ``time_limit_s <= 0``, ``num_workers < 1``, a bad
      ``seed`` or ``max_nodes``, or a switch that is not a bool.
    PlacementError: a bad ``hint``.
    TopologyError: a bad topology or cost table.
  """
  began = time.perf_counter()
  limit = check_arguments(graph, topology, time_limit_s, num_workers,
                          seed=seed, max_nodes=max_nodes, memory=memory,
                          links=links, log=log)
  costs = cost_table(graph, topology, costs)
  n = graph.n_nodes
  if hint is not None:
    hint = check_placements(hint, graph, topology.n_devices,
                            device_names=topology.device_names,
                            batched=False).astype(np.int32)
  if n == 0:
    empty = np.zeros(0, np.int32)
    return SolverResult(empty, empty, 0.0, 0.0, 0.0, "OPTIMAL", 0.0,
                        time.perf_counter() - began)
  if n > max_nodes:
    return _solve_coarsened(graph, topology, costs, began=began, limit=limit,
                            num_workers=num_workers, hint=hint, seed=seed,
                            memory=memory, links=links, log=log)
  status, placement, start, end, makespan_s, model_bound = _run_model(
      graph, topology, costs, limit_s=limit, num_workers=num_workers,
      seed=seed, hint=hint, memory=memory, links=links, log=log)
  if status == "INFEASIBLE" and memory:
    left = max(limit - (time.perf_counter() - began), 0.1 * limit)
    status, placement, start, end, makespan_s, model_bound = _run_model(
        graph, topology, costs, limit_s=left, num_workers=num_workers,
        seed=seed, hint=hint, memory=False, links=links, log=log)
  candidates = []
  if placement is not None:
    candidates += [(placement, _order_from_times(start, end)),
                   (placement, None)]
  if hint is not None:
    candidates.append((hint, None))
  if not candidates:
    candidates.append((_fallback_placement(graph, topology, costs), None))
  placement, order, runtime, oom = _best_candidate(graph, topology, costs,
                                                   candidates)
  bound = max(model_bound * (1.0 - BOUND_SLACK),
              lower_bound(graph, topology, costs))
  if status not in ("OPTIMAL", "FEASIBLE"):
    status = "UNKNOWN"
  return SolverResult(placement, order, runtime, makespan_s, bound, status,
                      _gap(runtime, bound), time.perf_counter() - began, oom)


def _solve_coarsened(graph, topology, costs, *, began, limit, num_workers,
                     hint, seed, memory, links, log):
  """Solves the coarse graph and expands (see the module docstring)."""
  coarsening = coarsen(graph, rule="size", max_groups=COARSE_GROUPS)
  groups = coarsening.group_of
  coarse_costs = np.zeros((coarsening.n_groups, topology.n_devices))
  executed = (graph.kind != NODE_INPUT)[:, None]
  np.add.at(coarse_costs, groups, np.where(executed, costs, 0.0))
  coarse_hint = None
  if hint is not None:               # the device most members sit on
    votes = np.zeros((coarsening.n_groups, topology.n_devices), np.int64)
    np.add.at(votes, (groups, hint), 1)
    coarse_hint = votes.argmax(1).astype(np.int32)
  left = max(limit - (time.perf_counter() - began), 0.1 * limit)
  coarse = solve(coarsening.graph, topology, coarse_costs, time_limit_s=left,
                 num_workers=num_workers, hint=coarse_hint, seed=seed,
                 memory=memory, links=links, max_nodes=coarsening.n_groups,
                 log=log)
  placement = np.asarray(expand(coarsening, coarse.placement), np.int32)
  position = np.empty(coarsening.n_groups, np.int64)
  position[coarse.order] = np.arange(coarsening.n_groups)
  # Groups in the coarse order, members by id: a topological order, since
  # every original edge goes to the same or a later group.
  order = np.lexsort((np.arange(graph.n_nodes), position[groups])).astype(
      np.int32)
  candidates = [(placement, order), (placement, None)]
  if hint is not None:
    candidates.append((hint, None))
  placement, order, runtime, oom = _best_candidate(graph, topology, costs,
                                                   candidates)
  bound = lower_bound(graph, topology, costs)
  status = "OPTIMAL" if runtime <= bound else "FEASIBLE"
  return SolverResult(placement, order, runtime, coarse.solver_makespan_s,
                      bound, status, _gap(runtime, bound),
                      time.perf_counter() - began, oom, coarsened=True)


def solver_lower_bound(graph: Graph, topology: Topology, costs=None, *,
                       time_limit_s: float = 60.0, num_workers: int = 2,
                       seed: int = 0, links: bool = True,
                       max_nodes: int = MAX_EXACT_NODES) -> float:
  """A lower bound in seconds on ``gplace.simulate(...).runtime_s`` of every
  placement and order: the larger of ``gplace.lower_bound`` and CP-SAT's
  proven bound of the model without memory conditions.

  Graphs above ``max_nodes`` nodes get ``gplace.lower_bound`` alone.

  Raises:
    SearchError: ``time_limit_s <= 0``, ``num_workers < 1``, a bad
      ``seed`` or ``max_nodes``, or ``links`` not a bool.
    TopologyError: a bad topology or cost table.
  """
  limit = check_arguments(graph, topology, time_limit_s, num_workers,
                          seed=seed, max_nodes=max_nodes, links=links)
  costs = cost_table(graph, topology, costs)
  bound = lower_bound(graph, topology, costs)
  if graph.n_nodes == 0 or graph.n_nodes > max_nodes:
    return bound
  _, _, _, _, _, model_bound = _run_model(
      graph, topology, costs, limit_s=limit, num_workers=num_workers,
      seed=seed, hint=None, memory=False, links=links)
  return max(bound, model_bound * (1.0 - BOUND_SLACK))
