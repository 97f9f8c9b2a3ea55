"""Tests of gplace.execution.timing: measure reports timings and counts, marks
failing placements instead of raising, and measure_placements scores each of
K placements under its schedule."""

import jax
import numpy as np
import pytest

import gplace
from gplace import _testing
from gplace.errors import PlacementError, ScheduleError
from gplace.execution import cache
from gplace.execution import inputs
from gplace.execution import timing
from gplace.sim.presets import local


@pytest.fixture(scope="module")
def control_flow():
  fn = _testing.control_flow_program
  args = _testing.control_flow_args()
  return fn, args, gplace.capture(fn, *args)


def test_measure_reports_timings_and_counts(control_flow):
  fn, args, graph = control_flow
  placement = np.random.default_rng(1).integers(0, 2, graph.n_nodes)
  placed = gplace.place(fn, graph, placement, jax.devices()[:2])
  result = gplace.measure(placed, *args, repeats=3, warmup=1)
  assert not result.failed and len(result.times_s) == 3
  assert result.min_s <= result.runtime_s <= result.max_s
  assert result.n_clusters == placed.n_clusters >= 2
  assert result.n_transfers == placed.n_transfers
  assert result.build_s >= result.compile_s >= 0
  plain = gplace.measure(fn, *args, repeats=3, warmup=1)
  assert plain.n_clusters == 1 and plain.runtime_s > 0


def test_measure_marks_failed_placements(control_flow, monkeypatch):
  fn, args, graph = control_flow
  def out_of_memory(*_):
    raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory")
  monkeypatch.setattr(cache, "compile_cluster", out_of_memory)
  cache.clear_cache()
  placed = gplace.place(fn, graph, np.zeros(graph.n_nodes, int),
                        jax.devices()[:1])
  result = gplace.measure(placed, *args, repeats=2)
  assert result.failed and "RESOURCE_EXHAUSTED" in result.reason
  assert result.runtime_s == float("inf")
  with pytest.warns(inputs.SingleDeviceWarning):
    runtimes = timing.measure_placements(
        fn, graph, np.zeros((2, graph.n_nodes), int), args, repeats=1,
        devices=jax.devices()[:1], penalty_s=9.0)
  np.testing.assert_array_equal(runtimes, [9.0, 9.0])
  cache.clear_cache()


def test_measure_placements_scores_each_placement(control_flow):
  fn, args, graph = control_flow
  devices = jax.devices()[:2]
  placements = np.stack([np.zeros(graph.n_nodes, int),
                         np.arange(graph.n_nodes) % 2])
  runtimes = timing.measure_placements(fn, graph, placements, args,
                                       devices=devices, repeats=2, mode="op")
  assert runtimes.shape == (2,) and np.all(np.isfinite(runtimes))
  # Explicit schedules: one order per placement, or the SimResult of all.
  ids = np.tile(np.arange(graph.n_nodes), (2, 1))
  result = gplace.simulate(graph, placements, local(devices),
                           return_schedule=True)
  for schedules in (ids, result, "device_greedy"):
    runtimes = timing.measure_placements(
        fn, graph, placements, args, devices=devices, repeats=1, warmup=0,
        mode="op", schedules=schedules)
    assert runtimes.shape == (2,) and np.all(np.isfinite(runtimes))
  assert timing.measure_placements(fn, graph, placements[:0], args,
                                   devices=devices).shape == (0,)
  with pytest.raises(PlacementError):
    timing.measure_placements(fn, graph, placements[0], args)
  with pytest.raises(ScheduleError, match="one order per placement"):
    timing.measure_placements(fn, graph, placements, args, devices=devices,
                              schedules=ids[:1])


def test_fastest_in_rounds_keeps_the_fastest_call_and_inf_for_failures(
    monkeypatch):
  # Scripted timings per function, one per round: "b" fails every round.
  script = {"a": [3.0, 1.0, 2.0], "b": [None, None, None]}
  seen = []

  def fake_measure(fn, *args, repeats, warmup):
    assert args == (7,) and (repeats, warmup) == (2, 1)
    seen.append(fn)
    value = script[fn].pop(0)
    return timing.Measurement(
        runtime_s=np.inf if value is None else value,
        min_s=np.inf if value is None else value,
        failed=value is None)

  monkeypatch.setattr(timing, "measure", fake_measure)
  got = timing.fastest_in_rounds(["a", "b"], 7, rounds=3, repeats=2,
                                 warmup=1, rng=np.random.default_rng(0))
  np.testing.assert_array_equal(got, [1.0, np.inf])
  assert sorted(seen) == ["a"] * 3 + ["b"] * 3
