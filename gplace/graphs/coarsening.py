"""Coarsening: merge ops into groups so that a policy places groups, not ops.

``coarsen(graph, rule, max_groups=None) -> Coarsening`` (``graph``,
``group_of int32 [N]``); rules ``"colocation"`` (ColocRL), ``"hsdag"``,
``"size"``. A coarse node sums its members' FLOPs, bytes and edges, keeps
only outputs that leave the group, and takes its costliest op's name.
:func:`expand` maps a group placement back to ops; rewards use the original
graph. Host-side numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numbers

import numpy as np

from gplace.errors import (CoarseningError, PlacementError, check_type,
                           first_line)
from gplace.graphs.build_checks import merge_edges, stable_topological_order
from gplace.graphs.constraints import coarse_constraints
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 check_graph)

RULES = ("colocation", "hsdag", "size")

# A group may weigh at most this many times the average group weight (before
# the cap is relaxed for lack of progress).
_BALANCE_SLACK = 2.0


class Coarsening(NamedTuple):
  """The result of :func:`coarsen`.

  Attributes:
    graph: the coarse graph, one node per group (``G`` nodes).
    group_of: ``[N]`` int32, the group (coarse node id) of each original node.
    rule: the rule that made it.
  """
  graph: Graph
  group_of: np.ndarray
  rule: str

  @property
  def n_groups(self) -> int:
    return self.graph.n_nodes

  def members(self, group: int) -> np.ndarray:
    """Original node ids in ``group``, increasing."""
    return np.flatnonzero(self.group_of == group).astype(np.int32)

  def expand(self, placement):
    """Group placement ``[..., G]`` -> node placement ``[..., N]``; see
    :func:`expand`."""
    return expand(self, placement)


def expand(coarsening: Coarsening, placement):
  """Maps a placement of groups to a placement of the original nodes.

  Args:
    coarsening: from :func:`coarsen`.
    placement: ``[G]`` or ``[K, G]`` device per group (as
      :func:`gplace.simulate` takes placements); a numpy or jax array (also
      traced under ``jit``: only its shape and dtype are checked).

  Returns:
    ``[N]`` or ``[K, N]``: each node gets its group's device.

  Raises:
    CoarseningError: ``coarsening`` is not a :class:`Coarsening`.
    PlacementError: the placement is not of an integer dtype, not of rank
      1 or 2, or its last axis is not of length ``G`` (checked on the dtype
      and shape, so it holds under ``jit``).
  """
  check_type(coarsening, Coarsening, "coarsening", "gplace.expand",
             CoarseningError, "make one with gplace.coarsen(graph)")
  if not hasattr(placement, "shape"):  # a list: numpy, so it can be indexed
    try:
      placement = np.asarray(placement)
    except (TypeError, ValueError) as err:
      raise PlacementError(
          f"gplace.expand needs a placement of integer device indices, got "
          f"{type(placement).__name__} that numpy cannot read as an array "
          f"({first_line(err)}).") from err
  # The dtype, not the values: a traced placement under jit has no values.
  dtype = getattr(placement, "dtype", None)
  if dtype is None or not np.issubdtype(dtype, np.integer):
    raise PlacementError(
        f"gplace.expand needs a placement of integer device indices, got "
        f"dtype {dtype}; pass e.g. np.asarray(placement, np.int32) (a "
        "float or string array would come back as node 'devices' of that "
        "dtype).")
  shape = np.shape(placement)
  if len(shape) > 2:
    raise PlacementError(
        f"gplace.expand takes a placement [G] or a batch of placements "
        f"[K, G], got shape {shape}; reshape a batch with more axes to "
        f"(-1, {coarsening.n_groups}) first.")
  if not shape or shape[-1] != coarsening.n_groups:
    raise PlacementError(
        f"A placement of shape {shape} cannot be expanded: the coarse graph "
        f"has {coarsening.n_groups} groups, so the last axis must be of "
        f"length {coarsening.n_groups}.")
  return placement[..., coarsening.group_of]


def coarsen(graph: Graph, rule: str = "colocation", *,
            max_groups: int | None = None) -> Coarsening:
  """Merges the nodes of ``graph`` into groups by ``rule``.

  Args:
    graph: a graph of ``N`` nodes.
    rule: ``"colocation"``, ``"hsdag"`` or ``"size"`` (see the module
      docstring).
    max_groups: at most this many groups (required for ``"size"``; optional
      for the other rules, which then go on merging by size).

  Returns:
    A :class:`Coarsening` whose ``graph`` is acyclic and numbered in
    topological order, with ``group_of[src] <= group_of[dst]`` for every
    original edge.

  Raises:
    GraphError: ``graph`` is not a :class:`~gplace.Graph`.
    CoarseningError: on an unknown rule or a bad ``max_groups``.
  """
  check_graph(graph, "gplace.coarsen")
  if not isinstance(rule, str) or rule not in RULES:
    raise CoarseningError(
        f"Unknown coarsening rule {rule!r}; choose one of {RULES}.")
  if max_groups is not None:
    if isinstance(max_groups, bool) or not isinstance(
        max_groups, numbers.Integral) or max_groups < 1:
      raise CoarseningError(
          f"max_groups must be a positive integer, got {max_groups!r}.")
    max_groups = int(max_groups)
  elif rule == "size":
    raise CoarseningError(
        "The 'size' rule needs max_groups (the number of groups to reduce "
        "to), e.g. coarsen(graph, 'size', max_groups=256).")

  n = graph.n_nodes
  if n == 0:
    return Coarsening(graph=graph, group_of=np.zeros(0, np.int32), rule=rule)
  if rule == "size":
    labels = np.arange(n, dtype=np.int64)
  else:
    labels = _chain_labels(graph, require_single_parent=(rule == "hsdag"))
  if max_groups is not None and _count(labels) > max_groups:
    labels = _reduce_to(graph, labels, max_groups)
  labels = _topological_labels(graph, labels)
  coarse = _quotient_graph(graph, labels)
  return Coarsening(graph=coarse, group_of=labels.astype(np.int32), rule=rule)


# Let ``gplace.coarsen.expand(...)`` read as the function of this module that
# ``gplace.coarsen`` is exported as.
coarsen.expand = expand
coarsen.Coarsening = Coarsening


# -- rules ----------------------------------------------------------------------


def _count(labels: np.ndarray) -> int:
  return int(labels.max()) + 1 if labels.size else 0


def _dense(labels: np.ndarray) -> np.ndarray:
  """Renumbers labels to 0..G-1 (by increasing old label)."""
  return np.unique(labels, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _roots(parent: np.ndarray) -> np.ndarray:
  """Follows ``parent`` pointers (a forest: roots point at themselves) to the
  roots, by pointer jumping: O(N log depth), vectorized."""
  parent = parent.copy()
  while True:
    grand = parent[parent]
    if np.array_equal(grand, parent):
      return parent
    parent = grand


def _chain_labels(graph: Graph, require_single_parent: bool) -> np.ndarray:
  """Each node with exactly one successor joins it (ColocRL); with
  ``require_single_parent``, only if that successor has no other parent
  (HSDAG). Transitive: every node ends up in its chain's last node's group."""
  n = graph.n_nodes
  parent = np.arange(n, dtype=np.int64)
  ptr, _ = graph.succ_csr
  joins = graph.out_degree == 1
  # Edges are sorted by source, so a node's only out-edge is at ptr[node].
  successor = graph.edge_dst[ptr[:-1][joins]].astype(np.int64)
  if require_single_parent:
    keep = graph.in_degree[successor] == 1
    joins[np.flatnonzero(joins)[~keep]] = False
    successor = successor[keep]
  parent[joins] = successor
  return _dense(_roots(parent))


def _node_weights(graph: Graph) -> np.ndarray:
  """Half the node's share of the nodes, half its share of the FLOPs."""
  n = graph.n_nodes
  total_flops = graph.flops.sum()
  if total_flops <= 0:
    return np.full(n, 1.0 / n)
  return 0.5 / n + 0.5 * graph.flops / total_flops


