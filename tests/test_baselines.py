"""Tests of gplace.baselines on small random DAGs and synthetic named graphs."""

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from gplace import baselines
from gplace.baselines import common as baselines_common
from gplace.baselines import sct as baselines_sct
from gplace import simulate
from gplace.errors import GplaceError, GraphError, TopologyError
from gplace.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT, random_dag
from gplace.topology import Device, Topology, preset, uniform_links

# One graph size for every simulator test, so that its jit compiles once.
SIM_NODES = 512


def make_topology(devices, name="test"):
  bandwidth, latency = uniform_links(len(devices), 12e9, 25e-6)
  return Topology(devices=tuple(devices), link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(len(devices)),
                  name=name)


def gpu(i, memory=12e9, flops=3e12):
  return Device(f"gpu:{i}", "gpu", peak_flops=flops, mem_bandwidth=240e9,
                memory_bytes=memory, launch_overhead_s=10e-6)


def cpu(memory=128e9):
  return Device("cpu:0", "cpu", peak_flops=0.66e12, mem_bandwidth=68e9,
                memory_bytes=memory, launch_overhead_s=5.7e-6)


def chain_graph(layer_names, ops_per_layer=3, name="graph", param_bytes=4096):
  """Input -> ops of layer 0 -> ops of layer 1 -> ... -> output.

  Each layer also has a parameter input read by its first op.
  """
  names, kinds, edges = ["batch/x"], [NODE_INPUT], []
  prev = 0
  for layer in layer_names:
    names.append(f"params/{layer}/kernel")
    kinds.append(NODE_INPUT)
    param = len(names) - 1
    for k in range(ops_per_layer):
      names.append(f"{layer}/op{k}/dot_general")
      kinds.append(NODE_OP)
      node = len(names) - 1
      edges.append((prev, node, 4096))
      if k == 0:
        edges.append((param, node, param_bytes))
      prev = node
  names.append("loss/reduce_sum")
  kinds.append(NODE_OP)
  edges.append((prev, len(names) - 1, 4096))
  names.append("output/0")
  kinds.append(NODE_OUTPUT)
  edges.append((len(names) - 2, len(names) - 1, 4))
  n = len(names)
  return Graph.build(
      names=names, op_type=["dot_general"] * n, kind=kinds,
      out_shapes=[(1024,)] * n, out_dtype=["float32"] * n,
      out_bytes=[4096] * n, flops=[1e9 if k == NODE_OP else 0 for k in kinds],
      bytes_accessed=[8192] * n, edges=edges, name=name)


def cut_bytes(graph, placement):
  cut = placement[graph.edge_src] != placement[graph.edge_dst]
  return int(graph.edge_bytes[cut].sum())


# -- registry and input checks -------------------------------------------------


def test_names_and_get():
  assert baselines.names() == [
      "single_device", "round_robin", "random", "expert", "metis", "m_topo",
      "m_etf", "m_sct", "heft", "ordered_eft"]
  assert baselines.schedulers() == ["m_etf", "m_sct", "heft", "ordered_eft"]
  for name in baselines.names():
    assert callable(baselines.get(name))
  with pytest.raises(GplaceError, match="m_etf"):
    baselines.get("nope")


def test_bad_inputs_raise_gplace_errors():
  graph = random_dag(40, seed=0)
  topology = preset("1cpu+2gpu")
  with pytest.raises(GraphError):
    baselines.m_etf("not a graph", topology)
  with pytest.raises(TopologyError):
    baselines.heft(graph, "1cpu+2gpu")
  with pytest.raises(TopologyError, match="costs"):
    baselines.m_topo(graph, topology, costs=np.ones((3, 3)))
  with pytest.raises(TopologyError):
    make_topology([])


# -- every baseline on random DAGs ---------------------------------------------


