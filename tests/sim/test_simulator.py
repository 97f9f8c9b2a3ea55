"""Tests of gplace.sim.simulator, the public ``simulate`` wrapper: errors at
the public boundary, single placements, the result type and dispatch order,
compile caching and exports. The model itself is tested against the
reference in test_reference.py; the other sim modules have their own tests."""

import numpy as np
import pytest

import gplace
from gplace.errors import (GplaceError, PlacementError, ScheduleError,
                           TopologyError)
from gplace.graphs.graph import random_dag
from gplace.sim.bounds import lower_bound
from gplace.sim.priority import priority_order
from gplace.sim import runner
from gplace.sim.simulator import SimResult, simulate
from gplace.sim.presets import preset
from gplace.sim.topology import Topology


def test_simulate_compiles_once_per_shape():
  topology = preset("1cpu+2gpu")
  graph = random_dag(25, seed=7)
  rng = np.random.default_rng(0)
  simulate(graph, rng.integers(0, 3, (4, 25)), topology)
  before = runner.simulate_jit._cache_size()
  for _ in range(3):
    simulate(graph, rng.integers(0, 3, (4, 25)), topology)
  assert runner.simulate_jit._cache_size() == before


def test_single_placement_and_result_type():
  topology = preset("1cpu+2gpu")
  graph = random_dag(10, seed=0)
  result = gplace.simulate(graph, np.zeros(10, int), topology)
  assert isinstance(result, gplace.SimResult) and result is not None
  assert np.shape(result.runtime_s) == ()
  assert np.shape(result.peak_bytes) == (3,)
  assert result.start_s is None
  assert result.order is None
  assert isinstance(result, SimResult)
  scheduled = gplace.simulate(graph, np.zeros(10, int), topology,
                              return_schedule=True)
  assert np.shape(scheduled.start_s) == np.shape(scheduled.order) == (10,)


def test_order_is_the_order_run_and_reproduces_the_result():
  graph = random_dag(30, seed=2, n_inputs=4)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(3).integers(
      0, topology.n_devices, (4, graph.n_nodes))
  result = simulate(graph, placements, topology, schedule="static",
                    return_schedule=True)
  order = np.asarray(result.order)
  assert order.shape == (4, graph.n_nodes) and order.dtype == np.int32
  np.testing.assert_array_equal(order, np.tile(np.arange(30), (4, 1)))
  shuffled = priority_order(np.random.default_rng(0).normal(size=30), graph)
  assert not np.array_equal(shuffled, np.arange(30))
  given = simulate(graph, placements, topology, order=shuffled,
                   return_schedule=True)
  np.testing.assert_array_equal(np.asarray(given.order)[0], shuffled)
  for res in (result, given):
    for k in range(4):
      again = simulate(graph, placements[k], topology,
                       order=np.asarray(res.order)[k], return_schedule=True)
      np.testing.assert_array_equal(np.asarray(again.start_s),
                                    np.asarray(res.start_s)[k])
      np.testing.assert_array_equal(np.asarray(again.peak_bytes),
                                    np.asarray(res.peak_bytes)[k])


def test_a_non_topological_order_is_a_schedule_error():
  graph = random_dag(10, seed=0)
  topology = preset("1cpu+2gpu")
  with pytest.raises(ScheduleError, match="topological"):
    simulate(graph, np.zeros(10, int), topology, order=np.arange(10)[::-1])
  with pytest.raises(ScheduleError, match="permutation"):
    simulate(graph, np.zeros(10, int), topology, order=np.zeros(10, int))
  assert issubclass(ScheduleError, PlacementError)


def test_bad_input_raises_gplace_errors():
  topology = preset("1cpu+2gpu")
  graph = random_dag(10, seed=0)
  ok = np.zeros(10, int)
  with pytest.raises(PlacementError, match="length 9"):
    simulate(graph, np.zeros(9, int), topology)
  with pytest.raises(PlacementError, match="device 3"):
    simulate(graph, np.full(10, 3), topology)
  with pytest.raises(PlacementError, match="device -1"):
    simulate(graph, np.full(10, -1), topology)
  with pytest.raises(PlacementError, match="integer"):
    simulate(graph, np.full(10, 0.5), topology)
  with pytest.raises(TopologyError, match="NaN"):
    simulate(graph, ok, topology, costs=np.full((10, 3), np.nan))
  with pytest.raises(TopologyError, match="shape"):
    simulate(graph, ok, topology, costs=np.ones((10, 2)))
  with pytest.raises(PlacementError, match="topological"):
    simulate(graph, ok, topology, order=np.arange(10)[::-1])
  with pytest.raises(PlacementError, match="permutation"):
    simulate(graph, ok, topology, order=np.zeros(10, int))
  with pytest.raises(TopologyError, match="Topology"):
    simulate(graph, ok, "1cpu+2gpu")
  with pytest.raises(TopologyError, match="at least one device"):
    Topology(devices=(), link_bandwidth=np.zeros((0, 0)),
             link_latency=np.zeros((0, 0)), compute_group=np.zeros(0))
  assert issubclass(PlacementError, GplaceError)


