"""Input checks and helpers of :meth:`gplace.Graph.build`: per-node sequences
and edges (a :class:`~gplace.errors.GraphError` naming the argument and the
fix), padded shapes, merged edges, the stable topological order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gplace.errors import GraphError, first_line

MAX_RANK = 8


def sequence_length(value: Any, field: str) -> int:
  """``len(value)``, or GraphError naming ``field`` if it has none."""
  if isinstance(value, (str, bytes)):
    raise GraphError(f"Graph.build: {field} must be a sequence with one "
                     f"entry per node, got a {type(value).__name__}.")
  try:
    return len(value)
  except TypeError as err:
    raise GraphError(f"Graph.build: {field} must be a sequence with one "
                     f"entry per node, got {type(value).__name__}.") from err


def edge_array(edges: Any, n_nodes: int) -> np.ndarray:
  """Validated ``[E, 3]`` int64 ``(src, dst, bytes)`` rows."""
  want = ("edges must be (src, dst, bytes) triples of integers, src and dst "
          f"node indices in 0..{n_nodes - 1}")
  try:
    array = np.asarray(list(edges))
  except (TypeError, ValueError) as err:
    raise GraphError(f"Graph.build: {want} ({first_line(err)}).") from err
  if array.size == 0:
    return np.zeros((0, 3), np.int64)
  if array.ndim != 2 or array.shape[1] != 3:
    raise GraphError(f"Graph.build: {want}; got an array of shape "
                     f"{array.shape}.")
  if array.dtype.kind not in "biuf" or (
      array.dtype.kind == "f"
      and not np.all(np.isfinite(array) & (array == np.round(array)))):
    raise GraphError(f"Graph.build: {want}; got values of dtype "
                     f"{array.dtype} that are not all integers.")
  if array.max() >= 2**63:     # int64 would wrap it around
    raise GraphError(f"Graph.build: {want}; got {array.max()}, past the "
                     "64-bit counts gplace keeps (below 2**63).")
  array = array.astype(np.int64)
  ends = array[:, :2]
  if np.any((ends < 0) | (ends >= n_nodes)):
    row = int(np.argmax(np.any((ends < 0) | (ends >= n_nodes), axis=1)))
    raise GraphError(
        f"Graph.build: edge {row} ({array[row, 0]} -> {array[row, 1]}) names "
        f"a node that does not exist; the graph has {n_nodes} nodes "
        f"(0..{n_nodes - 1}). Fix the edge list or add the node.")
  if np.any(array[:, 2] < 0):
    row = int(np.argmax(array[:, 2] < 0))
    raise GraphError(f"Graph.build: edge {row} has negative bytes "
                     f"{array[row, 2]}; edge bytes must be non-negative.")
  return array


def pad_shapes(shapes) -> tuple[np.ndarray, np.ndarray]:
  """Pads shape tuples to ``[N, MAX_RANK]``; returns ``(shape, rank)``.

  A rank above ``MAX_RANK`` folds its leading dimensions into one.
  """
  shapes = list(shapes)
  out = np.zeros((len(shapes), MAX_RANK), np.int64)
  rank = np.zeros(len(shapes), np.int8)
  for i, shape in enumerate(shapes):
    try:
      shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError, OverflowError) as err:
      raise GraphError(
          f"out_shapes[{i}] is {shape!r}, not a shape; give a tuple of "
          f"non-negative ints per node, e.g. (2, 3) ({first_line(err)})."
      ) from err
    if any(d < 0 for d in shape):
      raise GraphError(f"out_shapes[{i}] is {shape}, which has a negative "
                       "dimension; dimensions must be non-negative.")
    if len(shape) > MAX_RANK:
      cut = len(shape) - MAX_RANK + 1
      shape = (math.prod(shape[:cut]),) + shape[cut:]   # exact, no wrap
    if shape and max(shape) >= 2**63:
      raise GraphError(f"out_shapes[{i}] has a dimension of "
                       f"{float(max(shape)):.3g} (leading ones folded past "
                       f"rank {MAX_RANK}), not below 2**63; give the real "
                       "shape.")
    out[i, :len(shape)] = shape
    rank[i] = len(shape)
  return out, rank


def merge_edges(n_nodes: int, src, dst, nbytes):
  """Sorts edges by (src, dst) and merges duplicates, summing bytes.

  Raises:
    GraphError: a sum reaches 2**63 (int64 would wrap it around).
  """
  src = np.asarray(src, np.int64)
  dst = np.asarray(dst, np.int64)
  nbytes = np.asarray(nbytes, np.int64)
  keys = src * max(n_nodes, 1) + dst
  unique, inverse = np.unique(keys, return_inverse=True)
  merged = np.zeros(unique.shape[0], np.int64)
  np.add.at(merged, inverse, nbytes)
  if unique.size < keys.size:
    total = np.bincount(inverse.reshape(-1), weights=nbytes.astype(float))
    if total.max() >= 2.0**63:
      raise GraphError(f"The edges between one pair of nodes carry "
                       f"{total.max():.3g} bytes in all, past the 64-bit "
                       "counts gplace keeps (below 2**63); give the real "
                       "byte counts.")
  return (unique // max(n_nodes, 1)).astype(np.int32), (
      unique % max(n_nodes, 1)).astype(np.int32), merged


def stable_topological_order(n: int, src: np.ndarray, dst: np.ndarray,
                             names=None):
  """Kahn's algorithm that always takes the smallest ready id (so a graph
  already in topological order keeps its numbering).

  Raises:
    GraphError: the edges contain a cycle; the message names the nodes of
      a shortest one (by ``names``, else by id).
  """
  import heapq  # pylint: disable=g-import-not-at-top
  if src.size and np.all(src < dst):
    return np.arange(n)
  indegree = np.bincount(dst, minlength=n)
  order_edges = np.argsort(src, kind="stable")
  ptr = np.zeros(n + 1, np.int64)
  np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
  succ = dst[order_edges]
  ready = [i for i in range(n) if indegree[i] == 0]
  heapq.heapify(ready)
  order = []
  while ready:
    node = heapq.heappop(ready)
    order.append(node)
    for nxt in succ[ptr[node]:ptr[node + 1]]:
      indegree[nxt] -= 1
      if indegree[nxt] == 0:
        heapq.heappush(ready, int(nxt))
  if len(order) != n:
    cycle = shortest_cycle(n, src, dst, np.flatnonzero(indegree > 0))
    if not cycle:  # unreachable: Kahn's leftovers always hold a cycle
      raise GraphError("The edges contain a cycle; an op graph must be "
                       "acyclic.")
    label = ((lambda i: repr(str(names[i]))) if names is not None
             else (lambda i: f"node {i}"))
    shown = [label(i) for i in cycle[:MAX_CYCLE_SHOWN]]
    more = (f" -> ... ({len(cycle)} nodes in all)"
            if len(cycle) > MAX_CYCLE_SHOWN else "")
    raise GraphError(
        f"The edges contain a cycle: {' -> '.join(shown)}{more} -> "
        f"{shown[0]}; an op graph must be acyclic: drop or reverse one of "
        "these edges.")
  return np.asarray(order, np.int64)


#: A cycle error names at most this many of the cycle's nodes.
MAX_CYCLE_SHOWN = 10
#: Breadth-first searches a cycle error runs at most (one per start node).
_MAX_CYCLE_STARTS = 256


def shortest_cycle(n: int, src: np.ndarray, dst: np.ndarray,
                   candidates: np.ndarray) -> list[int]:
  """Node ids of a shortest directed cycle through one of ``candidates``
  (nodes Kahn's algorithm left, which include every cycle), in edge order.

  Nodes that cannot be on a cycle (no predecessor or no successor among
  the candidates) are peeled off first; a breadth-first search from each
  of (at most 256 of) the rest finds the shortest way back to it.
  """
  alive = np.zeros(n, bool)
  alive[candidates] = True
  src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
  while True:
    inside = alive[src] & alive[dst]
    has_in = np.bincount(dst[inside], minlength=n) > 0
    has_out = np.bincount(src[inside], minlength=n) > 0
    keep = alive & has_in & has_out
    if np.array_equal(keep, alive):
      break
    alive = keep
  inside = alive[src] & alive[dst]
  successors: dict[int, list[int]] = {}
  for a, b in zip(src[inside].tolist(), dst[inside].tolist()):
    successors.setdefault(a, []).append(b)
  best: list[int] = []
  for start in np.flatnonzero(alive)[:_MAX_CYCLE_STARTS].tolist():
    parent = {start: -1}
    frontier = [start]
    found = None
    while frontier and found is None:
      following = []
      for node in frontier:
        for nxt in successors.get(node, ()):
          if nxt == start:
            found = node
            break
          if nxt not in parent:
            parent[nxt] = node
            following.append(nxt)
        if found is not None:
          break
      frontier = following
    if found is None:
      continue
    path = [found]
    while path[-1] != start:
      path.append(parent[path[-1]])
    path.reverse()
    if not best or len(path) < len(best):
      best = path
      if len(best) == 2:
        break
  return best
