"""Tests of gplace.sim.bounds: no simulated placement beats the lower bound,
which is at least its critical-path and work components."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gplace.errors import TopologyError

from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, random_dag
from gplace.sim.bounds import (_bound, critical_path, interval_bound,
                               lower_bound, work_bound)
from gplace.sim.problem import make_problem
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from sim_cases import BUDGET, SETTINGS, jit_simulate, padded, random_topology


@SETTINGS
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10**6), measured=st.booleans())
def test_no_placement_beats_lower_bound(n_nodes, n_devices, seed, measured):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  costs = rng.uniform(0, 1e-3, (n_nodes, n_devices)) if measured else None
  bound = lower_bound(graph, topology, costs)
  placements = np.concatenate([
      rng.integers(0, n_devices, (6, n_nodes)),
      np.repeat(np.arange(n_devices)[:, None], n_nodes, 1)])
  problem = make_problem(graph, topology, costs=costs, **BUDGET)
  result = jit_simulate(problem, padded(placements))
  assert np.all(np.asarray(result.runtime_s) >= bound * (1 - 1e-6))


def test_lower_bound_components():
  graph = random_dag(200, seed=3)
  topology = preset("1cpu+4gpu")
  costs = topology.op_costs(graph)
  fastest = np.where(graph.kind == NODE_INPUT, 0.0, costs.min(1))
  bound = lower_bound(graph, topology)
  assert bound >= fastest.sum() / topology.n_compute_groups * (1 - 1e-12)
  assert bound >= fastest.max()


def test_critical_path_and_work_bound_by_hand():
  # A diamond 0 -> {1, 2} -> 3: the longest path is 0, 2, 3.
  graph = Graph.build(
      names=list("abcd"), op_type=["op"] * 4, kind=[NODE_OP] * 4,
      out_shapes=[(1,)] * 4, out_dtype=["float32"] * 4, out_bytes=[4] * 4,
      flops=[0.0] * 4, bytes_accessed=[0.0] * 4,
      edges=[(0, 1, 4), (0, 2, 4), (1, 3, 4), (2, 3, 4)])
  assert critical_path(graph, np.array([1.0, 2.0, 5.0, 1.0])) == 7.0
  # Two groups, each node as cheap on either: half the total work each.
  assert work_bound(np.ones((4, 2))) == 2.0
  # One node only the first group can run: the weights move onto it, and no
  # weights give more than its cost.
  assert 0.99 <= work_bound(np.array([[1.0, np.inf]])) <= 1.0
  assert work_bound(np.zeros((0, 3))) == 0.0


def test_interval_bound_by_hand():
  # A chain of four unit ops, then four unit ops that each read its end,
  # on two groups: the path is 5 and the work 8 / 2 = 4, but the last four
  # cannot start before 4 and take 2 on two groups, so no step beats 6.
  def build(edges):
    return Graph.build(
        names=list("abcdefgh"), op_type=["op"] * 8, kind=[NODE_OP] * 8,
        out_shapes=[(1,)] * 8, out_dtype=["float32"] * 8,
        out_bytes=[4] * 8, flops=[0.0] * 8, bytes_accessed=[0.0] * 8,
        edges=edges)

  chain = [(i, i + 1, 4) for i in range(3)]
  graph = build(chain + [(3, 4 + i, 4) for i in range(4)])
  costs = np.ones((8, 2))
  assert critical_path(graph, costs.min(1)) == 5.0
  assert work_bound(costs) == 4.0
  assert interval_bound(graph, costs) == pytest.approx(6.0)
  # Mirrored (four sources, then the chain): the same by the paths after.
  mirrored = build([(i, 4, 4) for i in range(4)]
                   + [(4 + i, 5 + i, 4) for i in range(3)])
  assert interval_bound(mirrored, costs) == pytest.approx(6.0)
  assert interval_bound(graph, np.zeros((8, 2))) == 0.0


def test_interval_bound_is_at_least_the_work_bound():
  graph = random_dag(120, seed=5)
  costs = np.random.default_rng(5).uniform(0, 1, (120, 3))
  assert interval_bound(graph, costs) >= work_bound(costs) * (1 - 1e-12)


def test_lower_bound_refuses_what_simulate_refuses():
  # A bound of 1e300 s once came back for costs simulate refuses as past
  # float32; and a complex table lost its imaginary part (issue 47).
  graph = random_dag(12, seed=0)
  topology = preset("1cpu+2gpu")
  ok = np.zeros(12, int)
  for costs in (np.full((12, 3), 1e300), np.full((12, 3), 3e38)):
    with pytest.raises(TopologyError, match="float32") as simulated:
      simulate(graph, ok, topology, costs=costs)
    with pytest.raises(TopologyError, match="float32") as bounded:
      lower_bound(graph, topology, costs)
    assert str(bounded.value) == str(simulated.value)
  slow = topology.replace(link_latency=np.where(
      np.eye(3, dtype=bool), 0.0, 1e300))
  with pytest.raises(TopologyError, match=r"transfer 1e\+300 s"):
    lower_bound(graph, slow)
  with pytest.raises(TopologyError, match="complex128"):
    lower_bound(graph, topology, np.ones((12, 3), complex))
  assert lower_bound(graph, topology, np.full((12, 3), 86400.0)) > 0


def test_lower_bound_is_kept_by_content_of_costs():
  # Kept per graph, topology and cost table: a table changed in place, or
  # another graph or topology, gets its own bound.
  graph = random_dag(60, seed=7)
  topology = preset("1cpu+2gpu")
  costs = np.random.default_rng(7).uniform(1e-3, 2e-3, (60, 3))
  first = lower_bound(graph, topology, costs)
  assert lower_bound(graph, topology, costs.copy()) == first
  costs *= 2.0
  assert lower_bound(graph, topology, costs) == pytest.approx(2 * first)
  other = random_dag(60, seed=8)
  assert lower_bound(other, topology, costs) == _bound(other, topology,
                                                       costs)
  # Eight independent unit ops: 8 / 3 on three devices, 8 / 5 on five.
  flat = Graph.build(
      names=list("abcdefgh"), op_type=["op"] * 8, kind=[NODE_OP] * 8,
      out_shapes=[(1,)] * 8, out_dtype=["float32"] * 8, out_bytes=[4] * 8,
      flops=[0.0] * 8, bytes_accessed=[0.0] * 8, edges=[])
  assert lower_bound(flat, topology, np.ones((8, 3))) == pytest.approx(8 / 3)
  assert lower_bound(flat, preset("1cpu+4gpu"),
                     np.ones((8, 5))) == pytest.approx(8 / 5)
