"""The planned schedule: HEFT's scheduling phase on a given placement.

:func:`planned_orders` books each placement's ops in decreasing priority into
the first idle gap of their device (insertion), transfers as the baselines
plan them, then simulates the planned order; given HEFT's placement it is
HEFT's own plan. ``schedule="best"`` keeps the faster of this and the
dynamic schedule (:data:`BEST_TIE`). Host-side (numba on threads).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from gplace.graphs.graph import NODE_INPUT, Graph
from gplace.sim import list_scheduler
from gplace.sim import native
from gplace.sim.cache import cached_problem
from gplace.sim.list_scheduler import MAX_GAPS
from gplace.sim.priority import order_priority, priority_order
from gplace.sim.topology import Topology, cost_table
#: ``schedule="best"`` keeps the planned schedule only where it is faster
#: than the dynamic one by more than this fraction: closer is a tie (the
#: dynamic one wins), which float32 rounding could otherwise decide either
#: way (the compiled schedulers run in float32, the reference in float64).
BEST_TIE = 1e-6

_HAS_NUMBA = native.HAS_NUMBA
if _HAS_NUMBA:  # else the plain-Python reference plans (planned_orders)
  from gplace.sim import planned_kernels  # pylint: disable=g-import-not-at-top


class PlannedProblem(NamedTuple):
  """The arrays the planner reads (``N`` nodes, ``D`` devices, ``E``
  edges), float64 as the baselines' list schedulers compute."""
  costs: np.ndarray            # [N, D] float64
  is_input: np.ndarray         # [N] bool
  pred_ptr: np.ndarray         # [N + 1] int64
  pred_src: np.ndarray         # [E] uint32, producers grouped by consumer
  send_bytes: np.ndarray       # [N] float64, largest out-edge
  latency: np.ndarray          # [D, D] float64
  hold_latency: np.ndarray     # [D, D] float64 latency that holds the link
  inv_bandwidth: np.ndarray    # [D, D] float64 (0 where infinite)
  group_of_device: np.ndarray  # [D] uint32, compute group 0..G-1
  n_groups: int


def make_planned_problem(graph: Graph, topology: Topology,
                         costs=None) -> PlannedProblem:
  """The planner's arrays for ``graph`` on ``topology`` (a builder for
  :func:`gplace.sim.cache.cached_problem`).

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` seconds (default: the roofline).
  """
  costs = cost_table(graph, topology, costs)
  ptr, eids = graph.pred_csr
  send = np.zeros(graph.n_nodes)
  np.maximum.at(send, graph.edge_src, graph.edge_bytes.astype(np.float64))
  with np.errstate(divide="ignore"):
    inv = 1.0 / np.asarray(topology.link_bandwidth, np.float64)
  inv[~np.isfinite(inv)] = 0.0
  _, group = np.unique(topology.compute_group, return_inverse=True)
  contiguous = lambda x, dtype: np.ascontiguousarray(x, dtype)
  return PlannedProblem(
      costs=contiguous(costs, np.float64),
      is_input=contiguous(graph.kind == NODE_INPUT, np.bool_),
      pred_ptr=contiguous(ptr, np.int64),
      pred_src=contiguous(graph.edge_src[eids], np.uint32),
      send_bytes=send,
      latency=contiguous(topology.link_latency, np.float64),
      hold_latency=contiguous(topology.link_hold_latency, np.float64),
      inv_bandwidth=np.ascontiguousarray(inv),
      group_of_device=contiguous(group.reshape(-1), np.uint32),
      n_groups=int(group.max()) + 1)


