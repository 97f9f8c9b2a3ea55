"""Tests of gplace's critical-chain plan (gplace.baselines.critical_chain),
HEFT with pinned devices and the path levels it is built on."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace import baselines, simulate
from gplace.baselines import critical_chain
from gplace.errors import BaselineError
from gplace.graphs.graph import NODE_INPUT, NODE_OP, Graph, random_dag
from gplace.sim import list_scheduler
from gplace.sim.bounds import critical_path, path_levels
from gplace.sim.presets import preset

from baseline_cases import check_schedule


@settings(max_examples=25, deadline=None)
@given(n_nodes=st.integers(2, 60), seed=st.integers(0, 10**6))
def test_path_levels_are_the_longest_paths_into_and_out_of_each_node(
    n_nodes, seed):
  graph = random_dag(n_nodes, seed=seed)
  cost = np.random.default_rng(seed).uniform(0, 1, n_nodes)
  top, bottom = path_levels(graph, cost)
  src, dst = graph.edge_src, graph.edge_dst
  assert np.all(top[dst] >= top[src] + cost[src] - 1e-12)
  assert np.all(bottom[src] >= cost[src] + bottom[dst] - 1e-12)
  assert np.all(bottom >= cost)
  # Each value is reached by some edge (or is the node alone).
  for i in range(n_nodes):
    into = top[src[dst == i]] + cost[src[dst == i]]
    assert np.isclose(top[i], into.max(initial=0.0))
    out = bottom[dst[src == i]]
    assert np.isclose(bottom[i], cost[i] + out.max(initial=0.0))
  assert np.isclose((top + bottom).max(), critical_path(graph, cost))
  assert path_levels(graph, cost, bottom=False)[1] is None


def _long_and_short():
  """An input feeding a long path a-b-c-d and a short side op x (a -> x ->
  d), and an op y hanging off b that ends early."""
  names = ["w", "a", "b", "c", "x", "y", "d"]
  kind = [NODE_INPUT] + [NODE_OP] * 6
  edges = [(0, 1, 8), (1, 2, 8), (2, 3, 8), (3, 6, 8), (1, 4, 8), (4, 6, 8),
           (2, 5, 8)]
  graph = Graph.build(
      names=names, op_type=["op"] * 7, kind=kind, out_shapes=[(2,)] * 7,
      out_dtype=["float32"] * 7, out_bytes=[8] * 7, flops=[0.0] * 7,
      bytes_accessed=[0.0] * 7, edges=edges)
  cost = np.array([0.0, 1.0, 1.0, 1.0, 0.5, 0.1, 1.0])
  return graph, np.stack([cost * 3, cost, cost], axis=1)


def test_chain_nodes_are_the_ops_near_the_longest_path():
  graph, costs = _long_and_short()
  chain = critical_chain.chain_nodes(graph, costs, 0.0)
  assert [graph.names[i] for i in np.flatnonzero(chain)] == list("abcd")
  # x has 1.5 of slack on a path of 4; y has 1.9.
  assert not critical_chain.chain_nodes(graph, costs, 0.37)[4]
  wide = critical_chain.chain_nodes(graph, costs, 0.38)
  assert wide[4] and not wide[5] and not wide[0]   # an input never is


def test_heft_keeps_pinned_nodes_on_their_device():
  graph = random_dag(300, seed=2)
  topology = preset("1cpu+4gpu")
  problem = list_scheduler.prepare(graph, topology, None)
  devices = np.arange(topology.n_devices)
  rank = baselines.list_scheduling.schedule_ranks(problem, devices)
  pinned = np.full(graph.n_nodes, -1)
  ops = np.flatnonzero(graph.kind != NODE_INPUT)
  pinned[ops[::3]] = 3
  plan = list_scheduler.heft_schedule(problem, devices, rank, pinned=pinned)
  assert np.all(plan.placement[ops[::3]] == 3)
  check_schedule(graph, topology, problem.costs, plan)
  free = list_scheduler.heft_schedule(problem, devices, rank)
  assert np.any(free.placement[ops[::3]] != 3)   # the pin binds
  # No pins is HEFT itself.
  unpinned = list_scheduler.heft_schedule(
      problem, devices, rank, pinned=np.full(graph.n_nodes, -1))
  np.testing.assert_array_equal(unpinned.placement, free.placement)


def test_a_pinned_node_without_room_goes_where_it_fits():
  graph = random_dag(60, seed=4)
  topology = preset("1cpu+2gpu")
  small = topology.memory_bytes.copy()
  small[2] = 0.0
  problem = list_scheduler.prepare(graph, topology, None)._replace(
      memory_bytes=small)
  devices = np.arange(topology.n_devices)
  rank = baselines.list_scheduling.schedule_ranks(problem, devices)
  plan = list_scheduler.heft_schedule(
      problem, devices, rank, pinned=np.full(graph.n_nodes, 2))
  ops = graph.kind != NODE_INPUT
  assert not np.any(plan.placement[ops] == 2)


@pytest.mark.parametrize("topology_name", ["1cpu+2gpu", "1cpu+4gpu"])
def test_plans_keep_each_chain_on_its_own_device_and_are_valid(
    topology_name):
  graph = random_dag(400, seed=6)
  topology = preset(topology_name)
  costs = topology.op_costs(graph)
  made = critical_chain.plans(graph, topology)
  assert {share for share, _ in made} == set(critical_chain.SLACK_SHARES)
  assert {1, 2} <= {count for _, count in made}
  for (share, count), plan in made.items():
    labels = critical_chain.chain_labels(graph, costs, share, count)
    assert labels.max() == count - 1
    chain = labels == 0
    np.testing.assert_array_equal(
        chain, critical_chain.chain_nodes(graph, costs, share))
    devices = [np.unique(plan.placement[labels == i]) for i in range(count)]
    assert all(d.size == 1 for d in devices)
    assert len({int(d[0]) for d in devices}) == count   # one device each
    # The first on the device that runs it fastest.
    assert plan.placement[chain][0] == np.argmin(costs[chain].sum(0))
    check_schedule(graph, topology, costs, plan)
    position = np.empty(graph.n_nodes, np.int64)
    position[plan.order] = np.arange(graph.n_nodes)
    assert np.all(position[graph.edge_src] < position[graph.edge_dst])
    result = simulate(graph, plan.placement, topology, order=plan.order)
    assert not bool(result.oom)
    # The chain runs in order on one device: its own work is a floor.
    assert float(result.runtime_s) >= costs[chain].min(1).sum() * (1 - 1e-5)


def test_the_next_chain_is_the_longest_path_the_first_leaves():
  graph, costs = _long_and_short()
  labels = critical_chain.chain_labels(graph, costs, 0.0, 3)
  names = np.array(graph.names)
  assert list(names[labels == 0]) == list("abcd")
  # With a-b-c-d free, x (0.5) is the longest path left, then y (0.1).
  assert list(names[labels == 1]) == ["x"]
  assert list(names[labels == 2]) == ["y"]
  assert labels[0] == -1   # the input
  # No fourth chain: nothing is left.
  np.testing.assert_array_equal(
      critical_chain.chain_labels(graph, costs, 0.0, 5), labels)
  made = critical_chain.plans(graph, preset("1cpu+2gpu"), costs=costs,
                              slack_shares=(0.0,), chain_counts=(1, 5))
  assert list(made) == [(0.0, 1)]


def test_more_chains_than_devices_pin_one_per_device():
  graph = random_dag(200, seed=3)
  topology = preset("1cpu+2gpu")
  problem = list_scheduler.prepare(graph, topology, None)
  labels = critical_chain.chain_labels(graph, problem.costs, 0.0, 5)
  assert labels.max() == 4
  plan = critical_chain.plan_critical_chain(problem, labels)
  check_schedule(graph, topology, problem.costs, plan)
  used = [np.unique(plan.placement[labels == i]) for i in range(3)]
  assert all(u.size == 1 for u in used)
  assert len({int(u[0]) for u in used}) == 3


@pytest.mark.parametrize("shares", [(), (-0.1,), (1.5,), (float("nan"),)])
def test_bad_slack_shares_are_refused(shares):
  graph = random_dag(20, seed=0)
  with pytest.raises(BaselineError, match="slack_shares"):
    critical_chain.plans(graph, preset("1cpu+2gpu"), slack_shares=shares)


@pytest.mark.parametrize("counts", [(), (0,), (1.5,), (True,)])
def test_bad_chain_counts_are_refused(counts):
  graph = random_dag(20, seed=0)
  with pytest.raises(BaselineError, match="chain_counts"):
    critical_chain.plans(graph, preset("1cpu+2gpu"), chain_counts=counts)


def test_it_is_not_a_classical_baseline():
  assert "critical_chain" not in baselines.names()
  assert "critical_chain" not in baselines.schedulers()