def _reduce_to(graph: Graph, labels: np.ndarray, max_groups: int):
  """The ``"size"`` procedure (``docs/design.md``, section 1), from
  ``labels``."""
  src = graph.edge_src.astype(np.int64)
  dst = graph.edge_dst.astype(np.int64)
  node_weight = _node_weights(graph)
  cap = _BALANCE_SLACK / max_groups
  labels = _dense(labels)
  while _count(labels) > max_groups:
    progressed = False
    for only_successor in (True, False):
      n_groups = _count(labels)
      if n_groups <= max_groups:
        break
      cross = labels[src] != labels[dst]
      qsrc, qdst, qbytes = merge_edges(n_groups, labels[src][cross],
                                       labels[dst][cross],
                                       graph.edge_bytes[cross])
      if only_successor:
        safe = np.bincount(qsrc, minlength=n_groups)[qsrc] == 1
      else:
        safe = np.bincount(qdst, minlength=n_groups)[qdst] == 1
      if not safe.any():
        continue
      order = np.argsort(-qbytes[safe], kind="stable")
      parent = _union_under_cap(
          qsrc[safe][order], qdst[safe][order],
          np.bincount(labels, node_weight, minlength=n_groups), cap,
          n_groups - max_groups)
      if parent is not None:
        labels = _dense(_roots(parent)[labels])
        progressed = True
    if not progressed:
      if cap < 1.0:
        cap *= 2.0
      else:
        labels = _contiguous_runs(graph, labels, node_weight, max_groups)
  return labels


