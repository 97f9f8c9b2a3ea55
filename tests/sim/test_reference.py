"""Tests of gplace.sim.reference: the jitted simulator agrees with the
plain-Python event-driven reference (property tests on random graphs and
topologies), and both agree with schedules worked out by hand."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.sim.problem import make_problem
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from sim_cases import (BUDGET, SETTINGS, assert_close_to_reference,
                       jit_simulate, padded, random_topology)


def random_topological_order(graph: Graph, rng) -> np.ndarray:
  indegree = graph.in_degree.copy()
  ready = [i for i in range(graph.n_nodes) if indegree[i] == 0]
  order = []
  while ready:
    node = ready.pop(int(rng.integers(len(ready))))
    order.append(node)
    for nxt in graph.successors(node):
      indegree[nxt] -= 1
      if indegree[nxt] == 0:
        ready.append(int(nxt))
  return np.asarray(order)


def assert_matches_reference(graph, placements, topology, costs=None,
                             order=None, width=8):
  problem = make_problem(graph, topology, costs=costs, order=order,
                         width=width, **BUDGET)
  result = jit_simulate(problem, padded(placements), return_schedule=True)
  n = graph.n_nodes
  result = result._replace(start_s=result.start_s[:, :n],
                           finish_s=result.finish_s[:, :n])
  for k, placement in enumerate(placements):
    ref = simulate_reference(graph, placement, topology, costs=costs,
                             order=order, schedule="static")
    assert_close_to_reference(result, k, ref)
    capacity = topology.memory_bytes
    near = np.any(np.abs(ref.peak_bytes - capacity) <= 1e-6 * capacity)
    if not near:
      assert bool(result.oom[k]) == ref.oom


@SETTINGS
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10**6), custom_order=st.booleans(),
       measured=st.booleans(), width=st.sampled_from([1, 3, 8]),
       degree=st.sampled_from([1.5, 2.5, 4.0]))
def test_matches_reference(n_nodes, n_devices, seed, custom_order, measured,
                           width, degree):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, avg_degree=degree, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (3, n_nodes))
  costs = rng.uniform(0, 1e-3, (n_nodes, n_devices)) if measured else None
  order = random_topological_order(graph, rng) if custom_order else None
  assert_matches_reference(graph, placements, topology, costs, order, width)


def test_high_fan_in_and_fan_out():
  # One parameter read by 30 ops, one op reading all of them: several chunks.
  n = 33
  edges = [(0, i, 4096) for i in range(1, 31)]
  edges += [(i, 31, 4096) for i in range(1, 31)] + [(31, 32, 4096)]
  kind = [NODE_INPUT] + [NODE_OP] * 31 + [NODE_OUTPUT]
  graph = Graph.build(
      names=[f"n{i}" for i in range(n)], op_type=["op"] * n, kind=kind,
      out_shapes=[(1024,)] * n, out_dtype=["float32"] * n,
      out_bytes=[4096] * n, flops=[1e6] * n, bytes_accessed=[8192.0] * n,
      edges=edges)
  rng = np.random.default_rng(0)
  topology = random_topology(rng, 4)
  placements = rng.integers(0, 4, (4, n))
  for width in (1, 4, 8):
    assert_matches_reference(graph, placements, topology, width=width)


def test_two_op_chain_by_hand():
  graph = Graph.build(
      names=["a", "b"], op_type=["op", "op"], kind=[NODE_OP, NODE_OP],
      out_shapes=[(1000,), (1000,)], out_dtype=["float32"] * 2,
      out_bytes=[4000, 4000], flops=[0.0, 0.0], bytes_accessed=[0.0, 0.0],
      edges=[(0, 1, 4000)])
  topology = preset("1cpu+2gpu")
  costs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
  result = simulate(graph, np.array([1, 2]), topology, costs=costs,
                    return_schedule=True)
  transfer = 25e-6 + 4000 / 12e9
  np.testing.assert_allclose(float(result.runtime_s), 2.0 + transfer + 6.0,
                             rtol=1e-6)
  np.testing.assert_allclose(np.asarray(result.start_s), [0, 2 + transfer],
                             rtol=1e-6)
  ref = simulate_reference(graph, np.array([1, 2]), topology, costs=costs)
  np.testing.assert_allclose(ref.runtime_s, 2.0 + transfer + 6.0, rtol=1e-12)
  np.testing.assert_allclose(ref.start_s, [0, 2 + transfer], rtol=1e-12)
  # Same device: no transfer; the output copy of a lives until b runs.
  same = simulate(graph, np.array([1, 1]), topology, costs=costs)
  np.testing.assert_allclose(float(same.runtime_s), 7.0, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(same.peak_bytes), [0, 8000, 0])
  ref = simulate_reference(graph, np.array([1, 1]), topology, costs=costs)
  assert ref.runtime_s == pytest.approx(7.0)
  np.testing.assert_allclose(ref.peak_bytes, [0, 8000, 0])


def test_shared_compute_group_serializes():
  graph = Graph.build(
      names=["a", "b"], op_type=["op", "op"], kind=[NODE_OP, NODE_OP],
      out_shapes=[(1,), (1,)], out_dtype=["float32"] * 2, out_bytes=[4, 4],
      flops=[0.0, 0.0], bytes_accessed=[0.0, 0.0], edges=[])
  base = preset("1cpu+2gpu")
  shared_topology = base.replace(compute_group=np.array([0, 1, 1]))
  costs = np.ones((2, 3))
  apart = simulate(graph, np.array([1, 2]), base, costs=costs)
  shared = simulate(graph, np.array([1, 2]), shared_topology, costs=costs)
  assert float(apart.runtime_s) == pytest.approx(1.0)
  assert float(shared.runtime_s) == pytest.approx(2.0)
  assert simulate_reference(graph, np.array([1, 2]), base,
                            costs=costs).runtime_s == pytest.approx(1.0)
  assert simulate_reference(graph, np.array([1, 2]), shared_topology,
                            costs=costs).runtime_s == pytest.approx(2.0)
