"""Tests of the planned and best schedules (gplace.sim.planned): the
compiled planner equals the plain-Python list scheduler it shares with the
baselines (gplace.sim.list_scheduler),
HEFT's placement is planned into HEFT's own plan, and schedule="best" is
the faster of the dynamic and planned schedules."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace import baselines
from gplace.errors import ScheduleError
from gplace.graphs.graph import random_dag
from gplace.sim import list_scheduler
from gplace.sim import planned
from gplace.sim.planned import BEST_TIE
from gplace.sim.priority import bottom_level, order_priority, priority_order
from gplace.sim.reference import planned_reference, simulate_reference
from gplace.sim.runner import run_parts
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from sim_cases import SETTINGS, assert_close_to_reference, is_topological
from sim_cases import random_topology

needs_numba = pytest.mark.skipif(not planned._HAS_NUMBA,
                                 reason="numba is not installed")


def _planned_orders(graph, topology, placements, priority, max_gaps,
                    costs=None):
  problem = planned.make_planned_problem(graph, topology, costs)
  rows = np.ascontiguousarray(placements, np.int64)
  out = (np.empty(rows.shape, np.int32), np.empty(rows.shape, np.int32))
  planned.plan_batch(problem, rows, planned.node_orders(priority, graph),
                     out, slice(0, len(rows)), max_gaps)
  return out


@needs_numba
@settings(SETTINGS, max_examples=25)
@given(n_nodes=st.integers(2, 300), n_devices=st.integers(1, 4),
       seed=st.integers(0, 10_000), max_gaps=st.sampled_from([0, 1, 3, 64]),
       random_priority=st.booleans(), coarse_costs=st.booleans(),
       pipelined=st.booleans())
def test_the_compiled_planner_equals_the_python_list_scheduler(
    n_nodes, n_devices, seed, max_gaps, random_priority, coarse_costs,
    pipelined):
  # Up to 300 nodes on few compute groups: chunks of busy intervals fill
  # and split; random priorities are not topological (sorted with
  # priority_order instead). Coarse costs (0, 1 or 2 units) give zero-length
  # ops and many equal starts: the order breaks those ties by id.
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed, n_inputs=int(rng.integers(1, 4)))
  # Pipelined links: both book a copy's link for its bytes only.
  topology = random_topology(rng, n_devices).replace(
      pipelined_links=pipelined)
  placements = rng.integers(0, n_devices, (3, n_nodes))
  costs = (rng.integers(0, 3, (n_nodes, n_devices)) * 1e-3 if coarse_costs
           else None)
  priority = (rng.normal(size=(3, n_nodes)) if random_priority
              else bottom_level(graph, topology, costs)[None].repeat(3, 0))
  ran, rank = _planned_orders(graph, topology, placements, priority,
                              max_gaps, costs)
  order = planned.node_orders(priority, graph)
  problem = list_scheduler.prepare(graph, topology, costs)
  for k in range(3):
    plan = list_scheduler.heft_schedule(
        problem, np.arange(n_devices), order_priority(order[k]),
        max_gaps=max_gaps, placement=placements[k])
    np.testing.assert_array_equal(ran[k], plan.order)
    np.testing.assert_array_equal(rank[k][ran[k]], np.arange(n_nodes))
    assert is_topological(graph, ran[k])


@pytest.mark.parametrize("topology_name", ["1cpu+2gpu", "1cpu+4gpu"])
def test_heft_placement_is_planned_into_heft_own_plan(topology_name):
  topology = preset(topology_name)
  graph = random_dag(400, seed=5)
  plan = baselines.plan("heft", graph, topology)
  own = simulate(graph, plan.placement, topology, order=plan.order)
  result = simulate(graph, plan.placement, topology, schedule="planned",
                    return_schedule=True)
  np.testing.assert_array_equal(result.order, plan.order)
  assert float(result.runtime_s) == float(own.runtime_s)
  best = simulate(graph, plan.placement, topology)
  assert float(best.runtime_s) <= float(own.runtime_s)


@settings(SETTINGS, max_examples=8)
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 4),
       seed=st.integers(0, 10_000), planned_only=st.booleans())
def test_planned_and_best_match_the_reference(n_nodes, n_devices, seed,
                                              planned_only):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (3, n_nodes))
  schedule = "planned" if planned_only else "best"
  result = simulate(graph, placements, topology, schedule=schedule,
                    return_schedule=True)
  for k in range(3):
    ref = simulate_reference(graph, placements[k], topology,
                             schedule=schedule)
    np.testing.assert_array_equal(result.order[k], ref.order)
    assert_close_to_reference(result, k, ref)


def test_best_is_the_faster_schedule_and_replays():
  graph = random_dag(300, seed=11)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(11).integers(0, 5, (16, 300))
  runs = {s: simulate(graph, placements, topology, schedule=s,
                      return_schedule=True)
          for s in ("dynamic", "planned", "best")}
  wins = (np.asarray(runs["planned"].runtime_s)
          < np.asarray(runs["dynamic"].runtime_s) * (1 - BEST_TIE))
  np.testing.assert_array_equal(
      np.asarray(runs["best"].runtime_s),
      np.where(wins, np.asarray(runs["planned"].runtime_s),
               np.asarray(runs["dynamic"].runtime_s)))
  np.testing.assert_allclose(   # ties are within BEST_TIE of each other
      np.asarray(runs["best"].runtime_s),
      np.minimum(np.asarray(runs["dynamic"].runtime_s),
                 np.asarray(runs["planned"].runtime_s)), rtol=BEST_TIE)
  expected = np.where(wins[:, None], runs["planned"].order,
                      runs["dynamic"].order)
  np.testing.assert_array_equal(runs["best"].order, expected)
  # The default is "best", and its order runs again as an explicit order.
  default = simulate(graph, placements, topology, return_schedule=True)
  np.testing.assert_array_equal(np.asarray(default.runtime_s),
                                np.asarray(runs["best"].runtime_s))
  for k in (0, 5):
    again = simulate(graph, placements[k], topology, order=default.order[k])
    assert float(again.runtime_s) == float(default.runtime_s[k])


def test_best_prefers_a_schedule_that_fits_in_memory():
  # A wide graph on one small device: the planned order (by critical path,
  # insertion) and the dynamic one hold different bytes at once.
  graph = random_dag(120, seed=2, avg_degree=3.0)
  topology = preset("1cpu+2gpu")
  placements = np.random.default_rng(2).integers(0, 3, (8, 120))
  runs = {s: simulate(graph, placements, topology, schedule=s)
          for s in ("dynamic", "planned", "best")}
  for k in range(8):
    candidates = sorted(
        (bool(runs[s].oom[k]), float(runs[s].runtime_s[k]), s != "planned")
        for s in ("dynamic", "planned"))
    oom, runtime, _ = candidates[0]
    assert (bool(runs["best"].oom[k]), float(runs["best"].runtime_s[k])) \
        == (oom, runtime)


def test_the_planner_threads_and_the_python_fallback_agree(monkeypatch):
  graph = random_dag(250, seed=4)
  topology = preset("1cpu+2gpu")
  placements = np.random.default_rng(4).integers(0, 3, (5, 250))
  level = bottom_level(graph, topology)
  batch = planned.planned_orders(graph, topology, None, placements, level,
                                 run_parts)
  for k in range(5):
    np.testing.assert_array_equal(
        batch[0][k], planned_reference(graph, placements[k], topology))
  monkeypatch.setattr(planned, "_HAS_NUMBA", False)
  slow = planned.planned_orders(graph, topology, None, placements, level,
                                run_parts)
  np.testing.assert_array_equal(slow[0], batch[0])
  np.testing.assert_array_equal(slow[1], batch[1])


def test_a_priority_steers_the_planned_schedule():
  graph = random_dag(60, seed=6)
  topology = preset("1cpu+2gpu")
  placement = np.random.default_rng(6).integers(0, 3, 60)
  priority = np.random.default_rng(7).normal(size=60).astype(np.float32)
  result = simulate(graph, placement, topology, schedule="planned",
                    priority=priority, return_schedule=True)
  ref = planned_reference(graph, placement, topology, priority=priority)
  np.testing.assert_array_equal(result.order, ref)


@pytest.mark.parametrize("schedule", ["planned", "best"])
def test_planned_schedules_reject_an_order(schedule):
  graph = random_dag(10, seed=0)
  topology = preset("1cpu+2gpu")
  with pytest.raises(ScheduleError, match="picks the order itself"):
    simulate(graph, np.zeros(10, np.int32), topology, schedule=schedule,
             order=np.arange(10))
  with pytest.raises(ScheduleError, match="shape"):
    simulate(graph, np.zeros(10, np.int32), topology, schedule=schedule,
             priority=np.zeros(9))
  with pytest.raises(ScheduleError, match="finite"):
    simulate(graph, np.zeros(10, np.int32), topology, schedule=schedule,
             priority=np.full(10, np.nan))


@settings(SETTINGS, max_examples=10)
@given(n_nodes=st.integers(2, 80), seed=st.integers(0, 10_000),
       tied=st.booleans())
def test_node_orders_are_the_priority_respecting_orders(n_nodes, seed, tied):
  graph = random_dag(n_nodes, seed=seed)
  priority = np.random.default_rng(seed).normal(size=(4, n_nodes))
  if tied:
    priority = np.round(priority)
  priority[0] = bottom_level(graph, preset("1cpu+2gpu"))  # topological
  # float32, as schedules take priorities: two float64 levels may round
  # to one float32 value, and then the node id breaks the tie.
  priority = priority.astype(np.float32)
  order = planned.node_orders(priority, graph)
  for k in range(4):
    np.testing.assert_array_equal(order[k],
                                  priority_order(priority[k], graph))


def test_planned_and_best_are_the_same_through_the_jitted_scheduler(
    monkeypatch):
  graph = random_dag(150, seed=9)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(9).integers(0, 5, (6, 150))
  fast = simulate(graph, placements, topology, return_schedule=True)
  monkeypatch.setenv("GPLACE_NATIVE", "0")
  slow = simulate(graph, placements, topology, return_schedule=True)
  np.testing.assert_array_equal(fast.order, slow.order)
  np.testing.assert_array_equal(np.asarray(fast.runtime_s),
                                np.asarray(slow.runtime_s))
