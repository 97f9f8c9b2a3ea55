"""A fusion decision in the placed program (host-side).

:func:`check_fusion` validates ``place(..., fusion=)``;
:func:`fused_dispatch_order` orders whole groups, so that a group's ops are
contiguous; the partition then makes each group one cluster (one jitted
executable, one launch, XLA fusing inside it), and an edge between groups
an executable boundary, where the value is materialized: a barrier XLA
cannot fuse across. (``jax.lax.optimization_barrier`` is not one: XLA's
CPU compiler expands it before fusion and fuses straight through it.)
See ``docs/design.md#fusion``.
"""

from __future__ import annotations

import numpy as np

from gplace.errors import FusionError
from gplace.execution.effects import respect_order
from gplace.execution.partition import (check_topology, device_greedy_order,
                                        schedule_order)
from gplace.graphs.fusion import (Fusion, expand_order, fuse,
                                  group_placements, group_rank)
from gplace.graphs.graph import Graph
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology


def check_fusion(fusion, graph: Graph, placement: np.ndarray
                 ) -> Fusion | None:
  """``place(..., fusion=)`` checked against the graph and placement.

  Returns:
    The :class:`~gplace.graphs.fusion.Fusion`, or None for None.

  Raises:
    FusionError: as :func:`gplace.graphs.fusion.fuse`, or a group the
      placement splits across devices.
  """
  if fusion is None:
    return None
  fused = fuse(graph, fusion)
  group_placements(fused, np.asarray(placement)[None])
  return fused


def check_effects(fused: Fusion, effectful: list[int], graph: Graph) -> None:
  """Raises FusionError if an op with side effects shares a group (it must
  run once, in program order, as under ``jax.jit``)."""
  for node in effectful:
    if fused.n_members[fused.group_of[node]] > 1:
      raise FusionError(
          f"Node {node} ({graph.names[node]}) has side effects and is in a "
          "fusion group; an effectful op runs alone. Give it label -1.")


def _group_edges(fused: Fusion, after: np.ndarray | None) -> np.ndarray | None:
  """``after`` ordering edges between groups (inside ones dropped)."""
  if after is None or not len(after):
    return after
  edges = fused.group_of[np.asarray(after, np.int64)].astype(np.int64)
  edges = edges[edges[:, 0] != edges[:, 1]]
  return np.unique(edges, axis=0).reshape(-1, 2)


def fused_dispatch_order(graph: Graph, fused: Fusion, labels,
                         placement: np.ndarray, schedule, devices,
                         topology: Topology | None = None,
                         after: np.ndarray | None = None
                         ) -> tuple[np.ndarray | None, list[int]]:
  """:func:`gplace.execution.partition.dispatch_order` of whole groups.

  The default schedule is the simulator's with the fusion decision; a
  given one runs its groups in the order of their first members. The
  devices' group sequences are interleaved as without fusion, then each
  group is replaced by its members (in id order, a topological order).

  Args:
    graph, placement: the placed graph and its ``[N]`` placement.
    fused: the checked decision; ``labels`` the ``[N]`` labels it came from.
    schedule: a :func:`~gplace.execution.partition.check_schedule` result.
    devices, topology: as for ``dispatch_order``.
    after: optional ``[E, 2]`` node ordering edges (effects).

  Returns:
    ``(schedule, op_order)``: the ``[N]`` node schedule used (None for
    ``"device_greedy"``) and the op node ids in dispatch order.
  """
  grouped = group_placements(fused, np.asarray(placement)[None])[0]
  group_after = _group_edges(fused, after)
  if isinstance(schedule, str):
    group_ops = device_greedy_order(fused.graph, grouped, group_after)
    schedule = None
  else:
    if schedule is None:
      result = simulate(graph, np.asarray(placement, np.int32),
                        check_topology(topology, devices),
                        return_schedule=True, fusion=labels)
      schedule = np.asarray(result.order, np.int64)
    group_schedule = group_rank(fused, schedule)
    if group_after is not None:
      group_schedule = respect_order(group_schedule, fused.graph,
                                     group_after)
    group_ops = schedule_order(fused.graph, grouped, group_schedule,
                               group_after)
    schedule = expand_order(fused, group_schedule)
  members = np.argsort(fused.group_of, kind="stable")
  start = np.searchsorted(fused.group_of[members], np.arange(fused.n_groups))
  ends = np.r_[start[1:], members.size]
  order = [int(node) for group in group_ops
           for node in members[start[group]:ends[group]]]
  return schedule, order
