"""Tests of the simple baselines: single device, round robin, random, METIS, expert."""

import numpy as np
import pytest

from gplace import baselines
from gplace.baselines import common
from gplace.graphs.graph import random_dag
from gplace.sim import list_scheduler
from gplace.sim.presets import preset

from baseline_cases import make_topology, gpu, cpu, chain_graph, cut_bytes


def test_single_device_picks_fastest_device_that_fits():
  graph = random_dag(200, seed=6)
  peak = baselines.single_device_peak_bytes(graph)
  # The peak of live bytes, not the sum of all outputs, must fit.
  assert peak < 0.5 * graph.out_bytes.sum()
  # The default (dynamic) schedule runs ops in another order than node ids,
  # with a higher peak here (1.47x).
  topology = make_topology([
      cpu(memory=10 * peak),                        # fits, slow
      gpu(0, memory=0.9 * peak, flops=100e12),      # fastest, too small
      gpu(1, memory=1.6 * peak, flops=3e12),        # fits, fast
      gpu(2, memory=2 * peak, flops=1e12),          # fits, slower
  ])
  placement = baselines.single_device(graph, topology)
  assert np.all(placement == 2)
  # Holding the node-id order's peak only is not enough when another device
  # holds the graph in both schedules (1.1x: an OOM in the default one).
  tight = make_topology([cpu(memory=10 * peak),
                         gpu(0, memory=1.1 * peak, flops=100e12),
                         gpu(1, memory=2 * peak, flops=1e12)])
  placement = baselines.single_device(graph, tight)
  assert np.all(placement == 2)
  default_peak = common.single_device_default_peak_bytes(
      list_scheduler.prepare(graph, tight, None))  # = simulate's (test_common)
  assert 1.1 * peak < default_peak <= 2 * peak
  # ... but better than nothing.
  only_id_order = make_topology([gpu(0, memory=0.9 * peak),
                                 gpu(1, memory=1.1 * peak, flops=1e12)])
  assert np.all(baselines.single_device(graph, only_id_order) == 1)
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
