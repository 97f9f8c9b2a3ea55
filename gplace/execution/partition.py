"""Partitioning a placed program into same-device clusters (host-side).

:func:`schedule_order` interleaves each device's ops from a schedule
(default: :func:`default_schedules`, the simulator's) into one order, and
:func:`partition` cuts it into maximal same-device :class:`Cluster` s (an
acyclic cluster graph, each device in schedule order).
"""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple, Sequence

from jax.extend import core as jex_core
import numpy as np

from gplace.errors import ScheduleError, TopologyError
from gplace.execution.effects import respect_order, successors_with
from gplace.graphs.capture import NodeRecord, Program
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.sim.simulator import SimResult, check_order, simulate
from gplace.sim.presets import local
from gplace.sim.topology import Topology

# -- signatures -----------------------------------------------------------------


def param_key(value: Any) -> str:
  """A string that identifies an equation parameter's meaning.

  Jaxprs print their text; closed-over constants (which the text omits) add
  their identities, so two programs only share an executable when that is
  safe. Anything else prints its ``repr`` (objects without a meaningful
  repr print their address, which keeps them apart).
  """
  if isinstance(value, jex_core.ClosedJaxpr):
    consts = ",".join(str(id(c)) for c in value.consts)
    return f"closed[{value.jaxpr}|{consts}]"
  if isinstance(value, jex_core.Jaxpr):
    return f"jaxpr[{value}]"
  if isinstance(value, (tuple, list)):
    return "(" + ",".join(param_key(v) for v in value) + ")"
  if isinstance(value, np.ndarray):
    return f"nd[{value.dtype}{value.shape}{hash(value.tobytes())}]"
  return repr(value)


def _aval_key(aval) -> str:
  return f"{aval.dtype}{tuple(aval.shape)}{'w' if aval.weak_type else ''}"


def op_signature(record: NodeRecord) -> str:
  """What an op node computes, independent of where its inputs come from:
  the primitive, its parameters, the abstract values it reads (literals by
  value) and which of its outputs are used."""
  eqn = record.eqn
  params = ";".join(f"{k}={param_key(eqn.params[k])}"
                    for k in sorted(eqn.params))
  reads = ",".join(
      f"lit:{type(ref.literal).__name__}:{ref.literal!r}" if ref.var < 0 else
      _aval_key(var.aval) for ref, var in zip(record.inputs, eqn.invars))
  return f"{eqn.primitive.name}[{params}]({reads})"


# -- the plan -------------------------------------------------------------------


class Cluster(NamedTuple):
  """A contiguous same-device run of ops, compiled as one executable.

  Attributes:
    device_index: index into the placed function's ``devices``.
    nodes: op node ids, in execution order.
    in_vars: value ids it reads from outside, in argument order.
    out_vars: value ids it produces that are read outside, in result order.
  """
  device_index: int
  nodes: tuple[int, ...]
  in_vars: tuple[int, ...]
  out_vars: tuple[int, ...]


