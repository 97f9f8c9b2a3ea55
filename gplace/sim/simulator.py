"""Simulated runtime and memory of placements: the RL reward.

:func:`simulate` ``(graph, placements [K, N], topology, costs=None,
order=None, *, priority=None, schedule=None, fusion=None) -> SimResult``
validates on the host, reuses the built problem and runs the schedule
(default ``"best"``; ``fusion``: ``docs/design.md#fusion``); inside ``jit``
call :func:`simulate_problem` or
:func:`gplace.sim.dispatch.simulate_dispatch`. The model:
``docs/design.md#the-simulators-model``.
"""

from __future__ import annotations

from typing import Optional

import jax
import numpy as np

from gplace.errors import PlacementError, ScheduleError, TopologyError
from gplace.graphs.graph import Graph, check_graph
from gplace.graphs.placement import check_placements, is_traced
from gplace.sim import fusion as sim_fusion
from gplace.sim import native, runner
from gplace.sim.cache import cached_problem, pinned
from gplace.sim.kernel import COMPILER_OPTIONS, one_kernel_loops
from gplace.sim.problem import (DEFAULT_WIDTH, SimProblem, SimResult,
                                check_order, check_orders,
                                flag_constraint_violations,
                                make_problem, send_bytes)
from gplace.sim.priority import (check_priority, order_priority,
                                 priority_order)
from gplace.sim.scan import simulate_problem
from gplace.sim.topology import Topology, check_topology, validate_costs

__all__ = ["COMPILER_OPTIONS", "DEFAULT_WIDTH", "SCHEDULES", "SimProblem",
           "SimResult",
           "check_order", "make_problem", "one_kernel_loops",
           "send_bytes",
           "simulate", "simulate_problem"]


def _check_topology(topology) -> None:
  """Raises TopologyError unless ``topology`` is a Topology with devices."""
  check_topology(topology, "gplace.simulate")
  if topology.n_devices < 1:
    raise TopologyError("The topology has no devices; placements need at "
                        "least one.")


_IN_JIT = (
    "gplace.simulate validates its arguments on the host and cannot run "
    "inside jax.jit, vmap or grad. Build the problem outside and call the "
    "jittable simulator inside: problem = gplace.sim.make_problem(graph, "
    "topology, costs) then gplace.sim.simulate_problem(problem, placements) "
    "(a shared order), or gplace.sim.make_dispatch_problem(...) then "
    "gplace.sim.simulate_dispatch(problem, placements, priority, "
    "dynamic=...) (per-placement schedules).")


def _check_arguments(graph, placements, topology, costs, order, priority,
                     return_schedule) -> None:
  """Type checks of :func:`simulate`'s arguments, before any conversion.

  Raises:
    GraphError: ``graph`` is not a Graph.
    PlacementError: ``graph`` has no nodes, or ``placements`` is traced
      (``simulate`` called inside ``jax.jit``).
    TopologyError: ``topology`` is not a Topology, or ``costs`` is traced.
    ScheduleError: ``order`` or ``priority`` is traced, or
      ``return_schedule`` is not a bool.
  """
  check_graph(graph, "gplace.simulate")
  _check_topology(topology)
  if graph.n_nodes == 0:
    raise PlacementError(
        f"graph {graph.name!r} has no nodes; there is nothing to simulate. "
        "Capture a function that computes something "
        "(gplace.capture(fn, *args)).")
  for argument, value, error in (("placements", placements, PlacementError),
                                 ("costs", costs, TopologyError),
                                 ("order", order, ScheduleError),
                                 ("priority", priority, ScheduleError)):
    if is_traced(value):
      raise error(f"{argument} is a traced JAX value. {_IN_JIT}")
  if not isinstance(return_schedule, (bool, np.bool_)):
    raise ScheduleError(f"return_schedule must be True or False, got "
                        f"{type(return_schedule).__name__}.")


SCHEDULES = ("static", "dynamic", "planned", "best")

#: What ``schedule=None`` runs when no order is given.
DEFAULT_SCHEDULE = "best"

# The schedules that pick each placement's order themselves.
_PER_PLACEMENT = ("dynamic", "planned", "best")