@pytest.mark.parametrize("topology_name", ["1cpu+2gpu", "1cpu+4gpu", "8xh100"])
def test_every_baseline_returns_valid_placement(topology_name):
  topology = preset(topology_name)
  for seed in (0, 1):
    graph = random_dag(300, seed=seed)
    placements = baselines.run_all(graph, topology)
    assert list(placements) == baselines.names()
    for name, placement in placements.items():
      assert placement.shape == (graph.n_nodes,), name
      assert placement.dtype == np.int32, name
      assert placement.min() >= 0 and placement.max() < topology.n_devices
    resident = baselines.resident_bytes(graph, placements["random"],
                                        topology.n_devices)
    assert resident.sum() == graph.out_bytes.sum()


@settings(max_examples=15, deadline=None)
@given(n_nodes=st.integers(2, 60), seed=st.integers(0, 10**6),
       avg_degree=st.floats(1.0, 4.0), n_gpus=st.integers(1, 3))
def test_tiny_graphs_any_baseline(n_nodes, seed, avg_degree, n_gpus):
  graph = random_dag(n_nodes, seed=seed, avg_degree=avg_degree)
  topology = make_topology([cpu()] + [gpu(i) for i in range(n_gpus)])
  for name, placement in baselines.run_all(graph, topology).items():
    assert placement.shape == (n_nodes,), name
    assert placement.min() >= 0 and placement.max() <= n_gpus, name
  for name in baselines.schedulers():
    check_schedule(graph, topology, topology.op_costs(graph),
                   baselines.plan(name, graph, topology))


def test_one_device_topology():
  topology = make_topology([gpu(0)])
  graph = random_dag(100, seed=3)
  for name, placement in baselines.run_all(graph, topology).items():
    assert np.all(placement == 0), name


def test_deterministic_for_a_seed():
  graph = random_dag(200, seed=4)
  topology = preset("1cpu+4gpu")
  first = baselines.run_all(graph, topology, seed=7)
  second = baselines.run_all(graph, topology, seed=7)
  for name in baselines.names():
    np.testing.assert_array_equal(first[name], second[name])
  other = baselines.random(graph, topology, seed=8)
  assert not np.array_equal(other, first["random"])


def tight_topology(graph, fraction=0.7, n_gpus=3):
  """GPUs that each hold ``fraction`` of the single-device peak."""
  peak = baselines.single_device_peak_bytes(graph)
  return make_topology([gpu(i, memory=fraction * peak)
                        for i in range(n_gpus)])


@pytest.mark.parametrize("name", baselines.schedulers())
def test_schedulers_keep_live_bytes_within_capacity(name):
  graph = random_dag(600, seed=2)
  # HEFT commits nodes in rank order, far from time order, which keeps many
  # more tensors live at once: it needs more room to find a fitting plan.
  topology = tight_topology(graph, 1.0 if name == "heft" else 0.7)
  plan = baselines.plan(name, graph, topology)
  assert np.all(plan.peak_bytes <= topology.memory_bytes), plan.peak_bytes
  assert np.unique(plan.placement).size >= 2  # it had to spread


@pytest.mark.parametrize("name", ["m_topo", "ordered_eft"])
def test_id_order_baselines_fit_in_simulator(name):
  # m_topo and ordered_eft commit nodes in id order, the simulator's default,
  # so their memory bound holds there too.
  graph = random_dag(SIM_NODES, seed=2)
  topology = tight_topology(graph)
  placement = baselines.get(name)(graph, topology)
  result = simulate(graph, placement, topology)
  assert not bool(result.oom), np.asarray(result.peak_bytes)


def test_single_device_peak_matches_simulator():
  topology = preset("1cpu+2gpu")
  for seed in (0, 1):
    graph = random_dag(SIM_NODES, seed=seed)
    result = simulate(graph, np.ones(graph.n_nodes, np.int32), topology)
    np.testing.assert_allclose(float(np.asarray(result.peak_bytes)[1]),
                               baselines.single_device_peak_bytes(graph),
                               rtol=1e-6)


