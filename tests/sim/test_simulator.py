"""Tests of the jitted simulator against the event-driven reference, the
lower bound, padding/stacking, and errors at the public boundary."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gplace
from gplace.sim.bounds import lower_bound
from gplace.errors import GplaceError, PlacementError, TopologyError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT, random_dag
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import (SimResult, make_problem, simulate,
                                  simulate_problem)
from gplace.sim.topology import Device, Topology, preset

RTOL = 1e-6
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
# Fixed budgets, so hypothesis examples reuse compiled simulators.
BUDGET = dict(n_nodes=48, n_steps=320, n_slots=48)
_jit_simulate = jax.jit(simulate_problem, static_argnames="return_schedule")


def padded(placements, n_nodes=48):
  placements = np.asarray(placements)
  return jnp.asarray(np.pad(placements, ((0, 0), (0,
                                                  n_nodes - placements.shape[1]))))


def random_topology(rng: np.random.Generator, n_devices: int) -> Topology:
  devices = tuple(
      Device(f"dev:{i}", "gpu", peak_flops=float(rng.uniform(0.5, 5) * 1e12),
             mem_bandwidth=float(rng.uniform(50, 500) * 1e9),
             memory_bytes=float(rng.uniform(2e6, 3e7)),
             launch_overhead_s=float(rng.uniform(0, 2e-5)))
      for i in range(n_devices))
  bandwidth = rng.uniform(1e9, 2e10, (n_devices, n_devices))
  latency = rng.uniform(0, 5e-5, (n_devices, n_devices))
  np.fill_diagonal(bandwidth, np.inf)
  np.fill_diagonal(latency, 0.0)
  group = rng.integers(0, n_devices, n_devices)     # shared compute groups
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=group, name="random")


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
  result = _jit_simulate(problem, padded(placements), return_schedule=True)
  n = graph.n_nodes
  result = result._replace(start_s=result.start_s[:, :n],
                           finish_s=result.finish_s[:, :n])
  for k, placement in enumerate(placements):
    ref = simulate_reference(graph, placement, topology, costs=costs,
                             order=order)
    scale = max(ref.runtime_s, 1e-30)
    np.testing.assert_allclose(float(result.runtime_s[k]), ref.runtime_s,
                               rtol=RTOL, atol=1e-30)
    np.testing.assert_allclose(np.asarray(result.start_s[k]), ref.start_s,
                               rtol=0, atol=RTOL * scale)
    np.testing.assert_allclose(np.asarray(result.finish_s[k]), ref.finish_s,
                               rtol=0, atol=RTOL * scale)
    np.testing.assert_allclose(np.asarray(result.peak_bytes[k]),
                               ref.peak_bytes, rtol=RTOL)
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
  # Same device: no transfer; the output copy of a lives until b runs.
  same = simulate(graph, np.array([1, 1]), topology, costs=costs)
  np.testing.assert_allclose(float(same.runtime_s), 7.0, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(same.peak_bytes), [0, 8000, 0])


def test_shared_compute_group_serializes():
  graph = Graph.build(
      names=["a", "b"], op_type=["op", "op"], kind=[NODE_OP, NODE_OP],
      out_shapes=[(1,), (1,)], out_dtype=["float32"] * 2, out_bytes=[4, 4],
      flops=[0.0, 0.0], bytes_accessed=[0.0, 0.0], edges=[])
  base = preset("1cpu+2gpu")
  costs = np.ones((2, 3))
  apart = simulate(graph, np.array([1, 2]), base, costs=costs)
  shared = simulate(graph, np.array([1, 2]),
                    base.replace(compute_group=np.array([0, 1, 1])),
                    costs=costs)
  assert float(apart.runtime_s) == pytest.approx(1.0)
  assert float(shared.runtime_s) == pytest.approx(2.0)


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
  result = _jit_simulate(problem, padded(placements))
  assert np.all(np.asarray(result.runtime_s) >= bound * (1 - 1e-6))


def test_lower_bound_components():
  graph = random_dag(200, seed=3)
  topology = preset("1cpu+4gpu")
  costs = topology.op_costs(graph)
  fastest = np.where(graph.kind == NODE_INPUT, 0.0, costs.min(1))
  bound = lower_bound(graph, topology)
  assert bound >= fastest.sum() / topology.n_compute_groups * (1 - 1e-12)
  assert bound >= fastest.max()


def test_padding_and_stacking_vmap():
  topology = preset("1cpu+4gpu")
  graphs = [random_dag(30, seed=1), random_dag(45, seed=2)]
  budget = dict(n_nodes=64, n_steps=96, n_slots=64)
  problems = [make_problem(g, topology, **budget) for g in graphs]
  shapes = [jax.tree_util.tree_map(np.shape, p) for p in problems]
  assert shapes[0] == shapes[1]
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *problems)
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 5, (2, 3, 64))
  batched = jax.jit(jax.vmap(simulate_problem))(stacked,
                                                jnp.asarray(placements))
  for i, graph in enumerate(graphs):
    alone = simulate(graph, placements[i, :, :graph.n_nodes], topology)
    np.testing.assert_allclose(np.asarray(batched.runtime_s[i]),
                               np.asarray(alone.runtime_s), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(batched.peak_bytes[i]),
                               np.asarray(alone.peak_bytes), rtol=1e-6)


def test_padding_placement_does_not_matter():
  topology = preset("1cpu+4gpu")
  graph = random_dag(20, seed=5)
  problem = make_problem(graph, topology, n_nodes=32)
  rng = np.random.default_rng(1)
  placements = rng.integers(0, 5, (2, 32))
  other = placements.copy()
  other[:, 20:] = rng.integers(0, 5, (2, 12))
  a = simulate_problem(problem, jnp.asarray(placements))
  b = simulate_problem(problem, jnp.asarray(other))
  np.testing.assert_array_equal(np.asarray(a.runtime_s),
                                np.asarray(b.runtime_s))
  np.testing.assert_array_equal(np.asarray(a.peak_bytes),
                                np.asarray(b.peak_bytes))


def test_simulate_compiles_once_per_shape():
  from gplace.sim import simulator  # pylint: disable=g-import-not-at-top
  topology = preset("1cpu+2gpu")
  graph = random_dag(25, seed=7)
  rng = np.random.default_rng(0)
  simulate(graph, rng.integers(0, 3, (4, 25)), topology)
  before = simulator._simulate_jit._cache_size()
  for _ in range(3):
    simulate(graph, rng.integers(0, 3, (4, 25)), topology)
  assert simulator._simulate_jit._cache_size() == before


def test_single_placement_and_result_type():
  topology = preset("1cpu+2gpu")
  graph = random_dag(10, seed=0)
  result = gplace.simulate(graph, np.zeros(10, int), topology)
  assert isinstance(result, gplace.SimResult) and result is not None
  assert np.shape(result.runtime_s) == ()
  assert np.shape(result.peak_bytes) == (3,)
  assert result.start_s is None
  assert isinstance(result, SimResult)


def test_bad_input_raises_gplace_errors():
  topology = preset("1cpu+2gpu")
  graph = random_dag(10, seed=0)
  ok = np.zeros(10, int)
  with pytest.raises(PlacementError, match="length 9"):
    simulate(graph, np.zeros(9, int), topology)
  with pytest.raises(PlacementError, match="device 3"):
    simulate(graph, np.full(10, 3), topology)
  with pytest.raises(PlacementError, match="device -1"):
    simulate(graph, np.full(10, -1), topology)
  with pytest.raises(PlacementError, match="integer"):
    simulate(graph, np.full(10, 0.5), topology)
  with pytest.raises(TopologyError, match="NaN"):
    simulate(graph, ok, topology, costs=np.full((10, 3), np.nan))
  with pytest.raises(TopologyError, match="shape"):
    simulate(graph, ok, topology, costs=np.ones((10, 2)))
  with pytest.raises(PlacementError, match="topological"):
    simulate(graph, ok, topology, order=np.arange(10)[::-1])
  with pytest.raises(PlacementError, match="permutation"):
    simulate(graph, ok, topology, order=np.zeros(10, int))
  with pytest.raises(TopologyError, match="Topology"):
    simulate(graph, ok, "1cpu+2gpu")
  with pytest.raises(TopologyError, match="at least one device"):
    Topology(devices=(), link_bandwidth=np.zeros((0, 0)),
             link_latency=np.zeros((0, 0)), compute_group=np.zeros(0))
  with pytest.raises(PlacementError, match="n_steps"):
    make_problem(random_dag(40, seed=1), topology, n_nodes=40, width=1)
  assert issubclass(PlacementError, GplaceError)


def test_exports():
  assert gplace.simulate is simulate
  assert gplace.lower_bound is lower_bound
  assert gplace.Topology is Topology


def test_one_kernel_loops_match_the_plain_scan(monkeypatch):
  from gplace.sim import kernel, simulator  # pylint: disable=g-import-not-at-top
  graph = random_dag(300, seed=11)
  topology = preset("1cpu+4gpu")
  problem = make_problem(graph, topology)
  placements = jnp.asarray(np.random.default_rng(0).integers(
      0, topology.n_devices, (8, problem.commit_step.shape[0])), jnp.int32)
  # A fresh function per variant: jit caches traces per function.
  fresh = lambda: jax.jit(lambda p, x: simulator.simulate_problem(p, x))
  with simulator.one_kernel_loops():
    fused_fn = fresh()
    fused = fused_fn(problem, placements)
    fused_text = fused_fn.lower(problem, placements).as_text()
  plain_fn = fresh()
  plain = plain_fn(problem, placements)
  if kernel._HAS_OP_METADATA and kernel.ONE_KERNEL_LOOPS:  # pylint: disable=protected-access
    assert "xla_cpu_small_call" in fused_text
  assert "xla_cpu_small_call" not in plain_fn.lower(
      problem, placements).as_text()
  monkeypatch.setattr(kernel, "ONE_KERNEL_LOOPS", False)
  with simulator.one_kernel_loops():
    switched_off = fresh()(problem, placements)
  np.testing.assert_array_equal(switched_off.runtime_s, plain.runtime_s)
  np.testing.assert_array_equal(fused.runtime_s, plain.runtime_s)
  np.testing.assert_array_equal(fused.peak_bytes, plain.peak_bytes)
