"""gplace.workloads.benchmark: the optimality benchmark's instances are
deterministic, and the memory caps force a split."""

import numpy as np
import pytest

from gplace.errors import WorkloadError
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.workloads import benchmark


def test_specs_list_each_class_in_order_with_unique_names():
  specs = benchmark.specs(benchmark.CLASSES)
  classes = [s.benchmark_class for s in specs]
  assert classes == sorted(classes, key=benchmark.CLASSES.index)
  assert classes.count("memory") == (len(benchmark.MEMORY_WORKLOADS)
                                     * len(benchmark.ACCELERATORS))
  assert len({s.name for s in specs}) == len(specs)
  with pytest.raises(WorkloadError, match="Unknown benchmark class"):
    benchmark.specs(["memory", "huge"])


def test_select_takes_instances_by_name_and_says_when_none_matches():
  wanted = ("bert tiny", "blocks forward, 4x")
  chosen = benchmark.select("|".join(wanted), "memory,homogeneous")
  names = [s.name for s in chosen]
  assert names and all(any(w in n for w in wanted) for n in names)
  assert {s.benchmark_class for s in chosen} == {"memory", "homogeneous"}
  assert names == [s.name for s in benchmark.specs(["memory", "homogeneous"])
                   if s.name in names]                # in the classes' order
  with pytest.raises(WorkloadError, match="names no graph"):
    benchmark.select("no such graph", "memory")
  with pytest.raises(WorkloadError, match="Unknown benchmark class"):
    benchmark.select("bert", "huge")


def test_memory_caps_hold_a_share_of_the_weights_and_repeat_by_seed():
  graph = random_dag(60, seed=2)
  weights = benchmark.weight_bytes(graph)
  assert weights == graph.out_bytes[graph.kind == NODE_INPUT].sum()
  topology, costs, _ = benchmark.memory_capped(graph, 4, seed=3)
  again, costs_again, _ = benchmark.memory_capped(graph, 4, seed=3)
  assert np.array_equal(topology.memory_bytes, again.memory_bytes)
  assert np.array_equal(costs, costs_again)
  share = topology.memory_bytes[1:] / weights
  low, high = benchmark.MEMORY_SHARE
  assert np.all((share >= low) & (share <= high))
  assert costs.shape == (graph.n_nodes, 5)
  ops = costs[:, 1] > 0
  slowdown = costs[ops] / costs[ops, 1:2]           # against the fastest
  assert np.allclose(slowdown[:, 0], benchmark.CPU_SLOWDOWN)
  assert np.all(np.diff(slowdown[0, 1:]) >= 0) and slowdown[0, 1] == 1.0


def test_matmul_chains_and_gpus():
  graph = benchmark.matmul_chains(n_chains=2, length=3, dim=8)
  assert list(graph.op_type).count("dot_general") == 6
  topology = benchmark.gpus(4)
  assert topology.n_devices == 4 and topology.name == "4xh100"
  assert len(set(topology.devices)) == 1 or all(
      d.peak_flops == topology.devices[0].peak_flops for d in topology.devices)
