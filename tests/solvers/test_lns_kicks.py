"""Tests of gplace.solvers.lns_kicks: under tight memory, a kick brings a
blocked critical op's weights to the fast device and makes room for them
(with nothing blocked, it moves a critical op's weight group to where
that op is fastest); LNS whose windows cannot leave such a basin leaves it
by kicks; no kick where memory is not tight, none that breaks allowed
devices or co-location; bad kick settings are SearchErrors."""

import numpy as np
import pytest

import gplace
from gplace import solvers
from gplace.errors import SearchError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.sim.topology import Device, Topology, cost_table, uniform_links
from gplace.solvers import lns_kicks
from gplace.solvers.lns_model import make_static
from gplace.solvers.lns_windows import Incumbent, score

WEIGHT = 1 << 20
CPU, FAST, SLOW = 0, 1, 2
# node ids after Graph.build's topological renumbering
W1, W2, X, A1, A2, OUT = range(6)


def two_weights(allowed=None, colocation=None) -> Graph:
  """``x -> a1 -> a2 -> out``; a1 reads the 1 MiB weight w1, a2 w2."""
  names = ["w1", "w2", "x", "a1", "a2", "out"]
  kinds = [NODE_INPUT, NODE_INPUT, NODE_INPUT, NODE_OP, NODE_OP,
           NODE_OUTPUT]
  sizes = [WEIGHT, WEIGHT, 4, 4, 4, 4]
  edges = [(2, 3, 4), (0, 3, WEIGHT), (3, 4, 4), (1, 4, WEIGHT), (4, 5, 4)]
  graph = Graph.build(names=names, op_type=["dot"] * 6, kind=kinds,
                      out_shapes=[(1,)] * 6, out_dtype=["float32"] * 6,
                      out_bytes=sizes, flops=[1.0] * 6,
                      bytes_accessed=[8.0] * 6, edges=edges, name="weights",
                      allowed_devices=allowed, colocation=colocation)
  assert list(graph.names) == names
  return graph


def devices(capacity: float) -> Topology:
  """A CPU with room for everything, a fast and a slow accelerator with
  ``capacity`` bytes each."""
  devs = (Device("cpu:0", "cpu", peak_flops=1e12, mem_bandwidth=1e11,
                 memory_bytes=1e12, launch_overhead_s=0.0),
          Device("acc:0", "gpu", peak_flops=1e12, mem_bandwidth=1e11,
                 memory_bytes=capacity, launch_overhead_s=0.0),
          Device("acc:1", "gpu", peak_flops=1e12, mem_bandwidth=1e11,
                 memory_bytes=capacity, launch_overhead_s=0.0))
  bandwidth, latency = uniform_links(3, 1e11, 1e-6)
  return Topology(devices=devs, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(3),
                  name="cpu+fast+slow")


def costs() -> np.ndarray:
  """a1 is cheap, a2 dear; the slow accelerator takes 3x, the CPU 10x."""
  table = np.zeros((6, 3))
  table[A1] = (1e-3, 1e-4, 3e-4)
  table[A2] = (1e-2, 1e-3, 3e-3)
  table[OUT] = 1e-6
  return table


# The basin: w1's group on the fast device, w2's on the slow one. Moving a2
# next to a1 would be faster, but the fast device cannot hold both weights.
BASIN = np.array([FAST, SLOW, CPU, FAST, SLOW, SLOW], np.int32)
TIGHT = 1.2 * WEIGHT


def scored(graph, topology, placement):
  table = cost_table(graph, topology, costs())
  order = gplace.simulate(graph, placement, topology, table,
                          return_schedule=True).order
  result = score(graph, topology, table, placement, order)
  return result, make_static(graph, topology, table, result.runtime_s)


def simulate_fn(graph, topology, order):
  def run(rows):
    result = gplace.simulate(graph, rows, topology, costs(), order=order)
    return np.asarray(result.runtime_s), np.asarray(result.oom)
  return run


def kick(graph, topology, placement=BASIN, peak_share=0.99):
  best, static = scored(graph, topology, placement)
  path = Incumbent(static, best).critical()[::-1]
  return best, static, path, lns_kicks.memory_kick(
      static, best, path, peak_share,
      simulate_fn(graph, topology, best.order), np.random.default_rng(0))


def test_a_kick_makes_room_for_the_blocked_critical_op():
  graph, topology = two_weights(), devices(TIGHT)
  best, static, path, kicked = kick(graph, topology)
  assert not best.oom
  blocked = lns_kicks.blocked_moves(
      static, best, path, simulate_fn(graph, topology, best.order),
      np.random.default_rng(0))
  assert blocked[0] == (A2, FAST)
  # w2 and a2 move to the fast device; w1's group goes to the slow one.
  assert kicked[[W2, A2]].tolist() == [FAST, FAST]
  assert kicked[[W1, A1]].tolist() == [SLOW, SLOW]
  after = gplace.simulate(graph, kicked, topology, costs(), order=best.order)
  assert not bool(after.oom)
  assert float(after.runtime_s) < 0.5 * best.runtime_s


def test_later_kicks_from_one_best_take_the_next_fastest_candidate():
  graph, topology = two_weights(), devices(TIGHT)
  best, static, path, _ = kick(graph, topology)
  kicks = [lns_kicks.memory_kick(static, best, path, 0.99,
                                 simulate_fn(graph, topology, best.order),
                                 np.random.default_rng(0), rank=rank)
           for rank in range(3)]
  # w1's group makes room on the slow device, then on the CPU; no third
  assert kicks[0][[W1, A1]].tolist() == [SLOW, SLOW]
  assert kicks[1][[W1, A1]].tolist() == [CPU, CPU]
  assert kicks[2] is None
  runtimes = [float(gplace.simulate(graph, k, topology, costs(),
                                    order=best.order).runtime_s)
              for k in kicks[:2]]
  assert runtimes[0] < runtimes[1]


