"""The state every list scheduler shares, and the plan they return.

:class:`ListScheduler` books compute groups, link queues and live memory as
nodes are committed one at a time; m-TOPO, m-ETF, m-SCT, HEFT and ordered EFT
(``list_scheduling.py``, ``sct.py``) drive it. Host-side pure Python; nothing
here is traced.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from gplace.graphs import constraints
from gplace.graphs.graph import NODE_INPUT, NODE_OUTPUT
from gplace.baselines.common import (PlanningProblem, copies_bytes,
                                     default_schedule_peak_bytes,
                                     simulated_peak_bytes, single_device_fits,
                                     single_device_peak_bytes)


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
      schedule's order (see :func:`plan_within_memory`; NaN for baselines
      that do not track memory).
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
  it when the producer runs. :func:`plan_within_memory` checks the exact
  count afterwards and repairs a plan that overflows. (Counting every output
  as resident forever, the simplest rule, overestimates the paper
  workloads' training steps 5-11x: GNMT-4 sums to 128 GB of outputs for an
  11.9 GB peak on one GPU.)

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


# A plan whose simulated peak overflows a device is made again with that
# device's planning budget cut to capacity / peak * MEMORY_REPAIR_SHRINK of
# the budget it had, at most MEMORY_REPAIR_ROUNDS times.
MEMORY_REPAIR_ROUNDS = 6
MEMORY_REPAIR_SHRINK = 0.9


def fastest_single_device(problem: PlanningProblem,
                          candidate_sets) -> int | None:
  """The device with the least total op time, among the first of
  ``candidate_sets`` (device index arrays, most wanted first) that has a
  device holding the whole graph, trying devices that hold it in both
  node-id order and the default schedule before those that hold it in
  node-id order only (``common.single_device_fits``); None if none does."""
  for holds in single_device_fits(problem):
    for candidates in candidate_sets:
      candidates = np.asarray(candidates, np.int64)
      candidates = candidates[holds[candidates]]
      if candidates.size:
        total = problem.costs[:, candidates].sum(axis=0)
        return int(candidates[int(np.argmin(total))])
  return None


def single_device_plan(problem: PlanningProblem, preferred) -> Plan | None:
  """Everything on the fastest device whose memory holds the whole graph.

  A device that holds the graph's peak in both node-id order and the
  default schedule (``common.single_device_fits``) if there is one, else one
  that holds it in node-id order; among ``preferred`` devices first, then
  among all. ``None`` when no device holds it even in node-id order. The
  plan runs ops in id order back to back, with no transfers.
  """
  graph, topology = problem.graph, problem.topology
  device = fastest_single_device(problem, [preferred,
                                           np.arange(topology.n_devices)])
  if device is None:
    return None
  is_input = graph.kind == NODE_INPUT
  duration = np.where(is_input, 0.0, problem.costs[:, device])
  finish = np.cumsum(duration)
  start = np.where(is_input, 0.0, finish - duration)
  finish = np.where(is_input, 0.0, finish)
  peak_bytes = np.zeros(topology.n_devices)
  peak_bytes[device] = single_device_peak_bytes(graph)
  return Plan(np.full(graph.n_nodes, device, np.int32),
              np.arange(graph.n_nodes, dtype=np.int32), start, finish,
              float(finish.max()), peak_bytes)


def plan_within_memory(planner: Callable[[PlanningProblem], Plan],
                       problem: PlanningProblem, preferred) -> Plan:
  """Runs ``planner`` and makes sure its placement fits in memory.

  The list schedulers count live bytes in the order they commit nodes,
  which is not the order the simulator runs them in (the default schedule's
  dynamic order, node ids under ``schedule="static"``, or the plan's
  ``order``), and count a copy from its consumer's placement rather than
  from when its producer runs; the simulated peak can then be well above
  the planned one (1.1-3.6x on a random 300-node graph with GPUs holding
  0.2-0.8 of the single-device peak). So the placement's exact peak
  (:func:`simulated_peak_bytes`) is checked in node-id order, in the plan's
  order and, when some device could overflow in some order
  (:func:`~gplace.baselines.common.copies_bytes` above its memory), in the
  order the default schedule runs it (one ``gplace.simulate`` call); a
  device that overflows in any of them gets a smaller planning budget for
  another try (MEMORY_REPAIR_ROUNDS at most; 1-6 retries on that graph when
  memory is tight, none when it is not). If no try fits, the plan puts
  everything on the fastest device that holds the whole graph
  (``preferred`` devices first, see :func:`single_device_plan`); if there
  is none either, the try that overflowed least is returned, and it will
  OOM.

  Args:
    planner: a list scheduler, ``PlanningProblem -> Plan``, that plans
      against ``problem.memory_bytes``.
    problem: the validated inputs.
    preferred: the devices the baseline uses by choice.

  Returns:
    The plan, its ``peak_bytes`` the simulated peak per device (the largest
    over those orders).
  """
  graph, topology = problem.graph, problem.topology
  capacity = topology.memory_bytes
  budget = capacity.copy()
  best, best_overflow = None, np.inf
  for _ in range(MEMORY_REPAIR_ROUNDS + 1):
    plan = planner(problem._replace(memory_bytes=budget.copy()))
    peak = np.maximum(
        simulated_peak_bytes(graph, plan.placement, topology.n_devices),
        simulated_peak_bytes(graph, plan.placement, topology.n_devices,
                             plan.order))
    if np.all(peak <= capacity) and np.any(
        copies_bytes(graph, plan.placement, topology.n_devices) > capacity):
      peak = np.maximum(
          peak, default_schedule_peak_bytes(problem, plan.placement)[0])
    plan = plan._replace(peak_bytes=peak)
    over = peak > capacity
    if not over.any():
      return plan
    overflow = float(np.max(peak / capacity))
    if overflow < best_overflow:
      best, best_overflow = plan, overflow
    budget[over] *= capacity[over] / peak[over] * MEMORY_REPAIR_SHRINK
  fallback = single_device_plan(problem, preferred)
  return best if fallback is None else fallback
