"""Validating placements: one device index per node, from any caller.

Every public entry point that accepts a placement (the simulator, the
executor, coarsening's ``expand``, the searches) validates it here, so a bad
placement gets the same clear :class:`~gplace.errors.PlacementError`
wherever it enters.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gplace.errors import PlacementError
from gplace.graphs.graph import Graph


def check_placements(placements, graph: Graph, n_devices: int, *,
                     device_names: Sequence[str] | None = None,
                     batched: bool = True) -> np.ndarray:
  """Validates placements; returns them as ``[K, N]`` int32 (``[N]`` if not
  ``batched``).

  Args:
    placements: ``[N]`` or (if ``batched``) ``[K, N]`` device indices;
      integer-valued floats are accepted.
    graph: the graph placed (``N = graph.n_nodes``).
    n_devices: devices are ``0 .. n_devices - 1``.
    device_names: named in the error message when given.
    batched: accept ``[K, N]`` and always return ``[K, N]``.

  Raises:
    PlacementError: wrong rank or length, non-integer values, or a device
      index out of range; the message names the node and the valid range.
  """
  array = np.asarray(placements)
  if array.dtype == object or not (np.issubdtype(array.dtype, np.integer)
                                   or np.issubdtype(array.dtype, np.floating)
                                   or array.dtype == bool):
    raise PlacementError(
        f"A placement holds integer device indices, got dtype {array.dtype}; "
        f"pass an int array (e.g. np.asarray(placement, np.int32)).")
  ranks = (1, 2) if batched else (1,)
  if array.ndim not in ranks:
    want = "[n_nodes] or [K, n_nodes]" if batched else "[n_nodes]"
    raise PlacementError(
        f"A placement must be {want}, got shape {array.shape}.")
  if array.shape[-1] != graph.n_nodes:
    raise PlacementError(
        f"A placement has length {array.shape[-1]} but graph {graph.name!r} "
        f"has {graph.n_nodes} nodes; give one device index per node.")
  if array.size and not np.issubdtype(array.dtype, np.integer):
    if not (np.all(np.isfinite(array)) and np.all(array == np.round(array))):
      raise PlacementError(
          f"A placement must hold integer device indices, got non-integer "
          f"values of dtype {array.dtype}.")
  array = np.atleast_2d(array).astype(np.int64)
  bad = (array < 0) | (array >= n_devices)
  if np.any(bad):
    row, node = np.argwhere(bad)[0]
    names = f" ({', '.join(device_names)})" if device_names else ""
    which = f"Placement {row} puts node" if array.shape[0] > 1 else "Node"
    raise PlacementError(
        f"{which} {node} ({graph.names[node]}) on device "
        f"{array[row, node]}, but only devices 0..{n_devices - 1}{names} "
        f"exist; fix the placement or pass more devices.")
  array = array.astype(np.int32)
  return array if batched else array[0]
