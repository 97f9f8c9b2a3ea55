"""Tests of gplace.autoplace.measured: which candidate optimize returns when
times are measured, and the tie rule that prefers a simpler plan (no
timing asserts: measurements are made up or monkeypatched)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.autoplace import budget
from gplace.autoplace import measured
from gplace.autoplace import optimizer
from gplace.autoplace.candidates import Candidate
from gplace.execution.timing import Measurement
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

GRAPH = random_dag(12, seed=0)
TOPOLOGY = preset("1cpu+2gpu")
N = GRAPH.n_nodes
SINGLE = Candidate("single_device (default)", np.zeros(N, np.int32), None,
                   1.0)
SPLIT = Candidate("annealing from single_device", np.arange(N) % 3, None,
                  1.0 - 7e-9)
TWO = Candidate("heft (default)", np.arange(N) % 2, None, 0.8)


def _measurement(median, iqr=0.01):
  return Measurement(runtime_s=median, iqr_s=iqr, times_s=(median,) * 5)


def test_complexity_counts_devices_clusters_and_transfers():
  single = measured.complexity(GRAPH, TOPOLOGY, None, SINGLE)
  split = measured.complexity(GRAPH, TOPOLOGY, None, SPLIT)
  assert single.devices == 1 and single.transfers == 0
  assert single.clusters == 1
  assert split.devices == 3 and split.transfers > 0
  assert split > single


def test_a_float_rounding_gain_does_not_beat_one_device_on_a_preset():
  # The case of issue 46: 7 ns "faster" over 1 s, on more devices.
  choice = measured.choose([SPLIT, SINGLE], GRAPH, TOPOLOGY, None)
  assert choice.winner.label == SINGLE.label
  assert choice.fastest.label == SPLIT.label
  assert "simpler" in choice.reason
  # A real simulated gain wins.
  choice = measured.choose([SINGLE, TWO], GRAPH, TOPOLOGY, None)
  assert choice.winner.label == TWO.label


def test_a_larger_tie_keeps_the_simpler_plan():
  # Without measurements on uncalibrated local devices a 20% simulated gain
  # is inside the simulator's error.
  choice = measured.choose([SINGLE, TWO], GRAPH, TOPOLOGY, None,
                           tie=measured.UNCALIBRATED_TIE)
  assert choice.winner.label == SINGLE.label


@pytest.mark.parametrize("single_s, two_s, iqr, winner", [
    (1.0, 0.8, 0.01, TWO.label),        # clearly faster when measured
    (1.0, 0.995, 0.01, SINGLE.label),   # within the spread: the simpler
    (0.9, 1.0, 0.01, SINGLE.label),     # the simulator was wrong
    (1.0, 0.95, 0.08, SINGLE.label),    # noisy: within the spread
])
def test_measurements_decide(single_s, two_s, iqr, winner):
  times = {SINGLE.label: _measurement(single_s, iqr),
           TWO.label: _measurement(two_s, iqr)}
  choice = measured.choose([TWO, SINGLE], GRAPH, TOPOLOGY, None,
                           measured=times)
  assert choice.winner.label == winner


def test_failed_and_unmeasured_candidates_do_not_win():
  times = {SINGLE.label: _measurement(1.0),
           TWO.label: Measurement(runtime_s=np.inf, failed=True)}
  choice = measured.choose([TWO, SINGLE, SPLIT], GRAPH, TOPOLOGY, None,
                           measured=times)
  assert choice.winner.label == SINGLE.label


def test_the_measured_set_starts_with_the_mandatory_candidates():
  slow = Candidate("round_robin (default)", np.arange(N) % 3, None, 2.0)
  found = measured.candidates_to_measure([slow, SPLIT, TWO, SINGLE])
  # The simulated winner (heft, also the best baseline), the single
  # device, then the next fastest.
  assert [c.label for c in found[:3]] == [TWO.label, SINGLE.label,
                                          SPLIT.label]
  assert {c.label for c in found} >= {SINGLE.label, TWO.label}
  # Each placement once (the same placement under two labels is one).
  twin = SINGLE._replace(label="expert (default)")
  assert len(measured.candidates_to_measure([SINGLE, twin])) == 1
  # gplace's critical-chain plan is no classical baseline: the best
  # baseline is measured even when the plan is faster.
  chain = Candidate("critical chain (default)", (np.arange(N) + 1) % 3,
                    None, 0.75)
  won = Candidate("annealing from critical chain", (np.arange(N) + 2) % 3,
                  None, 0.7)
  found = measured.candidates_to_measure([slow, chain, won, SINGLE, TWO],
                                         limit=3)
  assert [c.label for c in found] == [won.label, SINGLE.label, TWO.label]


def _mlp(params, x):
  return jnp.tanh(jax.nn.relu(x @ params["w1"]) @ params["w2"]).mean()


def test_optimize_on_local_devices_returns_the_measured_fastest(monkeypatch):
  params = {"w1": jnp.ones((64, 64)) / 64, "w2": jnp.ones((64, 64)) / 64}
  x = jnp.ones((8, 64))
  seen = []

  def fake_measure(fn, args, graph, topology, costs, candidates, **kwargs):
    del fn, args, graph, topology, costs, kwargs
    seen.extend(c.label for c in candidates)
    # Everything on one device is measured fastest, whatever was simulated.
    return {c.label: _measurement(
        1.0 if len(np.unique(c.placement)) == 1 else 2.0)
            for c in candidates}

  monkeypatch.setattr(measured, "measure", fake_measure)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = gplace.optimize(_mlp, params, x, topology="local",
                             method="round_robin", budget_s=5,
                             progress=False)
    result = gplace.optimize(_mlp, params, x, topology="local", budget_s=5,
                             progress=False, max_evaluations=64)
  assert any(issubclass(w.category, optimizer.UncalibratedWarning)
             for w in caught)
  assert seen and result.measured
  assert len(np.unique(result.placement)) == 1
  assert result.measured_s == 1.0
  text = result.table()
  assert "measured (median ± IQR)" in text and "measured on this machine" \
      in text


def test_a_preset_says_its_times_are_simulated():
  result = gplace.optimize(GRAPH, topology="1cpu+2gpu", method="heft",
                           progress=False)
  assert not result.measured and result.measured_s is None
  assert "simulated on '1cpu+2gpu'" in result.table()


def test_memory_pressure_is_read_from_the_baselines():
  feasible = [SINGLE, TWO, SPLIT]
  assert not budget.memory_pressure(feasible)
  assert not budget.memory_pressure([])
  capped = feasible + [TWO._replace(label="m_topo (default)",
                                    runtime_s=np.inf)]
  assert budget.memory_pressure(capped)        # 1 of 4 runs out
  many = feasible * 3 + capped[-1:]            # 1 of 10
  assert not budget.memory_pressure(many)
  assert budget.memory_pressure(many, budget.LNS_PRESSURE)


def test_results_state_their_gap_to_the_bound():
  result = gplace.optimize(GRAPH, topology="1cpu+2gpu", method="heft",
                           progress=False)
  assert result.gap == pytest.approx(
      result.runtime_s / result.lower_bound_s - 1)
  assert "gap to the lower bound" in result.table()


def test_slow_builds_reserve_more_of_the_budget_for_measuring():
  assert budget.measure_reserve_s(30.0) == budget.MEASURE_SHARE * 30.0
  assert budget.measure_reserve_s(30.0, build_s=0.1) == (
      budget.MEASURE_SHARE * 30.0)
  # A 5 s build (a 2,870-op LM step): two more builds and the rounds.
  assert budget.measure_reserve_s(30.0, build_s=5.0) == (
      budget.BUILD_RESERVE * 5.0 + budget.MIN_MEASURE_S)
  assert budget.measure_reserve_s(1.0) == budget.MIN_MEASURE_S


def test_optimize_builds_one_device_first_and_keeps_its_builds_time(
    monkeypatch):
  # The build's time moves the searches' deadline: with a build "taking"
  # the whole budget the searches get their floor, and the call still
  # returns a measured choice.
  calls = []

  def first_build_s(fn, args, graph, topology, costs, candidate, **kwargs):
    calls.append(candidate.label)
    return 1e3

  monkeypatch.setattr(measured, "first_build_s", first_build_s)
  fn = lambda x: jnp.tanh(x @ x).sum()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = gplace.optimize(fn, jnp.ones((16, 16)), topology="local",
                             budget_s=4.0, progress=False)
  assert calls and calls[0].startswith("single_device")
  assert np.isfinite(result.runtime_s)
