"""Device constraints of a graph: ``allowed_devices bool [N, D]`` and
``colocation int32 [N]`` (a class per node, ``-1`` none), checked when a
graph is built. :func:`violations` (the simulator), :func:`penalized_costs`
and :func:`repair` (baselines), :func:`device_mask` (policies). Host-side.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from gplace.errors import GraphError, PlacementError, first_line


def check_allowed_devices(value: Any, n_nodes: int) -> Optional[np.ndarray]:
  """Validates an allowed-device mask; returns a read-only ``[N, D]`` bool
  copy (None stays None).

  Raises:
    GraphError: not ``[N, D]`` booleans (0/1 numbers are accepted), no
      device, or a node that allows no device.
  """
  if value is None:
    return None
  try:
    mask = np.asarray(value)
    if mask.dtype.kind not in "biu" or (mask.dtype.kind != "b"
                                        and np.any((mask != 0) & (mask != 1))):
      raise TypeError(f"got values of dtype {mask.dtype}")
  except (TypeError, ValueError) as err:
    raise GraphError(
        "Graph field 'allowed_devices' must be an [n_nodes, n_devices] bool "
        f"mask ({first_line(err)}); pass e.g. np.ones((n_nodes, n_devices), "
        "bool) with False where a node may not run.") from err
  if mask.ndim != 2 or mask.shape[0] != n_nodes or mask.shape[1] < 1:
    raise GraphError(
        f"Graph field 'allowed_devices' has shape {mask.shape}, expected "
        f"({n_nodes}, n_devices) with n_devices >= 1: one row per node, one "
        "column per device of the topology.")
  mask = np.array(mask, dtype=bool)
  empty = ~mask.any(axis=1)
  if np.any(empty):
    node = int(np.argmax(empty))
    raise GraphError(
        f"Graph field 'allowed_devices': node {node} allows no device; "
        "every node must be allowed on at least one device.")
  mask.setflags(write=False)
  return mask


def check_colocation(value: Any, n_nodes: int) -> Optional[np.ndarray]:
  """Validates co-location classes; returns a read-only ``[N]`` int32 copy
  (None stays None).

  Raises:
    GraphError: not ``N`` integers, or a class below ``-1``.
  """
  if value is None:
    return None
  try:
    classes = np.asarray(value)
    if classes.dtype.kind not in "biuf" or not np.all(
        np.isfinite(classes) & (classes == np.round(classes))):
      raise TypeError(f"got values of dtype {classes.dtype} that are not "
                      "all integers")
  except (TypeError, ValueError) as err:
    raise GraphError(
        "Graph field 'colocation' must hold one integer class per node, -1 "
        f"for none ({first_line(err)}).") from err
  if classes.shape != (n_nodes,):
    raise GraphError(f"Graph field 'colocation' has shape {classes.shape}, "
                     f"expected ({n_nodes},): one class per node, -1 for "
                     "none.")
  if np.any(classes < -1):
    raise GraphError("Graph field 'colocation' holds a class below -1; "
                     "classes are 0, 1, ... and -1 means none.")
  if classes.size and classes.max() >= 2**31:
    # int32 would wrap it around, into another class.
    raise GraphError(f"Graph field 'colocation' holds class "
                     f"{classes.max()}; classes are int32, below 2**31: "
                     "number them 0, 1, ...")
  classes = np.array(classes, dtype=np.int32)
  classes.setflags(write=False)
  return classes


def check_feasible(allowed: Optional[np.ndarray],
                   colocation: Optional[np.ndarray]) -> None:
  """Raises GraphError if some co-location class has no device that all
  its members allow (no placement could keep the constraints)."""
  if allowed is None or colocation is None:
    return
  for label in np.unique(colocation[colocation >= 0]):
    members = np.flatnonzero(colocation == label)
    if not allowed[members].all(axis=0).any():
      raise GraphError(
          f"The nodes of co-location class {label} (nodes "
          f"{members[:6].tolist()}) allow no device in common, so no "
          "placement can keep the constraints; allow a shared device for "
          "all of them or split the class.")


def has_constraints(graph) -> bool:
  """Whether ``graph`` carries an allowed-device mask or co-location."""
  return graph.allowed_devices is not None or graph.colocation is not None


def check_device_count(graph, n_devices: int, caller: str) -> None:
  """Raises PlacementError if the graph's mask was written for a topology
  with another number of devices."""
  mask = graph.allowed_devices
  if mask is not None and mask.shape[1] != n_devices:
    raise PlacementError(
        f"{caller}: graph {graph.name!r} carries device constraints for "
        f"{mask.shape[1]} devices but the topology has {n_devices}; use the "
        "topology the constraints were written for, or "
        "graph.replace(allowed_devices=...) with one column per device.")


def violations(graph, placements: np.ndarray) -> np.ndarray:
  """Which placements break the graph's device constraints.

  Args:
    graph: the graph (``N`` nodes), with or without constraints.
    placements: ``[K, N]`` int, validated device indices.

  Returns:
    ``[K]`` bool: some node on a device it does not allow, or a
    co-location class split over several devices.
  """
  bad = np.zeros(np.shape(placements)[0], bool)
  if graph.allowed_devices is None and graph.colocation is None:
    return bad
  placements = np.asarray(placements, np.int64)
  if graph.allowed_devices is not None:
    nodes = np.arange(graph.n_nodes)
    bad |= ~graph.allowed_devices[nodes[None, :], placements].all(axis=1)
  if graph.colocation is not None:
    members = graph.colocation >= 0
    classes = graph.colocation[members]
    if classes.size:
      devices = placements[:, members]
      first = np.full((placements.shape[0], int(classes.max()) + 1), -1)
      # Any member's device is the class's device; compare all to it.
      first[:, classes] = devices
      bad |= np.any(devices != first[:, classes], axis=1)
  return bad


def penalized_costs(graph, costs: np.ndarray) -> np.ndarray:
  """``[N, D]`` costs with disallowed pairs made dearer than any whole
  schedule, so that earliest-finish schedulers never choose them while an
  allowed device exists (``costs`` is returned as is without a mask)."""
  if graph.allowed_devices is None:
    return costs
  penalty = max(float(costs.sum()), 1.0) * 10.0
  return np.where(graph.allowed_devices, costs, costs + penalty)


def repair(graph, placement: np.ndarray, costs: np.ndarray) -> np.ndarray:
  """The nearest placement that keeps the graph's device constraints.

  Each co-location class moves to the device most of its members are on,
  among the devices every member allows (the cheapest for the class when
  none of them is); each other node on a disallowed device moves to its
  cheapest allowed device. Nodes already fine stay where they are.

  Args:
    graph: the graph (``N`` nodes).
    placement: ``[N]`` int device per node.
    costs: ``[N, D]`` seconds per node and device (ties of the moves).

  Returns:
    ``[N]`` int32; ``placement`` itself (as int32) without constraints.

  Raises:
    PlacementError: a co-location class whose members allow no common
      device (no placement can keep the constraints).
  """
  placement = np.array(placement, np.int32)
  n_devices = costs.shape[1]
  allowed = (np.ones((graph.n_nodes, n_devices), bool)
             if graph.allowed_devices is None else graph.allowed_devices)
  bad = ~allowed[np.arange(graph.n_nodes), placement]
  if np.any(bad):
    cheapest = np.argmin(np.where(allowed, costs, np.inf), axis=1)
    placement[bad] = cheapest[bad]
  if graph.colocation is None:
    return placement
  for label in np.unique(graph.colocation[graph.colocation >= 0]):
    members = np.flatnonzero(graph.colocation == label)
    common = allowed[members].all(axis=0)
    if not common.any():
      raise PlacementError(
          f"graph {graph.name!r}: the nodes of co-location class {label} "
          f"({', '.join(graph.names[members][:4])}) allow no device in "
          "common, so no placement keeps the constraints; fix the graph's "
          "allowed_devices or colocation.")
    votes = np.bincount(placement[members], minlength=n_devices)
    votes = np.where(common, votes, -1)
    best = np.flatnonzero(votes == votes.max())
    if votes.max() <= 0:
      best = np.flatnonzero(common)
    device = best[np.argmin(costs[members][:, best].sum(axis=0))]
    placement[members] = device
  return placement


def device_mask(graph, n_devices: int, n_padded_nodes: int) -> np.ndarray:
  """The policies' ``device_mask`` of one graph: ``[N_pad, D]`` bool, the
  graph's allowed devices (all where it has none, and on padding nodes).

  Co-location is not a per-node mask; it is flagged by the simulator.
  """
  mask = np.ones((n_padded_nodes, n_devices), bool)
  if graph.allowed_devices is not None:
    check_device_count(graph, n_devices, "device_mask")
    mask[:graph.n_nodes] = graph.allowed_devices
  return mask


def coarse_constraints(graph, labels: np.ndarray, n_groups: int):
  """``(allowed_devices, colocation)`` of the coarse graph whose node ``g``
  merges the fine nodes with ``labels == g``: a group allows the devices all
  its members allow; groups that hold members of one class share a class.
  (None, None) for a graph without constraints."""
  allowed = None
  if graph.allowed_devices is not None:
    allowed = np.ones((n_groups, graph.allowed_devices.shape[1]), bool)
    np.logical_and.at(allowed, labels, graph.allowed_devices)
    if not allowed.any(axis=1).all():
      group = int(np.argmin(allowed.any(axis=1)))
      raise GraphError(
          f"Coarsening merges nodes that allow no device in common (group "
          f"{group}); coarsen with a rule that keeps them apart, or relax "
          "the graph's allowed_devices.")
  colocation = None
  if graph.colocation is not None:
    from scipy.sparse import coo_matrix  # pylint: disable=g-import-not-at-top
    from scipy.sparse.csgraph import connected_components  # pylint: disable=g-import-not-at-top
    members = graph.colocation >= 0
    classes = graph.colocation[members].astype(np.int64)
    n_classes = int(classes.max()) + 1 if classes.size else 0
    # Groups and classes as one graph: a group joins every class it holds.
    rows = labels[members].astype(np.int64)
    cols = n_groups + classes
    size = n_groups + n_classes
    link = coo_matrix((np.ones(rows.size), (rows, cols)), shape=(size, size))
    _, component = connected_components(link, directed=False)
    in_class = np.zeros(n_groups, bool)
    in_class[rows] = True
    _, dense = np.unique(component[:n_groups], return_inverse=True)
    colocation = np.where(in_class, dense.reshape(-1), -1).astype(np.int32)
  return allowed, colocation
