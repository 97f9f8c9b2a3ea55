"""Schedule priorities on the host: the critical path (:func:`bottom_level`,
:func:`upward_rank`), :func:`check_priority`, and the priority-respecting
topological order (:func:`priority_order`, :func:`order_priority`).
"""

from __future__ import annotations

import heapq

import numpy as np

from gplace.errors import ScheduleError
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.sim.topology import Topology, cost_table


def bottom_level(graph: Graph, topology: Topology, costs=None) -> np.ndarray:
  """Critical-path priority: each node's bottom level in seconds.

  The longest path from the node to an exit, counting each executed node's
  cost averaged over the devices and each edge's transfer averaged over the
  ordered pairs of distinct devices (HEFT's upward rank on the topology's
  costs). ``NODE_INPUT`` nodes cost nothing. A placement-independent
  priority: one vector serves every sample.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds (default: the roofline).

  Returns:
    ``[N]`` float64; ``level[u] > level[v]`` for every edge ``u -> v`` whose
    head costs something, ``>=`` always.
  """
  costs = cost_table(graph, topology, costs)
  node_cost = np.where(graph.kind == NODE_INPUT, 0.0, costs.mean(axis=1))
  edge_cost = mean_transfer_s(topology, np.arange(topology.n_devices),
                              graph.edge_bytes)
  return upward_rank(graph, node_cost, edge_cost)


def mean_transfer_s(topology: Topology, devices: np.ndarray,
                     nbytes: np.ndarray) -> np.ndarray:
  """Mean transfer seconds of ``nbytes`` over ordered pairs of ``devices``."""
  devices = np.asarray(devices)
  if devices.size < 2:
    return np.zeros(np.shape(nbytes))
  src, dst = np.meshgrid(devices, devices, indexing="ij")
  off = src != dst
  latency = topology.link_latency[src[off], dst[off]].mean()
  inv_bandwidth = (1.0 / topology.link_bandwidth[src[off], dst[off]]).mean()
  return latency + np.asarray(nbytes, np.float64) * inv_bandwidth


def upward_rank(graph: Graph, node_cost: np.ndarray,
                 edge_cost: np.ndarray) -> np.ndarray:
  """HEFT's upward rank: longest cost path from each node to an exit.

  Args:
    node_cost: ``[N]`` seconds per node.
    edge_cost: ``[E]`` seconds per edge.

  Returns:
    ``[N]`` float64; ``rank[i] >= rank[j]`` for every edge ``i -> j``.
  """
  n = graph.n_nodes
  rank = [0.0] * n
  cost = node_cost.tolist()
  ptr = graph.succ_csr[0].tolist()
  dst = graph.edge_dst.tolist()
  comm = edge_cost.tolist()
  for i in range(n - 1, -1, -1):
    best = 0.0
    for k in range(ptr[i], ptr[i + 1]):
      value = comm[k] + rank[dst[k]]
      if value > best:
        best = value
    rank[i] = cost[i] + best
  return np.asarray(rank)


def check_priority(priority, n_nodes: int, n_samples: int | None = None
                   ) -> np.ndarray:
  """Validates a priority vector; returns it as float32.

  Args:
    priority: ``[N]`` or ``[K, N]`` numbers, larger runs first.
    n_nodes: ``N``.
    n_samples: ``K`` if a ``[K, N]`` priority must match it.

  Returns:
    The priority, float32, same shape.

  Raises:
    ScheduleError: wrong shape, not numbers, or not finite.
  """
  try:
    array = np.asarray(priority, np.float64)
  except (TypeError, ValueError) as e:
    raise ScheduleError(f"priority must be an array of numbers: {e}") from None
  if array.ndim not in (1, 2) or array.shape[-1] != n_nodes:
    raise ScheduleError(
        f"priority must have shape [N] or [K, N] with N = {n_nodes} nodes, "
        f"got shape {array.shape}.")
  if array.ndim == 2 and n_samples is not None and array.shape[0] != n_samples:
    raise ScheduleError(
        f"priority has {array.shape[0]} rows but there are {n_samples} "
        "placements; give one row per placement, or one [N] vector for all.")
  if not np.all(np.isfinite(array)):
    raise ScheduleError("priority must be finite (no NaN or inf).")
  return array.astype(np.float32)


def priority_order(priority, graph: Graph) -> np.ndarray:
  """The priority-respecting topological order: repeatedly the node of
  highest priority among those whose producers have all been ordered (ties:
  lower node id first).

  Args:
    priority: ``[N]`` numbers (compared as float32, as the simulator does).
    graph: the op graph.

  Returns:
    ``[N]`` int64 order.
  """
  priority = check_priority(priority, graph.n_nodes).astype(np.float64)
  remaining = graph.in_degree.astype(np.int64).copy()
  ptr = graph.succ_csr[0]
  heap = [(-priority[v], v) for v in np.flatnonzero(remaining == 0).tolist()]
  heapq.heapify(heap)
  order = []
  while heap:
    _, v = heapq.heappop(heap)
    order.append(v)
    for w in graph.edge_dst[ptr[v]:ptr[v + 1]].tolist():
      remaining[w] -= 1
      if remaining[w] == 0:
        heapq.heappush(heap, (-priority[w], w))
  return np.asarray(order, np.int64)


def order_priority(order) -> np.ndarray:
  """A priority under which ``order`` (``[N]`` or ``[K, N]``, topological)
  is the priority-respecting order: ``N - position``, float32 (exact below
  2**24 nodes)."""
  order = np.asarray(order)
  n = order.shape[-1]
  rows = np.atleast_2d(order)
  priority = np.empty(rows.shape, np.float32)
  for row, out in zip(rows, priority):
    out[row] = n - np.arange(n)
  return priority.reshape(order.shape)

