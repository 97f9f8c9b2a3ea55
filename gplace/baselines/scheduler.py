"""Plans that fit in memory: :func:`plan_within_memory` checks a
:class:`~gplace.sim.list_scheduler.Plan` against the simulated peak and
replans an overflowing device; :func:`single_device_plan` is the last resort.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from gplace.graphs.graph import NODE_INPUT
from gplace.sim.list_scheduler import Plan, PlanningProblem
from gplace.baselines.common import (copies_bytes,
                                     default_schedule_peak_bytes,
                                     simulated_peak_bytes, single_device_fits,
                                     single_device_peak_bytes)


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