def test_memory_aware_schedulers_skip_a_full_fast_device():
  graph = random_dag(300, seed=5)
  peak = baselines.single_device_peak_bytes(graph)
  # A roomy slow GPU, and a fast GPU that holds a third of the peak.
  topology = make_topology([gpu(0, memory=2 * peak, flops=0.3e12),
                            gpu(1, memory=0.3 * peak, flops=30e12)])
  for name in baselines.schedulers():
    plan = baselines.plan(name, graph, topology)
    assert plan.peak_bytes[1] <= 0.3 * peak, name
    assert np.any(plan.placement == 1), name


# -- individual baselines ------------------------------------------------------


def test_single_device_picks_fastest_device_that_fits():
  graph = random_dag(200, seed=6)
  peak = baselines.single_device_peak_bytes(graph)
  # The peak of live bytes, not the sum of all outputs, must fit.
  assert peak < 0.5 * graph.out_bytes.sum()
  topology = make_topology([
      cpu(memory=10 * peak),                        # fits, slow
      gpu(0, memory=0.9 * peak, flops=100e12),      # fastest, too small
      gpu(1, memory=1.1 * peak, flops=3e12),        # fits, fast
      gpu(2, memory=2 * peak, flops=1e12),          # fits, slower
  ])
  placement = baselines.single_device(graph, topology)
  assert np.all(placement == 2)
  # Measured costs override the roofline.
  costs = np.ones((graph.n_nodes, 4))
  costs[:, 3] = 0.1
  assert np.all(baselines.single_device(graph, topology, costs=costs) == 3)
  # Nothing fits: the largest memory.
  small = make_topology([gpu(0, memory=0.1 * peak),
                         gpu(1, memory=0.3 * peak, flops=1e12)])
  assert np.all(baselines.single_device(graph, small) == 1)


def test_round_robin_and_random_spread_over_all_devices():
  graph = random_dag(500, seed=0)
  topology = preset("1cpu+4gpu")
  assert np.all(np.bincount(baselines.round_robin(graph, topology)) == 100)
  counts = np.bincount(baselines.random(graph, topology), minlength=5)
  assert np.all(counts > 60)


def test_metis_cuts_fewer_bytes_than_random():
  topology = preset("1cpu+4gpu")
  for seed in (0, 1):
    graph = random_dag(800, seed=seed)
    placement = baselines.metis(graph, topology, seed=seed)
    assert np.all(placement >= 1)  # GPUs only
    assert np.unique(placement).size == 4
    assert cut_bytes(graph, placement) < 0.5 * cut_bytes(
        graph, baselines.random(graph, topology, seed=seed))


def test_m_topo_fills_gpus_in_topological_blocks():
  graph = random_dag(400, seed=1)
  topology = preset("1cpu+4gpu")
  placement = baselines.m_topo(graph, topology)
  ops = placement[graph.kind != NODE_INPUT]
  assert np.all(ops >= 1)
  assert np.all(np.diff(ops) >= 0)  # contiguous blocks, in order
  assert np.unique(ops).size == 4


def check_schedule(graph, topology, costs, schedule):
  """The planned schedule obeys data dependences, and each compute group
  runs one op at a time."""
  placement = schedule.placement
  scheduled = graph.kind != NODE_INPUT
  src, dst = graph.edge_src, graph.edge_dst
  arrive = np.where(
      scheduled[src], schedule.finish_s[src], 0.0) + topology.transfer_time(
          graph.edge_bytes, placement[src], placement[dst])
  assert np.all(schedule.start_s[dst] >= arrive - 1e-12)
  np.testing.assert_allclose(
      (schedule.finish_s - schedule.start_s)[scheduled],
      costs[np.flatnonzero(scheduled), placement[scheduled]])
  group = topology.compute_group[placement]
  for g in np.unique(topology.compute_group):
    on = np.flatnonzero(scheduled & (group == g)
                        & (schedule.finish_s > schedule.start_s))
    order = on[np.argsort(schedule.start_s[on])]
    assert np.all(schedule.start_s[order[1:]]
                  >= schedule.finish_s[order[:-1]] - 1e-12)


