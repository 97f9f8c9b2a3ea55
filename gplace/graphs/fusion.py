"""Operation fusion as a decision: which ops run as one kernel.

A fusion decision is ``fusion: [N] int`` group labels (GO's per-node
formulation): ops that share a label ``>= 0`` run as one kernel, ``-1`` runs
alone. :func:`from_consumers` turns "fuse into this consumer" choices into
labels. :func:`fuse` checks a decision and contracts each group to one node
(:class:`Fusion`) whose cost is its roofline with the fused intermediates'
bytes left out; the simulators run that graph. Rules and simplifications:
``docs/design.md#fusion``. Host-side numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.errors import FusionError, GraphError, first_line
from gplace.graphs.build_checks import merge_edges, stable_topological_order
from gplace.graphs.constraints import coarse_constraints
from gplace.graphs.graph import Graph, NODE_OP, check_graph

#: Op types that never share a kernel with another op (XLA's fusion leaves
#: control flow, calls it cannot see into, collectives, host transfers and
#: library calls unfused). ``scan``, ``while`` and ``cond`` are single nodes
#: whose body is their cost, so this rule is also "no fusion across a loop
#: body boundary".
UNFUSABLE = frozenset({
    "scan", "while", "cond", "custom_call", "pure_callback", "io_callback",
    "debug_callback", "callback", "psum", "pmax", "pmin", "pmean",
    "all_gather", "all_to_all", "ppermute", "reduce_scatter", "psum_scatter",
    "axis_index", "xla_pmap", "shard_map", "pmap", "infeed", "outfeed",
    "send", "recv", "optimization_barrier", "sort", "fft", "cholesky",
    "triangular_solve", "lu", "qr", "eigh", "eig", "svd", "schur",
    "hessenberg", "tridiagonal", "device_put", "unknown",
})

#: Op types that become a library kernel (a GEMM or convolution): XLA fuses
#: elementwise producers and consumers around one, never two into one kernel.
LIBRARY_OPS = frozenset({"dot_general", "conv_general_dilated"})

#: ``fusion`` label of an op that runs alone.
UNFUSED = -1


class Fusion(NamedTuple):
  """A checked fusion decision and the graph it contracts to.

  Attributes:
    graph: the contracted graph, one node per group (``G`` nodes, in a
      topological order); a group's ``bytes_accessed`` leaves out the
      fused intermediates' traffic, its ``out_bytes`` only what leaves it.
    group_of: ``[N]`` int32, the group (contracted node) of each node.
    saved_bytes: ``[G]`` float64, memory traffic fusing the group saves:
      every read of a value made inside the group, and the write of a
      value no one outside reads.
    n_members: ``[G]`` int32, nodes per group.
  """

  graph: Graph
  group_of: np.ndarray
  saved_bytes: np.ndarray
  n_members: np.ndarray

  @property
  def n_groups(self) -> int:
    return self.graph.n_nodes

  def members(self, group: int) -> np.ndarray:
    """Node ids of ``group``, increasing."""
    return np.flatnonzero(self.group_of == group).astype(np.int32)


def check_labels(fusion, graph: Graph, caller: str) -> np.ndarray:
  """``fusion`` as ``[N]`` int64 labels (``-1`` or a group label).

  Raises:
    FusionError: not ``N`` integers, or a label below ``-1``.
  """
  try:
    labels = np.asarray(fusion)
  except (TypeError, ValueError) as err:
    raise FusionError(
        f"{caller}: fusion must be [N] integer group labels, got "
        f"{type(fusion).__name__} ({first_line(err)}).") from err
  n = graph.n_nodes
  if (labels.shape != (n,) or labels.dtype == bool
      or not np.issubdtype(labels.dtype, np.integer)):
    raise FusionError(
        f"{caller}: fusion must be [N] = [{n}] integer group labels (ops "
        f"sharing a label >= 0 run as one kernel, -1 alone), got shape "
        f"{labels.shape} and dtype {labels.dtype}; build one with "
        "gplace.graphs.fusion.from_consumers(graph, fuse_into).")
  labels = labels.astype(np.int64)
  if labels.size and labels.min() < UNFUSED:
    node = int(np.argmin(labels))
    raise FusionError(
        f"{caller}: fusion label {labels[node]} of node {node} "
        f"({graph.names[node]}) is below -1; use -1 for an op that runs "
        "alone, a label >= 0 for a group.")
  return labels


def from_consumers(graph: Graph, fuse_into) -> np.ndarray:
  """Labels from per-node "fuse into this consumer" choices.

  Args:
    graph: the op graph.
    fuse_into: ``[N]`` int, a successor of each node to fuse it into, or
      ``-1``; chains join transitively.

  Returns:
    ``[N]`` int64 labels, ``-1`` for nodes in no group (check them with
    :func:`fuse`).

  Raises:
    FusionError: not ``[N]`` integers, or a choice that is not a consumer.
  """
  check_graph(graph, "gplace.graphs.fusion.from_consumers")
  target = check_labels(fuse_into, graph, "from_consumers")
  chosen = np.flatnonzero(target >= 0)
  if chosen.size:
    if target[chosen].max() >= graph.n_nodes:
      node = int(chosen[np.argmax(target[chosen])])
      raise FusionError(f"fuse_into[{node}] = {target[node]} names no node "
                        f"of the {graph.n_nodes}.")
    keys = set((graph.edge_src.astype(np.int64) * graph.n_nodes
                + graph.edge_dst).tolist())
    for node in chosen.tolist():
      if node * graph.n_nodes + int(target[node]) not in keys:
        raise FusionError(
            f"fuse_into[{node}] = {target[node]}, but node {target[node]} "
            f"({graph.names[target[node]]}) does not read node {node} "
            f"({graph.names[node]}); fuse a node into one of its consumers "
            "or give -1.")
  parent = np.arange(graph.n_nodes, dtype=np.int64)
  parent[chosen] = target[chosen]
  while True:            # successors have larger ids: pointer jumping ends
    grand = parent[parent]
    if np.array_equal(grand, parent):
      break
    parent = grand
  size = np.bincount(parent, minlength=graph.n_nodes)
  return np.where(size[parent] > 1, parent, UNFUSED)


def _dense_groups(labels: np.ndarray) -> np.ndarray:
  """Dense labels ``0..G-1``: one per fused label, one per ``-1`` node,
  numbered by first member."""
  n = labels.shape[0]
  key = np.where(labels >= 0, labels, labels.max(initial=0) + 1
                 + np.arange(n))
  _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
  rank = np.empty(first.size, np.int64)
  rank[np.argsort(first, kind="stable")] = np.arange(first.size)
  return rank[inverse.reshape(-1)]


def _check_members(graph: Graph, group_of: np.ndarray, size: np.ndarray
                   ) -> None:
  """Raises FusionError for a group that holds a non-op node, an op that
  cannot share a kernel, or two library ops."""
  fused = size[group_of] > 1
  not_op = fused & (graph.kind != NODE_OP)
  if not_op.any():
    node = int(np.argmax(not_op))
    raise FusionError(
        f"Node {node} ({graph.names[node]}) is an input or output, not an "
        "op; only ops fuse. Give it fusion label -1.")
  alone = fused & np.isin(graph.op_type, sorted(UNFUSABLE))
  if alone.any():
    node = int(np.argmax(alone))
    raise FusionError(
        f"Node {node} ({graph.names[node]}) is a {graph.op_type[node]!r}, "
        "which never shares a kernel (control flow and loop bodies, "
        "collectives, callbacks and library calls run alone); give it "
        "fusion label -1.")
  library = fused & np.isin(graph.op_type, sorted(LIBRARY_OPS))
  count = np.bincount(group_of[library], minlength=size.size)
  if np.any(count > 1):
    group = int(np.argmax(count > 1))
    nodes = np.flatnonzero(library & (group_of == group))[:2].tolist()
    raise FusionError(
        f"Nodes {nodes[0]} ({graph.names[nodes[0]]}) and {nodes[1]} "
        f"({graph.names[nodes[1]]}) are both matmuls or convolutions in one "
        "fusion group; a kernel holds at most one. Split the group.")


def _topological_groups(graph: Graph, group_of: np.ndarray,
                        n_groups: int) -> np.ndarray:
  """``group_of`` renumbered so that every edge between groups goes up.

  Raises:
    FusionError: contracting the groups makes a cycle (a group that is not
      convex: a path leaves it and comes back, or two groups feed each
      other).
  """
  src, dst = group_of[graph.edge_src], group_of[graph.edge_dst]
  cross = src != dst
  if np.all(src[cross] < dst[cross]):
    return group_of
  qsrc, qdst, _ = merge_edges(n_groups, src[cross], dst[cross],
                              np.zeros(int(cross.sum()), np.int64))
  try:
    order = stable_topological_order(n_groups, qsrc.astype(np.int64),
                                     qdst.astype(np.int64))
  except GraphError as err:
    cycle = str(err).split(";")[0].split(": ", 1)[-1]
    raise FusionError(
        "The fusion groups cannot run as single kernels: contracting them "
        f"makes a cycle among groups ({cycle}, numbered by first member). "
        "A group must be convex: no path may leave it and come back, and "
        "two groups may not feed each other. Split the group.") from err
  rank = np.empty(n_groups, np.int64)
  rank[order] = np.arange(n_groups)
  return rank[group_of]


def _group_edges(graph: Graph, group_of: np.ndarray, n_groups: int):
  """Contracted edges: per producer node and consumer group, the tensors
  read once (the largest edge, up to the sum bounded by ``out_bytes``),
  summed over the producers of a group."""
  src = graph.edge_src.astype(np.int64)
  dst_group = group_of[graph.edge_dst]
  cross = group_of[src] != dst_group
  src, dst_group = src[cross], dst_group[cross]
  nbytes = graph.edge_bytes[cross].astype(np.int64)
  keys = src * n_groups + dst_group
  unique, inverse = np.unique(keys, return_inverse=True)
  inverse = inverse.reshape(-1)
  total = np.zeros(unique.size, np.int64)
  np.add.at(total, inverse, nbytes)
  largest = np.zeros(unique.size, np.int64)
  np.maximum.at(largest, inverse, nbytes)
  producer = unique // n_groups
  once = np.maximum(largest, np.minimum(total, graph.out_bytes[producer]))
  return merge_edges(n_groups, group_of[producer], unique % n_groups, once)


def fuse(graph: Graph, fusion) -> Fusion:
  """Checks a fusion decision and contracts each group to one node.

  A group's node sums its members' FLOPs; its ``bytes_accessed`` is the
  members' sum less :attr:`Fusion.saved_bytes` (at least 0), so the
  roofline gives the group's time and one launch overhead; its
  ``out_bytes`` counts only members read outside the group (a fused
  intermediate is never materialized). Input and output nodes, and ops
  labelled ``-1``, stay nodes of their own.

  Args:
    graph: the op graph (``N`` nodes).
    fusion: ``[N]`` int labels: ops sharing a label ``>= 0`` form a group.

  Returns:
    A :class:`Fusion`.

  Raises:
    GraphError: ``graph`` is not a Graph.
    FusionError: malformed labels; a group with an input or output node, an
      op of :data:`UNFUSABLE`, two of :data:`LIBRARY_OPS`, members that
      allow no device in common, or that is not convex.
  """
  check_graph(graph, "gplace.graphs.fusion.fuse")
  labels = check_labels(fusion, graph, "fuse")
  group_of = _dense_groups(labels)
  n_groups = int(group_of.max()) + 1 if group_of.size else 0
  size = np.bincount(group_of, minlength=n_groups)
  _check_members(graph, group_of, size)
  group_of = _topological_groups(graph, group_of, n_groups)
  size = np.bincount(group_of, minlength=n_groups)
  try:
    allowed, colocation = coarse_constraints(graph, group_of, n_groups)
  except GraphError as err:
    raise FusionError(
        f"A fusion group joins ops that allow no device in common "
        f"({first_line(err)}); a group runs on one device. Split it.") from err

  src, dst = graph.edge_src, graph.edge_dst
  inside = group_of[src] == group_of[dst]
  read_saved = np.bincount(group_of[dst[inside]],
                           weights=graph.edge_bytes[inside],
                           minlength=n_groups)
  read_outside = np.zeros(graph.n_nodes, bool)
  read_outside[src[~inside]] = True
  kept_inside = (graph.out_degree > 0) & ~read_outside
  write_saved = np.bincount(group_of[kept_inside],
                            weights=graph.out_bytes[kept_inside],
                            minlength=n_groups)
  saved = np.where(size > 1, read_saved + write_saved, 0.0)
  accessed = np.bincount(group_of, weights=graph.bytes_accessed,
                         minlength=n_groups)
  exits = ~kept_inside
  out_bytes = np.bincount(group_of[exits], weights=graph.out_bytes[exits],
                          minlength=n_groups).astype(np.int64)

  ids = np.arange(graph.n_nodes)
  # The representative: the member with the most FLOPs (lowest id on ties);
  # its shape, dtype and name stand for the group.
  order = np.lexsort((ids, -graph.flops, group_of))
  first = order[np.r_[True, group_of[order][1:] != group_of[order][:-1]]]
  names = graph.names[first].astype(object)
  names = np.where(size > 1, [f"fused[{n} +{s - 1}]"
                              for n, s in zip(names, size)], names)
  kind = graph.kind[first].copy()
  kind[size > 1] = NODE_OP
  edge_src, edge_dst, edge_bytes = _group_edges(graph, group_of, n_groups)
  contracted = Graph(
      names=names.astype(np.str_), op_type=graph.op_type[first], kind=kind,
      out_shape=graph.out_shape[first], out_rank=graph.out_rank[first],
      out_dtype=graph.out_dtype[first], out_bytes=out_bytes,
      flops=np.bincount(group_of, weights=graph.flops, minlength=n_groups),
      bytes_accessed=np.maximum(accessed - saved, 0.0),
      edge_src=edge_src, edge_dst=edge_dst, edge_bytes=edge_bytes,
      name=graph.name, allowed_devices=allowed, colocation=colocation)
  return Fusion(graph=contracted, group_of=group_of.astype(np.int32),
                saved_bytes=saved.astype(np.float64),
                n_members=size.astype(np.int32))


def group_placements(fusion: Fusion, placements: np.ndarray) -> np.ndarray:
  """``[K, G]`` device per group of checked ``[K, N]`` placements.

  Raises:
    FusionError: a group's members on different devices (no fusion across
      devices).
  """
  placements = np.asarray(placements)
  first = np.full(fusion.n_groups, fusion.group_of.size, np.int64)
  np.minimum.at(first, fusion.group_of, np.arange(fusion.group_of.size))
  grouped = placements[:, first]
  split = grouped[:, fusion.group_of] != placements
  if split.any():
    row, node = np.unravel_index(int(np.argmax(split)), split.shape)
    group = int(fusion.group_of[node])
    raise FusionError(
        f"Placement {row} puts node {node} ({fusion.graph.names[group]} "
        f"group) on device {placements[row, node]} but node {first[group]} "
        f"of its fusion group on device {grouped[row, group]}; a fused "
        "group runs on one device. Place the group's ops together or split "
        "the group.")
  return grouped


def group_rank(fusion: Fusion, order) -> np.ndarray:
  """``[G]`` int64, a topological order of the groups that follows the
  ``[N]`` node ``order``: ready groups in order of their first member."""
  order = np.asarray(order, np.int64)
  position = np.empty(order.size, np.int64)
  position[order] = np.arange(order.size)
  first = np.full(fusion.n_groups, order.size, np.int64)
  np.minimum.at(first, fusion.group_of, position)
  rank = np.empty(fusion.n_groups, np.int64)
  rank[np.argsort(first, kind="stable")] = np.arange(fusion.n_groups)
  graph = fusion.graph
  sequence = stable_topological_order(
      fusion.n_groups, rank[graph.edge_src].astype(np.int64),
      rank[graph.edge_dst].astype(np.int64))
  by_rank = np.argsort(rank)
  return by_rank[np.asarray(sequence, np.int64)]


def expand_order(fusion: Fusion, group_order) -> np.ndarray:
  """``[..., N]`` node order of a ``[..., G]`` group order: each group's
  members together, in id order (a topological order of the nodes)."""
  group_order = np.asarray(group_order, np.int64)
  rows = np.atleast_2d(group_order)
  n = fusion.group_of.size
  out = np.empty((rows.shape[0], n), np.int64)
  ids = np.arange(n)
  for row, target in zip(rows, out):
    position = np.empty(fusion.n_groups, np.int64)
    position[row] = np.arange(fusion.n_groups)
    target[:] = np.lexsort((ids, position[fusion.group_of]))
  return out.reshape(group_order.shape[:-1] + (n,))


def fusable(graph: Graph) -> np.ndarray:
  """``[N]`` bool, the nodes that may share a kernel: ops not in
  :data:`UNFUSABLE`."""
  return (graph.kind == NODE_OP) & ~np.isin(graph.op_type, sorted(UNFUSABLE))


def default_fusion(graph: Graph, placement) -> np.ndarray:
  """XLA's loop and input fusion inside each device, as labels.

  Each elementwise op (a fusable op that is neither a matmul or convolution
  nor a reduction) whose value has exactly one consumer, an elementwise op
  or a reduction on the same device, joins that consumer's group: the
  producer-into-consumer fusion XLA's instruction fusion does inside one
  executable (library calls stay alone, and a value read twice is not
  duplicated into both readers). Joining a single-consumer producer keeps a
  group convex, so only device constraints (``Graph.allowed_devices``) can
  make a join invalid; such joins are skipped. Host-side numpy.

  Args:
    graph: the op graph (``N`` nodes).
    placement: ``[N]`` int device per node.

  Returns:
    ``[N]`` int64 labels (``-1``: alone), valid for :func:`fuse` and
    ``placement``.

  Raises:
    GraphError: ``graph`` is not a Graph.
    FusionError: ``placement`` is not ``[N]`` integers.
  """
  check_graph(graph, "gplace.graphs.fusion.default_fusion")
  placement = np.asarray(placement)
  if (placement.shape != (graph.n_nodes,) or placement.dtype == bool
      or not np.issubdtype(placement.dtype, np.integer)):
    raise FusionError(
        f"default_fusion: placement must be [N] = [{graph.n_nodes}] integer "
        f"device indices, got shape {placement.shape} and dtype "
        f"{placement.dtype}; pass the placement the fusion is for.")
  is_reduction = np.char.startswith(graph.op_type.astype(str), "reduce")
  loop = fusable(graph) & ~np.isin(graph.op_type, sorted(LIBRARY_OPS))
  producer = loop & ~is_reduction & (graph.out_degree == 1)
  src, dst = graph.edge_src, graph.edge_dst
  join = producer[src] & loop[dst] & (placement[src] == placement[dst])
  fuse_into = np.full(graph.n_nodes, UNFUSED, np.int64)
  fuse_into[src[join]] = dst[join]
  labels = from_consumers(graph, fuse_into)
  if graph.allowed_devices is None and graph.colocation is None:
    return labels
  try:
    fuse(graph, labels)
    return labels
  except FusionError:   # device constraints: join one producer at a time
    pass
  fuse_into[:] = UNFUSED
  labels = np.full(graph.n_nodes, UNFUSED, np.int64)
  for edge in np.flatnonzero(join).tolist():
    fuse_into[src[edge]] = dst[edge]
    trial = from_consumers(graph, fuse_into)
    try:
      fuse(graph, trial)
      labels = trial
    except FusionError:
      fuse_into[src[edge]] = UNFUSED
  return labels