def node_orders(priority: np.ndarray, graph: Graph) -> np.ndarray:
  """The priority-respecting topological order of each row of ``priority``
  (``[N]`` or ``[K, N]``, larger first, ties by id): ``[R, N]`` int64
  (``R``: 1 or ``K``). A plain sort where it is already topological (the
  critical path always is), else Kahn's algorithm with a heap (compiled;
  :func:`~gplace.sim.priority.priority_order` without numba)."""
  priority = np.atleast_2d(np.asarray(priority))
  order = np.argsort(-priority, axis=1, kind="stable")
  position = np.empty_like(order)
  np.put_along_axis(position, order,
                    np.arange(order.shape[1])[None, :], axis=1)
  broken = np.flatnonzero((position[:, graph.edge_src]
                           > position[:, graph.edge_dst]).any(axis=1))
  if broken.size and _HAS_NUMBA:
    by_rank = np.ascontiguousarray(order, np.int64)
    order = by_rank.copy()
    planned_kernels.topological_rows(
        broken.astype(np.int64), np.ascontiguousarray(position, np.int64),
        by_rank, np.ascontiguousarray(graph.succ_csr[0], np.int64),
        np.ascontiguousarray(graph.edge_dst, np.int64),
        np.ascontiguousarray(graph.in_degree, np.int64), order)
  else:
    for row in broken.tolist():
      order[row] = priority_order(priority[row], graph)
  return np.ascontiguousarray(order, np.int64)


def plan_batch(problem: PlannedProblem, placements: np.ndarray,
               order: np.ndarray, out: tuple[np.ndarray, np.ndarray],
               rows: slice, max_gaps: int = MAX_GAPS) -> None:
  """Plans rows ``rows`` of ``placements`` into ``out``.

  Args:
    problem: from :func:`make_planned_problem`.
    placements: ``[K, N]`` uint32 device per node (C-contiguous).
    order: :func:`node_orders` of the ``[N]`` or ``[K, N]`` priorities,
      as uint32 (``[1, N]`` or ``[K, N]``).
    out: ``(order, rank)``, ``[K, N]`` int32 each, written in place: each
      placement's schedule (graph inputs first, then nodes by planned
      start, ties by id: a topological order, since an edge ``u -> v`` has
      ``start(v) >= finish(u) >= start(u)``) and each node's place in it.
    rows: the contiguous rows to plan (the compiled kernel runs without the
      GIL, so parts of a batch can run from threads of their own).
    max_gaps: idle gaps looked at per op.
  """
  lo, hi, _ = rows.indices(placements.shape[0])
  p = problem
  planned_kernels.plan_rows(
      lo, hi, placements, order, p.costs, p.is_input, p.pred_ptr,
      p.pred_src, p.send_bytes, p.latency, p.hold_latency, p.inv_bandwidth,
      p.group_of_device, p.n_groups, int(max_gaps), out[0], out[1])


def planned_orders(graph: Graph, topology: Topology, costs,
                   placements: np.ndarray, priority: np.ndarray,
                   run_parts: Callable[[Callable[[slice], None], int, int],
                                       None]
                   ) -> tuple[np.ndarray, np.ndarray]:
  """The planned schedule of each placement.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices.
    costs: optional ``[N, D]`` seconds (default: the roofline).
    placements: ``[K, N]`` int device per node.
    priority: ``[N]`` or ``[K, N]``, larger first (ties by id; the order is
      the priority-respecting topological one, :func:`node_orders`).
    run_parts: ``run_parts(work, k, n)`` calls ``work(rows)`` on slices
      that cover ``0..k`` (of ``n`` nodes each), possibly from several
      threads.

  Returns:
    ``(order, rank)``: ``[K, N]`` int32 topological orders (for
    ``gplace.simulate(..., order=...)``) and each node's place in its row.
  """
  k, n = placements.shape
  if not _HAS_NUMBA:     # the plain-Python reference, one by one
    problem = list_scheduler.prepare(graph, topology, costs)
    devices = np.arange(topology.n_devices)
    by_priority = node_orders(priority, graph)
    order = np.stack([list_scheduler.heft_schedule(
        problem, devices,
        order_priority(by_priority[0 if len(by_priority) == 1 else i]),
        max_gaps=MAX_GAPS, placement=placements[i]).order
                      for i in range(k)]).astype(np.int32)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order.astype(np.int64),
                      np.arange(n, dtype=np.int32)[None, :], axis=1)
    return order, rank
  problem = cached_problem(make_planned_problem, graph, topology,
                           costs=costs)
  rows = np.ascontiguousarray(placements, np.uint32)
  # Unsigned indices: numba skips the test for a negative one.
  by_priority = node_orders(priority, graph).astype(np.uint32)
  out = (np.empty((k, n), np.int32), np.empty((k, n), np.int32))
  run_parts(lambda part: plan_batch(problem, rows, by_priority, out, part),
            k, n)
  return out