@pytest.mark.parametrize("name", ["m_etf", "m_sct", "heft", "ordered_eft"])
def test_list_schedules_are_feasible(name):
  graph = random_dag(400, seed=8)
  topology = preset("1cpu+2gpu")
  costs = topology.op_costs(graph)
  plan = baselines.plan(name, graph, topology)
  np.testing.assert_array_equal(plan.placement,
                                baselines.get(name)(graph, topology))
  check_schedule(graph, topology, costs, plan)
  # The order is a topological order (a permutation, edges go forward).
  position = np.empty(graph.n_nodes, np.int64)
  position[plan.order] = np.arange(graph.n_nodes)
  assert np.all(position[graph.edge_src] < position[graph.edge_dst])
  # A list schedule is no shorter than the longest chain of fastest ops.
  fastest = costs.min(axis=1)
  assert plan.makespan_s >= baselines_common._upward_rank(
      graph, fastest, np.zeros(graph.n_edges)).max() - 1e-12


@pytest.mark.parametrize("name", ["m_etf", "m_sct", "heft", "ordered_eft"])
def test_list_schedules_serialize_shared_compute_groups(name):
  graph = random_dag(300, seed=4)
  bandwidth, latency = uniform_links(3, 10e9, 20e-6)
  # Two CPU "devices" on the same cores, one GPU.
  topology = Topology(
      devices=(cpu(), cpu(), gpu(0)), link_bandwidth=bandwidth,
      link_latency=latency, compute_group=np.array([0, 0, 1]), name="shared")
  plan = baselines.plan(name, graph, topology)
  check_schedule(graph, topology, topology.op_costs(graph), plan)


def test_plan_of_a_non_scheduler_is_id_order():
  graph = random_dag(50, seed=0)
  plan = baselines.plan("metis", graph, preset("1cpu+2gpu"))
  np.testing.assert_array_equal(plan.order, np.arange(50))
  assert np.isnan(plan.makespan_s)


def test_sct_favourites_are_one_per_node(monkeypatch):
  graph = random_dag(500, seed=9)
  topology = preset("1cpu+4gpu")
  problem = baselines_common._prepare(graph, topology, None)
  devices = np.arange(5)
  whole = baselines_sct._favourite_parents(problem, devices)
  # Windows of 100 nodes, and no time for LPs at all (greedy only).
  monkeypatch.setattr(baselines_sct, "SCT_LP_MAX_NODES", 100)
  windowed = baselines_sct._favourite_parents(problem, devices)
  monkeypatch.setattr(baselines_sct, "SCT_LP_TIME_BUDGET_S", -1.0)
  greedy = baselines_sct._favourite_parents(problem, devices)
  for favourite in (whole, windowed, greedy):
    has = favourite >= 0
    assert has.sum() > graph.n_nodes // 4
    parents = favourite[has]
    assert np.unique(parents).size == parents.size  # one child per parent
    assert np.all(graph.kind[parents] != NODE_INPUT)
    for child in np.flatnonzero(has)[:50]:
      assert favourite[child] in graph.predecessors(child)


def test_schedulers_beat_round_robin_under_simulator():
  topology = preset("1cpu+2gpu")
  for seed in (0, 1):
    graph = random_dag(SIM_NODES, seed=seed)
    names = ("round_robin", "m_etf", "heft", "m_sct", "ordered_eft")
    placements = baselines.run_all(graph, topology, only=names)
    result = simulate(graph, np.stack([placements[n] for n in names]),
                      topology)
    runtime = dict(zip(names, np.asarray(result.runtime_s)))
    for name in names[1:]:
      assert runtime[name] < runtime["round_robin"], runtime


def test_plans_predict_simulated_runtime():
  topology = preset("1cpu+2gpu")
  graph = random_dag(SIM_NODES, seed=3)
  for name in baselines.schedulers():
    plan = baselines.plan(name, graph, topology)
    order = None if name == "ordered_eft" else plan.order
    runtime = float(simulate(graph, plan.placement, topology,
                             order=order).runtime_s)
    # Same model up to link-queue order and the send sizes: close, not equal.
    assert 0.7 * plan.makespan_s < runtime < 1.5 * plan.makespan_s, (
        name, runtime, plan.makespan_s)


