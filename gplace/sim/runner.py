"""Runs batches of placements through the simulator's kernels on the host,
for :func:`gplace.simulate`: the scan split across cores
(:func:`scan_in_parts`), per-placement schedules compiled or jitted
(:func:`per_placement`), ``"best"`` as the faster of two, host work last.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import TopologyError
from gplace.graphs.graph import Graph
from gplace.sim import clusters, native, planned
from gplace.sim.cache import cached_problem
from gplace.sim.dispatch import (PAD_PRIORITY, dispatch_problem,
                                 make_dispatch_problem)
from gplace.sim.kernel import COMPILER_OPTIONS, one_kernel_loops
from gplace.sim.priority import bottom_level, order_priority
from gplace.sim.problem import SimProblem, SimResult
from gplace.sim.scan import simulate_problem
from gplace.sim.topology import Topology

simulate_jit = jax.jit(simulate_problem, static_argnames=("return_schedule",),
                       compiler_options=COMPILER_OPTIONS or None)


def _dispatch(*args, **kwargs):
  """:func:`dispatch_problem` under a jit of its own, traced in
  :func:`one_kernel_loops` (a separate function, so its trace cache is never
  shared with a caller's ``jax.jit(dispatch_problem)``)."""
  return dispatch_problem(*args, **kwargs)


dispatch_jit = jax.jit(_dispatch, static_argnames=("dynamic",),
                       compiler_options=COMPILER_OPTIONS or None)


def bucket(size: int, smallest: int = 16) -> int:
  """``size`` rounded up to a shape bucket: a multiple of ``smallest`` up to
  ``4 * smallest``, then to an eighth of the enclosing power of two (at most
  12.5% padding), so that graphs of similar size share one compilation."""
  size = max(int(size), 1)
  if size <= 4 * smallest:
    return -(-size // smallest) * smallest
  step = 1 << (size.bit_length() - 4)
  return -(-size // step) * step


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
    else (os.cpu_count() or 1)
POOL = None


def pool() -> concurrent.futures.ThreadPoolExecutor:
  """Threads that run parts of a batch of list schedules concurrently."""
  global POOL
  if POOL is None:
    POOL = concurrent.futures.ThreadPoolExecutor(
        CORES, thread_name_prefix="gplace-simulate")
  return POOL


#: Smallest batch (nodes x placements) that the compiled host kernels split
#: across the cores: a hand-off to the threads costs tens of microseconds,
#: about what 2^14 node-placements take to schedule.
HOST_SPLIT_MIN = 1 << 14


def run_parts(work, k: int, n: int) -> list:
  """Calls ``work(rows)`` on contiguous slices covering ``0..k`` (equal
  where ``k`` divides evenly), one per core, from the threads of
  :func:`pool` (the compiled host kernels run without the GIL), or on one
  slice where the batch of ``k`` placements of ``n`` nodes is below
  :data:`HOST_SPLIT_MIN`; returns the results in slice order."""
  parts = max(min(CORES, k), 1) if k * n >= HOST_SPLIT_MIN else 1
  bounds = np.linspace(0, k, parts + 1).astype(int)
  slices = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
  if parts == 1:
    return [work(slices[0])]
  return list(pool().map(work, slices))


#: Smallest batch (nodes x placements) that the shared-order scan splits
#: across the cores; below it, a thread hand-off costs more than it saves.
SPLIT_MIN = 1 << 16


#: Most placements one compiled scan takes on CPU: XLA's one-kernel loops
#: (:mod:`gplace.sim.kernel`) failed to compile from 2,048 rows on
#: (jax 0.10, graphs of 24 to 30k ops: "UNIMPLEMENTED: Fusion kind not
#: implemented on CPU"; 2,047 compiled), so a larger batch runs in blocks
#: of this many.
MAX_SCAN_ROWS = 1024


def _concatenate(parts: list) -> SimResult:
  return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *parts)


def scan_in_parts(problem: SimProblem, placements: np.ndarray,
                  return_schedule: bool) -> SimResult:
  """:func:`simulate_problem` of ``placements`` (``[K, N]``), on CPU in
  equal parts of the batch, one per core, from threads of their own (XLA
  runs the scan's loops on one core; placements are independent, so the
  results are the same row for row). Batches below :data:`SPLIT_MIN`
  node-placements, or that do not split evenly, run whole; on CPU, batches
  above :data:`MAX_SCAN_ROWS` run in blocks of that many."""
  k, n = placements.shape
  on_cpu = jax.default_backend() == "cpu"
  if on_cpu and k > MAX_SCAN_ROWS:
    return _concatenate([
        jax.tree_util.tree_map(np.asarray, scan_in_parts(
            problem, placements[i:i + MAX_SCAN_ROWS], return_schedule))
        for i in range(0, k, MAX_SCAN_ROWS)])

  def run(rows: slice) -> SimResult:
    with one_kernel_loops():         # (a context variable: set per thread)
      return simulate_jit(problem, jnp.asarray(placements[rows]),
                          return_schedule=return_schedule)

  parts = min(CORES, k)
  if not on_cpu or parts < 2 or k % parts or k * n < SPLIT_MIN:
    return run(slice(None))
  # Each thread waits for its own part (np.asarray): with the results
  # awaited by the caller instead, the split lost to one call at 1k and 80k
  # nodes (experiments/results/simulator_speed/README.md).
  in_thread = lambda rows: jax.tree_util.tree_map(np.asarray, run(rows))
  return _concatenate(run_parts(in_thread, k, n))


def critical_path_priority(graph: Graph, topology: Topology, costs=None):
  """``(bottom level float64 [N], as float32 [N], its native ranks or
  None)``: the default schedules' priority, built once per graph (a
  :func:`~gplace.sim.cache.cached_problem` builder) instead of at every
  call."""
  level = bottom_level(graph, topology, costs)
  steer = level.astype(np.float32)
  ranks = native.priority_ranks(steer) if use_native(graph) else None
  return level, steer, ranks


def simulate_schedules(graph: Graph, topology: Topology, costs,
                       placements: np.ndarray,
                       priority: Optional[np.ndarray], *,
                       dynamic: bool, ranks=None) -> SimResult:
  """Per-placement schedules of ``placements`` (``[K, N]``) through the
  jitted list scheduler, on a problem padded to shape buckets (nodes,
  edges, placements; see :func:`bucket`) so that calls on graphs of
  similar sizes reuse one compilation. Padding nodes run nowhere, have no
  edges or bytes and the lowest priority; they are removed from the
  returned order, so results equal the unpadded problem's (tested).
  ``priority``: ``[N]`` / ``[K, N]`` float32, or None for the critical
  path; ``ranks``: its :func:`~gplace.sim.native.priority_ranks` where the
  caller has them."""
  if priority is None:                   # the critical path, built once
    _, priority, ranks = cached_problem(critical_path_priority, graph,
                                        topology, costs=costs)
  if use_native(graph):
    return native_schedules(graph, topology, costs, placements, priority,
                            dynamic=dynamic, ranks=ranks)
  if topology.has_pipelined_links:
    raise TopologyError(
        f"Topology {topology.name!r} has pipelined_links, which only the "
        "compiled host scheduler models (gplace.sim.native: numba, a "
        "dependency of gplace, is missing or GPLACE_NATIVE=0). Install "
        "numba, unset GPLACE_NATIVE, or use topology.replace("
        "pipelined_links=False).")
  k, n = placements.shape
  n_pad, k_pad = bucket(n), 1 << max(k - 1, 0).bit_length()
  problem = cached_problem(make_dispatch_problem, graph, topology,
                           costs=costs, n_nodes=n_pad,
                           n_edges=bucket(graph.n_edges))
  padded = np.zeros((k_pad, n_pad), np.int32)
  padded[:k, :n] = placements
  padded[k:, :n] = placements[0]
  prio = np.full((k_pad, n_pad), PAD_PRIORITY, np.float32)
  priority = np.broadcast_to(priority, (k, n))
  prio[:k, :n] = priority
  prio[k:, :n] = priority[0]

  def run(rows: slice) -> SimResult:
    with one_kernel_loops():         # (a context variable: set per thread)
      return dispatch_jit(problem, jnp.asarray(padded[rows]),
                          jnp.asarray(prio[rows]), dynamic=dynamic)

  # Placements are scheduled one by one on CPU: parts of the batch run on
  # the machine's cores from threads of their own (XLA runs a program's
  # loops on one core).
  parts = min(CORES, k_pad) if jax.default_backend() == "cpu" else 1
  parts = 1 << (parts.bit_length() - 1)          # k_pad / parts: a power of 2
  if parts == 1:
    result = run(slice(None))
  else:
    size = k_pad // parts
    pieces = list(pool().map(run, [slice(i * size, (i + 1) * size)
                                   for i in range(parts)]))
    result = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs),
                                    *pieces)
  order = np.asarray(result.order)[:k]
  order = order[order < n].reshape(k, n)
  return SimResult(runtime_s=result.runtime_s[:k],
                   peak_bytes=result.peak_bytes[:k], oom=result.oom[:k],
                   start_s=result.start_s[:k, :n],
                   finish_s=result.finish_s[:k, :n], order=order)


