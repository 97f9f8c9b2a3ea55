"""Plain-Python, event-driven reference of the simulator's model: the
specification the fast paths are tested against (float64, slow, tests only).

:func:`simulate_reference` (a shared order), :func:`dispatch_reference` (the
list scheduler) and :func:`planned_reference` (the planned schedule).
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np

from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.graphs.fusion import fuse
from gplace.sim import fusion as sim_fusion
from gplace.sim import list_scheduler
from gplace.sim.planned import BEST_TIE, MAX_GAPS
from gplace.sim.priority import bottom_level, order_priority, priority_order
from gplace.sim.problem import (check_order, link_hold_seconds, send_bytes,
                                transfer_seconds)
from gplace.sim.topology import Topology, cost_table


class ReferenceResult(NamedTuple):
  """Outcome of one placement (float64).

  Attributes:
    runtime_s: latest finish time.
    peak_bytes: ``[D]`` peak live bytes per device.
    oom: peak above some device's capacity.
    start_s, finish_s: ``[N]`` per-node times.
    order: ``[N]`` the priority order the schedule followed.
  """

  runtime_s: float
  peak_bytes: np.ndarray
  oom: bool
  start_s: np.ndarray
  finish_s: np.ndarray
  order: np.ndarray | None = None


def planned_reference(graph: Graph, placement, topology: Topology,
                      costs=None, *, priority=None) -> np.ndarray:
  """The planned schedule of one ``[N]`` placement (``schedule="planned"``,
  :mod:`gplace.sim.planned`) by the plain-Python list scheduler the
  baselines share (:mod:`gplace.sim.list_scheduler`): HEFT's insertion
  rule with every node's device fixed, in the priority-respecting order of
  ``priority`` (default: the critical path). Returns the ``[N]`` order."""
  if priority is None:
    rank = bottom_level(graph, topology, costs)
  else:
    rank = order_priority(priority_order(priority, graph))
  return list_scheduler.heft_schedule(
      list_scheduler.prepare(graph, topology, costs),
      np.arange(topology.n_devices), rank, max_gaps=MAX_GAPS,
      placement=np.asarray(placement).reshape(-1)).order


def simulate_reference(graph: Graph, placement, topology: Topology,
                       costs=None, order=None, *, priority=None,
                       schedule: str | None = None,
                       fusion=None) -> ReferenceResult:
  """Simulates one ``[N]`` placement with the event-driven reference.

  The schedule as for :func:`gplace.simulate`: ``order`` (``[N]``) if given;
  else ``schedule`` (default ``"best"``), steered by ``priority`` (then
  :func:`dispatch_reference` decides the dynamic order, and
  :func:`planned_reference` the planned one); ``schedule="static"``
  without a priority runs node-id order. ``fusion`` (``[N]`` group labels)
  simulates the contracted graph and maps times back, as ``simulate``.
  """
  if fusion is not None:
    fused = fuse(graph, fusion)
    grouped = sim_fusion.to_groups(
        fused, graph, topology, np.asarray(placement).reshape(1, -1), costs,
        order, priority)
    result = simulate_reference(
        fused.graph, grouped.placements[0], topology, grouped.costs,
        grouped.order, priority=grouped.priority, schedule=schedule)
    return result._replace(
        start_s=sim_fusion.expand_times(fused, result.start_s),
        finish_s=sim_fusion.expand_times(fused, result.finish_s),
        order=sim_fusion.expand_schedule(fused, result.order))
  if schedule is None:
    schedule = "static" if order is not None else "best"
  if schedule in ("planned", "best"):
    assert order is None
    plan = simulate_reference(graph, placement, topology, costs,
                              order=planned_reference(
                                  graph, placement, topology, costs,
                                  priority=priority))
    if schedule == "planned":
      return plan
    dynamic = simulate_reference(graph, placement, topology, costs,
                                 priority=priority, schedule="dynamic")
    better = (plan.oom, plan.runtime_s) < (
        dynamic.oom, dynamic.runtime_s * (1.0 - BEST_TIE))
    return plan if better else dynamic
  if priority is not None or schedule == "dynamic":
    assert order is None
    if priority is None:
      priority = bottom_level(graph, topology, costs)
    return dispatch_reference(graph, placement, topology, costs,
                              np.asarray(priority, np.float32),
                              dynamic=schedule == "dynamic")
  n = graph.n_nodes
  placement = [int(x) for x in np.asarray(placement).reshape(-1)]
  assert len(placement) == n
  costs = cost_table(graph, topology, costs)
  order = list(range(n)) if order is None else [
      int(x) for x in check_order(order, n, graph)]
  position = [0] * n
  for i, node in enumerate(order):
    position[node] = i
  kind = [int(x) for x in graph.kind]
  groups = [int(x) for x in topology.compute_group]
  preds = [[] for _ in range(n)]
  succs = [[] for _ in range(n)]
  for s, t in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    preds[t].append(s)
    succs[s].append(t)
  nbytes = [int(x) for x in send_bytes(graph)]

  # Where each output must go, and the queues in priority order.
  destinations = [sorted({placement[w] for w in succs[u]} - {placement[u]})
                  for u in range(n)]
  group_queue: dict[int, list[int]] = {}
  link_queue: dict[tuple[int, int], list[int]] = {}
  for node in order:
    if kind[node] != NODE_INPUT:
      group_queue.setdefault(groups[placement[node]], []).append(node)
    for dest in destinations[node]:
      link_queue.setdefault((placement[node], dest), []).append(node)
  group_head = {g: 0 for g in group_queue}
  link_head = {link: 0 for link in link_queue}
  group_busy = {g: False for g in group_queue}
  link_busy = {link: False for link in link_queue}

  start = [0.0] * n
  finish = [None] * n
  available: dict[tuple[int, int], float] = {}   # (node, device) -> time
  events: list = []
  counter = 0

  def push(time, what, payload):
    nonlocal counter
    heapq.heappush(events, (time, counter, what, payload))
    counter += 1

  def try_group(g, now):
    if g not in group_queue or group_busy[g]:
      return
    if group_head[g] >= len(group_queue[g]):
      return
    node = group_queue[g][group_head[g]]
    dev = placement[node]
    if any((u, dev) not in available for u in preds[node]):
      return
    group_busy[g] = True
    group_head[g] += 1
    start[node] = now
    push(now + float(costs[node, dev]), "node", node)

  def try_link(link, now):
    if link not in link_queue or link_busy[link]:
      return
    if link_head[link] >= len(link_queue[link]):
      return
    node = link_queue[link][link_head[link]]
    if finish[node] is None:
      return
    link_busy[link] = True
    link_head[link] += 1
    src, dst = link
    latency = (0.0 if topology.batched_inputs and kind[node] == NODE_INPUT
               else float(topology.link_latency[src, dst]))
    held = nbytes[node] / float(topology.link_bandwidth[src, dst])
    if topology.pipelined_mask[src, dst]:  # free once the bytes left
      push(now + held, "link", link)
      push(now + held + latency, "arrival", (node, link))
    else:
      push(now + latency + held, "transfer", (node, link))

  def produced(node, now):
    finish[node] = now
    dev = placement[node]
    available[(node, dev)] = now
    for dest in destinations[node]:
      try_link((dev, dest), now)

  for node in order:                  # inputs are resident at time 0
    if kind[node] == NODE_INPUT:
      produced(node, 0.0)
  for g in group_queue:
    try_group(g, 0.0)
  while events:
    now, _, what, payload = heapq.heappop(events)
    if what == "node":
      node = payload
      group_busy[groups[placement[node]]] = False
      produced(node, now)
      try_group(groups[placement[node]], now)
    elif what == "link":
      link_busy[payload] = False
      try_link(payload, now)
    else:                            # "transfer" (frees the link) or "arrival"
      node, link = payload
      available[(node, link[1])] = now
      if what == "transfer":
        link_busy[link] = False
        try_link(link, now)
      try_group(groups[link[1]], now)
  missing = [v for v in range(n) if finish[v] is None]
  assert not missing, f"reference deadlocked on nodes {missing[:5]}"
  finish_arr = np.asarray(finish, np.float64)
  runtime = float(finish_arr.max()) if n else 0.0

  peak = _peak_bytes(graph, placement, position, succs, nbytes, kind,
                     topology.n_devices)
  oom = bool(np.any(peak > topology.memory_bytes))
  return ReferenceResult(runtime_s=runtime, peak_bytes=peak, oom=oom,
                         start_s=np.asarray(start, np.float64),
                         finish_s=finish_arr, order=np.asarray(order))


def dispatch_reference(graph: Graph, placement, topology: Topology, costs,
                       priority: np.ndarray, *, dynamic: bool
                       ) -> ReferenceResult:
  """The list scheduler of :mod:`gplace.sim.dispatch`, one node at a time.

  Each step dispatches, among the nodes whose producers have all been
  dispatched, the one with the smallest ``(t, group, -priority, id)``
  (``t`` and ``group`` only if ``dynamic``): ``t = max(ready, group free)``
  for executed nodes, ``0`` and group ``-1`` for ``NODE_INPUT`` nodes. It
  starts at ``max(ready, group free)``; its output is sent at once to every
  other device holding a consumer, each link serving in dispatch order.
  """
  n = graph.n_nodes
  placement = [int(x) for x in np.asarray(placement).reshape(-1)]
  costs = cost_table(graph, topology, costs)
  send_s = transfer_seconds(graph, topology)
  hold_s = link_hold_seconds(graph, topology)
  groups = [int(x) for x in topology.compute_group]
  executed = [int(k) != NODE_INPUT for k in graph.kind]
  succs = [[] for _ in range(n)]
  remaining = [0] * n
  for s, t in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    succs[s].append(t)
    remaining[t] += 1
  prio = [float(x) for x in priority]
  ready = [0.0] * n
  start = [0.0] * n
  finish = [0.0] * n
  done = [False] * n
  group_free: dict[int, float] = {}
  link_free: dict[tuple[int, int], float] = {}
  order = []

  def key(v):
    if not dynamic:
      return (-prio[v], v)
    if not executed[v]:
      return (0.0, -1, -prio[v], v)
    g = groups[placement[v]]
    return (max(ready[v], group_free.get(g, 0.0)), g, -prio[v], v)

  for _ in range(n):
    v = min((w for w in range(n) if not done[w] and remaining[w] == 0),
            key=key)
    done[v] = True
    order.append(v)
    dev = placement[v]
    if executed[v]:
      g = groups[dev]
      start[v] = max(ready[v], group_free.get(g, 0.0))
      finish[v] = start[v] + float(costs[v, dev])
      group_free[g] = finish[v]
    arrival = {dev: finish[v]}
    for dest in sorted({placement[w] for w in succs[v]} - {dev}):
      begin = max(finish[v], link_free.get((dev, dest), 0.0))
      arrival[dest] = begin + send_s[v, dev, dest]
      link_free[(dev, dest)] = begin + hold_s[v, dev, dest]
    for w in succs[v]:
      ready[w] = max(ready[w], arrival[placement[w]])
      remaining[w] -= 1
  position = [0] * n
  for i, v in enumerate(order):
    position[v] = i
  nbytes = [int(x) for x in send_bytes(graph)]
  kind = [int(x) for x in graph.kind]
  peak = _peak_bytes(graph, placement, position, succs, nbytes, kind,
                     topology.n_devices)
  return ReferenceResult(
      runtime_s=max(finish) if n else 0.0, peak_bytes=peak,
      oom=bool(np.any(peak > topology.memory_bytes)),
      start_s=np.asarray(start, np.float64),
      finish_s=np.asarray(finish, np.float64), order=np.asarray(order))


def _peak_bytes(graph, placement, position, succs, nbytes, kind, n_devices):
  """Sweeps explicit live intervals ``[first, last]`` of every copy."""
  n = graph.n_nodes
  end = n - 1
  intervals = [[] for _ in range(n_devices)]   # (first, last, bytes)
  for u in range(n):
    home = placement[u]
    last_on: dict[int, int] = {}
    for w in succs[u]:
      dev = placement[w]
      last_on[dev] = max(last_on.get(dev, -1), position[w])
    if kind[u] == NODE_INPUT:
      own = (0, end)
    elif kind[u] == NODE_OUTPUT:
      own = (position[u], end)
    else:
      own = (position[u], max(position[u], last_on.get(home, -1)))
    intervals[home].append((own[0], own[1], int(graph.out_bytes[u])))
    for dev, last in last_on.items():
      if dev != home:
        intervals[dev].append((position[u], last, nbytes[u]))
  peak = np.zeros(n_devices, np.float64)
  for dev in range(n_devices):
    delta = [0] * (n + 1)
    for first, last, size in intervals[dev]:
      delta[first] += size
      delta[last + 1] -= size
    live = best = 0
    for t in range(n):
      live += delta[t]
      best = max(best, live)
    peak[dev] = best
  return peak
