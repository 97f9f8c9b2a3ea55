"""The list scheduler the simulator and the baselines share (host-side).

:func:`prepare` -> :class:`PlanningProblem`; a :class:`ListScheduler` books
compute groups, links and live memory node by node into a :class:`Plan`
(placement and order); :func:`heft_schedule` is HEFT's insertion schedule,
with a fixed placement the reference of :mod:`gplace.sim.planned`.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

import numpy as np

from gplace.errors import PlacementError
from gplace.graphs import constraints
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT, check_graph
from gplace.sim.topology import Topology, check_topology, validate_costs

#: Idle gaps of a compute group looked at per op before it is appended
#: (keeps a step of :func:`heft_schedule` O(log N + MAX_GAPS), and of the
#: simulator's planned schedule, which uses the same number so that it
#: replans HEFT's placement into HEFT's plan).
MAX_GAPS = 64


class PlanningProblem(NamedTuple):
  """The validated inputs every baseline starts from.

  Attributes:
    graph: the op graph (at least one node).
    topology: the devices.
    costs: ``[N, D]`` float64 seconds per node and device.
    allowed: ``[G]`` int32, the devices a GPU-only baseline may use.
    memory_bytes: ``[D]`` float64 bytes the list schedulers plan to fit in
      (``None``: ``topology.memory_bytes``); smaller than the capacity when
      a plan is repaired (see
      :func:`gplace.baselines.scheduler.plan_within_memory`).
  """
  graph: Graph
  topology: Topology
  costs: np.ndarray
  allowed: np.ndarray
  memory_bytes: np.ndarray | None = None


def prepare(graph, topology, costs) -> PlanningProblem:
  """Validates a baseline's arguments; returns its :class:`PlanningProblem`.

  Raises:
    GraphError: ``graph`` is not a :class:`Graph`.
    PlacementError: ``graph`` has no nodes (as ``gplace.simulate``: there is
      nothing to place).
    TopologyError: ``topology`` is not a :class:`Topology`, or a bad
      ``costs`` table.
  """
  check_graph(graph, "A baseline")
  check_topology(topology, "A baseline")
  if graph.n_nodes == 0:
    raise PlacementError(
        f"graph {graph.name!r} has no nodes; there is nothing to place. "
        "Capture a function that computes something "
        "(gplace.capture(fn, *args)).")
  if costs is None:
    costs = topology.op_costs(graph)
  costs = validate_costs(costs, graph, topology)
  constraints.check_device_count(graph, topology.n_devices, "A baseline")
  return PlanningProblem(graph, topology, costs, gpu_devices(topology),
                         topology.memory_bytes)


def gpu_devices(topology: Topology) -> np.ndarray:
  """``[G]`` int32 indices of the non-CPU devices (all devices if none)."""
  gpus = [d for d, dev in enumerate(topology.devices) if dev.kind != "cpu"]
  if not gpus:
    gpus = list(range(topology.n_devices))
  return np.asarray(gpus, np.int32)


class Plan(NamedTuple):
  """A list scheduler's full plan: where each node runs, and in what order.

  Attributes:
    placement: ``[N]`` int32 device per node.
    order: ``[N]`` int32 node ids by planned start time (inputs first, ties
      by id): a topological order, usable as the simulator's ``order=``.
    start_s: ``[N]`` float64 planned start (0 for inputs).
    finish_s: ``[N]`` float64 planned finish.
    makespan_s: the scheduler's own estimate of the step time (NaN for
      baselines that do not schedule).
    peak_bytes: ``[D]`` float64 peak live bytes per device in the
      simulator's model, the largest of node-id order (``schedule=
      "static"``), ``order`` and, where memory is tight, the default
      schedule's order (see the baselines' ``plan_within_memory``; NaN for
      baselines that do not track memory).
  """
  placement: np.ndarray
  order: np.ndarray
  start_s: np.ndarray
  finish_s: np.ndarray
  makespan_s: float
  peak_bytes: np.ndarray


class ListScheduler:
  """State shared by the list schedulers (host-side, pure Python loops).

  Holds per-node predecessor lists, live bytes per device, link queues and
  the partial placement. Python lists rather than numpy because every step
  touches a handful of scalars and numpy's per-call overhead would dominate
  on 80k nodes.

  Transfers follow the simulator's model: a producer's output is sent once
  per remote device (``send_bytes``: its largest out-edge), and each ordered
  link carries one transfer at a time. A transfer is booked when its first
  consumer on the remote device is placed, starting when both the producer
  and the link are done; until then ``data_ready`` estimates it from the
  link's current queue (an estimate that can only grow). With
  ``topology.pipelined_links`` a transfer on a pipelined link holds it for
  its bytes only; the latency delays its arrival.

  Memory follows the simulator's liveness model, in the order nodes are
  committed. Inputs, and copies of inputs on other devices, are resident for
  the whole step (``resident_on``). Activations (op outputs and the copies a
  device receives) are live from when they are placed until the last
  consumer anywhere is placed; output nodes to the end (``act_live``). A
  device's peak is then ``max over time of act_live + resident_on``, so a
  node fits on ``d`` if ``max(act_peak[d], act_live[d] + its activation
  bytes) + resident_on[d] + the inputs it would pin there <= memory_bytes[d]``:
  inputs pinned late still count against the activation peak of earlier
  times, as in the simulator. This is an estimate, cheap enough for 80k
  nodes, not the simulator's count: it follows the commit order where the
  simulator follows node ids (or a planned order), and it counts a copy of
  an activation from its consumer's placement where the simulator allocates
  it when the producer runs. The baselines' ``plan_within_memory``
  (:mod:`gplace.baselines.scheduler`) checks the exact count afterwards and
  repairs a plan that overflows. (Counting every output as resident
  forever, the simplest rule, overestimates the paper workloads' training
  steps 5-11x: GNMT-4 sums to 128 GB of outputs for an 11.9 GB peak on one
  GPU.)

  Devices: a node goes on one of ``devices``; ``spill`` devices (the CPU of
  a GPU-only baseline) take a node only when it fits on none of them.
  """

  def __init__(self, problem: PlanningProblem, devices, spill=()):
    graph, topology = problem.graph, problem.topology
    self.n = graph.n_nodes
    self.devices = [int(d) for d in devices]
    self.spill = [int(d) for d in spill if d not in self.devices]
    self.reachable = self.devices + self.spill
    # Disallowed devices (the graph's device constraints) cost more than
    # any whole schedule, so a node goes there only when nothing else has
    # room; the baseline's final repair moves it back.
    self.cost = constraints.penalized_costs(graph, problem.costs).tolist()
    self.out_bytes = graph.out_bytes.astype(np.float64).tolist()
    capacity = (topology.memory_bytes if problem.memory_bytes is None
                else problem.memory_bytes)
    self.capacity = np.asarray(capacity, np.float64).tolist()
    n_devices = topology.n_devices
    self.n_devices = n_devices
    self.act_live = [0.0] * n_devices
    self.act_peak = [0.0] * n_devices
    self.resident_on = [0.0] * n_devices
    _, group = np.unique(topology.compute_group, return_inverse=True)
    self.group = group.reshape(-1).tolist()
    self.latency = topology.link_latency.tolist()
    self.hold_latency = topology.link_hold_latency.tolist()
    with np.errstate(divide="ignore"):
      inv = 1.0 / topology.link_bandwidth
    inv[~np.isfinite(inv)] = 0.0
    self.inv_bandwidth = inv.tolist()
    self.is_input = (graph.kind == NODE_INPUT).tolist()
    self.is_output = (graph.kind == NODE_OUTPUT).tolist()
    ptr, eids = graph.pred_csr
    self.pred_ptr = ptr.tolist()
    self.pred_src = graph.edge_src[eids].tolist()
    send = np.zeros(self.n)
    np.maximum.at(send, graph.edge_src, graph.edge_bytes.astype(np.float64))
    self.send_bytes = send.tolist()
    self.remaining = graph.out_degree.tolist()  # consumers not placed yet
    self.copies = {}   # producer -> devices that received a copy
    self.link_free = [[0.0] * n_devices for _ in range(n_devices)]
    self.arrival = {}  # producer * D + device -> arrival time of its copy
    self.succ_ptr = graph.succ_csr[0].tolist()
    self.succ_dst = graph.edge_dst.tolist()
    self.device = [-1] * self.n
    self.start = [0.0] * self.n
    self.finish = [0.0] * self.n

  def data_ready(self, i: int):
    """``(ready [D] s, need [D] bytes, resident [D] bytes)`` of node ``i``.

    ``ready[d]``: when all of its inputs could be on ``d``; ``need[d]``: the
    activation bytes placing it on ``d`` would add there (its output and the
    copies it would receive); ``resident[d]``: the bytes it would make
    resident there for the whole step (inputs it pins, copies of inputs).
    """
    n_devices = self.n_devices
    ready = [0.0] * n_devices
    need = [self.out_bytes[i]] * n_devices
    resident = [0.0] * n_devices
    device, finish, arrival = self.device, self.finish, self.arrival
    is_input = self.is_input
    for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
      p = self.pred_src[k]
      dp = device[p]
      if dp < 0:  # an input not placed yet: it will come here, for free.
        nbytes = self.out_bytes[p]
        for d in self.reachable:
          resident[d] += nbytes
        continue
      t0 = finish[p]
      nbytes = self.send_bytes[p]
      lat, inv, link = (self.latency[dp], self.inv_bandwidth[dp],
                        self.link_free[dp])
      base = p * n_devices
      stays = resident if is_input[p] else need
      for d in self.reachable:
        if d == dp:
          t = t0
        else:
          t = arrival.get(base + d)
          if t is None:
            t = link[d] if link[d] > t0 else t0
            t += lat[d] + nbytes * inv[d]
            stays[d] += nbytes
        if t > ready[d]:
          ready[d] = t
    return ready, need, resident

  def fits(self, d: int, need, resident) -> bool:
    """Whether placing a node with these ``data_ready`` bytes on ``d`` keeps
    the device's peak within its memory."""
    act = self.act_live[d] + need[d]
    if act < self.act_peak[d]:
      act = self.act_peak[d]
    return act + self.resident_on[d] + resident[d] <= self.capacity[d]

  def spill_fitting(self, need, resident) -> list[int]:
    """The spill devices where a node with these bytes fits."""
    return [d for d in self.spill if self.fits(d, need, resident)]

  def most_room(self) -> int:
    """The reachable device with the most room left (for a node that fits
    nowhere; the plan will not fit in memory)."""
    return max(self.reachable, key=lambda d: self.capacity[d]
               - self.act_live[d] - self.resident_on[d])

  def commit(self, i: int, d: int, start: float, finish: float) -> None:
    """Places node ``i`` on ``d``: pins its unplaced inputs, books the
    transfers it needs and updates live bytes."""
    self.device[i] = d
    self.start[i] = start
    self.finish[i] = finish
    act_live = self.act_live
    act_live[d] += self.out_bytes[i]
    n_devices = self.n_devices
    lo, hi = self.pred_ptr[i], self.pred_ptr[i + 1]
    for k in range(lo, hi):
      p = self.pred_src[k]
      dp = self.device[p]
      if dp < 0:
        self.device[p] = d
        self.resident_on[d] += self.out_bytes[p]
      elif dp != d and p * n_devices + d not in self.arrival:
        link = self.link_free[dp]
        t = link[d] if link[d] > self.finish[p] else self.finish[p]
        carry = self.send_bytes[p] * self.inv_bandwidth[dp][d]
        link[d] = t + (self.hold_latency[dp][d] + carry)
        self.arrival[p * n_devices + d] = t + (self.latency[dp][d] + carry)
        if self.is_input[p]:
          self.resident_on[d] += self.send_bytes[p]
        else:
          act_live[d] += self.send_bytes[p]
          self.copies.setdefault(p, []).append(d)
    if act_live[d] > self.act_peak[d]:
      self.act_peak[d] = act_live[d]
    for k in range(lo, hi):
      p = self.pred_src[k]
      if self.is_input[p]:
        continue  # parameters stay resident
      self.remaining[p] -= 1
      if self.remaining[p] == 0:
        self._free(p)
    if self.remaining[i] == 0 and not self.is_output[i]:
      self._free(i)

  def _free(self, p: int) -> None:
    self.act_live[self.device[p]] -= self.out_bytes[p]
    for d in self.copies.pop(p, ()):
      self.act_live[d] -= self.send_bytes[p]

  def result(self) -> Plan:
    # Inputs nobody reads are resident all the same: largest first, each to
    # the device with the most room left (a spill device only when no
    # preferred one has room for it).
    unused = [i for i in range(self.n) if self.device[i] < 0]
    room = lambda d: (self.capacity[d] - self.act_peak[d]
                      - self.resident_on[d])
    for i in sorted(unused, key=lambda i: -self.out_bytes[i]):
      d = max(self.devices, key=room)
      if room(d) < self.out_bytes[i] and self.spill:
        d = max(self.reachable, key=room)
      self.device[i] = d
      self.resident_on[d] += self.out_bytes[i]
    placement = np.asarray(self.device, np.int32)
    start, finish = np.asarray(self.start), np.asarray(self.finish)
    is_input = np.asarray(self.is_input)
    # Inputs first; then by start. An edge u -> v has start(v) >= finish(u)
    # >= start(u), and ids break ties, so this is a topological order.
    order = np.lexsort((np.arange(self.n), start, ~is_input))
    return Plan(placement, order.astype(np.int32), start, finish,
                float(finish.max()) if self.n else 0.0,
                np.asarray(self.act_peak) + np.asarray(self.resident_on))


