"""Where a placement's simulated time goes: its critical path, taken apart.

:func:`explain` ``(graph, placement, topology, ...) -> Explanation``
simulates one placement with its schedule and walks back from the last op
to finish, each time to what held it up last: a producer's value (arriving
after its transfer when the two ops are on different devices) or the op
before it on its compute group. The runtime splits exactly into the
compute of the ops on that path, the transfers on it, and the waits on it
(a busy link, or a device the schedule kept idle); the ops the path waits
behind on their device are work that a placement elsewhere could overlap.
Per device: ops and busy seconds. The path's ops are each moved alone to
every other device they may take, in the same schedule: the moves that
would make the step faster but do not fit in memory name what memory
costs (``blocked``). ``print(explanation)`` shows a table;
``gplace.optimize``'s ``result.explain()`` explains its winner.

The split answers "why is this placement slower than the bound?": the
bound (``gplace.lower_bound``) counts no transfers, and device sharing only
as work spread freely over the devices; the split shows what it leaves
out.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from gplace.errors import PlacementError
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.report import format_seconds
from gplace.sim.bounds import lower_bound
from gplace.sim.problem import send_bytes
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, cost_table

#: Kinds of step along the path (:attr:`Explanation.step_kind`).
SAME_DEVICE, TRANSFER, DEVICE_ORDER = 0, 1, 2
#: Single moves of the path's ops simulated for ``blocked``, at most (the
#: path's last ops first: at its end a slow device adds to the runtime
#: whatever ran before).
MAX_MOVES = 128
#: Blocked moves the table lists.
SHOWN = 3


class Explanation(NamedTuple):
  """A simulated placement's critical path and where its time goes.

  ``start_s + compute_s + transfer_s + wait_s == runtime_s`` (to the
  simulator's float32 rounding).

  Attributes:
    runtime_s: simulated seconds of the placement in its schedule.
    bound_s: ``gplace.lower_bound`` of the graph on the topology (or a
      larger proven bound given to :func:`explain`).
    oom: the placement does not fit in some device's memory.
    path: ``[P]`` int node ids of a critical path, first to last.
    step_kind: ``[P - 1]`` int per step ``path[i] -> path[i + 1]``:
      :data:`SAME_DEVICE` (a value on one device), :data:`TRANSFER` (a
      value sent between devices), :data:`DEVICE_ORDER` (the next op waited
      for its device).
    start_s: when the path's first op started (0 unless it waited).
    compute_s: seconds of the path's ops.
    behind_s: the part of ``compute_s`` of ops the path waited behind on
      their device (the ops before a :data:`DEVICE_ORDER` step).
    fastest_s: seconds of the path's ops on their fastest devices.
    transfer_s: the transfers on the path, uncontended.
    wait_s: the rest of the path's gaps: links busy with other transfers,
      devices idle by the schedule's choice.
    device_ops: ``[D]`` int ops placed on each device (graph inputs out).
    device_busy_s: ``[D]`` seconds each device computes.
    device_names: ``D`` names.
    schedule: what order it ran in (``"given order"``, ``"given
      priorities"``, or the simulator's schedule name).
    blocked: ``[B, 2]`` int ``(op, device)``: an op of the path moved
      alone to that device, in the same schedule, would make the step
      faster but does not fit in memory there; fastest first (of at most
      :data:`MAX_MOVES` moves tried, the path's last ops first; none when
      the placement itself does not fit).
    blocked_runtime_s: ``[B]`` the step's simulated seconds with each
      such move (memory aside).
    node_names: ``N`` node names, for the table.
  """

  runtime_s: float
  bound_s: float
  oom: bool
  path: np.ndarray
  step_kind: np.ndarray
  start_s: float
  compute_s: float
  behind_s: float
  fastest_s: float
  transfer_s: float
  wait_s: float
  device_ops: np.ndarray
  device_busy_s: np.ndarray
  device_names: tuple
  schedule: str
  blocked: np.ndarray = np.zeros((0, 2), np.int64)
  blocked_runtime_s: np.ndarray = np.zeros(0)
  node_names: tuple = ()

  @property
  def device_changes(self) -> int:
    """Steps of the path between devices (:data:`TRANSFER`)."""
    return int(np.sum(self.step_kind == TRANSFER))

  def table(self) -> str:
    """The split as a short text table (simulated times)."""
    total = self.runtime_s if self.runtime_s > 0 else 1.0

    def row(label: str, seconds: float) -> str:
      return (f"  {label:<44}{format_seconds(seconds):>12}"
              f"{100 * seconds / total:7.1f}%")

    over = (f" ({100 * (self.runtime_s / self.bound_s - 1):+.1f}% over "
            "the lower bound)" if self.bound_s > 0 else "")
    lines = [
        f"simulated {format_seconds(self.runtime_s)} in the "
        f"{self.schedule}{' (out of memory)' if self.oom else ''}; lower "
        f"bound {format_seconds(self.bound_s)}{over}",
        f"critical path: {self.path.size} ops, {self.device_changes} "
        "changes of device",
        row("compute of its ops", self.compute_s),
        row("  of which ops it waited behind on a device", self.behind_s),
        row("transfers between devices (uncontended)", self.transfer_s),
        row("waits (busy links, idle devices)", self.wait_s),
    ]
    if self.start_s > 0:
      lines.append(row("before its first op", self.start_s))
    lines.append(f"  the path's ops on their fastest devices: "
                 f"{format_seconds(self.fastest_s)}")
    lines.append(f"  {'device':<12}{'ops':>8}{'busy':>12}{'busy %':>8}")
    for name, ops, busy in zip(self.device_names, self.device_ops,
                               self.device_busy_s):
      lines.append(f"  {name:<12}{int(ops):>8}{format_seconds(busy):>12}"
                   f"{100 * busy / total:7.1f}%")
    if len(self.blocked):
      count = len(self.blocked)
      lines.append(f"memory blocks {count} faster single "
                   f"move{'s' if count > 1 else ''} of the path's ops:")
    for op, device, seconds in self.blocked_moves()[:SHOWN]:
      lines.append(f"  {op} to {device}: "
                   f"{format_seconds(self.runtime_s - seconds)} faster, "
                   "does not fit")
    return "\n".join(lines)

  def blocked_moves(self) -> list[tuple[str, str, float]]:
    """``[(op name, device name, runtime_s)]`` of :attr:`blocked`,
    fastest first."""
    names = self.node_names
    return [(names[v] if v < len(names) else f"node {v}",
             self.device_names[d], float(seconds))
            for (v, d), seconds in zip(self.blocked.tolist(),
                                       self.blocked_runtime_s)]

  def __str__(self) -> str:
    return self.table()


def _device_predecessor(order: np.ndarray, group: np.ndarray,
                        executed: np.ndarray) -> np.ndarray:
  """``[N]`` the op each executed op follows on its compute group (-1)."""
  ops = order[executed[order]]
  previous = np.full(order.size, -1, np.int64)
  for g in np.unique(group[ops]):
    members = ops[group[ops] == g]
    previous[members[1:]] = members[:-1]
  return previous


def _edge_transfer_s(graph: Graph, topology: Topology,
                     placement: np.ndarray) -> np.ndarray:
  """``[E]`` seconds of each edge's transfer in ``placement`` (0 when
  both ends share a device), as ``gplace.sim.problem.transfer_seconds``:
  ``topology.transfer_time``, without the latency for graph inputs where
  ``topology.batched_inputs``."""
  src = graph.edge_src
  a, b = placement[src], placement[graph.edge_dst]
  seconds = topology.transfer_time(send_bytes(graph)[src], a, b)
  if topology.batched_inputs:
    from_input = (graph.kind[src] == NODE_INPUT) & (a != b)
    seconds = seconds - np.where(from_input, topology.link_latency[a, b], 0.0)
  return seconds


def explain(graph: Graph, placement, topology: Topology, costs=None,
            order=None, *, priority=None, schedule: Optional[str] = None,
            bound_s: Optional[float] = None) -> Explanation:
  """Simulates ``placement`` and splits its runtime along a critical path.

  Args:
    graph: the op graph (``N`` nodes, ``E`` edges).
    placement: ``[N]`` device per node (one placement).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds (default: the roofline).
    order, priority, schedule: the schedule, as for ``gplace.simulate``
      (default: the simulator's default schedule).
    bound_s: a proven lower bound to report when above
      ``gplace.lower_bound`` (e.g. ``gplace.optimize``'s, which the exact
      solver may have tightened).

  Returns:
    An :class:`Explanation`.

  Raises:
    PlacementError: ``placement`` is not one ``[N]`` placement, and what
      ``gplace.simulate`` raises for bad placements, topologies, costs or
      schedules.
  """
  shape = np.shape(placement)
  if len(shape) != 1:
    raise PlacementError(
        f"gplace.explain takes one placement, shape [{graph.n_nodes}], got "
        f"shape {list(shape)}; explain each row of a batch on its own.")
  result = simulate(graph, placement, topology, costs, order,
                    priority=priority, schedule=schedule,
                    return_schedule=True)
  placement = np.asarray(placement, np.int64)
  start = np.asarray(result.start_s, np.float64).reshape(-1)
  finish = np.asarray(result.finish_s, np.float64).reshape(-1)
  run_order = np.asarray(result.order, np.int64).reshape(-1)
  executed = graph.kind != NODE_INPUT
  start = np.where(executed, start, 0.0)
  finish = np.where(executed, finish, 0.0)
  group = np.asarray(topology.compute_group).reshape(-1)[placement]
  behind = _device_predecessor(run_order, group, executed)
  transfer = _edge_transfer_s(graph, topology, placement)
  by_dst = np.argsort(graph.edge_dst, kind="stable")
  pred_ptr = np.searchsorted(graph.edge_dst[by_dst],
                             np.arange(graph.n_nodes + 1))
  ready = finish[graph.edge_src] + transfer       # [E] arrival of each value

  def held_up_by(v: int) -> tuple[int, int, float]:
    """``(node, step kind, transfer s)`` that ``v`` waited for last, or
    ``(-1, ...)`` when nothing held it up."""
    edges = by_dst[pred_ptr[v]:pred_ptr[v + 1]]
    best, kind, moved, latest = -1, SAME_DEVICE, 0.0, 0.0
    if edges.size:
      e = int(edges[np.argmax(ready[edges])])
      if ready[e] > 0:
        best, latest, moved = int(graph.edge_src[e]), ready[e], transfer[e]
        kind = (TRANSFER if placement[best] != placement[v]
                else SAME_DEVICE)
    w = int(behind[v])
    if w >= 0 and finish[w] > latest:
      best, kind, moved = w, DEVICE_ORDER, 0.0
    return best, kind, moved

  ran = np.flatnonzero(executed)
  v = int(ran[np.argmax(finish[ran])]) if ran.size else 0
  path, kinds, moved_s = [v], [], []
  while start[v] > 0:
    u, kind, moved = held_up_by(v)
    if u < 0:
      break
    path.append(u)
    kinds.append(kind)
    moved_s.append(moved)
    v = u
  path = np.asarray(path[::-1], np.int64)
  kinds = np.asarray(kinds[::-1], np.int64)
  moved_s = np.asarray(moved_s[::-1], np.float64)
  gaps = np.maximum(start[path[1:]] - finish[path[:-1]], 0.0)
  transfers = np.minimum(moved_s, gaps)
  took = finish[path] - start[path]
  table = cost_table(graph, topology, costs)
  fastest = np.where(executed, table.min(1), 0.0)
  d = topology.n_devices
  busy = np.bincount(placement[executed], (finish - start)[executed], d)
  runtime = float(np.asarray(result.runtime_s).reshape(-1)[0])
  oom = bool(np.asarray(result.oom).reshape(-1)[0])
  blocked, blocked_s = (_blocked(graph, placement, topology, costs, order,
                                 priority, schedule, path, table, runtime)
                        if not oom else (np.zeros((0, 2), np.int64),
                                         np.zeros(0)))
  return Explanation(
      runtime_s=runtime,
      bound_s=max(lower_bound(graph, topology, costs),
                  float(bound_s or 0.0)),
      oom=oom,
      path=path, step_kind=kinds,
      start_s=float(start[path[0]]),
      compute_s=float(took.sum()),
      behind_s=float(took[:-1][kinds == DEVICE_ORDER].sum()),
      fastest_s=float(fastest[path].sum()),
      transfer_s=float(transfers.sum()),
      wait_s=float((gaps - transfers).sum()),
      device_ops=np.bincount(placement[executed], minlength=d),
      device_busy_s=busy,
      device_names=tuple(topology.device_names),
      schedule=_schedule_name(order, priority, schedule),
      blocked=blocked, blocked_runtime_s=blocked_s,
      node_names=tuple(str(name) for name in graph.names))


def _blocked(graph, placement, topology, costs, order, priority, schedule,
             path, table, runtime_s) -> tuple[np.ndarray, np.ndarray]:
  """``([B, 2] (op, device), [B] runtime_s)``: single moves of ``path``'s
  ops (``[P]``, first to last) that make the step faster in the same
  schedule but run out of memory, fastest first."""
  allowed = np.isfinite(table)
  if graph.allowed_devices is not None:
    allowed &= np.asarray(graph.allowed_devices, bool)
  colocated = (np.zeros(graph.n_nodes, bool) if graph.colocation is None
               else np.asarray(graph.colocation) >= 0)
  moves = [(v, d) for v in path[::-1].tolist()
           if graph.kind[v] != NODE_INPUT and not colocated[v]
           for d in range(topology.n_devices)
           if d != placement[v] and allowed[v, d]][:MAX_MOVES]
  if not moves:
    return np.zeros((0, 2), np.int64), np.zeros(0)
  rows = np.repeat(placement[None].astype(np.int32), len(moves), 0)
  ops, devices = np.asarray(moves, np.int64).T
  rows[np.arange(len(moves)), ops] = devices
  moved = simulate(graph, rows, topology, costs, order, priority=priority,
                   schedule=schedule)
  seconds = np.asarray(moved.runtime_s, np.float64)
  keep = np.flatnonzero(np.asarray(moved.oom, bool) & (seconds < runtime_s))
  keep = keep[np.argsort(seconds[keep], kind="stable")]
  return np.asarray(moves, np.int64)[keep].reshape(-1, 2), seconds[keep]


def _schedule_name(order, priority, schedule) -> str:
  if order is not None:
    return "given order"
  if priority is not None:
    return ("given priorities" if schedule is None
            else f"{schedule} schedule, given priorities")
  return ("default schedule" if schedule is None
          else f"{schedule} schedule")