# -- expert --------------------------------------------------------------------


@pytest.mark.parametrize("name,index", [
    ("Encoder/layer_3/attention/dot_general", 3),
    ("params/Encoder/layer_3/kernel", 3),
    ("GNMT/Decoder/layer_12/mul", 12),
    ("decoder/lstm_3/scan", 3),
    ("RNNLM/LSTMCell_2/add", 2),
    ("RNNLM/OptimizedLSTMCell_1/tanh", 1),
    ("TransformerXL/block_2/Dense_0/dot_general", 2),
    ("BertEncoder/layer_11/attention/softmax", 11),
    ("Model/layers_4/mul", 4),
    ("Model/EncoderBlock_5/add", 5),
    ("transpose(jvp(Encoder))/layer_3/mul", 3),
    ("Encoder/layer_2/ResidualBlock_0/add", 2),
    ("Model/Dense_0/dot_general", -1),
    ("Model/LayerNorm_0/mul", -1),
    ("InceptionV3/Mixed_5b/conv", -1),
    ("output/1/0/nu/Decoder/softmax/bias", -1),
    ("add", -1),
])
def test_layer_index(name, index):
  assert baselines.layer_index(name) == index


def test_expert_one_layer_per_gpu():
  layers = [f"GNMT/Encoder/layer_{i}" for i in range(4)]
  graph = chain_graph(layers, name="gnmt4")
  topology = preset("1cpu+4gpu")
  placement = baselines.expert(graph, topology)
  names = [str(n) for n in graph.names]
  for i in range(4):
    for node, name in enumerate(names):
      if f"layer_{i}/" in name:
        assert placement[node] == 1 + i, name
  # Unnamed ops follow their producers; inputs their first consumer.
  assert placement[names.index("loss/reduce_sum")] == 4
  assert placement[names.index("batch/x")] == 1
  assert np.all(placement >= 1)


def test_expert_contiguous_blocks_when_more_layers_than_gpus():
  layers = [f"BertEncoder/layer_{i}" for i in range(12)]
  graph = chain_graph(layers, name="bert")
  placement = baselines.expert(graph, preset("1cpu+4gpu"))
  names = [str(n) for n in graph.names]
  for i in range(12):
    node = names.index(f"BertEncoder/layer_{i}/op0/dot_general")
    assert placement[node] == 1 + i // 3
  placement = baselines.expert(graph, preset("1cpu+2gpu"))
  for i in range(12):
    node = names.index(f"params/BertEncoder/layer_{i}/kernel")
    assert placement[node] == 1 + i // 6


def test_expert_fewer_layers_than_gpus_use_the_first_gpus():
  graph = chain_graph(["RNNLM/layer_0", "RNNLM/layer_1"], name="rnnlm2")
  placement = baselines.expert(graph, preset("1cpu+4gpu"))
  names = [str(n) for n in graph.names]
  assert placement[names.index("RNNLM/layer_0/op0/dot_general")] == 1
  assert placement[names.index("RNNLM/layer_1/op0/dot_general")] == 2
  assert set(np.unique(placement)) == {1, 2}


def test_expert_cnns_and_unlayered_graphs_go_on_one_gpu():
  layers = [f"ResNet/layer_{i}" for i in range(4)]
  graph = chain_graph(layers, name="resnet50")
  topology = preset("1cpu+4gpu")
  placement = baselines.expert(graph, topology)
  assert np.unique(placement).size == 1 and placement[0] >= 1
  # The workload argument overrides the graph name.
  spread = baselines.expert(graph, topology, workload="transformer_xl4")
  assert np.unique(spread).size == 4
  unlayered = random_dag(100, seed=0)
  placement = baselines.expert(unlayered, topology)
  assert np.unique(placement).size == 1 and placement[0] >= 1


def test_expert_without_gpus_uses_cpu():
  graph = chain_graph([f"layer_{i}" for i in range(2)], name="rnnlm2")
  topology = make_topology([cpu()])
  assert np.all(baselines.expert(graph, topology) == 0)
