"""The CP-SAT model of placement + scheduling: integer data and constraints.

:func:`build_model` (on :func:`scale_problem` ticks): a Boolean ``x[v, d]``
per node and device (the graph's device constraints fixed), per op a start
and an optional interval per device, no overlap within a compute group, an
edge across devices delayed by its transfer, the makespan as objective.
Relaxed so that its optimum bounds ``gplace.simulate`` from below: no link
contention, times rounded down, memory as two necessary conditions
(``docs/design.md``, section 4).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from ortools.sat.python import cp_model

from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.sim.topology import Topology
from gplace.sim.problem import send_bytes, transfer_seconds

# Ticks per second are chosen so that the reference time (a lower bound of
# the makespan) spans this many ticks: rounding each duration down then
# costs at most (path length) / 2**20 of the bound.
TICKS_PER_REFERENCE = 2**20
_KIB = 1024


class ScaledProblem(NamedTuple):
  """Integer data of the model (host numpy).

  Attributes:
    tick_s: seconds per tick.
    duration: ``[N, D]`` int64 ticks, ``floor(costs / tick_s)``; 0 for
      ``NODE_INPUT`` nodes (not executed).
    transfer: ``[N, D, D]`` int64 ticks to send node ``u``'s output from
      device ``s`` to ``d`` (``floor``; 0 on the diagonal).
    horizon: int, an upper bound on the makespan of some schedule of every
      placement (all nodes one after another, each waiting for its inputs).
    executed: ``[N]`` bool, node is not a ``NODE_INPUT``.
    sink: ``[N]`` bool, executed node that feeds no executed node.
  """

  tick_s: float
  duration: np.ndarray
  transfer: np.ndarray
  horizon: int
  executed: np.ndarray
  sink: np.ndarray


class ModelVariables(NamedTuple):
  """Handles into a built :class:`cp_model.CpModel`.

  Attributes:
    on: ``[N][D]`` Boolean literals, node on device.
    start: ``[N]`` start of each node (an int for inputs: 0).
    end: ``[N]`` end of each node (an int for inputs: 0).
    makespan: the objective variable.
    send_start: ``[N][D]`` start of the transfer of each node's output to
      each device (an IntVar; None without ``links`` or consumers).
    send_on: ``{(u, s, d): literal}``, ``u``'s output goes over link
      ``(s, d)`` (only with ``links``).
    prefix_used: ``[(literal, i, d)]`` of the symmetry breaking: some node
      ``<= i`` is on ``d``.
  """

  on: list
  start: list
  end: list
  makespan: cp_model.IntVar
  send_start: list
  send_on: dict
  prefix_used: list


def scale_problem(graph: Graph, topology: Topology, costs: np.ndarray,
                  reference_s: float) -> ScaledProblem:
  """Rounds a cost table and the transfers down to integer ticks.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: ``[N, D]`` float seconds, validated.
    reference_s: a positive time scale, e.g. ``gplace.lower_bound``; a tick
      is ``reference_s / TICKS_PER_REFERENCE``.
  """
  executed = graph.kind != NODE_INPUT
  scale = max(float(reference_s), float(costs.max(initial=0.0)), 1e-12)
  tick_s = scale / TICKS_PER_REFERENCE
  # Nudge below exact multiples so float error never rounds a tick up.
  down = lambda seconds: np.floor(seconds / tick_s * (1.0 - 1e-12)).astype(
      np.int64)
  duration = np.where(executed[:, None], np.maximum(down(costs), 0), 0)
  seconds = transfer_seconds(graph, topology)
  has_consumer = np.zeros(graph.n_nodes, bool)
  has_consumer[graph.edge_src] = True
  feeds_executed = np.zeros(graph.n_nodes, bool)
  feeds_executed[graph.edge_src[executed[graph.edge_dst]]] = True
  transfer = np.where(has_consumer[:, None, None],
                      np.maximum(down(seconds), 0), 0)
  horizon = int(duration.max(1, initial=0).sum()
                + transfer.reshape(graph.n_nodes, -1).max(1, initial=0).sum()
                + 1)
  sink = executed & ~feeds_executed
  return ScaledProblem(tick_s, duration.astype(np.int64),
                       transfer.astype(np.int64), horizon, executed, sink)


def interchangeable_devices(topology: Topology, costs: np.ndarray,
                            allowed: np.ndarray | None = None
                            ) -> list[list[int]]:
  """Classes (of size >= 2) of devices that any placement may permute.

  Two devices are interchangeable when swapping them maps the topology onto
  itself: equal cost columns and memory, each alone in its compute group,
  and link matrices unchanged by the swap; with ``allowed`` (``[N, D]``,
  the graph's device constraints) also the same ops allowed on both. Swaps
  generate the permutations of a class, so a placement and its relabelling
  run equally fast.
  """
  d = topology.n_devices
  group = np.asarray(topology.compute_group)
  alone = np.array([np.sum(group == group[i]) == 1 for i in range(d)])
  memory = topology.memory_bytes
  bandwidth = np.array(topology.link_bandwidth)
  latency = np.array(topology.link_latency)
  np.fill_diagonal(bandwidth, np.inf)
  np.fill_diagonal(latency, 0.0)

  def swappable(a, b):
    if not (alone[a] and alone[b] and memory[a] == memory[b]
            and np.array_equal(costs[:, a], costs[:, b])):
      return False
    if allowed is not None and not np.array_equal(allowed[:, a],
                                                  allowed[:, b]):
      return False
    perm = np.arange(d)
    perm[[a, b]] = [b, a]
    return (np.array_equal(bandwidth[np.ix_(perm, perm)], bandwidth)
            and np.array_equal(latency[np.ix_(perm, perm)], latency))

  classes, seen = [], set()
  for a in range(d):
    if a in seen:
      continue
    members = [a] + [b for b in range(a + 1, d)
                     if b not in seen and swappable(a, b)]
    seen.update(members)
    if len(members) > 1:
      classes.append(members)
  return classes


def canonical_placement(placement: np.ndarray, classes) -> np.ndarray:
  """Relabels each class's devices by first use in node order, the form the
  model's symmetry breaking admits (same runtime: the classes are
  interchangeable)."""
  out = np.array(placement, np.int64)
  for members in classes:
    used = []
    for dev in out:
      if dev in members and dev not in used:
        used.append(int(dev))
    mapping = dict(zip(used, members[:len(used)]))
    for old, new in mapping.items():
      out[placement == old] = new
  return out


def _add_symmetry_breaking(model, on, classes, n):
  """Value precedence: node ``i`` may use the ``k``-th device of a class
  only if an earlier node uses the ``(k-1)``-th.

  Returns:
    ``[(literal, i, dev)]``: literal is true iff a node ``<= i`` is on
    ``dev``.
  """
  prefix_used = []
  for members in classes:
    used_before = [None] * len(members)    # OR of x[j, member] over j < i
    for i in range(n):
      for k, dev in enumerate(members):
        if k > 0:
          if used_before[k - 1] is None:
            model.add(on[i][dev] == 0)
          else:
            model.add_implication(on[i][dev], used_before[k - 1])
      if i + 1 < n:
        for k, dev in enumerate(members[:-1]):
          prev = used_before[k]
          now = model.new_bool_var("")
          if prev is None:
            model.add(now == on[i][dev])
          else:
            model.add_bool_or([prev, on[i][dev]]).only_enforce_if(now)
            model.add_implication(prev, now)
            model.add_implication(on[i][dev], now)
          used_before[k] = now
          prefix_used.append((now, i, dev))
  return prefix_used


def _add_device_constraints(model, graph, on) -> None:
  """The graph's device constraints: ``x[v, d] = 0`` where ``v`` does not
  allow ``d`` (``Graph.allowed_devices``), and the members of a co-location
  class on one device (``Graph.colocation``)."""
  if graph.allowed_devices is not None:
    for v, dev in zip(*np.nonzero(~np.asarray(graph.allowed_devices))):
      model.add(on[int(v)][int(dev)] == 0)
  if graph.colocation is not None:
    colocation = np.asarray(graph.colocation)
    for label in np.unique(colocation[colocation >= 0]):
      first, *rest = np.flatnonzero(colocation == label).tolist()
      for v in rest:
        for dev in range(len(on[v])):
          model.add(on[v][dev] == on[first][dev])


def _add_memory(model, graph, topology, on, scaled):
  """The two necessary memory conditions (``docs/design.md``, section 4)."""
  d = topology.n_devices
  kib = lambda b: np.floor_divide(np.asarray(b, np.int64), _KIB)
  capacity = [int(math.ceil(m / _KIB)) for m in topology.memory_bytes]
  out_kib = kib(graph.out_bytes)
  send_kib = kib(send_bytes(graph))
  is_input = graph.kind == NODE_INPUT
  ends_live = is_input | (graph.kind == NODE_OUTPUT)
  resident = {}                  # device -> IntVar, made when first needed

  def resident_on(dev):
    if dev not in resident:
      resident[dev] = model.new_int_var(0, total_resident, f"resident{dev}")
      model.add(resident[dev] == sum(
          int(out_kib[u]) * on[u][dev] for u in np.flatnonzero(is_input)
          if out_kib[u]))
    return resident[dev]

  total_resident = int(out_kib[is_input].sum())
  for dev in range(d):
    terms = [int(out_kib[u]) * on[u][dev]
             for u in np.flatnonzero(ends_live) if out_kib[u]]
    if int(out_kib[ends_live].sum()) > capacity[dev]:
      model.add(sum(terms) <= capacity[dev])
  src, dst = graph.edge_src, graph.edge_dst
  for v in np.flatnonzero(scaled.executed):
    preds = src[dst == v]
    op_preds = preds[~is_input[preds]]
    fixed = int(out_kib[v]) + int(np.minimum(out_kib, send_kib)[op_preds]
                                   .sum())
    param_preds = preds[is_input[preds]]
    most = total_resident + fixed + int(send_kib[param_preds].sum())
    for dev in range(d):
      if most <= capacity[dev]:
        continue
      remote = [int(send_kib[u]) * (1 - on[u][dev]) for u in param_preds
                if send_kib[u]]
      model.add(resident_on(dev) + fixed + sum(remote) <= capacity[dev]
                ).only_enforce_if(on[v][dev])


def _add_transfers(model, graph, topology, scaled, on, end, links):
  """Transfers as optional intervals, no overlap per link (``links``).

  ``u``'s output crosses link ``(s, d)`` iff ``u`` is on ``s`` and a
  consumer on ``d``; it starts at ``send_start[u][d] >= end[u]``. Links
  serve transfers in any order (the simulator: in producer order), which
  only relaxes the model.
  """
  n, d = graph.n_nodes, topology.n_devices
  send_start = [[None] * d for _ in range(n)]
  send_on = {}
  if not links or d == 1:
    return send_start, send_on
  consumers = [[] for _ in range(n)]
  for u, v in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    if scaled.executed[v]:
      consumers[u].append(v)
  link_intervals: dict = {}
  for u in range(n):
    if not consumers[u]:
      continue
    for dst_dev in range(d):
      begin = model.new_int_var(0, scaled.horizon, f"t{u}_{dst_dev}")
      model.add(begin >= end[u])
      send_start[u][dst_dev] = begin
      for s in range(d):
        if s == dst_dev:
          continue
        used = model.new_bool_var(f"y{u}_{s}_{dst_dev}")
        model.add_implication(used, on[u][s])
        model.add_bool_or([used.negated()]
                          + [on[w][dst_dev] for w in consumers[u]])
        for w in consumers[u]:
          model.add_bool_or([on[u][s].negated(), on[w][dst_dev].negated(),
                             used])
        send_on[(u, s, dst_dev)] = used
        link_intervals.setdefault((s, dst_dev), []).append(
            model.new_optional_fixed_size_interval_var(
                begin, int(scaled.transfer[u, s, dst_dev]), used,
                f"l{u}_{s}_{dst_dev}"))
  for intervals in link_intervals.values():
    if len(intervals) > 1:
      model.add_no_overlap(intervals)
  return send_start, send_on


def build_model(graph: Graph, topology: Topology, scaled: ScaledProblem,
                classes=(), memory: bool = True, links: bool = True,
                floor_ticks: int = 0
                ) -> tuple[cp_model.CpModel, ModelVariables]:
  """The CP-SAT model of the module docstring.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    scaled: the integer data from :func:`scale_problem`.
    classes: interchangeable device classes (symmetry breaking), e.g. from
      :func:`interchangeable_devices`.
    memory: add the memory conditions.
    links: model link contention (transfers as intervals, one at a time per
      link, in any order); without it links carry any number at once.
    floor_ticks: a known lower bound of the makespan in ticks (e.g.
      ``gplace.lower_bound / tick_s``, rounded down): the makespan starts
      there. The model's optimum then is ``max(its own, floor_ticks)``,
      still a bound of the simulator when ``floor_ticks`` is one.

  Returns:
    ``(model, variables)``; the objective (minimize the makespan) is set.
  """
  model = cp_model.CpModel()
  n, d = graph.n_nodes, topology.n_devices
  horizon = scaled.horizon
  on = [[model.new_bool_var(f"x{v}_{dev}") for dev in range(d)]
        for v in range(n)]
  for v in range(n):
    model.add_exactly_one(on[v])
  _add_device_constraints(model, graph, on)
  start, end = [0] * n, [0] * n
  groups = np.asarray(topology.compute_group)
  group_intervals = {int(g): [] for g in np.unique(groups)}
  for v in np.flatnonzero(scaled.executed):
    lengths = scaled.duration[v]
    start[v] = model.new_int_var(0, horizon, f"s{v}")
    end[v] = model.new_int_var(0, horizon, f"e{v}")
    model.add(end[v] == start[v] + sum(
        int(lengths[dev]) * on[v][dev] for dev in range(d) if lengths[dev]))
    for dev in range(d):
      group_intervals[int(groups[dev])].append(
          model.new_optional_fixed_size_interval_var(
              start[v], int(lengths[dev]), on[v][dev], f"i{v}_{dev}"))
  for intervals in group_intervals.values():
    if len(intervals) > 1:
      model.add_no_overlap(intervals)

  send_start, send_on = _add_transfers(model, graph, topology, scaled, on,
                                       end, links)
  for u, v in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    if not scaled.executed[v]:          # inputs are resident whatever feeds them
      continue
    if scaled.executed[u]:
      model.add(start[v] >= end[u])
    delay = scaled.transfer[u]                      # [D(src), D(dst)]
    for dst_dev in range(d):
      others = [s for s in range(d) if s != dst_dev]
      if not others:
        continue
      sent = send_start[u][dst_dev] if links else end[u]
      least = int(min(delay[s, dst_dev] for s in others))
      if least > 0 or links:
        model.add(start[v] >= sent + least).only_enforce_if(
            [on[v][dst_dev], on[u][dst_dev].negated()])
      for s in others:
        if delay[s, dst_dev] > least:
          model.add(start[v] >= sent + int(delay[s, dst_dev])
                    ).only_enforce_if([on[u][s], on[v][dst_dev]])

  makespan = model.new_int_var(min(int(floor_ticks), horizon), horizon,
                             "makespan")
  for v in np.flatnonzero(scaled.sink):
    model.add(makespan >= end[v])
  # Redundant: a group is busy for the sum of its nodes' durations.
  for g in np.unique(groups):
    members = np.flatnonzero(groups == g)
    load = [int(scaled.duration[v, dev]) * on[v][dev]
            for v in np.flatnonzero(scaled.executed) for dev in members
            if scaled.duration[v, dev]]
    if load:
      model.add(makespan >= sum(load))
  prefix_used = _add_symmetry_breaking(model, on, classes, n)
  if memory:
    _add_memory(model, graph, topology, on, scaled)
  model.minimize(makespan)
  return model, ModelVariables(on, start, end, makespan, send_start, send_on,
                               prefix_used)
