"""List schedulers: Baechi's m-TOPO and m-ETF, HEFT, and an earliest-finish-
time placer in node-id order. Each ``plan_*`` returns a :class:`Plan`: a
placement and the op order it planned (see ``gplace.baselines.plan``).
HEFT's insertion schedule is the simulator's too
(:func:`gplace.sim.list_scheduler.heft_schedule`).

Host-side heaps and numpy; nothing here is traced."""

from __future__ import annotations

import heapq

import numpy as np

from gplace.graphs.graph import Graph
from gplace.sim.list_scheduler import (MAX_GAPS, ListScheduler, Plan,
                                       PlanningProblem, heft_schedule,
                                       prepare)
from gplace.sim.topology import Topology
from gplace.baselines.common import (placer_from_planner,
                                     respecting_constraints)
from gplace.sim.priority import mean_transfer_s, upward_rank
from gplace.baselines.scheduler import plan_within_memory

# Insertion-based HEFT (gplace.sim.list_scheduler.heft_schedule) looks at
# most this many idle gaps of a device before appending at its end, which
# keeps it O(N * D * HEFT_MAX_GAPS); the simulator's planned schedule uses
# the same number, so that it replans HEFT's placement into HEFT's plan.
HEFT_MAX_GAPS = MAX_GAPS


def etf_schedule(problem: PlanningProblem, devices, priority: np.ndarray,
                 favourite_parent: np.ndarray | None = None,
                 spill=()) -> Plan:
  """Memory-constrained earliest-task-first list scheduling (Baechi m-ETF).

  Repeatedly takes the ready node that can start earliest on some device
  (ties: higher ``priority``), and puts it on the device with room for it
  where it finishes earliest (on identical devices that is the
  earliest-start device of classic ETF; with a CPU in the mix it stops slow
  devices from grabbing work just because they are idle). With
  ``favourite_parent`` (m-SCT) a node goes to its favourite parent's device
  whenever that device has room and is idle by the time the node's data is
  there. A node that fits on none of ``devices`` goes to the ``spill``
  device with room where it finishes earliest; one that fits nowhere goes
  where there is most room (the plan overflows; see
  ``scheduler.plan_within_memory``, which repairs it).

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
    spill: devices used only for nodes that fit on none of ``devices``.
  """
  state = ListScheduler(problem, devices, spill)
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
    for candidates in (devices, state.spill):
      if choice >= 0:
        break
      choice_finish = float("inf")
      for d in candidates:
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


def schedule_ranks(problem: PlanningProblem, devices,
                   first: np.ndarray | None = None) -> np.ndarray:
  """Upward rank with op time and transfer time averaged over ``devices``.

  With ``first`` (``[N]`` bool), each of those nodes weighs more than any
  path of the others, so they rank ahead wherever they compete."""
  node_cost = problem.costs[:, devices].mean(axis=1)
  edge_cost = mean_transfer_s(problem.topology, devices,
                              problem.graph.edge_bytes)
  if first is not None:
    node_cost = node_cost + (node_cost.sum() + edge_cost.sum()) * first
  return upward_rank(problem.graph, node_cost, edge_cost)


def plan_ordered_eft(problem: PlanningProblem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  by_id = -np.arange(problem.graph.n_nodes, dtype=np.float64)
  return plan_within_memory(
      lambda p: heft_schedule(p, devices, by_id, max_gaps=0), problem,
      devices)


ordered_eft = placer_from_planner(
    plan_ordered_eft, "ordered_eft", """Earliest finish time with nodes in id order, no insertion.

  Not from a paper: the list scheduler whose model matches the simulator's
  static schedule (``schedule="static"``: each device runs its ops in
  node-id order), so what it plans is what ``gplace.simulate(...,
  schedule="static")`` measures, up to the transfer queues.
  Memory-aware like m-ETF; uses every device.

  Returns:
    ``[N]`` int32 placement.
  """)


def plan_m_etf(problem: PlanningProblem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  rank = schedule_ranks(problem, devices)
  return plan_within_memory(lambda p: etf_schedule(p, devices, rank),
                            problem, devices)


def plan_heft(problem: PlanningProblem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  rank = schedule_ranks(problem, devices)
  return plan_within_memory(lambda p: heft_schedule(p, devices, rank),
                            problem, devices)


m_etf = placer_from_planner(
    plan_m_etf, "m_etf", """Baechi's m-ETF: memory-constrained earliest-task-first scheduling.

  See :func:`etf_schedule`; ties between equally early nodes go to the one
  with the larger upward rank. Uses every device of the topology.
  :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """)


heft = placer_from_planner(
    plan_heft, "heft", """HEFT (Topcuoglu et al. 2002), made memory-aware.

  Nodes in decreasing upward rank (mean op time over devices, mean transfer
  time over device pairs), each on the device where it finishes earliest with
  insertion into idle gaps; devices without room are skipped. Uses every
  device of the topology. :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """)


# -- Baechi m-SCT --------------------------------------------------------------


@respecting_constraints
def m_topo(graph: Graph, topology: Topology, *, costs=None,
           seed: int = 0) -> np.ndarray:
  """Baechi's m-TOPO: fill GPUs in topological order, balanced and in memory.

  Walks non-input nodes in id order (a topological order) and puts them on
  the current GPU until it holds ``1/G`` of the total compute (mean op time
  over the GPUs) or the node does not fit in its memory, then moves to the
  next GPU. Inputs are placed with their first consumer. Memory is live
  bytes in id order, as in the list schedulers (see ListScheduler). When no
  GPU has room, a node spills to the other devices (the CPU); the placement
  is then checked and repaired as the list schedulers' are
  (``scheduler.plan_within_memory``), so it fits whenever everything fits on
  one device (in the default schedule and in node-id order).

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  problem = prepare(graph, topology, costs)
  gpus = problem.allowed
  others = np.setdiff1d(np.arange(topology.n_devices), gpus)
  return plan_within_memory(lambda p: _topo_fill(p, gpus, others), problem,
                            gpus).placement


def _topo_fill(problem: PlanningProblem, gpus, spill) -> Plan:
  """m-TOPO's fill of ``gpus`` in id order, spilling to ``spill``."""
  graph = problem.graph
  gpus = [int(d) for d in gpus]
  state = ListScheduler(problem, gpus, spill)
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
      fitting = ([d for d in gpus if state.fits(d, need, resident)]
                 or state.spill_fitting(need, resident))
      device = fitting[0] if fitting else state.most_room()
    state.commit(i, device, 0.0, 0.0)
    load += work[i]
  # No schedule, so no order of its own: node-id order.
  return state.result()._replace(
      order=np.arange(graph.n_nodes, dtype=np.int32))


# -- list scheduling: m-ETF, m-SCT, HEFT ---------------------------------------