def heft_schedule(problem: PlanningProblem, devices, rank: np.ndarray, *,
                  max_gaps: int | None = None,
                  placement: np.ndarray | None = None,
                  pinned: np.ndarray | None = None) -> Plan:
  """Insertion-based HEFT over ``devices`` in decreasing ``rank`` order.

  Each node goes to the device (with room, when any has) where it finishes
  earliest, using the first idle gap of that device's compute group that
  is long enough after the node's data is ready. At most ``max_gaps``
  (default :data:`MAX_GAPS`) gaps are tried per device before appending after
  its last op; ``max_gaps=0`` appends always (no insertion). Memory is
  tracked in rank order, the order nodes are committed.

  With ``placement`` (``[N]`` device per node) every node goes where it
  says (inputs too, from the start) and only the schedule is planned: the
  plain-Python reference of the simulator's ``schedule="planned"``
  (:mod:`gplace.sim.planned`). Given HEFT's own placement it plans HEFT's
  own schedule again, since every step then sees the same state.
  With ``pinned`` (``[N]`` int, a device or -1) a node with a device goes
  there when it has room (CPOP's critical-path processor), else as HEFT
  places it.
  """
  max_gaps = MAX_GAPS if max_gaps is None else max_gaps
  state = ListScheduler(problem, devices)
  if placement is not None:
    placement = np.asarray(placement).tolist()
    for i in np.flatnonzero(state.is_input).tolist():
      state.device[i] = placement[i]
  n = state.n
  devices = state.devices
  cost, group = state.cost, state.group
  n_groups = max(group) + 1
  starts = [[] for _ in range(n_groups)]  # busy intervals, sorted
  ends = [[] for _ in range(n_groups)]
  # Decreasing rank is a topological order; ties broken by id keep it one.
  order = np.lexsort((np.arange(n), -np.asarray(rank)))
  is_input = state.is_input
  pin = ([-1] * n if pinned is None
         else np.asarray(pinned, np.int64).tolist())

  def slot(g, ready, duration):
    """(index, start) of the first gap of group g fitting the op."""
    s_list, e_list = starts[g], ends[g]
    m = len(s_list)
    if m == 0:
      return 0, ready
    k = bisect.bisect_right(s_list, ready)
    # The gap before interval idx runs from ends[idx-1] (or 0) to starts[idx].
    for idx in range(k, min(m, k + max_gaps)):
      gap_start = e_list[idx - 1] if idx > 0 else 0.0
      s = ready if ready > gap_start else gap_start
      if s + duration <= s_list[idx]:
        return idx, s
    tail = e_list[m - 1]
    return m, ready if ready > tail else tail

  for i in order.tolist():
    if is_input[i]:
      continue
    ready, need, resident = state.data_ready(i)
    row = cost[i]
    best = None
    if placement is not None:
      candidates = [placement[i]]
    elif pin[i] >= 0 and state.fits(pin[i], need, resident):
      candidates = [pin[i]]
    else:
      candidates = [d for d in devices if state.fits(d, need, resident)]
    if not candidates:  # the plan overflows; the caller repairs it
      candidates = [state.most_room()]
    for d in candidates:
      idx, s = slot(group[d], ready[d], row[d])
      f = s + row[d]
      if best is None or f < best[0]:
        best = (f, s, d, idx)
    f, s, d, idx = best
    if f > s:
      g = group[d]
      starts[g].insert(idx, s)
      ends[g].insert(idx, f)
    state.commit(i, d, s, f)
  return state.result()
