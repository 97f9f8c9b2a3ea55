"""Validating placements: one device index per node, from any caller, so a
bad placement raises the same :class:`~gplace.errors.PlacementError`
wherever it enters.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from gplace._compiled import njit
from gplace.errors import PlacementError, first_line
from gplace.graphs.graph import Graph, check_graph


def is_traced(value: Any) -> bool:
  """Whether ``value`` is a JAX tracer (an argument inside ``jax.jit``,
  ``vmap`` or ``grad``), which host-side numpy cannot read."""
  if "jax" not in sys.modules:  # nothing can be traced without jax loaded
    return False
  import jax  # pylint: disable=g-import-not-at-top
  return isinstance(value, jax.core.Tracer)


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
    PlacementError: not an array of numbers (None, strings, a ragged list,
      a traced value), wrong rank or length, non-integer values, or a
      device index out of range; the message names the node and the valid
      range.
  """
  check_graph(graph, "A placement check")
  if is_traced(placements):
    raise PlacementError(
        "placements is a traced JAX value (inside jax.jit, vmap or grad), "
        "but placements are checked on the host; pass a concrete array, or "
        "call the jittable gplace.sim.simulate_problem / "
        "gplace.sim.dispatch.simulate_dispatch inside jit.")
  try:
    array = np.asarray(placements)
  except (TypeError, ValueError) as err:
    raise PlacementError(
        f"placements must be an array of integer device indices, got "
        f"{type(placements).__name__} that numpy cannot read as one "
        f"({first_line(err)}); pass e.g. np.asarray(placement, np.int32), "
        "one row per placement.") from err
  if array.dtype == bool:
    raise PlacementError(
        f"A placement holds integer device indices, got booleans (from "
        f"{type(placements).__name__}), which would read as devices 0 and "
        "1; pass device indices, e.g. np.where(mask, 1, 0).astype(np.int32) "
        "for a mask of the nodes on device 1.")
  if array.dtype == object or not (np.issubdtype(array.dtype, np.integer)
                                   or np.issubdtype(array.dtype, np.floating)):
    raise PlacementError(
        f"A placement holds integer device indices, got dtype {array.dtype} "
        f"(from {type(placements).__name__}); pass an int array "
        "(e.g. np.asarray(placement, np.int32)).")
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
  array = np.atleast_2d(array)
  # Checked before the cast to int, so that 1e30 is not wrapped around.
  cast = _checked_cast(array, n_devices)
  if cast is None:
    row, node = np.argwhere((array < 0) | (array >= n_devices))[0]
    names = f" ({', '.join(device_names)})" if device_names else ""
    which = f"Placement {row} puts node" if array.shape[0] > 1 else "Node"
    raise PlacementError(
        f"{which} {node} ({graph.names[node]}) on device "
        f"{int(array[row, node])}, but only devices 0..{n_devices - 1}"
        f"{names} exist; fix the placement or pass more devices.")
  return cast if batched else cast[0]


def _checked_cast(array: np.ndarray, n_devices: int) -> np.ndarray | None:
  """``array`` (``[K, N]``, numbers) as int32, or None if a value lies
  outside ``0 .. n_devices - 1``. Integer arrays take one compiled pass
  (numba, where installed) instead of numpy's three: this runs on every
  ``gplace.simulate`` call, over ``K * N`` values."""
  if array.size == 0:
    return array.astype(np.int32)
  kernel = (njit(_cast_rows) if array.dtype in (np.int64, np.int32)
            else None)
  if kernel is not None:
    out = np.empty(array.shape, np.int32)
    ok = kernel(np.ascontiguousarray(array).reshape(-1), out.reshape(-1),
                n_devices)
    return out if ok else None
  if array.min() < 0 or array.max() >= n_devices:
    return None
  return array.astype(np.int32)


def _cast_rows(values, out, n_devices):
  """Writes ``values`` into ``out`` (int32); False at the first value
  outside ``0 .. n_devices - 1``."""
  for i in range(values.shape[0]):
    v = values[i]
    if v < 0 or v >= n_devices:
      return False
    out[i] = v
  return True
