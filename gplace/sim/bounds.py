"""Lower bounds on the simulated runtime of any placement (host-side).

:func:`lower_bound` ``(graph, topology, costs=None) -> float`` seconds: the
largest of :func:`critical_path`, :func:`work_bound` and
:func:`interval_bound`, so that ``runtime / lower_bound`` is an honest gap
(``docs/design.md#bounds``).
"""

from __future__ import annotations

import numpy as np

from gplace.graphs.graph import Graph, NODE_INPUT, check_graph
from gplace.sim.cache import cached_problem
from gplace.sim.simulator import check_time_bound
from gplace.sim.topology import Topology, check_topology, cost_table


def _group_costs(costs: np.ndarray, topology: Topology) -> np.ndarray:
  """``[N, G]`` cheapest cost of each node on a device of each group."""
  _, group = np.unique(topology.compute_group, return_inverse=True)
  group = group.reshape(-1)
  out = np.full((costs.shape[0], int(group.max()) + 1), np.inf)
  for dev, g in enumerate(group):
    out[:, g] = np.minimum(out[:, g], costs[:, dev])
  return out


def critical_path(graph: Graph, node_costs: np.ndarray) -> float:
  """Longest path of ``node_costs`` (``[N]`` seconds) through the graph."""
  if graph.n_nodes == 0:
    return 0.0
  top, _ = path_levels(graph, node_costs, bottom=False)
  return float((top + np.asarray(node_costs, np.float64)).max())


def path_levels(graph: Graph, node_costs: np.ndarray, *, bottom: bool = True
                ) -> tuple[np.ndarray, np.ndarray | None]:
  """Top and bottom levels of ``node_costs`` (``[N]`` seconds), no
  transfers: ``top[i]`` the longest path into node ``i`` (without it),
  ``bottom[i]`` the longest from it to an exit (with it), so that
  ``max(top + bottom)`` is :func:`critical_path` and ``critical_path -
  (top + bottom)`` each node's slack. ``bottom`` is None when not asked.

  Returns:
    ``(top [N], bottom [N] or None)`` float64.
  """
  cost = np.asarray(node_costs, np.float64)
  n = graph.n_nodes
  top = np.zeros(n)
  if n == 0:
    return top, (top.copy() if bottom else None)
  depth = graph.depth
  # Level by level: every edge goes from a lower depth to a higher one.
  by_depth = np.argsort(depth[graph.edge_dst], kind="stable")
  src = graph.edge_src[by_depth]
  dst = graph.edge_dst[by_depth]
  bounds = np.searchsorted(depth[dst], np.arange(depth.max() + 2))
  for level in range(1, depth.max() + 1):
    lo, hi = bounds[level], bounds[level + 1]
    if hi > lo:
      np.maximum.at(top, dst[lo:hi], top[src[lo:hi]] + cost[src[lo:hi]])
  if not bottom:
    return top, None
  below = cost.copy()
  for level in range(depth.max(), 0, -1):
    lo, hi = bounds[level], bounds[level + 1]
    if hi > lo:
      np.maximum.at(below, src[lo:hi], below[dst[lo:hi]] + cost[src[lo:hi]])
  return top, below


def work_bound(group_costs: np.ndarray, iterations: int = 200) -> float:
  """``max_w sum_i min_g w_g c[i, g]`` over the simplex (searched; any
  iterate is a valid bound, the best one is returned)."""
  return _work_duals(group_costs, iterations)[0]


def _work_duals(group_costs: np.ndarray, iterations: int = 200
                ) -> tuple[float, np.ndarray]:
  """:func:`work_bound` and the weights ``[G]`` that give it."""
  c = np.asarray(group_costs, np.float64)
  n, g = c.shape
  weights = np.full(g, 1.0 / g)
  if n == 0:
    return 0.0, weights
  best, best_weights = 0.0, weights
  step = 1.0
  for _ in range(iterations):
    weighted = c * weights[None, :]
    choice = np.argmin(weighted, 1)
    value = float(weighted[np.arange(n), choice].sum())
    if value > best:
      best, best_weights = value, weights
    # Subgradient: the cost each group would carry under this choice.
    grad = np.bincount(choice, weights=c[np.arange(n), choice], minlength=g)
    scale = grad.max()
    if not scale > 0:
      break
    weights = weights * np.exp(step * grad / scale)
    weights /= weights.sum()
    step *= 0.98
  return best, best_weights


