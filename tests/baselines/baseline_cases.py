"""Shared graphs, topologies and checks for the baseline tests."""

import numpy as np

from gplace import baselines
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.sim.topology import Device, Topology, uniform_links


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


def cpu(memory=128e9, i=0):
  return Device(f"cpu:{i}", "cpu", peak_flops=0.66e12, mem_bandwidth=68e9,
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


def tight_topology(graph, fraction=0.7, n_gpus=3):
  """GPUs that each hold ``fraction`` of the single-device peak."""
  peak = baselines.single_device_peak_bytes(graph)
  return make_topology([gpu(i, memory=fraction * peak)
                        for i in range(n_gpus)])


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
