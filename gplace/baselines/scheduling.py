"""List schedulers: Baechi's m-TOPO and m-ETF, HEFT, and an earliest-finish-
time placer for the simulator's node-id order. Each plans an op order as well as a
placement (see ``gplace.baselines.plan``).

Host-side heaps and numpy; nothing here is traced."""

from __future__ import annotations

import bisect
import heapq
from typing import NamedTuple

import numpy as np

from gplace.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.topology import Topology
from gplace.baselines.common import (_Problem, _mean_transfer_s, _prepare,
                                     _upward_rank)

# Insertion-based HEFT looks at most this many idle gaps of a device before
# appending at its end, which keeps it O(N * D * HEFT_MAX_GAPS).
HEFT_MAX_GAPS = 64


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
    peak_bytes: ``[D]`` float64 the scheduler's estimate of peak live bytes
      per device (see _Scheduler; NaN for baselines that do not track it).
  """
  placement: np.ndarray
  order: np.ndarray
  start_s: np.ndarray
  finish_s: np.ndarray
  makespan_s: float
  peak_bytes: np.ndarray



class _Scheduler:
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
  link's current queue (an estimate that can only grow).

  Memory follows the simulator's liveness model, in the order nodes are
  committed. Inputs, and copies of inputs on other devices, are resident for
  the whole step (``resident_on``). Activations (op outputs and the copies a
  device receives) are live from when they are placed until the last
  consumer anywhere is placed; output nodes to the end (``act_live``). A
  device's peak is then ``max over time of act_live + resident_on``, so a
  node fits on ``d`` if ``max(act_peak[d], act_live[d] + its activation
  bytes) + resident_on[d] + the inputs it would pin there <= memory_bytes[d]``:
  inputs pinned late still count against the activation peak of earlier
  times, as in the simulator. One gap: a copy of an activation is counted
  from its consumer's placement, while the simulator allocates it when the
  producer runs, so far-apart edges (forward to backward) can make the
  simulator's peak higher than planned. (Counting every output as resident
  forever, the simplest rule, overestimates the paper workloads' training
  steps 5-11x: GNMT-4 sums to 128 GB of outputs for an 11.9 GB peak on one
  GPU.)
  """

  def __init__(self, problem: _Problem, devices):
    graph, topology = problem.graph, problem.topology
    self.n = graph.n_nodes
    self.devices = list(devices)
    self.cost = problem.costs.tolist()
    self.out_bytes = graph.out_bytes.astype(np.float64).tolist()
    self.capacity = topology.memory_bytes.tolist()
    n_devices = topology.n_devices
    self.n_devices = n_devices
    self.act_live = [0.0] * n_devices
    self.act_peak = [0.0] * n_devices
    self.resident_on = [0.0] * n_devices
    _, group = np.unique(topology.compute_group, return_inverse=True)
    self.group = group.reshape(-1).tolist()
    self.latency = topology.link_latency.tolist()
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
        for d in self.devices:
          resident[d] += nbytes
        continue
      t0 = finish[p]
      nbytes = self.send_bytes[p]
      lat, inv, link = (self.latency[dp], self.inv_bandwidth[dp],
                        self.link_free[dp])
      base = p * n_devices
      stays = resident if is_input[p] else need
      for d in self.devices:
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

  def most_room(self) -> int:
    return max(self.devices, key=lambda d: self.capacity[d] - self.act_live[d]
               - self.resident_on[d])

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
        t += (self.latency[dp][d]
              + self.send_bytes[p] * self.inv_bandwidth[dp][d])
        link[d] = t
        self.arrival[p * n_devices + d] = t
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
    # the device with the most room left.
    unused = [i for i in range(self.n) if self.device[i] < 0]
    for i in sorted(unused, key=lambda i: -self.out_bytes[i]):
      d = max(self.devices, key=lambda d: self.capacity[d] - self.act_peak[d]
              - self.resident_on[d])
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