def _device_run_order(graph: Graph, placement: np.ndarray, rank: np.ndarray,
                      follow_rank: bool,
                      after: np.ndarray | None = None) -> list[int]:
  """A topological order of the op nodes that stays on one device while that
  device has an eligible op, and otherwise moves to the device whose eligible
  op has the lowest ``rank``.

  An op is eligible when all its op inputs (and its ``after``
  predecessors) have run and (with ``follow_rank``) it is the lowest-ranked
  op of its device not yet run, so every device runs its ops in ``rank``
  order; without ``follow_rank`` any ready op is eligible, the lowest-ranked
  first.
  """
  is_op = graph.kind == NODE_OP
  indegree = np.zeros(graph.n_nodes, np.int64)
  op_edges = is_op[graph.edge_src] & is_op[graph.edge_dst]
  np.add.at(indegree, graph.edge_dst[op_edges], 1)
  if after is not None and len(after):
    np.add.at(indegree, after[:, 1], 1)
  successors = successors_with(graph, after)
  ops = np.flatnonzero(is_op)
  sequence: dict[int, list[int]] = {}
  for node in ops[np.argsort(rank[ops], kind="stable")]:
    sequence.setdefault(int(placement[node]), []).append(int(node))
  done = {device: 0 for device in sequence}
  ready: dict[int, list[tuple[int, int]]] = {device: [] for device in sequence}
  for node in ops[indegree[ops] == 0]:
    ready[int(placement[node])].append((int(rank[node]), int(node)))
  for heap in ready.values():
    heapq.heapify(heap)

  def eligible(device):
    heap = ready[device]
    if not heap or (follow_rank and
                    heap[0][1] != sequence[device][done[device]]):
      return None
    return heap[0]

  order: list[int] = []
  current = None
  while True:
    if current is None or eligible(current) is None:
      live = [(head, device) for device in ready
              if (head := eligible(device)) is not None]
      if not live:
        break
      current = min(live)[1]
    _, node = heapq.heappop(ready[current])
    done[current] += 1
    order.append(node)
    for succ in successors(node):
      if is_op[succ]:
        indegree[succ] -= 1
        if indegree[succ] == 0:
          heapq.heappush(ready[int(placement[succ])],
                         (int(rank[succ]), int(succ)))
  if len(order) != len(ops):
    raise ScheduleError(
        "The schedule is not a topological order of the graph's ops (the "
        f"executor could order only {len(order)} of {len(ops)}); pass a "
        "topological order, e.g. SimResult.order.")
  return order


def device_greedy_order(graph: Graph, placement: np.ndarray,
                        after: np.ndarray | None = None) -> list[int]:
  """A topological order of the op nodes that stays on one device as long
  as that device has a ready op (ties broken by node id): the executor's
  order before schedules (``place(..., schedule="device_greedy")``).

  Args:
    graph: the op graph.
    placement: ``[N]`` device index per node.
    after: optional ``[E, 2]`` extra ``(before, after)`` ordering edges
      (:func:`effect_edges`).

  Returns:
    The op node ids in execution order.
  """
  return _device_run_order(graph, placement, np.arange(graph.n_nodes),
                           follow_rank=False, after=after)


def schedule_order(graph: Graph, placement: np.ndarray,
                   schedule: np.ndarray,
                   after: np.ndarray | None = None) -> list[int]:
  """A topological order of the op nodes in which every device runs its ops
  exactly in ``schedule`` order, with as few device switches as a greedy
  pass finds (so the fewest clusters it can).

  The per-device order is what a schedule fixes (a device runs its
  executables one after another, in dispatch order); how the devices'
  sequences interleave only decides where clusters are cut. Staying on a
  device while its next op is ready never deadlocks: the earliest op of
  ``schedule`` not yet run is always ready.

  Args:
    graph: the op graph.
    placement: ``[N]`` device index per node.
    schedule: ``[N]`` int, a topological order of all nodes (checked by
      :func:`check_schedule`) that also respects ``after``.
    after: optional ``[E, 2]`` extra ``(before, after)`` ordering edges
      (:func:`effect_edges`).

  Returns:
    The op node ids in execution order.

  Raises:
    ScheduleError: ``schedule`` is not a topological order.
  """
  rank = np.empty(graph.n_nodes, np.int64)
  rank[np.asarray(schedule, np.int64)] = np.arange(graph.n_nodes)
  return _device_run_order(graph, placement, rank, follow_rank=True,
                           after=after)


# -- schedules ------------------------------------------------------------------

#: ``place(..., schedule=DEVICE_GREEDY)``: no schedule; the executor's
#: original :func:`device_greedy_order`.
DEVICE_GREEDY = "device_greedy"


def schedule_orders(result: SimResult) -> np.ndarray:
  """The dispatch order of simulated placements, as the schedule contract
  defines it: ``result.order`` when the simulator returned it, else
  ``np.lexsort((np.arange(N), start_s[k]))`` (by start time, ties by node
  id).

  Args:
    result: a :class:`~gplace.sim.simulator.SimResult` of ``simulate(...,
      return_schedule=True)``, for one placement (``[N]`` fields) or ``K``.

  Returns:
    ``[K, N]`` int64 (``K = 1`` for one placement).

  Raises:
    ScheduleError: the result carries no schedule.
  """
  if result.order is not None:
    return np.atleast_2d(np.asarray(result.order)).astype(np.int64)
  if result.start_s is None:
    raise ScheduleError(
        "This SimResult has no schedule; simulate with "
        "gplace.simulate(..., return_schedule=True) and pass that result.")
  start = np.atleast_2d(np.asarray(result.start_s))
  ids = np.arange(start.shape[1])
  return np.stack([np.lexsort((ids, row)) for row in start]).astype(np.int64)


