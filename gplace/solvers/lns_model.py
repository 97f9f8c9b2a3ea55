"""The CP-SAT model of one window of large-neighbourhood search.

:func:`solve_window` re-solves the placement of the freed ops and the order
of every op in a span of the incumbent's order, the rest fixed; it builds in
``O(span + boundary)`` (host numpy and OR-tools, never the whole graph).
:mod:`gplace.solvers.lns` is the search around it; the reasoning is in
``docs/design.md``, section 4.
"""

from __future__ import annotations

import heapq
import math
from typing import NamedTuple, Optional

import numpy as np
from ortools.sat.python import cp_model

from gplace.errors import SearchError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.sim.problem import send_bytes
from gplace.sim.topology import Topology
from gplace.solvers.lns_constraints import (add_edges, add_links,
                                            add_memory, add_memory_outside,
                                            tie_colocated,
                                            window_devices)
from gplace.solvers.model import scale_problem

_KIB = 1024
#: CP-SAT's parameters for a window, on top of its limits, one worker and
#: the seed: small models re-solved often, where presolve and the LP
#: relaxation cost more than they save (on a 1,103-op graph, 20 s: 116
#: windows and -4.2% with both off, 77 and -1.2% with both on), and so do
#: probing, symmetry detection and inprocessing: without them more windows
#: are proven optimal within their limit, so they grow, and LNS from HEFT
#: ends faster (1,103-op gnmt2, 40 s, seeds 0-2, each seed faster: 7.135
#: against 7.199 ms mean on 1 CPU + 2 acc., 6.070 against 6.158 on 4 acc.;
#: experiments/results/lns_window/params_2026-12-06).
WINDOW_PARAMETERS = {
    "cp_model_presolve": False,
    "linearization_level": 0,
    "cp_model_probing_level": 0,
    "symmetry_level": 0,
    "use_sat_inprocessing": False,
}

#: Whether a window's transfers queue on their links
#: (``lns_constraints.add_links``) by default. Without, a window is
#: smaller: the same recorded windows (experiments/window_replay.py, late
#: in a 40 s or 10 s run) saved 1.37-1.76x as much simulated time per
#: second of model and solve on gnmt2 small (1 CPU + 2 / 4 acc.), resnet50
#: tiny (4 acc.) and the transformer blocks and layer (4 / 8 H100s), the
#: simulator confirming as many of their candidates (experiments/results/
#: lns_window/replay_*_2026-12-07). But in a live run the windows then grow
#: (their size adapts to CP-SAT's time) and LNS solves no more of them:
#: 897-922 against 934 in 30 s on gnmt2 small, 1 CPU + 2 acc., and
#: gplace.optimize at 60 s ended no faster there (seeds 0-4, mean 7.132
#: against 7.119 ms). Kept.
WINDOW_LINKS = True


class Static(NamedTuple):
  """Problem data every window shares (host numpy, built once).

  Attributes:
    tick_s: seconds per tick of ``duration`` and ``transfer``.
    duration: ``[N, D]`` int64 ticks (0 for inputs).
    transfer: ``[N, D, D]`` int64 ticks to send a node's output.
    executed: ``[N]`` bool, not an input.
    device_group: ``[D]`` int64 compute group of each device (0..G-1).
    allowed: ``[N, D]`` bool, devices each node may use.
    colocation: ``[N]`` int64 class (-1: none).
    succ_ptr, succ: CSR of consumers (``[N + 1]``, ``[E]``).
    succ_src: ``[E]`` the producer of each entry of ``succ``.
    pred_ptr, pred: CSR of producers.
    out_kib, send_kib: ``[N]`` int64 KiB of outputs and of one transfer.
    is_input, ends_live: ``[N]`` bool; inputs and outputs live to the end.
    capacity_kib: ``[D]`` int64 device memory.
    max_transfer: the longest transfer in ticks.
  """

  tick_s: float
  duration: np.ndarray
  transfer: np.ndarray
  executed: np.ndarray
  device_group: np.ndarray
  allowed: np.ndarray
  colocation: np.ndarray
  succ_ptr: np.ndarray
  succ: np.ndarray
  succ_src: np.ndarray
  pred_ptr: np.ndarray
  pred: np.ndarray
  out_kib: np.ndarray
  send_kib: np.ndarray
  is_input: np.ndarray
  ends_live: np.ndarray
  capacity_kib: np.ndarray
  max_transfer: int


