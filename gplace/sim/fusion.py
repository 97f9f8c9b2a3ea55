"""Fusion in the cost model: a fused group is one node of the simulated graph.

:func:`contract` (cached per graph and decision) gives the contracted graph
of :func:`gplace.graphs.fusion.fuse`; :func:`fused_costs` its ``[G, D]``
cost table; :func:`to_groups` maps placements, orders and priorities onto
groups and :func:`expand_times` maps start and finish times back, so that
:func:`gplace.simulate` and the reference simulate the same contracted
graph. Host-side numpy; see ``docs/design.md#fusion``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.graphs.fusion import (Fusion, check_labels, expand_order, fuse,
                                  group_placements, group_rank)
from gplace.graphs.graph import Graph, NODE_OP
from gplace.sim import clusters
from gplace.sim.cache import cached_problem
from gplace.sim.topology import Topology, validate_costs


def _build(graph: Graph, topology, costs=None, order=None) -> Fusion:
  """:func:`fuse` in the shape :func:`cached_problem` calls builders
  (``order`` carries the labels)."""
  del topology, costs
  return fuse(graph, order)


def contract(graph: Graph, fusion) -> Fusion:
  """:func:`gplace.graphs.fusion.fuse`, the same object for a repeated
  decision on the same graph object (so that the simulator's problem cache
  sees one contracted graph).

  Raises:
    FusionError: as :func:`~gplace.graphs.fusion.fuse`.
  """
  labels = check_labels(fusion, graph, "gplace.simulate")
  return cached_problem(_build, graph, None, order=labels)


def fused_costs(fused: Fusion, graph: Graph, topology: Topology,
                costs=None) -> np.ndarray:
  """``[G, D]`` float64 seconds of each group on each device.

  Without ``costs``: the roofline of the contracted node
  (:meth:`Topology.op_costs`: FLOPs summed, the fused intermediates' bytes
  left out, one launch overhead). With a measured ``[N, D]`` table: that
  roofline scaled per device by the members' measured over roofline sum
  (the measurement calibrates the group's model; a group whose members'
  roofline is 0 takes their measured sum); a node of its own keeps its
  measured time.

  Raises:
    TopologyError: a bad cost table.
  """
  roofline = topology.op_costs(fused.graph)
  if costs is None:
    return roofline
  measured = validate_costs(costs, graph, topology)
  member_roofline = topology.op_costs(graph)
  d = topology.n_devices
  measured_sum = np.zeros((fused.n_groups, d))
  roofline_sum = np.zeros((fused.n_groups, d))
  np.add.at(measured_sum, fused.group_of, measured)
  np.add.at(roofline_sum, fused.group_of, member_roofline)
  with np.errstate(divide="ignore", invalid="ignore"):
    scaled = np.where(roofline_sum > 0,
                      roofline * measured_sum / roofline_sum, measured_sum)
  return np.where((fused.n_members > 1)[:, None], scaled, measured_sum)


class Grouped(NamedTuple):
  """A simulation's arguments mapped onto groups.

  Attributes:
    placements: ``[K, G]`` int32 device per group.
    order: ``[G]`` or ``[K, G]`` group order, or None.
    priority: ``[G]`` or ``[K, G]`` float32 priority, or None.
    costs: ``[G, D]`` float64 cost table.
  """

  placements: np.ndarray
  order: np.ndarray | None
  priority: np.ndarray | None
  costs: np.ndarray


def to_groups(fused: Fusion, graph: Graph, topology: Topology,
              placements: np.ndarray, costs=None, order=None,
              priority=None) -> Grouped:
  """Maps checked ``[K, N]`` placements, an ``[N]`` / ``[K, N]`` order or
  priority and a cost table onto the groups: a group's device is its
  members', its place in an order its first member's, its priority its
  members' largest.

  Raises:
    FusionError: a group split across devices.
    TopologyError: a bad cost table.
  """
  grouped = group_placements(fused, placements).astype(np.int32)
  group_order = None
  if order is not None:
    order = np.asarray(order, np.int64)
    group_order = (group_rank(fused, order) if order.ndim == 1 else
                   np.stack([group_rank(fused, row) for row in order]))
  group_priority = None
  if priority is not None:
    priority = np.asarray(priority, np.float32)
    rows = np.atleast_2d(priority)
    out = np.full((rows.shape[0], fused.n_groups), -np.inf, np.float32)
    for row, target in zip(rows, out):
      np.maximum.at(target, fused.group_of, row)
    group_priority = out.reshape(priority.shape[:-1] + (fused.n_groups,))
  return Grouped(grouped, group_order, group_priority,
                 fused_costs(fused, graph, topology, costs))


def expand_times(fused: Fusion, times):
  """``[..., N]`` per-node times from ``[..., G]`` group times (every
  member starts and finishes with its kernel); None stays None."""
  if times is None:
    return None
  return np.asarray(times)[..., fused.group_of]


def expand_schedule(fused: Fusion, group_order):
  """``[..., N]`` node order of a group order (None stays None): members
  of a group together, in id order."""
  if group_order is None:
    return None
  return expand_order(fused, group_order)


def launch_correction(fused: Fusion, topology: Topology,
                      group_placements_: np.ndarray, group_orders
                      ) -> np.ndarray | None:
  """``[K]`` float64 seconds to add to a fused simulation's runtime so that
  it charges ``Device.cluster_launch_s`` once per group, as the executor
  launches them (one executable per group), instead of once per
  same-device run of groups (what the simulator charges without fusion);
  None when the topology charges no launches.

  Args:
    fused: the decision.
    topology: the devices.
    group_placements_: ``[K, G]`` device per group.
    group_orders: ``[K, G]`` the orders the groups ran in.
  """
  launch = clusters.launch_costs(topology)
  if not np.any(launch > 0):
    return None
  placements = np.atleast_2d(group_placements_)
  is_op = fused.graph.kind == NODE_OP
  per_group = np.stack([np.bincount(row[is_op], minlength=launch.size)
                        for row in placements])
  runs = clusters.count_clusters(fused.graph, placements,
                                 np.asarray(group_orders), launch.size)
  return (per_group - runs) @ launch