def simulate(graph: Graph, placements, topology: Topology, costs=None,
             order=None, *, priority=None, schedule: str | None = None,
             return_schedule: bool = False, fusion=None) -> SimResult:
  """Simulated runtime and memory of placements of ``graph`` on ``topology``.

  Validates everything on the host, builds the problem (once per graph
  object, topology object and content of ``costs`` and ``order``: repeated
  calls reuse it, see :mod:`gplace.sim.cache`) and runs a cached jitted
  simulation. Inside a jitted training step, call
  :func:`simulate_problem` (shared order) or
  :func:`gplace.sim.dispatch.simulate_dispatch` directly.

  The schedule (in which order each compute group runs its nodes):

  * default (``schedule=None``): ``order`` if one is given, else
    ``"best"``.
  * ``schedule="dynamic"``: list scheduling as an asynchronous runtime does
    it: a free compute group runs its arrived op of highest ``priority``
    (default: the critical path, :func:`gplace.sim.priority.bottom_level`),
    or, if none has arrived, the first to arrive. Each placement gets its
    own schedule. See :mod:`gplace.sim.dispatch`.
  * ``schedule="planned"``: an ahead-of-time plan: ops in decreasing
    ``priority`` (default: the critical path), each booked into the first
    idle gap of its device that holds it (HEFT's scheduling phase on the
    given placement; it may keep a device idle for a critical op). See
    :mod:`gplace.sim.planned`.
  * ``schedule="best"``: both, and per placement the faster (one that fits
    in memory first, then the faster, also when neither fits; ties, to
    within ``gplace.sim.planned.BEST_TIE``: dynamic). What gplace reports a
    placement's runtime as, and what its executor runs.
  * ``schedule="static"``: the priority order ``order`` (``[N]``, shared by
    all placements, or ``[K, N]``, one per placement); else the
    priority-respecting topological order of ``priority`` (``[N]`` or
    ``[K, N]``, larger first); else node-id order (the fastest to simulate,
    and what a runtime that dispatches in program order does).

  A shared order runs the fast scan of :mod:`gplace.sim.scan` (one placement
  in an order runs on the host scheduler below instead, the same schedule
  without building a scan problem for the order); per-placement
  schedules run the list scheduler of :mod:`gplace.sim.dispatch`, here as
  compiled host code (:mod:`gplace.sim.native`, bit-identical schedules,
  parts of the batch on all cores; ``GPLACE_NATIVE=0`` runs the jitted
  one instead: ``O(W + out-degree)`` per node and placement with a 64-slot
  candidate buffer, or ``O(log N + out-degree)`` with rank trees where more
  candidates wait at once). Either is several times slower than the scan
  on CPU; see ``experiments/bench_simulator.py``.

  Args:
    graph: the op graph (``N`` nodes).
    placements: ``[K, N]`` or ``[N]`` int device index per node.
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds per node and device.
    order: optional ``[N]`` or ``[K, N]`` topological priority order.
    priority: optional ``[N]`` or ``[K, N]`` float priorities.
    schedule: ``None`` (default), ``"static"``, ``"dynamic"``,
      ``"planned"`` or ``"best"``.
    return_schedule: also return per-node ``start_s`` / ``finish_s`` and
      the dispatch ``order`` (pass it back as ``order=`` to reproduce the
      result, or to ``gplace.place(..., schedule=)`` to execute it).
    fusion: optional ``[N]`` int fusion group labels
      (:mod:`gplace.graphs.fusion`): each group runs as one kernel, one
      node of the simulated graph (its members share start and finish
      times, and sit together in ``order``); default: every op alone.

  Returns:
    :class:`SimResult`; fields have no ``K`` axis if ``placements`` is 1-D.

  Raises:
    GraphError: ``graph`` is not a :class:`~gplace.Graph`.
    PlacementError: bad placements, an empty graph, or traced placements
      (``simulate`` called inside ``jax.jit``; the message says what to
      call there instead).
    ScheduleError: a bad ``order``, ``priority`` or ``schedule``, or both
      an order and a priority (or an order with a schedule that picks its
      own: ``"dynamic"``, ``"planned"``, ``"best"``).
    TopologyError: bad topology or cost table, or costs, transfers and
      host costs that could add up past float32 (1e38 s).
    FusionError: a bad fusion decision, or a fused group that a placement
      splits across devices.
  """
  _check_arguments(graph, placements, topology, costs, order, priority,
                   return_schedule)
  array = check_placements(placements, graph, topology.n_devices,
                           device_names=topology.device_names)
  single = np.ndim(placements) == 1
  costs = check_time_bound(graph, topology, costs)   # hashed once a call
  if schedule is None:
    schedule = "static" if order is not None else DEFAULT_SCHEDULE
  order, priority = _check_schedule(graph, topology, costs, array.shape[0],
                                    order, priority, schedule)
  if fusion is not None:
    return _simulate_fused(graph, array, topology, costs, order, priority,
                           schedule, return_schedule, fusion, single)
  if order is not None and order.ndim == 2:
    priority = order_priority(order)
    order = None
  if priority is not None and priority.ndim == 1 and schedule == "static":
    order, priority = priority_order(priority, graph), None
  if schedule in _PER_PLACEMENT:
    result = runner.per_placement(graph, topology, costs, array, priority,
                                  schedule)
    if not return_schedule:
      result = result._replace(start_s=None, finish_s=None, order=None)
  elif priority is None and not topology.has_pipelined_links and not (
      order is not None and array.shape[0] == 1 and native.available()):
    problem = cached_problem(make_problem, graph, topology, costs=costs,
                             order=order)
    result = runner.scan_in_parts(problem, array, return_schedule)
    ran = np.broadcast_to(np.asarray(
        np.arange(graph.n_nodes) if order is None else order, np.int32),
                          array.shape)
    result = runner.add_host_work(graph, topology, array, result, ran)
    if return_schedule:                 # the priority order it ran
      result = result._replace(order=ran.copy())
  else:
    # Pipelined links, or one placement in an order of its own: the host
    # scheduler runs the order as priorities (the same schedule, tested;
    # a scan would first build a problem for the order: 10x longer for a
    # 1,103-op graph).
    result = _host_schedules(graph, topology, costs, array, order,
                             priority)
    if not return_schedule:
      result = result._replace(start_s=None, finish_s=None, order=None)
  # Device constraints (gplace.graphs.constraints): broken ones count as
  # infeasible, like OOM.
  result = flag_constraint_violations(graph, array, result)
  if single:
    result = jax.tree_util.tree_map(lambda x: x[0], result)
  return result