def check_schedule(schedule, graph: Graph):
  """Validates a ``place(..., schedule=...)`` argument.

  Args:
    schedule: None (the simulator's default schedule, resolved when the
      placed function is built), :data:`DEVICE_GREEDY`, an ``[N]`` int
      topological order of the nodes, or a ``SimResult`` of one placement
      from ``simulate(..., return_schedule=True)``.
    graph: the placed graph (``N = graph.n_nodes``).

  Returns:
    None, :data:`DEVICE_GREEDY`, or the order as ``[N]`` int64.

  Raises:
    ScheduleError: an unknown name, a SimResult of several placements or
      without a schedule, or an order that is not a topological permutation
      of the nodes; the message says how to fix it.
  """
  if schedule is None:
    return None
  if isinstance(schedule, str):
    if schedule == DEVICE_GREEDY:
      return schedule
    raise ScheduleError(
        f"Unknown schedule {schedule!r}: pass None (the simulator's default "
        f"schedule), {DEVICE_GREEDY!r}, an [N] topological order, or a "
        "SimResult from gplace.simulate(..., return_schedule=True).")
  if isinstance(schedule, SimResult):
    orders = schedule_orders(schedule)
    if orders.shape[0] != 1:
      raise ScheduleError(
          f"The SimResult holds {orders.shape[0]} placements; pass the one "
          "of this placement, e.g. jax.tree.map(lambda x: x[k], result).")
    schedule = orders[0]
  try:
    return check_order(schedule, graph.n_nodes, graph)
  except ScheduleError as err:
    raise ScheduleError(f"Bad schedule for graph {graph.name!r}: {err}") from err


def default_schedules(graph: Graph, placements: np.ndarray, devices,
                      topology: Topology | None = None) -> np.ndarray:
  """The simulator's default schedule of each placement.

  Executor device ``i`` (``devices[i]``) is topology device ``i``: the
  default topology, :func:`gplace.sim.presets.local` ``(devices)``,
  describes exactly these devices in this order (forced CPU devices share one
  compute group, each accelerator is its own).

  Args:
    graph: the op graph.
    placements: ``[K, N]`` int device indices into ``devices``.
    devices: the placed function's ``jax.Device`` s (``D``).
    topology: optional topology with ``D`` devices (e.g. a calibrated
      ``Profile.topology``); default ``local(devices)``.

  Returns:
    ``[K, N]`` int64 dispatch orders (:func:`schedule_orders`).

  Raises:
    TopologyError: a topology with another number of devices.
  """
  topology = check_topology(topology, devices)
  result = simulate(graph, np.asarray(placements, np.int32), topology,
                    return_schedule=True)
  return schedule_orders(result)


def check_topology(topology: Topology | None, devices) -> Topology:
  """``topology``, or ``local(devices)`` if None; checks it has one device
  per executor device."""
  if topology is None:
    return local(list(devices))
  if not isinstance(topology, Topology):
    raise TopologyError(f"topology must be a gplace.Topology, got "
                        f"{type(topology).__name__}.")
  if topology.n_devices != len(devices):
    raise TopologyError(
        f"The topology has {topology.n_devices} devices but the placement "
        f"runs on {len(devices)}; topology device i must describe devices[i] "
        "(pass gplace.sim.presets.local(devices) or a profile's topology).")
  return topology


