"""Moves over fusion decisions (``docs/design.md#fusion``).

:func:`merge` joins an op's group with a consumer's group on the same
device, :func:`split` takes an op out of its group; both return a decision
that :func:`gplace.graphs.fusion.fuse` accepts for the placement (a move
that finds no legal change returns its input), in the canonical labelling
of :func:`canonical`. Every draw is from the caller's
``np.random.Generator``. Host-side numpy.
"""

from __future__ import annotations

import numpy as np

from gplace.graphs.fusion import LIBRARY_OPS, UNFUSED, fusable
from gplace.graphs.fusion_decisions import is_legal
from gplace.graphs.graph import Graph

#: Draws a move makes before it gives up and returns its input unchanged.
MOVE_TRIES = 8


def canonical(labels) -> np.ndarray:
  """``[N]`` int64 labels with each group of two or more members labelled
  by its lowest member id and every other node ``-1``: two decisions that
  fuse the same ops have the same canonical labels."""
  labels = np.asarray(labels, np.int64)
  n = labels.size
  key = np.where(labels >= 0, labels, labels.max(initial=0) + 1 + np.arange(n))
  _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
  inverse = inverse.reshape(-1)
  size = np.bincount(inverse, minlength=first.size)
  return np.where(size[inverse] > 1, first[inverse], UNFUSED).astype(np.int64)


def unit_labels(labels) -> np.ndarray:
  """``[N]`` int64 labels with a label of its own for every ``-1`` node
  (``gplace.search.common.make_units`` groups: a fused group moves as one)."""
  labels = np.asarray(labels, np.int64)
  return np.where(labels >= 0, labels,
                  labels.size + np.arange(labels.size, dtype=np.int64))


def merge(rng: np.random.Generator, graph: Graph, placement: np.ndarray,
          labels: np.ndarray, tries: int = MOVE_TRIES) -> np.ndarray:
  """Joins the groups of a producer and a consumer on one device.

  Draws an edge ``u -> v`` between fusable ops on the same device in
  different groups, uniformly, and joins their groups (all members); keeps
  the first join that is legal (a group must stay convex, hold at most one
  matmul or convolution and allow a device).

  Args:
    rng: the search's generator.
    graph: the op graph (``N`` nodes).
    placement: ``[N]`` int device per node.
    labels: ``[N]`` legal canonical labels.
    tries: edges drawn at most.

  Returns:
    ``[N]`` int64 canonical labels, ``labels`` when no draw was legal.
  """
  unit = unit_labels(labels)
  src, dst = graph.edge_src, graph.edge_dst
  ok = fusable(graph)
  # Two groups that each hold a matmul or convolution never join: cheaper
  # to rule out here than by a failed fuse().
  library = np.bincount(unit, weights=np.isin(graph.op_type,
                                              sorted(LIBRARY_OPS)),
                        minlength=2 * unit.size)
  open_edges = np.flatnonzero(ok[src] & ok[dst]
                              & (placement[src] == placement[dst])
                              & (unit[src] != unit[dst])
                              & (library[unit[src]] + library[unit[dst]]
                                 <= 1))
  for edge in rng.choice(open_edges, min(tries, open_edges.size),
                         replace=False).tolist():
    trial = unit.copy()
    trial[unit == unit[dst[edge]]] = unit[src[edge]]
    trial = canonical(trial)
    if is_legal(graph, trial, placement):
      return trial
  return np.asarray(labels, np.int64)


def split(rng: np.random.Generator, graph: Graph, placement: np.ndarray,
          labels: np.ndarray, tries: int = MOVE_TRIES) -> np.ndarray:
  """Takes a fused op out of its group.

  Draws a fused op uniformly and gives it ``-1``; when what is left of its
  group is not convex, the next draw is tried, and after ``tries`` the last
  op drawn's whole group is dissolved (always legal: no group of the rest
  changes, and contracting fewer groups makes no cycle).

  Args:
    rng: the search's generator.
    graph: the op graph (``N`` nodes).
    placement: ``[N]`` int device per node.
    labels: ``[N]`` legal canonical labels.
    tries: ops drawn at most.

  Returns:
    ``[N]`` int64 canonical labels (``labels`` when nothing is fused).
  """
  labels = np.asarray(labels, np.int64)
  fused = np.flatnonzero(labels >= 0)
  if fused.size == 0:
    return labels
  drawn = rng.choice(fused, min(tries, fused.size), replace=False).tolist()
  for node in drawn:
    trial = labels.copy()
    trial[node] = UNFUSED
    trial = canonical(trial)
    if is_legal(graph, trial, placement):
      return trial
  return np.where(labels == labels[drawn[-1]], UNFUSED, labels)


def perturb(rng: np.random.Generator, graph: Graph, placement: np.ndarray,
            labels: np.ndarray, n_moves: int, merge_share: float
            ) -> np.ndarray:
  """``n_moves`` moves in a row, each a :func:`merge` with probability
  ``merge_share`` else a :func:`split`; ``[N]`` legal canonical labels."""
  for _ in range(n_moves):
    if rng.random() < merge_share:
      labels = merge(rng, graph, placement, labels)
    else:
      labels = split(rng, graph, placement, labels)
  return labels