def use_native(graph: Graph) -> bool:
  """Whether per-placement schedules of ``graph`` run through
  :mod:`gplace.sim.native`."""
  return native.available() and graph.n_nodes <= native.MAX_NODES


def native_schedules(graph: Graph, topology: Topology, costs,
                     placements: np.ndarray, priority, *, dynamic: bool,
                     ranks=None) -> SimResult:
  """:func:`simulate_schedules` through the compiled host scheduler of
  :mod:`gplace.sim.native` (same schedules, bit for bit), parts of the
  batch on the machine's cores. ``ranks``: the priorities'
  :func:`~gplace.sim.native.priority_ranks` where the caller has them."""
  k, n = placements.shape
  problem = cached_problem(native.make_native_problem, graph, topology,
                           costs=costs)
  rows = np.ascontiguousarray(placements, np.int32)
  if ranks is None:
    ranks = native.priority_ranks(priority)
  out = native.empty_schedules(k, problem)
  run_parts(lambda part: native.schedule_batch(problem, rows, ranks,
                                               dynamic, out, part), k, n)
  memory = np.asarray(topology.memory_bytes, np.float32)
  return SimResult(runtime_s=out.finish.max(axis=1), peak_bytes=out.peak,
                   oom=(out.peak > memory[None, :]).any(axis=1),
                   start_s=out.start, finish_s=out.finish, order=out.order)