#: Thresholds per axis of :func:`interval_bound`'s grid (quantiles).
INTERVAL_GRID = 128


def interval_bound(graph: Graph, group_costs: np.ndarray,
                   grid: int = INTERVAL_GRID) -> float:
  """The work bound of the ops that must run inside an interval.

  An op cannot start before its top level (the longest path into it at
  the fastest devices) nor end later than the makespan less the longest
  path after it. So for thresholds ``t`` and ``q``, the ops whose top level
  is at least ``t`` and whose path after them is at least ``q`` all run
  inside ``[t, T - q]``, and ``T >= t + q +`` their :func:`work_bound`.
  ``t = q = 0`` is :func:`work_bound` itself (every graph has ops at top
  level 0 and ops with nothing after them), so this is never below it;
  late ops with little parallel work left beside them (a decoder's last
  steps) tighten it. Searched on a ``grid x grid`` of quantiles, with the
  whole graph's work-bound weights (any weights give a valid bound), then
  the best cell with its own.

  Args:
    graph: the op graph (``N`` nodes).
    group_costs: ``[N, G]`` seconds of each node on each compute group
      (0 for inputs).

  Returns:
    Seconds.
  """
  c = np.asarray(group_costs, np.float64)
  if c.shape[0] == 0:
    return 0.0
  fastest = c.min(1)
  top, below = path_levels(graph, fastest)
  after = below - fastest
  _, weights = _work_duals(c)
  share = (c * weights[None, :]).min(1)
  levels = np.linspace(0.0, 1.0, grid)
  ts, qs = np.unique(np.quantile(top, levels)), np.unique(
      np.quantile(after, levels))
  cell = (np.searchsorted(ts, top, side="right") - 1,
          np.searchsorted(qs, after, side="right") - 1)
  work = np.zeros((ts.size, qs.size))
  count = np.zeros((ts.size, qs.size))
  np.add.at(work, cell, share)
  np.add.at(count, cell, 1.0)

  def at_least(a):               # sums over cells (>= j, >= l)
    return a[::-1, ::-1].cumsum(0).cumsum(1)[::-1, ::-1]

  value = np.where(at_least(count) > 0,
                   ts[:, None] + qs[None, :] + at_least(work), 0.0)
  j, k = np.unravel_index(np.argmax(value), value.shape)
  inside = (top >= ts[j]) & (after >= qs[k])
  return max(float(value[j, k]),
             float(ts[j] + qs[k] + work_bound(c[inside])))


def lower_bound(graph: Graph, topology: Topology, costs=None) -> float:
  """A lower bound in seconds on ``simulate(...).runtime_s`` of any placement.

  Args:
    graph: the op graph.
    topology: the devices.
    costs: optional ``[N, D]`` measured seconds (default: the roofline).

  Returns:
    the largest of the critical path at the fastest devices, the work
    bound and the interval bound (see module doc).

  Raises:
    GraphError: ``graph`` is not a :class:`~gplace.Graph`.
    TopologyError: ``topology`` is not a :class:`~gplace.Topology`, a
      bad cost table, or times past float32 that ``gplace.simulate``
      refuses (:func:`gplace.sim.simulator.check_time_bound`).
  """
  check_graph(graph, "gplace.lower_bound")
  check_topology(topology, "gplace.lower_bound")
  if graph.n_nodes == 0:
    cost_table(graph, topology, costs)   # a bad table still raises
    return 0.0
  # Kept per graph, topology and content of costs: searches, LNS chains
  # and optimize's phases ask for the same bound again (0.3-0.4 s on 30k
  # ops, gnmt4).
  return cached_problem(_bound, graph, topology,
                        costs=check_time_bound(graph, topology, costs))


def _bound(graph: Graph, topology: Topology, costs=None) -> float:
  """:func:`lower_bound` of a checked, non-empty graph."""
  table = cost_table(graph, topology, costs)
  costs = np.where((graph.kind == NODE_INPUT)[:, None], 0.0, table)
  fastest = costs.min(1)
  # The interval bound includes the work bound (its cell t = q = 0).
  return max(critical_path(graph, fastest),
             interval_bound(graph, _group_costs(costs, topology)))
