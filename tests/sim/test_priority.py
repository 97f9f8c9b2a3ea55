"""Tests of gplace.sim.priority and of how gplace.simulate checks its
schedule arguments."""

import numpy as np
import pytest

from gplace.errors import ScheduleError
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim.priority import (bottom_level, check_priority,
                                 order_priority, priority_order)
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from sim_cases import is_topological, random_topology


def test_bottom_level_is_the_longest_mean_cost_path():
  graph = random_dag(40, seed=5)
  topology = preset("1cpu+2gpu")
  costs = topology.op_costs(graph)
  level = bottom_level(graph, topology)
  mean = np.where(graph.kind == NODE_INPUT, 0.0, costs.mean(1))
  # Exits: their own cost; every edge: the tail is at least the head plus
  # the head's own cost (transfers add to it).
  exits = graph.out_degree == 0
  np.testing.assert_allclose(level[exits], mean[exits])
  src, dst = graph.edge_src, graph.edge_dst
  assert np.all(level[src] >= mean[src] + level[dst] - 1e-15)
  # One device: no transfers, so exactly the longest cost path.
  single = random_topology(np.random.default_rng(0), 1)
  one = bottom_level(graph, single)
  cost1 = np.where(graph.kind == NODE_INPUT, 0.0,
                   single.op_costs(graph)[:, 0])
  longest = cost1.copy()
  for v in range(graph.n_nodes - 1, -1, -1):
    succ = dst[src == v]
    if succ.size:
      longest[v] += longest[succ].max()
  np.testing.assert_allclose(one, longest)


def test_priority_order_is_topological_and_follows_priority():
  graph = random_dag(50, seed=2)
  rng = np.random.default_rng(0)
  priority = rng.normal(size=50)
  order = priority_order(priority, graph)
  assert sorted(order.tolist()) == list(range(50))
  assert is_topological(graph, order)
  # Among the nodes available at each step it took the highest priority.
  remaining = graph.in_degree.copy()
  done = np.zeros(50, bool)
  for v in order:
    available = np.flatnonzero(~done & (remaining == 0))
    assert priority[v] == priority[available].max()
    done[v] = True
    remaining[graph.edge_dst[graph.edge_src == v]] -= 1
  # An order's own priority gives the order back.
  np.testing.assert_array_equal(
      priority_order(order_priority(order), graph), order)


def test_shared_priority_equals_its_order():
  graph = random_dag(30, seed=7)
  topology = preset("1cpu+2gpu")
  placements = np.random.default_rng(1).integers(0, 3, (4, 30))
  priority = bottom_level(graph, topology)
  a = simulate(graph, placements, topology, priority=priority,
               schedule="static")
  b = simulate(graph, placements, topology,
               order=priority_order(priority, graph))
  np.testing.assert_array_equal(np.asarray(a.runtime_s),
                                np.asarray(b.runtime_s))


def test_check_priority_errors():
  with pytest.raises(ScheduleError, match="shape"):
    check_priority(np.zeros(3), 4)
  with pytest.raises(ScheduleError, match="rows"):
    check_priority(np.zeros((2, 4)), 4, n_samples=3)
  with pytest.raises(ScheduleError, match="finite"):
    check_priority([0.0, np.nan], 2)
  with pytest.raises(ScheduleError, match="numbers"):
    check_priority(["a", "b"], 2)
  assert check_priority([[1, 2]], 2).dtype == np.float32


def test_simulate_rejects_conflicting_schedules():
  graph = random_dag(10, seed=0)
  topology = preset("1cpu+2gpu")
  placement = np.zeros(10, int)
  with pytest.raises(ScheduleError, match="Unknown schedule"):
    simulate(graph, placement, topology, schedule="fifo")
  with pytest.raises(ScheduleError, match="not both"):
    simulate(graph, placement, topology, order=np.arange(10),
             priority=np.zeros(10))
  with pytest.raises(ScheduleError, match="dynamic"):
    simulate(graph, placement, topology, order=np.arange(10),
             schedule="dynamic")
  with pytest.raises(ScheduleError, match="rows"):
    simulate(graph, np.zeros((2, 10), int), topology,
             order=np.tile(np.arange(10), (3, 1)))
  with pytest.raises(ScheduleError, match="topological"):
    simulate(graph, np.zeros((1, 10), int), topology,
             order=np.arange(10)[None, ::-1])
