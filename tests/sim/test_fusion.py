"""Tests of fusion in the cost model (issue 49, items 1 and 2): the
contraction's costs against a per-group recomputation, ``gplace.simulate``
against the reference with fusion on random graphs, a hand-built chain with
an exact predicted time, and bad fusion decisions."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gplace.errors import FusionError, GplaceError
from gplace.graphs.fusion import (LIBRARY_OPS, UNFUSABLE, expand_order, fuse,
                                  from_consumers, group_rank)
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.sim.fusion import fused_costs
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import simulate
from gplace.sim.topology import Device, Topology, uniform_links
from gplace._testing import random_fusion
from sim_cases import RTOL, SETTINGS, is_topological, random_topology


def brute_force_group_bytes(graph: Graph, members: list[int]) -> float:
  """Bytes a fused group accesses, by the rule written out per member."""
  inside = set(members)
  total = 0.0
  for v in members:
    total += graph.bytes_accessed[v]
    consumers = set(graph.successors(v).tolist())
    for u in graph.predecessors(v).tolist():
      if u in inside:   # read from the kernel, not from memory
        e = np.flatnonzero((graph.edge_src == u) & (graph.edge_dst == v))[0]
        total -= graph.edge_bytes[e]
    if consumers and consumers <= inside:   # never written out
      total -= graph.out_bytes[v]
  return max(total, 0.0)


@SETTINGS
@given(n_nodes=st.integers(3, 36), n_devices=st.integers(1, 3),
       seed=st.integers(0, 10**6), measured=st.booleans())
def test_contracted_costs_match_a_per_group_recomputation(
    n_nodes, n_devices, seed, measured):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placement = rng.integers(0, n_devices, n_nodes)
  fusion = fuse(graph, random_fusion(graph, placement, rng))
  costs = (rng.uniform(1e-6, 1e-3, (n_nodes, n_devices)) if measured
           else None)
  table = fused_costs(fusion, graph, topology, costs)
  member_roofline = topology.op_costs(graph)
  for group in range(fusion.n_groups):
    members = fusion.members(group).tolist()
    if len(members) == 1:
      expected = (member_roofline[members[0]] if costs is None
                  else costs[members[0]])
    else:
      flops = graph.flops[members].sum()
      nbytes = brute_force_group_bytes(graph, members)
      roofline = topology.time_scale * np.maximum(
          flops / topology.peak_flops, nbytes / topology.mem_bandwidth
      ) + topology.launch_overhead_s       # one launch for the group
      expected = roofline if costs is None else (
          roofline * costs[members].sum(0)
          / member_roofline[members].sum(0))
    np.testing.assert_allclose(table[group], expected, rtol=1e-12)
  # The contracted graph keeps every value that leaves a group, only those.
  leaving = np.zeros(graph.n_nodes, bool)
  leaving[graph.edge_src[fusion.group_of[graph.edge_src]
                         != fusion.group_of[graph.edge_dst]]] = True
  leaving |= graph.out_degree == 0
  assert fusion.graph.out_bytes.sum() == graph.out_bytes[leaving].sum()


@SETTINGS
@given(n_nodes=st.integers(3, 36), n_devices=st.integers(1, 4),
       seed=st.integers(0, 10**6), measured=st.booleans(),
       schedule=st.sampled_from(["static", "dynamic", "planned", "best"]))
def test_simulator_agrees_with_the_reference_under_fusion(
    n_nodes, n_devices, seed, measured, schedule):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (2, n_nodes)).astype(np.int32)
  placements[1] = placements[0]          # one decision fits both rows
  labels = random_fusion(graph, placements[0], rng)
  costs = (rng.uniform(1e-6, 1e-3, (n_nodes, n_devices)) if measured
           else None)
  result = simulate(graph, placements, topology, costs, schedule=schedule,
                    return_schedule=True, fusion=labels)
  group_of = fuse(graph, labels).group_of
  for k in range(2):
    order = result.order[k]
    assert is_topological(graph, order)
    # Members of a group run back to back, as one kernel: one run of equal
    # group ids per group.
    runs = np.flatnonzero(np.r_[True, np.diff(group_of[order]) != 0])
    assert len(runs) == len(np.unique(group_of))
    for ref in (simulate_reference(graph, placements[k], topology, costs,
                                   schedule=schedule, fusion=labels),
                simulate_reference(graph, placements[k], topology, costs,
                                   order=order, fusion=labels)):
      scale = max(ref.runtime_s, 1e-30)
      np.testing.assert_allclose(float(result.runtime_s[k]), ref.runtime_s,
                                 rtol=RTOL)
      np.testing.assert_allclose(result.start_s[k], ref.start_s, rtol=0,
                                 atol=RTOL * scale)
      np.testing.assert_allclose(result.finish_s[k], ref.finish_s, rtol=0,
                                 atol=RTOL * scale)
      np.testing.assert_allclose(result.peak_bytes[k], ref.peak_bytes,
                                 rtol=RTOL)


@SETTINGS
@given(n_nodes=st.integers(3, 36), n_devices=st.integers(1, 3),
       seed=st.integers(0, 10**6))
def test_no_fusion_is_the_unfused_simulation(n_nodes, n_devices, seed):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (3, n_nodes))
  plain = simulate(graph, placements, topology, return_schedule=True)
  alone = simulate(graph, placements, topology, return_schedule=True,
                   fusion=np.full(n_nodes, -1))
  for field in ("runtime_s", "peak_bytes", "start_s", "finish_s", "order"):
    np.testing.assert_array_equal(getattr(alone, field),
                                  getattr(plain, field))


@SETTINGS
@given(n_nodes=st.integers(3, 36), seed=st.integers(0, 10**6))
def test_fusing_on_one_device_never_slows_a_static_order(n_nodes, seed):
  # One device, no transfers: the runtime is the sum of the kernels, and a
  # group's roofline is at most its members' (max of sums <= sum of maxes,
  # fewer bytes, fewer launches).
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, 1)
  placement = np.zeros(n_nodes, np.int32)
  labels = random_fusion(graph, placement, rng)
  fused = simulate(graph, placement, topology, schedule="static",
                   fusion=labels)
  plain = simulate(graph, placement, topology, schedule="static")
  assert float(fused.runtime_s) <= float(plain.runtime_s) * (1 + 1e-6)


def chain_graph(nbytes: int) -> Graph:
  """x -> a (add) -> b (tanh) -> c (mul) -> out; every op reads and writes
  ``nbytes`` (memory bound), the output node holds no bytes of its own."""
  return Graph.build(
      names=["x", "a", "b", "c", "out"],
      op_type=["input", "add", "tanh", "mul", "output"],
      kind=[NODE_INPUT, NODE_OP, NODE_OP, NODE_OP, NODE_OUTPUT],
      out_shapes=[(nbytes // 4,)] * 5, out_dtype=["float32"] * 5,
      out_bytes=[nbytes] * 4 + [0], flops=[0, 8, 8, 8, 0],
      bytes_accessed=[0, 2 * nbytes, 2 * nbytes, 2 * nbytes, 0],
      edges=[(0, 1, nbytes), (1, 2, nbytes), (2, 3, nbytes),
             (3, 4, nbytes)], name="chain")


def test_a_fused_chain_takes_the_predicted_time_and_memory():
  nbytes = 1 << 20
  bandwidth, launch = 1e11, 1e-5
  device = Device("gpu:0", "gpu", peak_flops=1e14, mem_bandwidth=bandwidth,
                  memory_bytes=1e9, launch_overhead_s=launch)
  links, latency = uniform_links(1, 1e10, 0.0)
  topology = Topology(devices=(device,), link_bandwidth=links,
                      link_latency=latency, compute_group=np.zeros(1, np.int64),
                      name="one")
  graph = chain_graph(nbytes)
  labels = np.array([-1, 0, 0, 0, -1])
  fusion = fuse(graph, labels)
  # Saved: b and c read a and b from the kernel (2 reads), and a's and b's
  # outputs are never written (2 writes).
  assert fusion.n_groups == 3
  np.testing.assert_array_equal(fusion.saved_bytes, [0, 4 * nbytes, 0])
  plain = simulate_reference(graph, np.zeros(5), topology, schedule="static")
  fused = simulate_reference(graph, np.zeros(5), topology, schedule="static",
                             fusion=labels)
  fast = simulate(graph, np.zeros(5, np.int32), topology, schedule="static",
                  fusion=labels, return_schedule=True)
  assert plain.runtime_s == pytest.approx(3 * (2 * nbytes / bandwidth
                                               + launch), rel=1e-12)
  # One kernel: x read once, c written once, one launch.
  predicted = 2 * nbytes / bandwidth + launch
  assert fused.runtime_s == pytest.approx(predicted, rel=1e-12)
  assert float(fast.runtime_s) == pytest.approx(predicted, rel=1e-6)
  # Saved exactly 4 * nbytes of traffic and 2 launches.
  assert plain.runtime_s - fused.runtime_s == pytest.approx(
      4 * nbytes / bandwidth + 2 * launch, rel=1e-9)
  np.testing.assert_allclose(fast.start_s, [0, 0, 0, 0, predicted],
                             atol=1e-12)
  np.testing.assert_allclose(fast.finish_s[1:4], predicted, rtol=1e-6)
  # Memory: unfused, x, a and b are live at b; fused, a and b never exist.
  assert plain.peak_bytes[0] == 3 * nbytes
  assert fused.peak_bytes[0] == 2 * nbytes
  assert float(fast.peak_bytes[0]) == 2 * nbytes


def test_from_consumers_joins_chains():
  graph = chain_graph(64)
  labels = from_consumers(graph, [-1, 2, 3, -1, -1])
  assert labels[0] == -1 and labels[4] == -1
  assert labels[1] == labels[2] == labels[3] >= 0
  assert fuse(graph, labels).n_groups == 3


def test_group_order_round_trips():
  graph = random_dag(30, seed=3)
  placement = np.zeros(30, np.int32)
  fusion = fuse(graph, random_fusion(graph, placement,
                                     np.random.default_rng(0)))
  order = expand_order(fusion, np.arange(fusion.n_groups))
  assert is_topological(graph, order)
  np.testing.assert_array_equal(group_rank(fusion, order),
                                np.arange(fusion.n_groups))


# -- bad decisions ------------------------------------------------------------


def graph_with(op_types) -> Graph:
  """input -> op_0 -> op_1 -> ... -> output, with these op types."""
  n = len(op_types) + 2
  return Graph.build(
      names=[f"n{i}" for i in range(n)],
      op_type=["input", *op_types, "output"],
      kind=[NODE_INPUT] + [NODE_OP] * len(op_types) + [NODE_OUTPUT],
      out_shapes=[(4,)] * n, out_dtype=["float32"] * n, out_bytes=[16] * n,
      flops=[0] + [4] * len(op_types) + [0], bytes_accessed=[32] * n,
      edges=[(i, i + 1, 16) for i in range(n - 1)])


@pytest.mark.parametrize("fusion, match", [
    (np.zeros(3, np.int64), "shape"),
    (np.zeros(5, np.float32), "dtype"),
    (np.array([-1, 0, 0, -2, -1]), "below -1"),
    (np.array([0, 0, -1, -1, -1]), "input or output"),
    ("abc", "integer"),
])
def test_malformed_labels_raise(fusion, match):
  with pytest.raises(FusionError, match=match):
    fuse(graph_with(["add", "mul", "tanh"]), fusion)


@pytest.mark.parametrize("op_type", sorted({"scan", "while", "cond",
                                            "psum", "io_callback"}))
def test_ops_that_cannot_share_a_kernel_raise(op_type):
  assert op_type in UNFUSABLE
  with pytest.raises(FusionError, match="never shares a kernel"):
    fuse(graph_with(["add", op_type, "tanh"]), [-1, 0, 0, -1, -1])


def test_two_matmuls_in_one_kernel_raise():
  assert "dot_general" in LIBRARY_OPS
  with pytest.raises(FusionError, match="at most one"):
    fuse(graph_with(["dot_general", "add", "dot_general"]),
         [-1, 0, 0, 0, -1])
  fuse(graph_with(["dot_general", "add", "mul"]), [-1, 0, 0, 0, -1])


def test_a_group_that_is_not_convex_raises():
  # a -> b -> c with a and c fused but b outside: a path leaves and returns.
  with pytest.raises(FusionError, match="convex"):
    fuse(graph_with(["add", "mul", "tanh"]), [-1, 0, -1, 0, -1])


def test_a_group_split_across_devices_raises():
  graph = graph_with(["add", "mul", "tanh"])
  topology = random_topology(np.random.default_rng(0), 2)
  with pytest.raises(FusionError, match="one device"):
    simulate(graph, np.array([0, 0, 1, 0, 0]), topology,
             fusion=[-1, 0, 0, -1, -1])
  with pytest.raises(FusionError, match="one device"):
    simulate_reference(graph, np.array([0, 0, 1, 0, 0]), topology,
                       fusion=[-1, 0, 0, -1, -1])


def test_fuse_into_a_non_consumer_raises():
  with pytest.raises(FusionError, match="does not read"):
    from_consumers(graph_with(["add", "mul", "tanh"]), [-1, 3, -1, -1, -1])
  assert issubclass(FusionError, GplaceError)


def test_a_group_whose_ops_allow_no_common_device_raises():
  graph = graph_with(["add", "mul", "tanh"])
  allowed = np.ones((5, 2), bool)
  allowed[1] = [True, False]
  allowed[2] = [False, True]
  graph = graph.replace(allowed_devices=allowed)
  with pytest.raises(FusionError, match="no device in common"):
    fuse(graph, [-1, 0, 0, -1, -1])
  fuse(graph, [-1, -1, 0, 0, -1])


def test_orders_and_priorities_per_placement_map_onto_groups():
  rng = np.random.default_rng(4)
  graph = random_dag(24, seed=4)
  topology = random_topology(rng, 2)
  placements = np.stack([rng.integers(0, 2, 24)] * 2).astype(np.int32)
  labels = random_fusion(graph, placements[0], rng)
  first = simulate(graph, placements, topology, schedule="dynamic",
                   return_schedule=True, fusion=labels)
  again = simulate(graph, placements, topology, order=first.order,
                   return_schedule=True, fusion=labels)
  np.testing.assert_allclose(again.runtime_s, first.runtime_s, rtol=1e-6)
  np.testing.assert_array_equal(again.order, first.order)
  priority = rng.random((2, 24))
  steered = simulate(graph, placements, topology, priority=priority,
                     schedule="dynamic", return_schedule=True, fusion=labels)
  for k in range(2):
    ref = simulate_reference(graph, placements[k], topology,
                             priority=priority[k], schedule="dynamic",
                             fusion=labels)
    np.testing.assert_allclose(float(steered.runtime_s[k]), ref.runtime_s,
                               rtol=RTOL)


@SETTINGS
@given(data=st.data())
def test_any_labels_fuse_or_raise_a_fusion_error(data):
  ops = data.draw(st.lists(st.sampled_from(
      ["add", "mul", "tanh", "dot_general", "scan", "reduce_sum"]),
      min_size=1, max_size=6))
  graph = graph_with(ops)
  labels = data.draw(st.lists(st.integers(-2, 3), min_size=graph.n_nodes,
                              max_size=graph.n_nodes))
  try:
    fusion = fuse(graph, labels)
  except FusionError:
    return
  assert fusion.graph.n_nodes == fusion.n_groups <= graph.n_nodes
  assert np.all(fusion.graph.edge_src < fusion.graph.edge_dst)