def _etf_schedule(problem: _Problem, devices, priority: np.ndarray,
                  favourite_parent: np.ndarray | None = None) -> Plan:
  """Memory-constrained earliest-task-first list scheduling (Baechi m-ETF).

  Repeatedly takes the ready node that can start earliest on some device
  (ties: higher ``priority``), and puts it on the device with room for it
  where it finishes earliest (on identical devices that is the
  earliest-start device of classic ETF; with a CPU in the mix it stops slow
  devices from grabbing work just because they are idle). With
  ``favourite_parent`` (m-SCT) a node goes to its favourite parent's device
  whenever that device has room and is idle by the time the node's data is
  there. A node that fits nowhere goes where there is most room (the
  schedule will OOM).

  Each device keeps two heaps of the ready nodes: those whose data is not
  there before the device is free, keyed by data-ready time, and those that
  could start the moment it is free, keyed by priority. A device's best
  candidate is then the top of one heap, and a step costs O(D log R) instead
  of the O(R D) scan of textbook ETF over R ready nodes. Ready times only
  grow (inputs get pinned elsewhere, links fill up), so stale entries are
  re-checked lazily when they reach a top. Memory is left to the device
  choice: the node picked is the earliest to start ignoring memory.

  Args:
    devices: device indices the schedule may use.
    priority: ``[N]`` tie-break, larger first (upward rank).
    favourite_parent: ``[N]`` int, a producer id or -1.
  """
  state = _Scheduler(problem, devices)
  n = state.n
  devices = state.devices
  cost, group = state.cost, state.group
  group_free = [0.0] * (max(group) + 1)
  graph = problem.graph
  is_input = np.asarray(state.is_input)
  from_input = is_input[graph.edge_src]
  waiting = np.bincount(graph.edge_dst[~from_input], minlength=n).tolist()
  # Ready times of a node that reads an input can still grow while it waits
  # (another consumer may pin the input elsewhere first): always re-check.
  reads_input = (np.bincount(graph.edge_dst[from_input], minlength=n)
                 > 0).tolist()
  prio = (-np.asarray(priority, np.float64)).tolist()
  favourite = (favourite_parent.tolist() if favourite_parent is not None
               else None)
  ready_at = [None] * n
  done = [False] * n
  future = {d: [] for d in devices}     # (data-ready time, prio, node)
  available = {d: [] for d in devices}  # (prio, node), data there when free
  heappush, heappop = heapq.heappush, heapq.heappop

  def release(i):
    ready_at[i] = state.data_ready(i)[0]
    for d in devices:
      heappush(future[d], (ready_at[i][d], prio[i], i))

  def fix_future_top(d):
    """Pops done entries and re-keys a stale top of future[d]."""
    fut = future[d]
    while fut:
      r, p, i = fut[0]
      if done[i]:
        heappop(fut)
        continue
      if reads_input[i]:
        ready_at[i] = state.data_ready(i)[0]
        if ready_at[i][d] > r:
          heapq.heapreplace(fut, (ready_at[i][d], p, i))
          continue
      return

  def front(d):
    """``(earliest start, prio, node)`` of device d's best candidate."""
    free = group_free[group[d]]
    fut, avail = future[d], available[d]
    while True:
      fix_future_top(d)
      if fut and fut[0][0] <= free:
        _, p, i = heappop(fut)
        heappush(avail, (p, i))
        continue
      break
    while avail:
      p, i = avail[0]
      if done[i]:
        heappop(avail)
        continue
      if reads_input[i]:
        ready_at[i] = state.data_ready(i)[0]
        if ready_at[i][d] > free:
          heappop(avail)
          heappush(fut, (ready_at[i][d], p, i))
          continue
      return free, p, i
    fix_future_top(d)
    return fut[0] if fut else None

  for i in range(n):
    if not state.is_input[i] and waiting[i] == 0:
      release(i)
  while True:
    best = None
    for d in devices:
      candidate = front(d)
      if candidate is not None and (best is None or candidate < best):
        best = candidate
    if best is None:
      break
    i = best[2]
    ready, need, resident = state.data_ready(i)
    row = cost[i]
    choice = -1
    if favourite is not None and favourite[i] >= 0:
      d = state.device[favourite[i]]
      if d in devices and group_free[group[d]] <= ready[d] and state.fits(
          d, need, resident):
        choice = d
    if choice < 0:
      choice_finish = float("inf")
      for d in devices:
        if not state.fits(d, need, resident):
          continue
        s = ready[d]
        g = group_free[group[d]]
        if g > s:
          s = g
        if s + row[d] < choice_finish:
          choice, choice_finish = d, s + row[d]
    if choice < 0:
      choice = state.most_room()
    start = max(ready[choice], group_free[group[choice]])
    finish = start + row[choice]
    group_free[group[choice]] = finish
    state.commit(i, choice, start, finish)
    done[i] = True
    for k in range(state.succ_ptr[i], state.succ_ptr[i + 1]):
      j = state.succ_dst[k]
      waiting[j] -= 1
      if waiting[j] == 0:
        release(j)
  return state.result()


