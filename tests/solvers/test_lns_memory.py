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


def two_weights_graph(chain: int = 60) -> Graph:
  """w1 -> a0 -> a1 -> ... -> a{chain-1} <- w2, then -> out; the weights
  200 KiB each, the ops' values 4 KiB."""
  n = chain + 3
  sizes = [200, 200] + [4] * chain + [0]
  edges = ([(0, 2, 200 * KIB), (1, n - 2, 200 * KIB)]
           + [(i, i + 1, 4 * KIB) for i in range(2, n - 1)])
  return Graph.build(
      names=["w1", "w2"] + [f"a{i}" for i in range(chain)] + ["out"],
      op_type=["input"] * 2 + ["exp"] * chain + ["output"],
      kind=[NODE_INPUT] * 2 + [NODE_OP] * chain + [NODE_OUTPUT],
      out_shapes=[(s * KIB // 4,) for s in sizes],
      out_dtype=["float32"] * n, out_bytes=[s * KIB for s in sizes],
      flops=[0, 0] + [1] * chain + [0],
      bytes_accessed=[0, 0] + [1] * chain + [0], edges=edges,
      name="two_weights")


@pytest.mark.parametrize("seed", [0, 6])
def test_late_inputs_move_only_inputs_and_only_later(seed):
  graph = random_dag(80, seed=seed)
  order = np.asarray(gplace.simulate(
      graph, np.zeros(graph.n_nodes, np.int32), preset("1cpu+4gpu"),
      return_schedule=True).order)
  assert (graph.kind == NODE_INPUT).sum() > 1
  late = lns_windows.late_inputs(graph, order, 3)
  np.testing.assert_array_equal(np.sort(late), np.arange(graph.n_nodes))
  position = np.empty(graph.n_nodes, np.int64)
  position[late] = np.arange(graph.n_nodes)
  assert (position[graph.edge_src] < position[graph.edge_dst]).all()
  ops = graph.kind[order] != NODE_INPUT       # the rest keep their order
  np.testing.assert_array_equal(late[graph.kind[late] != NODE_INPUT],
                                order[ops])
  before = np.cumsum(ops)                     # non-inputs up to each spot
  was = np.empty(graph.n_nodes, np.int64)
  was[order] = before
  now = np.empty(graph.n_nodes, np.int64)
  now[late] = np.cumsum(graph.kind[late] != NODE_INPUT)
  inputs = graph.kind == NODE_INPUT
  assert (now[inputs] >= was[inputs]).all() and (now > was).any()
  consumed = np.unique(graph.edge_src)
  for v in consumed[inputs[consumed]]:
    readers = graph.edge_dst[graph.edge_src == v]
    first = readers[np.argmin(position[readers])]
    assert position[v] < position[first]
    # moved: at most 3 ops (other inputs aside) between it and its reader
    assert now[first] - 1 - now[v] <= 3 or now[v] == was[v]
  np.testing.assert_array_equal(
      lns_windows.late_inputs(graph, order, graph.n_nodes), order)


def test_lns_starts_with_late_inputs_where_early_ones_overfill_memory():
  # a copy of each weight on the accelerator: both live from the start of
  # the order overfill its 300 KiB; each from shortly before its reader
  # (lns_windows.INPUT_LEAD positions) fits
  graph, topology = two_weights_graph(), two_devices(300)
  n, ms = graph.n_nodes, 1e-3
  costs = np.array([[0, 0]] * 2 + [[10 * ms, ms]] * (n - 3) + [[0, 0]])
  placement = np.array([0, 0] + [1] * (n - 2), np.int32)
  early = np.arange(n, dtype=np.int32)
  late = lns_windows.late_inputs(graph, early, lns_windows.INPUT_LEAD)
  position = np.argsort(late)
  assert position[0] == 0                       # read first: stays
  # INPUT_LEAD ops between w2 and its reader
  assert position[n - 2] - position[1] - 1 == lns_windows.INPUT_LEAD
  score = lambda o: lns_windows.score(graph, topology, costs, placement, o)
  assert score(early).oom and not score(late).oom
  result = gplace.solvers.lns(graph, topology, costs=costs, start=placement,
                              start_order=early, max_iterations=1, seed=0)
  assert not result.oom and result.runtime_s <= score(late).runtime_s