def make_static(graph: Graph, topology: Topology, costs: np.ndarray,
                reference_s: float) -> Static:
  """The shared data, with ticks of ``reference_s / 2**20``; ``O(N D^2)``."""
  scaled = scale_problem(graph, topology, costs, reference_s)
  n, d = graph.n_nodes, topology.n_devices
  _, device_group = np.unique(np.asarray(topology.compute_group),
                              return_inverse=True)
  by_dst = np.argsort(graph.edge_dst, kind="stable")
  allowed = (np.ones((n, d), bool) if graph.allowed_devices is None
             else np.asarray(graph.allowed_devices, bool))
  colocation = (np.full(n, -1, np.int64) if graph.colocation is None
                else np.asarray(graph.colocation, np.int64))
  is_input = graph.kind == NODE_INPUT
  succ_ptr = np.searchsorted(graph.edge_src, np.arange(n + 1))
  return Static(
      tick_s=scaled.tick_s, duration=scaled.duration,
      transfer=scaled.transfer, executed=scaled.executed,
      device_group=device_group.reshape(-1).astype(np.int64),
      allowed=allowed, colocation=colocation,
      succ_ptr=succ_ptr, succ=np.asarray(graph.edge_dst, np.int64),
      succ_src=np.repeat(np.arange(n, dtype=np.int64), np.diff(succ_ptr)),
      pred_ptr=np.searchsorted(graph.edge_dst[by_dst], np.arange(n + 1)),
      pred=np.asarray(graph.edge_src, np.int64)[by_dst],
      out_kib=np.asarray(graph.out_bytes, np.int64) // _KIB,
      send_kib=send_bytes(graph) // _KIB, is_input=is_input,
      ends_live=is_input | (graph.kind == NODE_OUTPUT),
      capacity_kib=np.array([math.ceil(m / _KIB)
                             for m in topology.memory_bytes], np.int64),
      max_transfer=int(scaled.transfer.max(initial=0)))


class Context(NamedTuple):
  """The incumbent around one window (ticks).

  Attributes:
    placement: ``[N]`` int device per node.
    order: ``[N]`` int the incumbent's op order.
    position: ``[N]`` int position of each node in ``order``.
    finish: ``[N]`` int64 finish ticks, valid before the span.
    tail: ``[N]`` int64 ticks from a node's start to the end along the
      incumbent's precedences (data and device order), valid after it.
    lo, hi: the span, positions ``lo..hi`` of ``order`` (inclusive).
    free: node ids whose device is freed (inside the span).
    live: ``[D, N]`` int64 KiB live on each device at each position of
      ``order`` (:func:`~gplace.solvers.lns_constraints.live_kib`), or None
      where memory is not tight (then copies outside the span go
      unchecked).
  """

  placement: np.ndarray
  order: np.ndarray
  position: np.ndarray
  finish: np.ndarray
  tail: np.ndarray
  lo: int
  hi: int
  free: np.ndarray
  live: Optional[np.ndarray] = None


class WindowSolution(NamedTuple):
  """What CP-SAT returned for one window.

  Attributes:
    status: CP-SAT's status name.
    placement: ``[N]`` int32 incumbent with the freed ops moved, or None.
    order: ``[N]`` int32 incumbent order with the span reordered, or None.
    objective_ticks: the window's makespan estimate (NaN without a
      solution); ``hint_ticks``: the incumbent's.
    deterministic_s: CP-SAT's deterministic time spent.
  """

  status: str
  placement: Optional[np.ndarray]
  order: Optional[np.ndarray]
  objective_ticks: float
  hint_ticks: float
  deterministic_s: float


def _boundary(static: Static, ctx: Context, span: np.ndarray):
  """Per group, the last finish before the span and the tail of the first
  op after it; and the largest end of paths that skip the span.

  Returns:
    ``(free_at [D], tail_after [D], outside)``: ticks per device (of its
    group) and the constant ``outside``.
  """
  groups = int(static.device_group.max()) + 1
  before, after = ctx.order[:ctx.lo], ctx.order[ctx.hi + 1:]
  free_at = np.zeros(groups, np.int64)
  tail_after = np.zeros(groups, np.int64)
  ops = before[static.executed[before]]
  op_group = static.device_group[ctx.placement[ops]]
  for g in range(groups):
    mine = ops[op_group == g]
    if mine.size:
      free_at[g] = ctx.finish[mine[-1]]
  ops = after[static.executed[after]]
  op_group = static.device_group[ctx.placement[ops]]
  for g in range(groups):
    mine = ops[op_group == g]
    if mine.size:
      tail_after[g] = ctx.tail[mine[0]]
  outside = int((free_at + tail_after).max(initial=0))
  if ctx.lo:
    outside = max(outside, int(ctx.finish[before].max()))
  # Edges from before the span to after it (vectorized over the graph's
  # edges: numpy, not the model).
  src, dst = static.succ_src, static.succ
  skip = ((ctx.position[src] < ctx.lo) & (ctx.position[dst] > ctx.hi)
          & static.executed[dst])
  if skip.any():
    u, w = src[skip], dst[skip]
    base = np.where(static.executed[u], ctx.finish[u], 0)
    reach = base + static.transfer[u, ctx.placement[u], ctx.placement[w]] \
        + ctx.tail[w]
    outside = max(outside, int(reach.max()))
  return (free_at[static.device_group], tail_after[static.device_group],
          outside)


