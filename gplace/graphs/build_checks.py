"""Input checks of :meth:`gplace.Graph.build`: per-node sequences and the
edge list, each failure a :class:`~gplace.errors.GraphError` that names the
argument and the fix. Host-side numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gplace.errors import GraphError, first_line


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
