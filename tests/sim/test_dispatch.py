"""Tests of gplace.sim.dispatch: per-placement schedules (list scheduling)
agree with the plain-Python reference, reproduce themselves through the
shared-order scan, and follow the dynamic rule on schedules worked out by
hand."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace.errors import PlacementError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.graphs.graph import random_dag
from gplace.sim import kernel
from gplace.sim.dispatch import (dispatch_problem, make_dispatch_problem,
                                 simulate_dispatch, width_ladder)
from gplace.sim.priority import bottom_level, order_priority
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology
from sim_cases import (RTOL, SETTINGS, assert_close_to_reference,
                       is_topological, random_topology)


@pytest.fixture(autouse=True)
def _jitted_scheduler(monkeypatch):
  """gplace.simulate through the jitted list scheduler (the compiled host
  one, gplace.sim.native, has its own tests against it)."""
  monkeypatch.setenv("GPLACE_NATIVE", "0")


@settings(SETTINGS, max_examples=9)
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10_000), dynamic=st.booleans())
def test_dispatch_matches_reference(n_nodes, n_devices, seed, dynamic):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (3, n_nodes))
  priority = rng.normal(size=(3, n_nodes)).astype(np.float32)
  result = simulate(graph, placements, topology, priority=priority,
                    schedule="dynamic" if dynamic else "static",
                    return_schedule=True)
  for k in range(3):
    ref = simulate_reference(graph, placements[k], topology,
                             priority=priority[k],
                             schedule="dynamic" if dynamic else "static")
    np.testing.assert_array_equal(result.order[k], ref.order)
    assert_close_to_reference(result, k, ref)


@settings(SETTINGS, max_examples=5)
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10_000))
def test_dynamic_schedule_reproduces_through_the_shared_order_scan(
    n_nodes, n_devices, seed):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (4, n_nodes))
  dynamic = simulate(graph, placements, topology, schedule="dynamic",
                     return_schedule=True)
  for k in range(4):
    assert is_topological(graph, dynamic.order[k])
    again = simulate(graph, placements[k], topology, order=dynamic.order[k],
                     return_schedule=True)
    scale = max(float(again.runtime_s), 1e-30)
    np.testing.assert_allclose(float(dynamic.runtime_s[k]),
                               float(again.runtime_s), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dynamic.start_s[k]),
                               np.asarray(again.start_s), atol=RTOL * scale)
    np.testing.assert_allclose(np.asarray(dynamic.peak_bytes[k]),
                               np.asarray(again.peak_bytes), rtol=RTOL)
    ref = simulate_reference(graph, placements[k], topology,
                             order=dynamic.order[k])
    np.testing.assert_allclose(float(dynamic.runtime_s[k]), ref.runtime_s,
                               rtol=RTOL)


def test_per_sample_orders_equal_one_shared_order_each():
  graph = random_dag(30, seed=4)
  topology = preset("1cpu+2gpu")
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 3, (3, 30))
  orders = np.stack([
      np.arange(30), simulate(graph, placements[1], topology,
                              schedule="dynamic", return_schedule=True).order,
      np.argsort(-bottom_level(graph, topology), kind="stable")])
  assert all(is_topological(graph, o) for o in orders)
  batched = simulate(graph, placements, topology, order=orders,
                     return_schedule=True)
  for k in range(3):
    one = simulate(graph, placements[k], topology, order=orders[k],
                   return_schedule=True)
    np.testing.assert_array_equal(batched.order[k], orders[k])
    np.testing.assert_allclose(float(batched.runtime_s[k]),
                               float(one.runtime_s), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(batched.peak_bytes[k]),
                               np.asarray(one.peak_bytes), rtol=RTOL)


def _graph(names, kinds, edges):
  n = len(names)
  return Graph.build(
      names=names, op_type=[k.lower() for k in kinds],
      kind=[{"IN": NODE_INPUT, "OP": NODE_OP, "OUT": NODE_OUTPUT}[k]
            for k in kinds],
      out_shapes=[(1,)] * n, out_dtype=["float32"] * n, out_bytes=[4] * n,
      flops=[0] * n, bytes_accessed=[0] * n,
      edges=[(s, t, 4) for s, t in edges], name="by_hand")


def _two_devices(latency_s: float) -> Topology:
  """Two devices in their own compute groups; a transfer takes
  ``latency_s`` (bandwidth is practically infinite)."""
  devices = tuple(Device(f"dev:{i}", "gpu", peak_flops=1e12,
                         mem_bandwidth=1e11, memory_bytes=1e9)
                  for i in range(2))
  return Topology(devices=devices, link_bandwidth=np.full((2, 2), 1e15),
                  link_latency=np.array([[0.0, latency_s], [latency_s, 0.0]]),
                  compute_group=np.arange(2), name="two")


def test_dynamic_rule_by_hand():
  # x -> a (long) -> out_a and x -> b (short) -> c -> out_c.
  graph = _graph(["x", "a", "b", "c", "out_a", "out_c"],
                 ["IN", "OP", "OP", "OP", "OUT", "OUT"],
                 [(0, 1), (0, 2), (2, 3), (1, 4), (3, 5)])
  topology = _two_devices(3.0)
  costs = np.zeros((6, 2))
  costs[1], costs[2], costs[3] = 5.0, 1.0, 1.0
  # a on device 1 (x's output arrives at 3), b and c on device 0.
  split = simulate(graph, np.array([0, 1, 0, 0, 1, 0]), topology, costs,
                   schedule="dynamic", return_schedule=True)
  np.testing.assert_allclose(np.asarray(split.start_s)[[1, 2, 3]], [3.0, 0.0, 1.0],
                             atol=1e-6)
  # All on one device: the critical path (a, bottom level 5) runs first.
  together = simulate(graph, np.zeros(6, int), topology, costs,
                      schedule="dynamic", return_schedule=True)
  np.testing.assert_allclose(np.asarray(together.start_s)[[1, 2, 3]], [0.0, 5.0, 6.0])
  # A priority that prefers b runs b and c first.
  prefer_b = np.array([0, 0, 9, 9, 0, 0], np.float32)
  steered = simulate(graph, np.zeros(6, int), topology, costs,
                     priority=prefer_b, schedule="dynamic",
                     return_schedule=True)
  np.testing.assert_allclose(np.asarray(steered.start_s)[[1, 2, 3]], [2.0, 0.0, 1.0])
  np.testing.assert_array_equal(steered.order[:4], [0, 2, 3, 1])


def test_dynamic_runs_an_arrived_op_rather_than_wait_for_priority():
  # x0 -> a (high priority, its input arrives at 3), x1 -> b (arrived).
  graph = _graph(["x0", "x1", "a", "b", "out_a", "out_b"],
                 ["IN", "IN", "OP", "OP", "OUT", "OUT"],
                 [(0, 2), (1, 3), (2, 4), (3, 5)])
  topology = _two_devices(3.0)
  costs = np.zeros((6, 2))
  costs[2], costs[3] = 5.0, 1.0
  placement = np.array([0, 1, 1, 1, 1, 1])
  dynamic = simulate(graph, placement, topology, costs, schedule="dynamic",
                     return_schedule=True)
  np.testing.assert_allclose(np.asarray(dynamic.start_s)[[2, 3]], [3.0, 0.0], atol=1e-6)
  np.testing.assert_allclose(float(dynamic.runtime_s), 8.0, atol=1e-6)
  # The static order of the same priorities waits for a: one second more.
  static = simulate(graph, placement, topology, costs,
                    priority=bottom_level(graph, topology, costs),
                    schedule="static", return_schedule=True)
  np.testing.assert_allclose(float(static.runtime_s), 9.0, atol=1e-6)
  ref = simulate_reference(graph, placement, topology, costs,
                           schedule="dynamic")
  np.testing.assert_allclose(ref.runtime_s, 8.0, atol=1e-6)


def test_budget_padding_and_jit_of_the_raw_function():
  graph = random_dag(20, seed=1)
  topology = preset("1cpu+2gpu")
  exact = make_dispatch_problem(graph, topology)
  padded = make_dispatch_problem(graph, topology, n_nodes=32, n_edges=80)
  rng = np.random.default_rng(1)
  placement = rng.integers(0, 3, (2, 20))
  priority = bottom_level(graph, topology).astype(np.float32)
  a = simulate_dispatch(exact, jnp.asarray(placement), priority, dynamic=True)
  wide = np.pad(placement, ((0, 0), (0, 12)))
  b = simulate_dispatch(padded, jnp.asarray(wide),
                        np.pad(priority, (0, 12)), dynamic=True)
  np.testing.assert_allclose(np.asarray(a.runtime_s), np.asarray(b.runtime_s),
                             rtol=RTOL)
  np.testing.assert_allclose(np.asarray(a.finish_s),
                             np.asarray(b.finish_s)[:, :20], rtol=RTOL)
  # Problems of one budget stack and vmap.
  other = make_dispatch_problem(random_dag(25, seed=2), topology, n_nodes=32,
                                n_edges=80)
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), padded, other)
  both = jax.vmap(lambda p: simulate_dispatch(
      p, jnp.asarray(wide), np.pad(priority, (0, 12)), dynamic=True))(stacked)
  np.testing.assert_allclose(np.asarray(both.runtime_s[0]),
                             np.asarray(b.runtime_s), rtol=RTOL)
  with pytest.raises(PlacementError, match="budget"):
    make_dispatch_problem(graph, topology, n_nodes=10)


def test_order_priority_inverts_positions():
  order = np.array([[2, 0, 1], [0, 1, 2]])
  priority = order_priority(order)
  np.testing.assert_array_equal(np.argsort(-priority, axis=1), order)


def _fan(width: int) -> Graph:
  """x -> ``width`` parallel ops (also ``width`` roots) -> one sum -> out."""
  n_ops = 2 * width
  names = (["x"] + [f"a{i}" for i in range(width)]
           + [f"r{i}" for i in range(width)] + ["sum", "out"])
  kinds = ["IN"] + ["OP"] * n_ops + ["OP", "OUT"]
  total = 1 + n_ops
  edges = ([(0, 1 + i) for i in range(width)]
           + [(1 + i, total) for i in range(n_ops)] + [(total, total + 1)])
  return _graph(names, kinds, edges)


def test_the_width_ladder_grows_eightfold_then_one_slot_per_node():
  assert width_ladder(64, 2560) == (64, 512, 2560)
  assert width_ladder(64, 40) == (40,)
  assert width_ladder(4, 28) == (4, 28)
  assert width_ladder(3, 28) == (3, 28)     # 24 is past half of 28
  assert width_ladder(1, 100) == (1, 8, 100)
  assert width_ladder(64, 4882) == (64, 512, 4882)
  assert width_ladder(64, 10000) == (64, 512, 4096, 10000)


@pytest.mark.parametrize("dynamic,width", [(True, 4), (False, 4),
                                           (True, 1)])
def test_a_full_candidate_buffer_falls_back_to_the_exact_schedule(dynamic,
                                                                  width):
  # 12 executed roots and a frontier of 24: a 4-slot buffer overflows at
  # once, so the batch is scheduled again with a wider buffer (1 slot: 8,
  # then 28; else 28); the results are those of an unbounded buffer and of
  # the reference.
  graph = _fan(12)
  topology = preset("1cpu+2gpu")
  problem = make_dispatch_problem(graph, topology)
  rng = np.random.default_rng(3)
  placements = jnp.asarray(rng.integers(0, 3, (3, graph.n_nodes)))
  priority = rng.normal(size=(3, graph.n_nodes)).astype(np.float32)
  narrow = simulate_dispatch(problem, placements, priority, dynamic=dynamic,
                             width=width)
  full = simulate_dispatch(problem, placements, priority, dynamic=dynamic,
                           width=graph.n_nodes)
  np.testing.assert_array_equal(np.asarray(narrow.order),
                                np.asarray(full.order))
  np.testing.assert_array_equal(np.asarray(narrow.finish_s),
                                np.asarray(full.finish_s))
  for k in range(3):
    ref = simulate_reference(graph, np.asarray(placements[k]), topology,
                             priority=priority[k],
                             schedule="dynamic" if dynamic else "static")
    np.testing.assert_array_equal(np.asarray(full.order[k]), ref.order)
    np.testing.assert_allclose(float(full.runtime_s[k]), ref.runtime_s,
                               rtol=RTOL)


def test_buffer_overflow_is_detected():
  from gplace.sim.list_kernel import GraphArrays, LaneArrays, init_state
  graph = _fan(12)
  problem = make_dispatch_problem(graph, preset("1cpu+2gpu"))
  lanes = LaneArrays(*(jnp.zeros((1, graph.n_nodes + 1), jnp.int32),) * 6,
                     n_stream=jnp.zeros((1,), jnp.int32))
  arrays = GraphArrays(problem.succ_ptr, problem.succ_dst, problem.executed,
                       problem.send_s, problem.in_degree)
  assert bool(init_state(arrays, lanes, 3, width=4).overflow[0])
  assert not bool(init_state(arrays, lanes, 3, width=16).overflow[0])


def test_one_kernel_and_plain_loops_agree_bit_for_bit():
  graph = random_dag(60, seed=5)
  topology = preset("1cpu+4gpu")
  problem = make_dispatch_problem(graph, topology)
  placements = jnp.asarray(np.random.default_rng(5).integers(0, 5, (4, 60)))
  priority = jnp.asarray(bottom_level(graph, topology), jnp.float32)
  run = lambda: jax.jit(functools.partial(dispatch_problem, dynamic=True,
                                          width=8))(problem, placements,
                                                    priority)
  plain = run()
  with kernel.one_kernel_loops():
    fused = run()
  for a, b in zip(plain, fused):
    if a is not None:
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_simulate_pads_to_shape_buckets_without_changing_results():
  # simulate() pads nodes, edges and placements to shape buckets; the
  # unpadded list scheduler gives the same schedules.
  graph = random_dag(37, seed=6)
  topology = preset("1cpu+2gpu")
  placements = np.random.default_rng(6).integers(0, 3, (3, 37))
  result = simulate(graph, placements, topology, schedule="dynamic",
                    return_schedule=True)
  exact = simulate_dispatch(make_dispatch_problem(graph, topology),
                            jnp.asarray(placements),
                            bottom_level(graph, topology).astype(np.float32),
                            dynamic=True)
  np.testing.assert_array_equal(result.order, np.asarray(exact.order))
  np.testing.assert_array_equal(np.asarray(result.finish_s),
                                np.asarray(exact.finish_s))
  np.testing.assert_array_equal(np.asarray(result.peak_bytes),
                                np.asarray(exact.peak_bytes))


def test_the_default_schedule_is_dynamic_unless_an_order_is_given():
  graph = random_dag(30, seed=2, n_inputs=4)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(3).integers(0, 5, (4, 30))
  default = simulate(graph, placements, topology, return_schedule=True)
  dynamic = simulate(graph, placements, topology, schedule="dynamic",
                     return_schedule=True)
  np.testing.assert_array_equal(default.order, dynamic.order)
  np.testing.assert_array_equal(np.asarray(default.runtime_s),
                                np.asarray(dynamic.runtime_s))
  assert not np.array_equal(default.order[0], np.arange(30))
  given = simulate(graph, placements, topology, order=np.arange(30),
                   return_schedule=True)
  static = simulate(graph, placements, topology, schedule="static",
                    return_schedule=True)
  np.testing.assert_array_equal(given.order, static.order)
  np.testing.assert_array_equal(np.asarray(given.runtime_s),
                                np.asarray(static.runtime_s))
  ref = simulate_reference(graph, placements[0], topology)
  np.testing.assert_array_equal(default.order[0], ref.order)