def _union_under_cap(a_list, b_list, weight, cap, needed):
  """Unions ``a`` with ``b`` for each candidate edge in order, skipping those
  that would exceed ``cap``, until ``needed`` unions. Returns the parent array
  (``None`` if nothing merged). The candidates form a forest, so every union
  joins two different trees and removes exactly one group."""
  parent = list(range(len(weight)))
  weight = weight.tolist()
  merges = 0
  for a, b in zip(a_list.tolist(), b_list.tolist()):
    while parent[a] != a:
      parent[a] = parent[parent[a]]
      a = parent[a]
    while parent[b] != b:
      parent[b] = parent[parent[b]]
      b = parent[b]
    if weight[a] + weight[b] > cap:
      continue
    parent[a] = b
    weight[b] += weight[a]
    merges += 1
    if merges >= needed:
      break
  return np.asarray(parent, np.int64) if merges else None


def _contiguous_runs(graph, labels, node_weight, max_groups):
  """Cuts a topological order of the groups into at most ``max_groups``
  contiguous runs of about equal weight.

  Cut ``k`` goes near the point where the running weight reaches ``k /
  max_groups`` of the total: at the position, within a quarter of a run's
  weight either side, where the fewest bytes cross (the sum of edges from
  before the cut to after it).
  """
  labels = _topological_labels(graph, labels)
  n_groups = _count(labels)
  weight = np.bincount(labels, node_weight, minlength=n_groups)
  # after[p]: weight of positions 0..p, i.e. at a cut just after position p.
  after = np.cumsum(weight)
  step = after[-1] / max_groups
  src, dst = graph.edge_src, graph.edge_dst
  cross = labels[src] != labels[dst]
  # crossing[p]: bytes over a cut just after position p.
  crossing = np.zeros(n_groups + 1, np.float64)
  np.add.at(crossing, labels[src][cross], graph.edge_bytes[cross])
  np.add.at(crossing, labels[dst][cross], -graph.edge_bytes[cross])
  crossing = np.cumsum(crossing)[:n_groups]
  cuts = []
  for k in range(1, max_groups):
    lo, hi = np.searchsorted(after, [(k - 0.25) * step, (k + 0.25) * step])
    hi = min(hi, n_groups - 1)
    if lo >= hi:
      if lo < n_groups - 1:
        cuts.append(lo)
      continue
    cuts.append(lo + int(np.argmin(crossing[lo:hi])))
  run = np.zeros(n_groups + 1, np.int64)
  run[np.unique(np.asarray(cuts, np.int64)) + 1] = 1
  run = np.cumsum(run)[:n_groups]
  return _dense(run[labels])


