"""LNS windows and memory outside their span: the live-bytes profile they
check against is the simulator's, and a window does not move an op onto a
device where the copy it reads would overfill memory before the span."""

import numpy as np
import pytest

import gplace
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, cost_table, uniform_links
from gplace.solvers import lns_windows
from gplace.solvers.lns_constraints import live_kib
from gplace.solvers.lns_model import Context, make_static, solve_window

KIB = 1024


@pytest.mark.parametrize("seed", [0, 3])
def test_the_live_profile_peaks_where_the_simulator_does(seed):
  graph, topology = random_dag(60, seed=seed), preset("1cpu+4gpu")
  table = cost_table(graph, topology)
  static = make_static(graph, topology, table, 1e-3)
  placement = np.random.default_rng(seed).integers(
      0, topology.n_devices, graph.n_nodes).astype(np.int32)
  result = gplace.simulate(graph, placement, topology, return_schedule=True)
  position = np.empty(graph.n_nodes, np.int64)
  position[np.asarray(result.order)] = np.arange(graph.n_nodes)
  live = live_kib(static, placement, position)
  assert live.shape == (topology.n_devices, graph.n_nodes)
  # random_dag's sizes are whole KiB, so the profile is exact.
  np.testing.assert_allclose(live.max(1) * KIB,
                             np.asarray(result.peak_bytes, np.float64))


def early_value_graph() -> Graph:
  """x -> a (100 KiB) -> d; x -> b (300 KiB) -> c; c, d -> out."""
  sizes = [4, 100, 300, 4, 4, 0]
  return Graph.build(
      names=["x", "a", "b", "c", "d", "out"],
      op_type=["input", "exp", "exp", "exp", "exp", "output"],
      kind=[NODE_INPUT] + [NODE_OP] * 4 + [NODE_OUTPUT],
      out_shapes=[(s * KIB // 4,) for s in sizes],
      out_dtype=["float32"] * 6, out_bytes=[s * KIB for s in sizes],
      flops=[0, 1, 1, 1, 1, 0], bytes_accessed=[0, 1, 1, 1, 1, 0],
      edges=[(0, 1, 4 * KIB), (0, 2, 4 * KIB), (1, 4, 100 * KIB),
             (2, 3, 300 * KIB), (3, 5, 4 * KIB), (4, 5, 4 * KIB)],
      name="early_value")


def two_devices(memory_kib: float) -> Topology:
  devices = (Device("cpu:0", "cpu", peak_flops=1e12, mem_bandwidth=1e11,
                    memory_bytes=1e9, launch_overhead_s=0.0),
             Device("acc:0", "gpu", peak_flops=1e12, mem_bandwidth=1e11,
                    memory_bytes=memory_kib * KIB, launch_overhead_s=0.0))
  bandwidth, latency = uniform_links(2, 1e9, 0.0)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(2),
                  name="cpu+acc")


def test_a_window_keeps_an_early_values_copy_from_overfilling_a_device():
  graph, topology = early_value_graph(), two_devices(360)
  ms = 1e-3
  # d is ten times faster on the accelerator, which has room for d itself
  # but not for a copy of a's value next to b's while b's is live.
  costs = np.array([[0, 0], [ms, ms], [10 * ms, ms], [10 * ms, ms],
                    [10 * ms, ms], [0, 0]])
  placement = np.array([0, 0, 1, 1, 0, 0], np.int32)
  order = np.arange(graph.n_nodes, dtype=np.int32)
  score = lambda p, o: lns_windows.score(graph, topology, costs, p, o)
  scored = score(placement, order)
  assert not scored.oom
  moved = placement.copy()
  moved[4] = 1
  assert score(moved, order).oom      # a's copy from position 1 to 4
  assert score(moved, order).runtime_s < scored.runtime_s
  static = make_static(graph, topology, costs, scored.runtime_s)
  incumbent = lns_windows.Incumbent(static, scored)
  lo, hi = 4, 5

  def solve(live):
    ctx = Context(scored.placement, scored.order, incumbent.position,
                  incumbent.finish, incumbent.tails_after(hi).copy(), lo,
                  hi, np.array([4]), live)
    return solve_window(static, ctx, limit_s=10.0, deterministic_s=10.0,
                        seed=0)

  blind = solve(None)               # memory checked at the span's ops only
  assert blind.placement[4] == 1 and score(blind.placement,
                                           blind.order).oom
  seeing = solve(incumbent.live())
  assert seeing.status == "OPTIMAL" and seeing.placement[4] == 0
  assert not score(seeing.placement, seeing.order).oom


@pytest.mark.parametrize("memory_kib, tight",
                         [(360, True), (500, False), (1e6, False)])
def test_windows_check_memory_outside_their_span_where_it_is_tight(
    memory_kib, tight):
  graph, topology = early_value_graph(), two_devices(memory_kib)
  costs = cost_table(graph, topology)
  placement = np.array([0, 0, 1, 1, 0, 0], np.int32)
  scored = lns_windows.score(graph, topology, costs, placement,
                             np.arange(6, dtype=np.int32))
  static = make_static(graph, topology, costs, scored.runtime_s)
  search = lns_windows.Search(
      static, lns_windows.Incumbent(static, scored),
      lambda p, o: lns_windows.score(graph, topology, costs, p, o), seed=0,
      window=4, max_window=6, solve_time_s=0.1)
  # The accelerator's peak (b's 300 KiB and c's 4) against its memory.
  assert search.tight == tight
