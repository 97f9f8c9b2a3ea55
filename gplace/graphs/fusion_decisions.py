"""A learned policy's per-node fusion choices as legal fusion labels.

GO's fusion task: each node says "fuse me into my consumer" (1) or not
(0). :func:`consumer_targets` names that consumer, :func:`decision_labels`
turns the choices of one sampled decision into labels that
:func:`gplace.graphs.fusion.fuse` accepts for the placement, dropping the
choices that cannot hold (never raising on them): a policy samples
decisions, and an illegal one is repaired, not an error. Host-side numpy.
"""

from __future__ import annotations

import numpy as np

from gplace.errors import FusionError
from gplace.graphs.fusion import (UNFUSED, from_consumers, fusable, fuse,
                                  group_placements)
from gplace.graphs.graph import Graph, check_graph


def consumer_targets(graph: Graph, placement) -> np.ndarray:
  """Each node's fusion target for ``placement [N]``: its first consumer
  (lowest node id) on the same device, if both may share a kernel
  (:func:`gplace.graphs.fusion.fusable`), else -1.

  Returns:
    ``[N]`` int64.
  """
  placement = _check_placement(graph, placement, "consumer_targets")
  can = fusable(graph)
  src, dst = graph.edge_src.astype(np.int64), graph.edge_dst.astype(np.int64)
  ok = can[src] & can[dst] & (placement[src] == placement[dst])
  target = np.full(graph.n_nodes, np.iinfo(np.int64).max, np.int64)
  np.minimum.at(target, src[ok], dst[ok])
  return np.where(target < graph.n_nodes, target, UNFUSED)


def is_legal(graph: Graph, labels, placement) -> bool:
  """Whether ``fuse(graph, labels)`` accepts ``labels`` and no group spans
  two devices of ``placement [N]``."""
  try:
    fused = fuse(graph, labels)
    group_placements(fused, np.asarray(placement)[None])
  except FusionError:
    return False
  return True


def decision_labels(graph: Graph, placement, decisions) -> np.ndarray:
  """Legal fusion labels from per-node "fuse into my consumer" choices.

  Node ``n`` with ``decisions[n] = 1`` joins the group of
  ``consumer_targets(graph, placement)[n]`` (chains join transitively,
  :func:`gplace.graphs.fusion.from_consumers`). A choice without a target
  is dropped. If the joined groups are not legal (two matmuls in one
  kernel, a group that is not convex, ops that allow no device in common),
  the choices are repaired deterministically: taken one at a time in node
  order, each kept only if the labels stay legal. The result never
  depends on anything but its arguments.

  Args:
    graph: the op graph (``N`` nodes).
    placement: ``[N]`` int device per node.
    decisions: ``[N]`` int or bool, nonzero where a node fuses.

  Returns:
    ``[N]`` int64 labels, legal for ``graph`` and ``placement``.

  Raises:
    FusionError: ``placement`` or ``decisions`` is not ``[N]`` (the shape,
      not a choice, is wrong).
  """
  placement = _check_placement(graph, placement, "decision_labels")
  decisions = np.asarray(decisions)
  if decisions.shape != (graph.n_nodes,):
    raise FusionError(
        f"decision_labels: decisions must be [N] = [{graph.n_nodes}] "
        f"(one choice per node), got shape {decisions.shape}; slice a "
        "padded decision to the graph's nodes.")
  target = consumer_targets(graph, placement)
  chosen = (decisions != 0) & (target >= 0)
  fuse_into = np.where(chosen, target, UNFUSED)
  labels = from_consumers(graph, fuse_into)
  if is_legal(graph, labels, placement):
    return labels
  fuse_into[:] = UNFUSED
  labels = np.full(graph.n_nodes, UNFUSED, np.int64)
  for node in np.flatnonzero(chosen).tolist():
    fuse_into[node] = target[node]
    trial = from_consumers(graph, fuse_into)
    if is_legal(graph, trial, placement):
      labels = trial
    else:
      fuse_into[node] = UNFUSED
  return labels


def _check_placement(graph: Graph, placement, caller: str) -> np.ndarray:
  check_graph(graph, f"gplace.graphs.fusion_decisions.{caller}")
  placement = np.asarray(placement)
  if (placement.shape != (graph.n_nodes,) or placement.dtype == bool
      or not np.issubdtype(placement.dtype, np.integer)):
    raise FusionError(
        f"{caller}: placement must be [N] = [{graph.n_nodes}] integer device "
        f"indices, got shape {placement.shape} and dtype {placement.dtype}; "
        "pass the placement the fusion decision is for.")
  return placement.astype(np.int64)