class _Model(cp_model.CpModel):
  """A CP-SAT model without OR-tools' camelCase method aliases, which it
  otherwise makes per instance (about 1 ms; LNS builds thousands)."""

  def _add_pre_pep8_methods(self) -> None:
    pass


def _add_hints(model: cp_model.CpModel, hints: list) -> None:
  """``model.add_hint(var, value)`` for each pair (non-negated variables),
  in one call to the model's proto."""
  proto = model.model_proto.solution_hint
  proto.vars.extend([var.index for var, _ in hints])
  proto.values.extend([int(value) for _, value in hints])


def solve_window(static: Static, ctx: Context, *, limit_s: float,
                 deterministic_s: float, seed: int,
                 memory: bool = True,
                 links: Optional[bool] = None) -> WindowSolution:
  """Re-solves the window: the freed ops' devices and the span's order.

  The model: the freed ops' devices (their allowed ones; a co-location
  class with members outside the window stays), a start and end per op of
  the span, the span's fixed ops in their incumbent order per compute
  group, no overlap per group, data edges delayed by transfers (links
  uncontended), the span after everything before it (its finish times
  fixed), and the objective ``max(end + tail)`` over edges and device
  orders that leave the span (and paths that skip it): the incumbent's
  makespan when the window keeps it. Memory: the two necessary conditions
  of :mod:`gplace.solvers.model` for the span's ops and, with
  ``ctx.live``, the copies the window adds outside the span
  (:func:`~gplace.solvers.lns_constraints.add_memory_outside`). The
  incumbent is the hint, a feasible solution. With ``links`` (default
  :data:`WINDOW_LINKS`), each transfer out of the span is also an interval
  on its link, one at a time; without, it only delays its consumer (a
  looser relaxation, smaller and faster to solve).
  """
  if links is None:
    links = WINDOW_LINKS
  span = ctx.order[ctx.lo:ctx.hi + 1]
  freed = np.zeros(ctx.position.size, bool)
  freed[ctx.free] = True
  free_at, tail_after, outside = _boundary(static, ctx, span)
  model = _Model()
  on, devices = {}, {}
  for v in span.tolist():
    devices[v] = window_devices(static, ctx, freed, v)
    if freed[v] and len(devices[v]) > 1:
      on[v] = {d: model.new_bool_var("") for d in devices[v]}
      model.add_exactly_one(on[v].values())
  tie_colocated(model, static, span, on)

  def choose(v, values):
    """``values[device of v]`` as a linear expression or an int."""
    if v in on:
      return sum(int(values[d]) * on[v][d] for d in on[v] if values[d])
    return int(values[devices[v][0]])

  d_count = static.duration.shape[1]
  span_ticks = sum(int(static.duration[v].max())
                   + d_count * int(static.transfer[v].max())
                   for v in span.tolist())
  horizon = int(outside + free_at.max(initial=0) + span_ticks
                + static.max_transfer + 1)
  hint, sent, hint_ticks = _hint(static, ctx, span, free_at, tail_after,
                                 outside)
  start, end, intervals = {}, {}, {}
  for v in span[static.executed[span]].tolist():
    start[v] = model.new_int_var(0, horizon, "")
    end[v] = model.new_int_var(0, horizon, "")
    model.add(end[v] == start[v] + choose(v, static.duration[v]))
    model.add(start[v] >= choose(v, free_at))
    for d in devices[v]:
      g = int(static.device_group[d])
      size = int(static.duration[v, d])
      intervals.setdefault(g, []).append(
          model.new_optional_fixed_size_interval_var(start[v], size,
                                                     on[v][d], "")
          if v in on else
          model.new_fixed_size_interval_var(start[v], size, ""))
  for group in intervals.values():
    if len(group) > 1:
      model.add_no_overlap(group)
  last_fixed = {}                        # group -> last fixed op so far
  for v in span.tolist():
    if v in start and v not in on:
      g = int(static.device_group[devices[v][0]])
      if g in last_fixed:
        model.add(start[v] >= end[last_fixed[g]])
      last_fixed[g] = v
  objective = model.new_int_var(outside, max(hint_ticks, 2 * horizon) + 1,
                              "makespan")
  for v in span.tolist():
    add_edges(model, static, ctx, v, on, devices, start, end, choose,
               objective)
    if v in end:
      model.add(objective >= end[v] + choose(v, tail_after))
  if memory:
    add_memory(model, static, ctx, span, freed, on, devices)
    add_memory_outside(model, static, ctx, on)
  hints = [(literal, ctx.placement[v] == d)
           for v, literals in on.items() for d, literal in literals.items()]
  for v in start:
    hints.append((start[v], hint[v]))
    hints.append((end[v], hint[v] + static.duration[v, ctx.placement[v]]))
  sends = (add_links(model, static, ctx, span, on, devices, start, end,
                      objective, horizon) if links else {})
  for (u, d), (begin, used) in sends.items():
    hints.append((begin, sent.get((u, d), int(hint.get(u, 0) + (
        static.duration[u, ctx.placement[u]] if u in hint else 0)))))
    for s, literal in used.items():
      if literal is not True and not (u in on and literal is on[u][s]):
        hints.append((literal, ctx.placement[u] == s and (u, d) in sent))
  hints.append((objective, hint_ticks))
  _add_hints(model, hints)
  model.minimize(objective)
  solver = cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = max(float(limit_s), 1e-3)
  solver.parameters.max_deterministic_time = max(float(deterministic_s), 1e-3)
  solver.parameters.num_workers = 1      # reproducible for a seed
  solver.parameters.random_seed = int(seed)
  for name, value in WINDOW_PARAMETERS.items():
    setattr(solver.parameters, name, value)
  status = solver.status_name(solver.solve(model))
  if status == "MODEL_INVALID":
    raise SearchError(
        "gplace built an LNS window model that OR-tools rejects ("
        f"{model.validate()}); please report this with the graph.")
  if status not in ("OPTIMAL", "FEASIBLE"):
    return WindowSolution(status, None, None, math.nan, float(hint_ticks),
                          solver.deterministic_time)
  placement = np.array(ctx.placement, np.int32)
  for v, literals in on.items():
    placement[v] = next(d for d, lit in literals.items()
                        if solver.boolean_value(lit))
  keys = {v: ((solver.value(start[v]), solver.value(end[v])) if v in start
              else (-1, -1)) for v in span.tolist()}
  order = np.array(ctx.order, np.int32)
  order[ctx.lo:ctx.hi + 1] = _topological(static, ctx, span, keys)
  return WindowSolution(status, placement, order, solver.objective_value,
                        float(hint_ticks), solver.deterministic_time)