def add_host_work(graph: Graph, topology: Topology, placements: np.ndarray,
                  result: SimResult, orders) -> SimResult:
  """``result`` with the executor's host work (cluster launches and copy
  issues, :func:`gplace.sim.clusters.host_costs`) added to ``runtime_s``;
  unchanged when no device of ``topology`` has a ``cluster_launch_s`` or a
  ``copy_issue_s``. ``orders``: ``[K, N]`` the priority orders the
  placements ran in."""
  extra = clusters.host_costs(graph, topology, placements, orders)
  if extra is None:
    return result
  runtime = np.asarray(result.runtime_s, np.float64) + extra
  return result._replace(runtime_s=runtime.astype(np.float32))


def per_placement(graph: Graph, topology: Topology, costs,
                  placements: np.ndarray, priority, schedule: str
                  ) -> SimResult:
  """``placements`` (``[K, N]``) each in its own ``"dynamic"``,
  ``"planned"`` or ``"best"`` schedule (``priority``: ``[N]`` / ``[K, N]``
  float32, or None for the critical path)."""
  if priority is None:          # float64 level: HEFT's rank, for the plan
    plan_by, steer = cached_problem(critical_path_priority, graph,
                                    topology, costs=costs)[0], None
  else:
    steer = plan_by = priority
  if schedule != "planned":
    dynamic = simulate_schedules(graph, topology, costs, placements, steer,
                                 dynamic=True)
    dynamic = add_host_work(graph, topology, placements, dynamic,
                            dynamic.order)
    if schedule == "dynamic":
      return dynamic
  orders, ranks = planned.planned_orders(graph, topology, costs, placements,
                                         plan_by, run_parts)
  if use_native(graph):               # the ranks are the orders' inverse
    plan = native_schedules(graph, topology, costs, placements, None,
                            dynamic=False, ranks=(ranks, orders))
  else:
    plan = simulate_schedules(graph, topology, costs, placements,
                              order_priority(orders), dynamic=False)
  plan = add_host_work(graph, topology, placements, plan, plan.order)
  if schedule == "planned":
    return plan
  # Fits in memory first, then faster (also when neither fits); ties
  # (within BEST_TIE): dynamic.
  oom_plan, oom_dynamic = np.asarray(plan.oom), np.asarray(dynamic.oom)
  take = (oom_plan < oom_dynamic) | ((oom_plan == oom_dynamic) & (
      np.asarray(plan.runtime_s)
      < np.asarray(dynamic.runtime_s) * (1.0 - planned.BEST_TIE)))
  pick = lambda a, b: np.where(take.reshape((-1,) + (1,) * (np.ndim(a) - 1)),
                               np.asarray(a), np.asarray(b))
  return jax.tree_util.tree_map(pick, plan, dynamic)
