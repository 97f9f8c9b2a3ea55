"""Shared cases of the search tests (tests/search): tiny graphs with known
optimal placements, and checks that every search must pass on them (each
search's test module runs them on its own search)."""

import math

import numpy as np
import pytest

import gplace
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, uniform_links

MS = 1e-3


def small_case():
  """A 30-node random graph on a CPU and two GPUs."""
  return random_dag(30, seed=3), preset("1cpu+2gpu")


def chains_graph(lengths, name="chains"):
  """Independent chains, each ``input -> ops -> output``, 4-byte tensors.

  Nodes are interleaved across chains so that node ids mix them.
  """
  names, kinds, edges, chain_of = [], [], [], []
  previous = {}
  for c in range(len(lengths)):
    names.append(f"chain{c}/x")
    kinds.append(NODE_INPUT)
    chain_of.append(c)
    previous[c] = len(names) - 1
  for step in range(max(lengths) + 1):
    for c, length in enumerate(lengths):
      if step > length:
        continue
      is_output = step == length
      names.append(f"chain{c}/output" if is_output else f"chain{c}/op{step}")
      kinds.append(NODE_OUTPUT if is_output else NODE_OP)
      chain_of.append(c)
      edges.append((previous[c], len(names) - 1, 4))
      previous[c] = len(names) - 1
  n = len(names)
  graph = Graph.build(
      names=names, op_type=["dot_general"] * n, kind=kinds,
      out_shapes=[(1,)] * n, out_dtype=["float32"] * n, out_bytes=[4] * n,
      flops=[1e9 if k == NODE_OP else 0.0 for k in kinds],
      bytes_accessed=[8.0] * n, edges=edges, name=name)
  return graph


def op_costs(graph, per_device_s):
  """``[N, D]`` costs: ``per_device_s[d]`` for every op on device ``d``."""
  is_op = (graph.kind == NODE_OP)[:, None]
  return np.where(is_op, np.asarray(per_device_s)[None, :], 0.0)


def two_gpus(memory=(1e9, 1e9)):
  devices = tuple(Device(f"gpu:{i}", "gpu", peak_flops=1e12,
                         mem_bandwidth=1e11, memory_bytes=m)
                  for i, m in enumerate(memory))
  bandwidth, latency = uniform_links(2, 12e9, 25e-6)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(2),
                  name="2gpu")


def swap_chains_case():
  """Two chains of 6 ops, each three times faster on the other's device
  (1 ms against 3 ms), a transfer 50 ms: ``(graph, topology, costs,
  start)``, the start each chain on its slow device (18 ms). Moving part
  of a chain is always slower than the start; only exchanging both chains
  whole reaches the optimum, 6 ms (a block move over the whole order)."""
  graph = chains_graph([6, 6])
  chain = np.array([int(name.startswith("chain1")) for name in graph.names])
  fast = 1 - chain
  costs = np.where((graph.kind == NODE_OP)[:, None], np.where(
      np.arange(2)[None, :] == fast[:, None], 1 * MS, 3 * MS), 0.0)
  bandwidth, latency = uniform_links(2, 12e9, 50 * MS)
  topology = Topology(devices=two_gpus().devices, link_bandwidth=bandwidth,
                      link_latency=latency, compute_group=np.arange(2),
                      name="2gpu")
  return graph, topology, costs, chain.astype(np.int32)


# -- known optima: each search's module runs these on its own search ----------


def check_chain_goes_to_the_fastest_device(fn):
  # One chain of 8 heavy ops; device 2 is the fastest by far, transfers take
  # 25 us: everything on device 2 (8 ms) is the unique optimum.
  graph = chains_graph([8])
  topology = preset("1cpu+2gpu")
  costs = op_costs(graph, [10 * MS, 2 * MS, 1 * MS])
  init = np.zeros(graph.n_nodes, np.int32)
  result = fn(graph, topology, costs=costs, seed=0, budget=3000, init=init)
  np.testing.assert_array_equal(result.placement, np.full(graph.n_nodes, 2))
  assert result.runtime_s == pytest.approx(8 * MS, rel=1e-5)


def check_two_chains_split_across_two_gpus(fn):
  # Two independent chains of 6 ops on two equal GPUs, all on GPU 0 at the
  # start (12 ms): one chain per GPU halves the runtime. With colocation
  # groups each chain is one group, so one move finds it.
  graph = chains_graph([6, 6])
  topology = two_gpus()
  costs = op_costs(graph, [1 * MS, 1 * MS])
  init = np.zeros(graph.n_nodes, np.int32)
  result = fn(graph, topology, costs=costs, seed=0, budget=500, init=init,
              groups="colocation")
  assert result.init_runtime_s == pytest.approx(12 * MS, rel=1e-5)
  assert result.runtime_s == pytest.approx(6 * MS, rel=1e-5)
  chain = np.array([int(n.split("/")[0][5:]) for n in graph.names])
  for c in (0, 1):
    assert len(set(result.placement[chain == c])) == 1
  assert result.placement[chain == 0][0] != result.placement[chain == 1][0]


def check_out_of_memory_is_infeasible(fn):
  # GPU 1 is faster but holds only a few tensors: the whole chain there runs
  # out of memory, so the search must not return it.
  graph = chains_graph([8])
  topology = two_gpus(memory=(1e9, 8.0))
  costs = op_costs(graph, [2 * MS, 1 * MS])
  result = fn(graph, topology, costs=costs, budget=400,
              init=np.zeros(graph.n_nodes, np.int32))
  assert math.isfinite(result.runtime_s)
  assert not bool(gplace.simulate(graph, result.placement, topology,
                                  costs=costs).oom)
  everything_fast = np.ones(graph.n_nodes, np.int32)
  assert bool(gplace.simulate(graph, everything_fast, topology,
                              costs=costs).oom)