def dispatch_order(graph: Graph, placement: np.ndarray, schedule, devices,
                   topology: Topology | None = None,
                   after: np.ndarray | None = None
                   ) -> tuple[np.ndarray | None, list[int]]:
  """Resolves a checked schedule into the executor's op order.

  Args:
    graph, placement: the placed graph and its ``[N]`` placement.
    schedule: a :func:`check_schedule` result.
    devices, topology: as for :func:`default_schedules`.
    after: optional ``[E, 2]`` ordering edges the order must respect too
      (:func:`effect_edges`); a schedule that breaks them is repaired with
      :func:`respect_order`.

  Returns:
    ``(schedule, op_order)``: the ``[N]`` schedule used (None for
    :data:`DEVICE_GREEDY`) and the op node ids in dispatch order.
  """
  if isinstance(schedule, str):
    return None, device_greedy_order(graph, placement, after)
  if schedule is None:
    schedule = default_schedules(graph, placement[None], devices, topology)[0]
  if after is not None:
    schedule = respect_order(schedule, graph, after)
  return schedule, schedule_order(graph, placement, schedule, after)


# -- the cut --------------------------------------------------------------------


def partition(program: Program, placement: np.ndarray,
              mode: str = "cluster",
              order: Sequence[int] | None = None,
              group_of: np.ndarray | None = None) -> list[Cluster]:
  """Cuts a placed program into clusters (host-side).

  Args:
    program: a traced program.
    placement: ``[N]`` device index per node.
    mode: ``"cluster"`` (maximal same-device runs of ``order``) or ``"op"``
      (one cluster per op).
    order: the op node ids in dispatch order, a topological order of the op
      nodes (:func:`schedule_order`); default :func:`device_greedy_order`.
    group_of: optional ``[N]`` fusion group per node, a group's ops
      contiguous in ``order`` (:mod:`gplace.execution.fusion`): then
      either mode cuts exactly one cluster per group.

  Returns:
    Clusters in dispatch order; the cluster graph is acyclic.
  """
  if order is None:
    order = device_greedy_order(program.graph, placement)
  groups: list[list[int]] = []
  for node in order:
    last = groups[-1][-1] if groups else None
    if last is None:
      joins = False
    elif group_of is not None:   # one fusion group per cluster
      joins = group_of[last] == group_of[node]
    else:                        # maximal same-device runs, or one op
      joins = mode == "cluster" and placement[last] == placement[node]
    if joins:
      groups[-1].append(node)
    else:
      groups.append([node])
  cluster_of = np.full(program.graph.n_nodes, -1, np.int64)
  for index, nodes in enumerate(groups):
    cluster_of[nodes] = index
  # Values read outside their producer's cluster (other clusters, outputs).
  owner = value_owner(program)
  used_outside: set[int] = set()
  for node, record in enumerate(program.nodes):
    if record.kind == NODE_INPUT:
      continue
    for ref in record.inputs:
      if ref.var >= 0 and (record.kind == NODE_OUTPUT
                           or cluster_of[owner[ref.var]] != cluster_of[node]):
        used_outside.add(ref.var)
  clusters = []
  for index, nodes in enumerate(groups):
    in_vars: dict[int, None] = {}
    out_vars: list[int] = []
    for node in nodes:
      record = program.nodes[node]
      for ref in record.inputs:
        if ref.var >= 0 and cluster_of[owner[ref.var]] != index:
          in_vars.setdefault(ref.var)
      out_vars.extend(v for v in record.outputs if v in used_outside)
    clusters.append(Cluster(int(placement[nodes[0]]), tuple(nodes),
                            tuple(in_vars), tuple(out_vars)))
  return clusters


def value_owner(program: Program) -> dict[int, int]:
  """``{value id: id of the node that produces it}``."""
  owner = {}
  for node, record in enumerate(program.nodes):
    for var in record.outputs:
      if var >= 0:
        owner[var] = node
  return owner


def value_bytes(program: Program) -> dict[int, int]:
  """``{value id: bytes}`` of op results and argument leaves (constants are
  left out: they are staged once, never sent per call)."""
  out = {}
  for record in program.nodes:
    if record.kind == NODE_OP:
      avals = [(var, v.aval) for var, v in zip(record.outputs,
                                               record.eqn.outvars)]
    elif record.kind == NODE_INPUT and record.source[0] == "arg":
      avals = [(record.outputs[0], program.in_avals[record.source[1]])]
    else:
      continue
    for var, aval in avals:
      if var >= 0:
        out[var] = int(np.prod(aval.shape)) * aval.dtype.itemsize
  return out