def test_no_kick_where_memory_is_not_tight():
  graph = two_weights()
  assert kick(graph, devices(TIGHT), peak_share=0.5)[-1] is None
  # with room for both weights, nothing is blocked, and the peak is low
  roomy = devices(8 * WEIGHT)
  best, static, path, _ = kick(graph, roomy)
  assert lns_kicks.blocked_moves(
      static, best, path, simulate_fn(graph, roomy, best.order),
      np.random.default_rng(0)) == []
  peak = gplace.simulate(graph, BASIN, roomy, costs()).peak_bytes
  share = float(np.max(np.asarray(peak) / np.asarray(roomy.memory_bytes)))
  assert share < lns_kicks.PRESSURE
  assert kick(graph, roomy, peak_share=share)[-1] is None


def test_with_nothing_blocked_a_kick_moves_a_critical_weight_group():
  # w1's group on the CPU, w2's on the slow device (0.83 of its memory):
  # a2 is no faster next to a1 on the CPU, so no op is blocked; the kick
  # moves a critical op that reads a weight, with its group, to where the
  # op alone is fastest: a2 and w2 to the fast device.
  graph, topology = two_weights(), devices(TIGHT)
  start = np.array([CPU, SLOW, CPU, CPU, SLOW, SLOW], np.int32)
  best, static, path, kicked = kick(graph, topology, start,
                                    peak_share=1 / 1.2)
  assert lns_kicks.blocked_moves(
      static, best, path, simulate_fn(graph, topology, best.order),
      np.random.default_rng(0)) == []
  moves = lns_kicks.weight_moves(static, best, path,
                                 simulate_fn(graph, topology, best.order),
                                 np.random.default_rng(0))
  assert moves[0] == (A2, FAST)
  assert sorted(moves[1:]) == [(A1, FAST), (A1, SLOW), (A2, CPU)]
  assert kicked[[W2, A2]].tolist() == [FAST, FAST]
  assert kicked[[W1, A1]].tolist() == [CPU, CPU]
  after = gplace.simulate(graph, kicked, topology, costs(), order=best.order)
  assert not bool(after.oom)
  assert float(after.runtime_s) < best.runtime_s


def test_kicks_keep_allowed_devices_and_colocation():
  allowed = np.ones((6, 3), bool)
  allowed[A1, SLOW] = False                 # a1 may not use the slow device
  graph, topology = two_weights(allowed=allowed), devices(TIGHT)
  *_, kicked = kick(graph, topology)
  assert kicked is not None and kicked[A1] != SLOW
  assert kicked[[W2, A2]].tolist() == [FAST, FAST]
  together = np.array([-1, -1, -1, -1, 0, 0])   # a2 with out
  graph = two_weights(allowed=allowed, colocation=together)
  best, static, _, _ = kick(graph, topology)
  rows = lns_kicks.kick_candidates(static, best.placement, A2, FAST,
                                   np.random.default_rng(0))
  assert rows
  for row in rows:
    assert row[A2] == row[OUT] == FAST and allowed[np.arange(6), row].all()


def test_lns_leaves_a_memory_basin_by_kicks_that_windows_cannot_leave():
  graph, topology = two_weights(), devices(TIGHT)
  best, _ = scored(graph, topology, BASIN)
  runs = {}
  for kick_after in (None, 1):
    runs[kick_after] = solvers.lns(
        graph, topology, costs=costs(), start=BASIN, start_order=best.order,
        window_size=2, max_window_size=2, max_iterations=8, seed=0,
        solve_time_s=0.5, kick_after=kick_after)
  stuck, kicked = runs[None], runs[1]
  assert stuck.kicks == 0
  assert stuck.runtime_s == pytest.approx(best.runtime_s)
  assert kicked.kicks >= 1
  assert kicked.runtime_s < 0.5 * best.runtime_s and not kicked.oom
  assert np.all(np.diff(kicked.history[:, 1]) <= 0)
  simulated = gplace.simulate(graph, kicked.placement, topology, costs(),
                              order=kicked.order)
  assert float(simulated.runtime_s) == pytest.approx(kicked.runtime_s,
                                                     rel=1e-6)


@pytest.mark.parametrize("kick_after", [0, -3, 2.5, True, "300"])
def test_bad_kick_settings_are_search_errors(kick_after):
  graph, topology = two_weights(), devices(TIGHT)
  with pytest.raises(SearchError, match="kick_after"):
    solvers.lns(graph, topology, costs=costs(), kick_after=kick_after,
                max_iterations=1)


@pytest.mark.parametrize("n_groups", [3, 2000])
def test_ejections_are_listed_or_drawn_without_listing_them_all(n_groups):
  targets = [0, 2, 3]
  rng = np.random.default_rng(0)
  combos = lns_kicks._ejections(n_groups, targets, rng)
  every = n_groups * 3 + n_groups * (n_groups - 1) // 2 * 9
  assert len(combos) == min(every, lns_kicks.MAX_CANDIDATES - 1)
  assert len(set(combos)) == len(combos)
  for groups, devices in combos:
    assert 1 <= len(groups) == len(devices) <= lns_kicks.MAX_EJECTED
    assert len(set(groups)) == len(groups)
    assert all(0 <= g < n_groups for g in groups)
    assert set(devices) <= set(targets)