def _heft_schedule(problem: _Problem, devices, rank: np.ndarray, *,
                   max_gaps: int | None = None) -> Plan:
  """Insertion-based HEFT over ``devices`` in decreasing ``rank`` order.

  Each node goes to the device (with room, when any has) where it finishes
  earliest, using the first idle gap of that device's compute group that
  is long enough after the node's data is ready. At most ``max_gaps``
  (default HEFT_MAX_GAPS) gaps are tried per device before appending after
  its last op; ``max_gaps=0`` appends always (no insertion). Memory is
  tracked in rank order, the order nodes are committed.
  """
  max_gaps = HEFT_MAX_GAPS if max_gaps is None else max_gaps
  state = _Scheduler(problem, devices)
  n = state.n
  devices = state.devices
  cost, group = state.cost, state.group
  n_groups = max(group) + 1
  starts = [[] for _ in range(n_groups)]  # busy intervals, sorted
  ends = [[] for _ in range(n_groups)]
  # Decreasing rank is a topological order; ties broken by id keep it one.
  order = np.lexsort((np.arange(n), -np.asarray(rank)))
  is_input = state.is_input

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
    candidates = [d for d in devices if state.fits(d, need, resident)]
    if not candidates:
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


def _schedule_ranks(problem: _Problem, devices) -> np.ndarray:
  """Upward rank with op time and transfer time averaged over ``devices``."""
  node_cost = problem.costs[:, devices].mean(axis=1)
  edge_cost = _mean_transfer_s(problem.topology, devices,
                               problem.graph.edge_bytes)
  return _upward_rank(problem.graph, node_cost, edge_cost)


def _plan_ordered_eft(problem: _Problem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  by_id = -np.arange(problem.graph.n_nodes, dtype=np.float64)
  return _heft_schedule(problem, devices, by_id, max_gaps=0)


def ordered_eft(graph: Graph, topology: Topology, *, costs=None,
                seed: int = 0) -> np.ndarray:
  """Earliest finish time with nodes in id order, no insertion.

  Not from a paper: the list scheduler whose model matches the simulator's
  default execution (each device runs its ops in node-id order), so what it
  plans is what ``gplace.simulate`` measures, up to the transfer queues.
  Memory-aware like m-ETF; uses every device.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_ordered_eft(_prepare(graph, topology, costs)).placement


def _plan_m_etf(problem: _Problem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  rank = _schedule_ranks(problem, devices)
  return _etf_schedule(problem, devices, rank)


def _plan_heft(problem: _Problem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  rank = _schedule_ranks(problem, devices)
  return _heft_schedule(problem, devices, rank)


def m_etf(graph: Graph, topology: Topology, *, costs=None,
          seed: int = 0) -> np.ndarray:
  """Baechi's m-ETF: memory-constrained earliest-task-first scheduling.

  See :func:`_etf_schedule`; ties between equally early nodes go to the one
  with the larger upward rank. Uses every device of the topology.
  :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_m_etf(_prepare(graph, topology, costs)).placement


def heft(graph: Graph, topology: Topology, *, costs=None,
         seed: int = 0) -> np.ndarray:
  """HEFT (Topcuoglu et al. 2002), made memory-aware.

  Nodes in decreasing upward rank (mean op time over devices, mean transfer
  time over device pairs), each on the device where it finishes earliest with
  insertion into idle gaps; devices without room are skipped. Uses every
  device of the topology. :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_heft(_prepare(graph, topology, costs)).placement


# -- Baechi m-SCT --------------------------------------------------------------


def m_topo(graph: Graph, topology: Topology, *, costs=None,
           seed: int = 0) -> np.ndarray:
  """Baechi's m-TOPO: fill GPUs in topological order, balanced and in memory.

  Walks non-input nodes in id order (a topological order) and puts them on
  the current GPU until it holds ``1/G`` of the total compute (mean op time
  over the GPUs) or the node does not fit in its memory, then moves to the
  next GPU. Inputs are placed with their first consumer. Memory is live
  bytes in id order, as in the list schedulers (see _Scheduler). When the
  last GPU is full, a node goes to the GPU with the most room left.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  problem = _prepare(graph, topology, costs)
  gpus = problem.allowed.tolist()
  state = _Scheduler(problem, gpus)
  work = problem.costs[:, gpus].mean(axis=1)
  budget = work.sum() / len(gpus)
  work = work.tolist()
  current, load = 0, 0.0
  for i in range(graph.n_nodes):
    if state.is_input[i]:
      continue
    _, need, resident = state.data_ready(i)
    device = gpus[current]
    while (load >= budget or not state.fits(device, need, resident)) and (
        current + 1 < len(gpus)):
      current, load = current + 1, 0.0
      device = gpus[current]
    if not state.fits(device, need, resident):
      fitting = [d for d in gpus if state.fits(d, need, resident)]
      device = fitting[0] if fitting else state.most_room()
    state.commit(i, device, 0.0, 0.0)
    load += work[i]
  return state.result().placement


# -- list scheduling: m-ETF, m-SCT, HEFT ---------------------------------------
