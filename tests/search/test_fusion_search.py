"""Fusion as a searched decision (issue 49, items 2 and 3): the default
decision, merge and split moves that keep a decision legal, the fusion
search (never worse than its start, the best fusion of a hand-built chain)
and its bad settings."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from gplace.errors import FusionError, GplaceError, PlacementError, SearchError
from gplace.graphs.fusion import default_fusion, fuse
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.search.fusion import fusion_annealing
from gplace.graphs.fusion_decisions import is_legal
from gplace.search.fusion_moves import canonical, merge, perturb, split
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, uniform_links

FEW = settings(max_examples=8, deadline=None,
               suppress_health_check=[HealthCheck.too_slow])


def one_gpu(n_devices: int = 1) -> Topology:
  devices = tuple(Device(f"gpu:{i}", "gpu", peak_flops=1e13,
                         mem_bandwidth=1e11, memory_bytes=1e9,
                         launch_overhead_s=1e-5) for i in range(n_devices))
  links, latency = uniform_links(n_devices, 1e10, 1e-6)
  return Topology(devices=devices, link_bandwidth=links, link_latency=latency,
                  compute_group=np.arange(n_devices), name="gpus")


def two_matmul_chain(nbytes: int = 1 << 20) -> Graph:
  """x -> a (tanh) -> m1 (dot) -> b (add) -> m2 (dot) -> c (mul) -> out:
  a kernel holds at most one matmul, so b joins one of them."""
  ops = ["input", "tanh", "dot_general", "add", "dot_general", "mul",
         "output"]
  kinds = [NODE_INPUT] + [NODE_OP] * 5 + [NODE_OUTPUT]
  flops = [0, 1e3, 2e8, 1e3, 1e8, 1e3, 0]
  return Graph.build(
      names=["x", "a", "m1", "b", "m2", "c", "out"], op_type=ops, kind=kinds,
      out_shapes=[(nbytes // 4,)] * 7, out_dtype=["float32"] * 7,
      out_bytes=[nbytes] * 6 + [0], flops=flops,
      bytes_accessed=[0] + [2 * nbytes] * 5 + [0],
      edges=[(i, i + 1, nbytes) for i in range(6)], name="two_matmuls")


def chain_partitions(n_ops: int):
  """Every split of ``n_ops`` chained ops (ids 1..n_ops) into runs, as
  labels of the ``n_ops + 2`` nodes."""
  for cuts in itertools.product([False, True], repeat=n_ops - 1):
    labels = np.full(n_ops + 2, -1, np.int64)
    run = 0
    for op in range(n_ops):
      if op and cuts[op - 1]:
        run += 1
      labels[op + 1] = run
    yield labels


@FEW
@given(n_nodes=st.integers(6, 30), n_devices=st.integers(1, 3),
       seed=st.integers(0, 10_000))
def test_moves_keep_a_decision_legal(n_nodes, n_devices, seed):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  placement = rng.integers(0, n_devices, n_nodes).astype(np.int32)
  labels = canonical(default_fusion(graph, placement))
  assert is_legal(graph, labels, placement)
  for _ in range(12):
    labels = merge(rng, graph, placement, labels)
    assert is_legal(graph, labels, placement)
    np.testing.assert_array_equal(labels, canonical(labels))
    if rng.random() < 0.5:
      labels = split(rng, graph, placement, labels)
      assert is_legal(graph, labels, placement)
  labels = perturb(rng, graph, placement, labels, 5, 0.5)
  assert is_legal(graph, labels, placement)


def test_default_fusion_joins_single_consumer_elementwise_ops():
  graph = two_matmul_chain()
  labels = default_fusion(graph, np.zeros(7, np.int32))
  # a and b feed matmuls (library calls stay alone), c the output node.
  np.testing.assert_array_equal(labels, np.full(7, -1))
  chain = random_dag(40, seed=1)
  placement = np.zeros(40, np.int32)
  labels = default_fusion(chain, placement)
  fused = fuse(chain, labels)
  assert fused.n_members.max() > 1
  assert is_legal(chain, labels, placement)
  # On another device, a consumer is never joined.
  split_placement = (np.arange(40) % 2).astype(np.int32)
  assert is_legal(chain, default_fusion(chain, split_placement),
                  split_placement)


def test_search_finds_the_best_fusion_of_a_chain():
  graph, topology = two_matmul_chain(), one_gpu()
  placement = np.zeros(7, np.int32)
  partitions = [p for p in chain_partitions(5)
                if is_legal(graph, p, placement)]
  runtimes = [float(simulate(graph, placement, topology, fusion=p).runtime_s)
              for p in partitions]
  best = float(np.min(runtimes))
  result = fusion_annealing(graph, topology, placement=placement, budget=300,
                            batch_size=16, seed=0)
  assert is_legal(graph, result.fusion, placement)
  assert result.runtime_s == pytest.approx(best, rel=1e-6)
  assert result.runtime_s < result.unfused_runtime_s
  assert result.gain_over_unfused > 0
  # The decision reproduces its runtime.
  again = simulate(graph, placement, topology, fusion=result.fusion)
  assert float(again.runtime_s) == pytest.approx(result.runtime_s, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_search_never_returns_worse_than_its_start(seed):
  graph, topology = random_dag(30, seed=seed), preset("1cpu+2gpu")
  placement = np.random.default_rng(seed).integers(0, 3, 30).astype(np.int32)
  start = canonical(default_fusion(graph, placement))
  result = fusion_annealing(graph, topology, placement=placement,
                            start_fusion=start, budget=96, batch_size=32,
                            seed=seed, placement_share=0.3)
  assert result.runtime_s <= result.start_runtime_s
  assert result.start_runtime_s <= min(result.default_runtime_s,
                                       result.unfused_runtime_s)
  assert result.evaluations <= 96
  assert is_legal(graph, result.fusion, result.placement)
  assert np.all(np.diff(result.history.runtime_s) <= 0)
  again = simulate(graph, result.placement, topology, fusion=result.fusion)
  assert float(again.runtime_s) == pytest.approx(result.runtime_s, rel=1e-6)
  # Deterministic for a seed.
  same = fusion_annealing(graph, topology, placement=placement,
                          start_fusion=start, budget=96, batch_size=32,
                          seed=seed, placement_share=0.3)
  np.testing.assert_array_equal(same.fusion, result.fusion)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(budget=0), SearchError, "budget must be a positive integer"),
    (dict(move_size=0), SearchError, "move_size"),
    (dict(merge_share=1.5), SearchError, "merge_share"),
    (dict(placement_share=-0.1), SearchError, "placement_share"),
    (dict(seed=-1), SearchError, "seed"),
    (dict(order=[0, 1], priority=None), SearchError, "permutation"),
    (dict(order=np.arange(7), priority=np.ones(7)), SearchError,
     "not both"),
    (dict(priority=np.full(7, np.nan)), SearchError, "finite"),
    (dict(start_fusion=[-1, 0, 0, 0, 0, -1, -1]), FusionError,
     "both matmuls"),
    (dict(placement=np.full(7, 5)), PlacementError, "device"),
    (dict(t0=0.0), SearchError, "temperature"),
])
def test_bad_settings_raise_gplace_errors(kwargs, error, match):
  settings_ = dict(placement=np.zeros(7, np.int32), budget=8)
  settings_.update(kwargs)
  with pytest.raises(error, match=match):
    fusion_annealing(two_matmul_chain(), one_gpu(), **settings_)
  assert issubclass(error, GplaceError)


def test_default_fusion_rejects_a_bad_placement():
  with pytest.raises(FusionError, match="placement must be"):
    default_fusion(two_matmul_chain(), np.zeros(3, np.int32))