def _host_schedules(graph, topology, costs, array, order,
                    priority) -> SimResult:
  """``array``'s rows run by the host scheduler in ``order`` (or by
  ``priority``), with the executor's host work."""
  ranks = None
  if priority is None:
    order = np.arange(graph.n_nodes) if order is None else order
    priority = order_priority(order)
    # priority_ranks of that priority, without sorting: the order itself
    position = np.empty(order.size, np.int32)
    position[order] = np.arange(order.size, dtype=np.int32)
    ranks = (position[None], np.asarray(order, np.int32)[None])
  result = runner.simulate_schedules(graph, topology, costs, array,
                                     priority, dynamic=False, ranks=ranks)
  return runner.add_host_work(graph, topology, array, result, result.order)


def simulate_in_order(graph: Graph, placement: np.ndarray,
                      topology: Topology, costs: np.ndarray,
                      order: np.ndarray) -> SimResult:
  """``simulate(graph, placement, topology, costs, order=order,
  return_schedule=True)`` of one placement, without checking the
  arguments again: for a search that checked its problem once and scores
  many candidates of it (placements it built within the allowed devices,
  topological orders). Same result, tested.

  Args:
    graph: the op graph (``N`` nodes).
    placement: ``[N]`` int device per node.
    topology: the devices.
    costs: ``[N, D]`` float64 seconds (``cost_table``; keep it unchanged:
      ``gplace.sim.cache.freeze`` saves hashing it on every call).
    order: ``[N]`` topological op order.
  """
  if not native.available():  # the scan would build a problem per order
    return simulate(graph, placement, topology, costs, order=order,
                    return_schedule=True)
  array = np.asarray(placement, np.int32)[None]
  result = _host_schedules(graph, topology, costs, array,
                           np.asarray(order, np.int32), None)
  result = flag_constraint_violations(graph, array, result)
  return jax.tree_util.tree_map(lambda x: x[0], result)


def _simulate_fused(graph, placements, topology, costs, order, priority,
                    schedule, return_schedule, fusion, single) -> SimResult:
  """:func:`simulate` of the contracted graph of ``fusion``, with times and
  the order mapped back to the nodes (``docs/design.md#fusion``)."""
  fused = sim_fusion.contract(graph, fusion)
  grouped = sim_fusion.to_groups(fused, graph, topology, placements, costs,
                                 order, priority)
  result = simulate(fused.graph, grouped.placements, topology,
                    None if costs is None else grouped.costs,
                    grouped.order, priority=grouped.priority,
                    schedule=schedule, return_schedule=True)
  extra = sim_fusion.launch_correction(fused, topology, grouped.placements,
                                       result.order)
  if extra is not None:      # the executor launches one cluster per group
    result = result._replace(runtime_s=(
        np.asarray(result.runtime_s, np.float64) + extra).astype(np.float32))
  if not return_schedule:
    result = result._replace(start_s=None, finish_s=None, order=None)
  result = result._replace(
      start_s=sim_fusion.expand_times(fused, result.start_s),
      finish_s=sim_fusion.expand_times(fused, result.finish_s),
      order=sim_fusion.expand_schedule(fused, result.order))
  result = flag_constraint_violations(graph, placements, result)
  if single:
    result = jax.tree_util.tree_map(lambda x: x[0], result)
  return result


