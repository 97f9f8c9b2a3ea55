"""Tests of gplace.search.joint: placement and schedule searched together."""

import json

import numpy as np
import pytest

import gplace
from gplace.errors import SearchError
from gplace.graphs.graph import random_dag
from gplace.search import annealing
from gplace.search.joint import joint_annealing, order_priority, rescale
from gplace.sim import graph_files
from tests.search.search_cases import swap_chains_case

MS = 1e-3


def reorder_toy(path) -> float:
  """Two chains pinned to their devices where only the op order matters:
  device 0 runs p and q (2 ms each); q feeds r (10 ms on device 1); p feeds
  s (1 ms on device 0, but 200 ms on device 1, so its mean cost puts p on
  the critical path). The critical path runs p first: r ends at 15 ms;
  running q first ends at 12 ms, the optimum. Returns it."""
  pinned = lambda device: {"allowed_devices": [device]}
  document = {
      "topology": {"devices": [
          {"name": f"gpu:{i}", "kind": "gpu", "peak_flops": 1e13,
           "mem_bandwidth": 1e12, "memory_bytes": 1e9} for i in range(2)],
                   "links": {"bandwidth": 1e12, "latency_s": 0.0}},
      "nodes": [
          {"id": "x", "kind": "input", "out_bytes": 4, **pinned(0)},
          {"id": "p", "out_bytes": 4, "cost_s": [2 * MS, 2 * MS],
           **pinned(0)},
          {"id": "q", "out_bytes": 4, "cost_s": [2 * MS, 2 * MS],
           **pinned(0)},
          {"id": "s", "out_bytes": 4, "cost_s": [1 * MS, 200 * MS],
           **pinned(0)},
          {"id": "r", "out_bytes": 4, "cost_s": [10 * MS, 10 * MS],
           **pinned(1)},
          {"id": "out", "kind": "output", "out_bytes": 4, **pinned(1)}],
      "edges": [{"src": "x", "dst": "p"}, {"src": "x", "dst": "q"},
                {"src": "p", "dst": "s"}, {"src": "q", "dst": "r"},
                {"src": "s", "dst": "out"}, {"src": "r", "dst": "out"}]}
  with open(path, "w") as f:
    json.dump(document, f)
  return 12 * MS


@pytest.fixture(name="toy")
def toy_fixture(tmp_path):
  path = str(tmp_path / "toy.json")
  optimum = reorder_toy(path)
  return path, graph_files.load(path), optimum


def test_only_reordering_reaches_the_optimum(toy):
  _, loaded, optimum = toy
  graph, topology, costs = loaded.graph, loaded.topology, loaded.costs
  placement = np.array([0, 0, 0, 0, 1, 1])
  default = float(gplace.simulate(graph, placement, topology,
                                  costs=costs).runtime_s)
  assert default == pytest.approx(15 * MS)
  # A placement search cannot move a pinned op: it stays at 15 ms.
  found = annealing(graph, topology, costs=costs, budget=128, seed=0,
                    init=placement)
  assert found.runtime_s == pytest.approx(15 * MS)
  joint = joint_annealing(graph, topology, costs=costs, budget=128, seed=0,
                          init=placement, schedule_share=1.0)
  np.testing.assert_array_equal(joint.placement, placement)
  assert joint.runtime_s == pytest.approx(optimum, rel=1e-6)
  again = gplace.simulate(graph, joint.placement, topology, costs=costs,
                          order=joint.order)
  assert float(again.runtime_s) == pytest.approx(joint.runtime_s, rel=1e-6)


@pytest.mark.parametrize("method", ["joint_annealing", "auto"])
def test_optimize_reorders_to_the_optimum(toy, method):
  path, _, optimum = toy
  result = gplace.optimize(path, method=method, budget_s=10, progress=False,
                           max_evaluations=256)
  assert result.runtime_s == pytest.approx(optimum, rel=1e-6)
  assert result.order is not None  # the winner runs in its own order
  rerun = gplace.simulate(result.graph, result.placement, result.topology,
                          costs=result.costs, order=result.schedule())
  assert float(rerun.runtime_s) == pytest.approx(optimum, rel=1e-6)


def test_joint_search_is_never_slower_than_its_start_and_reproducible():
  graph = random_dag(80, seed=3)
  topology = gplace.topology.preset("1cpu+2gpu")
  first = joint_annealing(graph, topology, budget=512, seed=1)
  again = joint_annealing(graph, topology, budget=512, seed=1)
  assert first.runtime_s <= first.init_runtime_s
  np.testing.assert_array_equal(first.placement, again.placement)
  np.testing.assert_array_equal(first.order, again.order)
  assert first.evaluations <= 512
  rerun = gplace.simulate(graph, first.placement, topology,
                          order=first.order)
  assert float(rerun.runtime_s) == pytest.approx(first.runtime_s, rel=1e-6)


def test_a_block_move_swaps_what_no_single_move_can():
  graph, topology, costs, start = swap_chains_case()
  kwargs = dict(costs=costs, budget=512, init=start, schedule_share=0.0,
                seed=0)
  found = joint_annealing(graph, topology, block_share=1.0, **kwargs)
  assert found.runtime_s == pytest.approx(6 * MS, rel=1e-5)
  np.testing.assert_array_equal(found.placement, 1 - start)
  single = joint_annealing(graph, topology, block_share=0.0, **kwargs)
  assert single.runtime_s == pytest.approx(18 * MS, rel=1e-5)


def test_order_priority_and_rescale():
  order = np.array([2, 0, 1])
  priority = order_priority(order)
  assert list(np.argsort(-priority)) == [2, 0, 1]
  rng = np.random.default_rng(0)
  base = np.ones((4, 5), np.float32)
  moved = rescale(rng, base, np.array([1, 3]), 1.0, 3)
  assert np.all(moved[:, [0, 2, 4]] == 1.0)   # only movable ops change
  assert np.all(moved > 0) and not np.all(moved == 1.0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(schedule_share=1.5), "schedule_share"),
    (dict(block_share=-0.1), "block_share"),
    (dict(sigma=0.0), "sigma must be a positive"),
    (dict(init_order=np.array([0, 0, 1])), "init_order must be a "
     "permutation"),
])
def test_bad_settings_are_search_errors(kwargs, message):
  graph = random_dag(10, seed=0)
  with pytest.raises(SearchError, match=message):
    joint_annealing(graph, gplace.topology.preset("1cpu+2gpu"), budget=64,
                    **kwargs)