@pytest.mark.parametrize("schedule", ["static", "dynamic", "planned",
                                      "best"])
def test_times_past_float32_are_refused_not_reported_as_a_runtime(schedule):
  # inf s with oom=False looked like a valid (if slow) placement before,
  # and the dynamic schedule even gave 0 s (issue 47).
  topology = preset("1cpu+2gpu")
  graph = random_dag(10, seed=0)
  ok = np.zeros(10, int)
  huge = graph.replace(flops=np.where(graph.kind == 1, 1e308, 0.0))
  with pytest.raises(TopologyError, match=r"could reach .*float32.*op cost "
                     r"1\.5\de\+296 s \(node 1, random/n1, on cpu:0\)"):
    simulate(huge, ok, topology, schedule=schedule)
  # Each cost fits float32, their sum does not.
  with pytest.raises(TopologyError, match="float32"):
    simulate(graph, ok, topology, costs=np.full((10, 3), 3e38),
             schedule=schedule)
  # Links: a latency of 1e300 s, whatever the placement.
  slow = topology.replace(link_latency=np.where(
      np.eye(3, dtype=bool), 0.0, 1e300))
  for placement in (np.arange(10) % 3, ok):
    with pytest.raises(TopologyError, match=r"transfer 1e\+300 s"):
      simulate(graph, placement, slow, schedule=schedule)
  # A day per op and per transfer is fine.
  day = topology.replace(link_latency=np.where(
      np.eye(3, dtype=bool), 0.0, 86400.0))
  result = simulate(graph, np.arange(10) % 3, day, schedule=schedule,
                    costs=np.full((10, 3), 86400.0))
  assert np.isfinite(float(result.runtime_s))
  assert float(result.runtime_s) >= 86400.0


def test_a_boolean_placement_is_refused():
  graph = random_dag(10, seed=0)
  with pytest.raises(PlacementError, match="booleans"):
    simulate(graph, np.ones(10, bool), preset("1cpu+2gpu"))


def test_exports():
  assert gplace.simulate is simulate
  assert gplace.lower_bound is lower_bound
  assert gplace.Topology is Topology


def test_the_shared_order_scan_splits_the_batch_without_changing_it(
    monkeypatch):
  # A batch above the split threshold runs in parts on threads of their own;
  # each placement's result is the one the whole batch gives.
  graph = random_dag(1200, avg_degree=2.5, n_inputs=4, seed=4)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(3).integers(0, 5, (64, graph.n_nodes))
  monkeypatch.setattr(runner, "CORES", 2)
  split = simulate(graph, placements, topology, schedule="static",
                   return_schedule=True)
  monkeypatch.setattr(runner, "SPLIT_MIN", 1 << 40)
  whole = simulate(graph, placements, topology, schedule="static",
                   return_schedule=True)
  for field in ("runtime_s", "peak_bytes", "oom", "start_s", "finish_s",
                "order"):
    np.testing.assert_array_equal(np.asarray(getattr(split, field)),
                                  np.asarray(getattr(whole, field)))


def test_a_batch_above_the_compiled_scans_limit_runs_in_blocks():
  # XLA:CPU fails to compile the one-kernel scan for more than
  # runner.MAX_SCAN_ROWS placements; a larger batch in a shared order (odd,
  # so it does not split across cores) gives each row its own result.
  graph = random_dag(24, seed=5)
  topology = preset("1cpu+4gpu")
  rng = np.random.default_rng(5)
  k = runner.MAX_SCAN_ROWS + 1
  placements = rng.integers(0, topology.n_devices, (k, graph.n_nodes))
  order = np.arange(graph.n_nodes)
  whole = simulate(graph, placements, topology, order=order,
                   return_schedule=True)
  rows = [0, 1, k - 2, k - 1]
  apart = simulate(graph, placements[rows], topology, order=order,
                   return_schedule=True)
  assert np.asarray(whole.runtime_s).shape == (k,)
  np.testing.assert_array_equal(np.asarray(whole.runtime_s)[rows],
                                np.asarray(apart.runtime_s))
  np.testing.assert_array_equal(np.asarray(whole.finish_s)[rows],
                                np.asarray(apart.finish_s))
  np.testing.assert_array_equal(np.asarray(whole.oom)[rows],
                                np.asarray(apart.oom))