def _hint(static, ctx, span, free_at, tail_after, outside):
  """The span in the incumbent's devices and order, each op as early as it
  can start, links serving transfers in producer order: a feasible
  solution of the model.

  Returns:
    ``(start, sent, objective)``: start ticks per op, ``{(u, d): tick}``
    transfer starts, and the objective's value.
  """
  group_free, link_free, ready = {}, {}, {}
  start, sent = {}, {}
  best = int(outside)
  for v in span.tolist():
    here = int(ctx.placement[v])
    finish = 0
    if static.executed[v]:
      g = int(static.device_group[here])
      begin = max(group_free.get(g, int(free_at[here])), ready.get(v, 0))
      for u in static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]].tolist():
        if ctx.position[u] < ctx.lo:
          base = int(ctx.finish[u]) if static.executed[u] else 0
          begin = max(begin, base + int(static.transfer[u, ctx.placement[u],
                                                        here]))
      start[v] = begin
      finish = begin + int(static.duration[v, here])
      group_free[g] = finish
      best = max(best, finish + int(tail_after[here]))
    arrival = {here: finish}
    for w in static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]].tolist():
      if not static.executed[w]:
        continue
      there = int(ctx.placement[w])
      if there not in arrival:
        begin = max(finish, link_free.get((here, there), 0))
        sent[(v, there)] = begin
        arrival[there] = begin + int(static.transfer[v, here, there])
        link_free[(here, there)] = arrival[there]
      if ctx.position[w] <= ctx.hi:
        ready[w] = max(ready.get(w, 0), arrival[there])
      else:
        best = max(best, arrival[there] + int(ctx.tail[w]))
  return start, sent, best


def _topological(static, ctx, span, keys) -> np.ndarray:
  """The span's nodes by ``(start, end, incumbent position)``, repaired
  into a topological order (a node never before its producers)."""
  inside = set(span.tolist())
  missing = {}
  for v in span.tolist():
    preds = static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]].tolist()
    missing[v] = sum(u in inside for u in preds)
  heap = [(keys[v], int(ctx.position[v]), v) for v in span.tolist()
          if missing[v] == 0]
  heapq.heapify(heap)
  out = []
  while heap:
    _, _, v = heapq.heappop(heap)
    out.append(v)
    for w in static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]].tolist():
      if w in inside:
        missing[w] -= 1
        if missing[w] == 0:
          heapq.heappush(heap, (keys[w], int(ctx.position[w]), w))
  return np.asarray(out, np.int32)