def _topological_labels(graph: Graph, labels: np.ndarray) -> np.ndarray:
  """Renumbers groups 0..G-1 so that every edge between groups goes from a
  lower to a higher label. Tries orders by last and by first member (right by
  construction for the colocation and hsdag rules), else a topological sort.
  """
  labels = _dense(labels)
  n_groups = _count(labels)
  src, dst = graph.edge_src, graph.edge_dst
  cross = labels[src] != labels[dst]
  qsrc, qdst = labels[src][cross], labels[dst][cross]
  ids = np.arange(graph.n_nodes)
  last = np.full(n_groups, -1, np.int64)
  np.maximum.at(last, labels, ids)
  first = np.full(n_groups, graph.n_nodes, np.int64)
  np.minimum.at(first, labels, ids)
  for key in (last, first):
    new_label = np.empty(n_groups, np.int64)
    new_label[np.argsort(key, kind="stable")] = np.arange(n_groups)
    if np.all(new_label[qsrc] < new_label[qdst]):
      return new_label[labels]
  qsrc, qdst, _ = merge_edges(n_groups, qsrc, qdst, np.zeros_like(qsrc))
  order = stable_topological_order(n_groups, qsrc.astype(np.int64),
                                   qdst.astype(np.int64))
  new_label = np.empty(n_groups, np.int64)
  new_label[order] = np.arange(n_groups)
  return new_label[labels]


def _first_per_group(labels: np.ndarray, *keys) -> np.ndarray:
  """For each group, the node that sorts first by ``keys`` (most significant
  first), ties broken by lowest id."""
  ids = np.arange(labels.shape[0])
  order = np.lexsort((ids,) + tuple(reversed(keys)) + (labels,))
  sorted_labels = labels[order]
  starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
  return order[starts]


def _quotient_graph(graph: Graph, labels: np.ndarray) -> Graph:
  """The coarse graph of topologically numbered, dense ``labels``."""
  n_groups = _count(labels)
  src, dst = graph.edge_src, graph.edge_dst
  cross = labels[src] != labels[dst]
  leaves_group = np.zeros(graph.n_nodes, bool)
  leaves_group[src[cross]] = True
  leaves_group |= graph.out_degree == 0

  representative = _first_per_group(labels, graph.kind != NODE_OP,
                                    -graph.flops)
  largest_exit = _first_per_group(labels, ~leaves_group, -graph.out_bytes)
  kind_count = np.stack([np.bincount(labels[graph.kind == k],
                                     minlength=n_groups)
                         for k in (NODE_INPUT, NODE_OUTPUT)])
  size = np.bincount(labels, minlength=n_groups)
  kind = np.full(n_groups, NODE_OP, np.int8)
  kind[kind_count[0] == size] = NODE_INPUT
  kind[kind_count[1] == size] = NODE_OUTPUT
  out_bytes = np.zeros(n_groups, np.int64)
  np.add.at(out_bytes, labels[leaves_group], graph.out_bytes[leaves_group])
  edge_src, edge_dst, edge_bytes = merge_edges(
      n_groups, labels[src][cross], labels[dst][cross],
      graph.edge_bytes[cross])
  allowed_devices, colocation = coarse_constraints(graph, labels, n_groups)
  return Graph(
      allowed_devices=allowed_devices, colocation=colocation,
      names=graph.names[representative],
      op_type=graph.op_type[representative],
      kind=kind,
      out_shape=graph.out_shape[largest_exit],
      out_rank=graph.out_rank[largest_exit],
      out_dtype=graph.out_dtype[largest_exit],
      out_bytes=out_bytes,
      flops=np.bincount(labels, graph.flops, minlength=n_groups),
      bytes_accessed=np.bincount(labels, graph.bytes_accessed,
                                 minlength=n_groups),
      edge_src=edge_src, edge_dst=edge_dst, edge_bytes=edge_bytes,
      name=graph.name)
