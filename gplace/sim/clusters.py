"""The executor's host work for a placement: cluster launches and copies.

:func:`count_clusters` follows the executor's dispatch rule exactly (effect
ordering aside), :func:`count_copies` counts values copied into each device;
:func:`host_costs` charges ``Device.cluster_launch_s`` and ``copy_issue_s``
for them, added to ``runtime_s``. Host-side (numba where installed). Why:
``docs/design.md``, "Calibration".
"""

from __future__ import annotations

import numpy as np

from gplace._compiled import njit
from gplace.graphs.graph import Graph, NODE_OP


def _count_rows(placements, orders, is_op, succ_ptr, edge_dst, in_degree,
                n_devices, out):
  """Adds each row's clusters per device to ``out [K, D]`` (int64);
  returns the first row whose order is not topological, or -1.

  ``orders [K, N]``: the nodes of each row in priority order;
  ``succ_ptr``/``edge_dst``: the graph's successors (edges sorted by
  source); ``in_degree``: op inputs of each node (copied per row).
  """
  k, n = placements.shape
  rank = np.empty(n, np.int64)
  count = np.empty(n_devices + 1, np.int64)
  for row in range(k):
    placement, order = placements[row], orders[row]
    for i in range(n):
      rank[order[i]] = i
    indeg = in_degree.copy()
    # Each device's ops in priority order: sequence[start[d]:start[d + 1]].
    count[:] = 0
    for i in range(n):
      if is_op[order[i]]:
        count[placement[order[i]] + 1] += 1
    start = np.cumsum(count)
    sequence = np.empty(start[n_devices], np.int64)
    head = start[:n_devices].copy()
    for i in range(n):
      v = order[i]
      if is_op[v]:
        sequence[head[placement[v]]] = v
        head[placement[v]] += 1
    head[:] = start[:n_devices]           # next op of each device
    current = -1
    for _ in range(start[n_devices]):
      if current < 0 or head[current] == start[current + 1] or \
          indeg[sequence[head[current]]] != 0:
        best, best_rank = -1, n
        for d in range(n_devices):
          if head[d] < start[d + 1]:
            v = sequence[head[d]]
            if indeg[v] == 0 and rank[v] < best_rank:
              best, best_rank = d, rank[v]
        if best < 0:
          return row
        current = best
        out[row, current] += 1
      v = sequence[head[current]]
      head[current] += 1
      for e in range(succ_ptr[v], succ_ptr[v + 1]):
        indeg[edge_dst[e]] -= 1
  return -1


def count_clusters(graph: Graph, placements: np.ndarray,
                   orders: np.ndarray, n_devices: int) -> np.ndarray:
  """Clusters per device that the executor runs each placement in.

  Args:
    graph: the op graph (``N`` nodes).
    placements: ``[K, N]`` int device index per node.
    orders: ``[K, N]`` int, each placement's priority order (a topological
      order of all nodes, e.g. ``SimResult.order``).
    n_devices: ``D``.

  Returns:
    ``[K, D]`` int64: how many clusters of each placement run on each
    device (their sum is ``Placed.n_clusters`` of ``gplace.place`` with
    that schedule).

  Raises:
    ValueError: an order is not a topological order (callers pass orders
      the simulator made or checked).
  """
  placements = np.ascontiguousarray(np.atleast_2d(placements), np.int64)
  orders = np.ascontiguousarray(np.atleast_2d(orders), np.int64)
  is_op = graph.kind == NODE_OP
  in_degree = np.bincount(graph.edge_dst[is_op[graph.edge_src]],
                          minlength=graph.n_nodes).astype(np.int64)
  out = np.zeros((placements.shape[0], n_devices), np.int64)
  count_rows = njit(_count_rows) or _count_rows
  bad = count_rows(placements, orders, is_op, graph.succ_csr[0],
                   graph.edge_dst.astype(np.int64), in_degree, n_devices,
                   out)
  if bad >= 0:
    raise ValueError(f"orders[{bad}] is not a topological order of the "
                     "graph's ops.")
  return out


def _count_copies(placements, succ_ptr, edge_dst, n_devices, out):
  """Adds to ``out [K, D]`` (int64) the values each row copies to each
  device: node ``v`` counts once for each device other than its own that
  holds one of its successors."""
  k, n = placements.shape
  stamp = np.zeros(n_devices, np.int64)
  for row in range(k):
    placement = placements[row]
    for v in range(n):
      mark = row * n + v + 1
      for e in range(succ_ptr[v], succ_ptr[v + 1]):
        d = placement[edge_dst[e]]
        if d != placement[v] and stamp[d] != mark:
          stamp[d] = mark
          out[row, d] += 1


def count_copies(graph: Graph, placements: np.ndarray,
                 n_devices: int) -> np.ndarray:
  """Values each placement copies to each device: the simulator's
  transfers (every node's output goes once to each other device that reads
  it; graph inputs included), which are the executor's copies.

  Args:
    graph: the op graph (``N`` nodes).
    placements: ``[K, N]`` (or ``[N]``) int device index per node.
    n_devices: ``D``.

  Returns:
    ``[K, D]`` int64 copies into each device.
  """
  placements = np.ascontiguousarray(np.atleast_2d(placements), np.int64)
  out = np.zeros((placements.shape[0], n_devices), np.int64)
  count = njit(_count_copies) or _count_copies
  count(placements, graph.succ_csr[0], graph.edge_dst.astype(np.int64),
        n_devices, out)
  return out


def launch_costs(topology) -> np.ndarray:
  """``[D]`` float64 ``Device.cluster_launch_s`` of every device."""
  return np.array([dev.cluster_launch_s for dev in topology.devices],
                  np.float64)


def copy_costs(topology) -> np.ndarray:
  """``[D]`` float64 ``Device.copy_issue_s`` of every device."""
  return np.array([dev.copy_issue_s for dev in topology.devices], np.float64)


def host_costs(graph: Graph, topology, placements: np.ndarray,
               orders) -> np.ndarray | None:
  """``[K]`` float64 seconds of host work :func:`gplace.simulate` adds to
  each placement's runtime: its clusters' launches
  (:func:`count_clusters` in ``orders [K, N]``, the priority orders they
  run in) and its copies (:func:`count_copies`); None when the topology
  charges neither."""
  launch, copy = launch_costs(topology), copy_costs(topology)
  extra = None
  if np.any(launch > 0):
    extra = count_clusters(graph, placements, np.asarray(orders),
                           topology.n_devices) @ launch
  if np.any(copy > 0):
    copies = count_copies(graph, placements, topology.n_devices) @ copy
    extra = copies if extra is None else extra + copies
  return extra