# Times the float32 simulators may reach: well inside float32 (3.4e38).
_MAX_TIME_S = 1e38


def _time_bound_s(graph: Graph, topology: Topology, costs=None) -> tuple:
  """``(bound_s, what)``: no simulated time of any placement and schedule
  exceeds ``bound_s``, every op cost, transfer and host cost taken once at
  its largest (a schedule never idles while nothing runs, so a finish time
  is a sum of some of them); ``what`` names the largest term, for
  messages. Host-side float64."""
  table = (topology.op_costs(graph) if costs is None
           else validate_costs(costs, graph, topology))
  d = topology.n_devices
  node, device = np.unravel_index(int(np.argmax(table)), table.shape)
  terms = {f"op cost {table[node, device]:.3g} s (node {node}, "
           f"{graph.names[node]}, on {topology.device_names[device]})":
           float(table.max(axis=1).sum())}
  if d > 1 and graph.n_edges:
    sent = np.zeros(graph.n_nodes)
    np.maximum.at(sent, graph.edge_src, graph.edge_bytes)
    off = ~np.eye(d, dtype=bool)
    latency = float(topology.link_latency[off].max())
    inverse_bandwidth = float((1.0 / topology.link_bandwidth[off]).max())
    longest = latency + sent * inverse_bandwidth
    terms[f"transfer {longest.max():.3g} s (the links' latency and "
          "bandwidth)"] = float((d - 1) * longest.sum())
  host = max(max(dev.cluster_launch_s for dev in topology.devices),
             max(dev.copy_issue_s for dev in topology.devices))
  terms[f"host cost {host:.3g} s per cluster or copy"] = (
      host * graph.n_nodes * d)
  with np.errstate(over="ignore"):
    bound = float(np.sum(list(terms.values())))
  return bound, max(terms, key=terms.get)


def check_time_bound(graph, topology, costs) -> Optional[np.ndarray]:
  """Raises TopologyError if simulated times could pass float32: they
  would come out infinite, or as garbage (a runtime of 0). (Also what
  :func:`gplace.lower_bound` refuses, so that it never bounds a runtime
  that :func:`simulate` would refuse.)

  Returns:
    ``costs`` validated (``[N, D]`` float64) and frozen
    (:func:`gplace.sim.cache.pinned`: hashed once however many problems
    the caller looks up with it), or None for None.
  """
  if costs is not None:   # checked before it is hashed for the cache
    costs = pinned(validate_costs(costs, graph, topology))
  bound, what = cached_problem(_time_bound_s, graph, topology, costs=costs)
  if not bound < _MAX_TIME_S:
    raise TopologyError(
        f"The simulated times of graph {graph.name!r} on topology "
        f"{topology.name!r} could reach {bound:.3g} s, past what the "
        f"simulator's float32 holds (up to {_MAX_TIME_S:.0e} s); the "
        f"largest term is the {what}. Fix the graph's flops and "
        "bytes_accessed, the cost table, or the topology to real values.")
  return costs


def _check_schedule(graph, topology, costs, n_samples, order, priority,
                    schedule):
  """Validated ``(order, priority)``: int64 order(s) or None, float32
  priorities or None (the default critical path for ``"dynamic"``)."""
  if schedule not in SCHEDULES:
    raise ScheduleError(f"Unknown schedule {schedule!r}; use one of "
                        f"{', '.join(map(repr, SCHEDULES))}.")
  if order is not None and priority is not None:
    raise ScheduleError("Pass an order or a priority, not both: an order "
                        "already fixes every priority.")
  if order is not None and schedule in _PER_PLACEMENT:
    raise ScheduleError(
        f"schedule={schedule!r} picks the order itself; pass a priority to "
        f"steer it, or drop schedule={schedule!r} to run this order.")
  if order is not None:
    rows = np.asarray(order)
    if rows.ndim == 2:
      if rows.shape[0] != n_samples:
        raise ScheduleError(
            f"order has {rows.shape[0]} rows but there are {n_samples} "
            "placements; give one row per placement, or one [N] order.")
      order = check_orders(rows, graph.n_nodes, graph)
    else:
      order = check_order(order, graph.n_nodes, graph)
  if priority is not None:
    priority = check_priority(priority, graph.n_nodes, n_samples)
  return order, priority
