"""Tests of gplace.search.annealing: the Metropolis rule, the temperature
schedule's checks, and the known optima of tiny graphs."""

import math

import numpy as np
import pytest

import gplace
from gplace import search
from gplace.errors import ScheduleError, SearchError
from gplace.search.annealing import (annealing, annealing_placer,
                                     check_schedule, metropolis)
from gplace.search.common import Evaluator
from gplace.sim.priority import priority_order
import search_cases
from search_cases import MS, swap_chains_case


@pytest.fixture(scope="module")
def small():
  return search_cases.small_case()


def test_chain_goes_to_the_fastest_device():
  search_cases.check_chain_goes_to_the_fastest_device(annealing)


def test_two_chains_split_across_two_gpus():
  search_cases.check_two_chains_split_across_two_gpus(annealing)


def test_out_of_memory_is_infeasible():
  search_cases.check_out_of_memory_is_infeasible(annealing)


def test_metropolis_accepts_downhill_and_rarely_far_uphill():
  rng = np.random.default_rng(0)
  runtime_s = np.array([0.5, 1.0, 1.001, 2.0, math.inf])
  passed = np.stack([metropolis(rng, runtime_s, 1.0, 1e-3)
                     for _ in range(2000)])
  assert passed[:, 0].all() and passed[:, 1].all()   # faster, or equal
  assert 0.2 < passed[:, 2].mean() < 0.5              # exp(-1) ~ 0.37
  assert not passed[:, 3].any()                       # exp(-1000)
  assert not passed[:, 4].any()                       # infeasible
  # From an infeasible placement every feasible candidate passes.
  np.testing.assert_array_equal(metropolis(rng, runtime_s, math.inf, 1e-3),
                                np.isfinite(runtime_s))


def test_check_schedule_returns_floats():
  assert check_schedule(1, 1) == (1.0, 1.0)
  assert check_schedule(0.01, None) == (0.01, None)
  with pytest.raises(SearchError, match="positive"):
    check_schedule(True, None)


@pytest.mark.parametrize("kwargs,match", [
    (dict(t0=0.0), "positive"),
    (dict(t0=-1.0), "positive"),
    (dict(t0=float("nan")), "positive"),
    (dict(decay=0.0), r"\(0, 1\]"),
    (dict(decay=1.5), r"\(0, 1\]"),
    (dict(decay=-0.5), r"\(0, 1\]"),
])
def test_annealing_rejects_a_schedule_that_is_not_positive(kwargs, match,
                                                            small):
  graph, topology = small
  with pytest.raises(SearchError, match=match):
    search.annealing(graph, topology, **kwargs)


def test_a_block_move_swaps_what_no_single_move_can():
  graph, topology, costs, start = swap_chains_case()
  kwargs = dict(costs=costs, budget=512, init=start, seed=0)
  found = search.annealing(graph, topology, block_share=1.0, **kwargs)
  assert found.runtime_s == pytest.approx(6 * MS, rel=1e-5)
  single = search.annealing(graph, topology, block_share=0.0, **kwargs)
  assert single.runtime_s == pytest.approx(18 * MS, rel=1e-5)


@pytest.mark.parametrize("share", [-0.5, 1.5, float("nan"), True])
def test_block_share_must_be_a_share(share, small):
  graph, topology = small
  with pytest.raises(SearchError, match="block_share must be a number in"):
    search.annealing(graph, topology, block_share=share)


def test_exports():
  assert search.annealing is annealing
  assert search.PLACERS["annealing"] is annealing_placer


def test_a_stalled_search_gives_its_time_back(small):
  graph, topology = small
  result = annealing(graph, topology, budget=10**7, time_limit_s=120.0,
                     stall_s=1.0)
  assert result.evaluations < 10**7
  assert result.wall_s < 60.0


def test_stall_s_must_be_positive(small):
  graph, topology = small
  with pytest.raises(SearchError, match="stall_s must be a positive"):
    annealing(graph, topology, budget=64, stall_s=0.0)


def _shuffled_order(graph, seed=0):
  """A random topological order of ``graph``'s nodes."""
  rng = np.random.default_rng(seed)
  return priority_order(rng.random(graph.n_nodes).astype(np.float32), graph)


def test_annealing_in_a_fixed_order_scores_every_placement_in_it(small):
  graph, topology = small
  order = _shuffled_order(graph)
  start = np.arange(graph.n_nodes, dtype=np.int32) % topology.n_devices

  def in_order(placement):
    return float(gplace.simulate(graph, placement, topology,
                                 order=order).runtime_s)

  # The order matters for the start: scoring in it is a different problem.
  assert in_order(start) != pytest.approx(
      float(gplace.simulate(graph, start, topology).runtime_s), rel=1e-3)
  result = annealing(graph, topology, budget=512, init=start, order=order,
                     seed=1)
  assert result.init_runtime_s == pytest.approx(in_order(start), rel=1e-6)
  assert result.runtime_s == pytest.approx(in_order(result.placement),
                                           rel=1e-6)
  assert result.runtime_s < result.init_runtime_s
  # History is the best so far, in the order.
  assert np.all(np.diff(result.history.runtime_s) <= 0)


def test_an_evaluator_with_an_order_scores_in_it(small):
  graph, topology = small
  order = _shuffled_order(graph, seed=4)
  placements = np.random.default_rng(0).integers(
      0, topology.n_devices, (5, graph.n_nodes)).astype(np.int32)
  costs = topology.op_costs(graph)
  evaluator = Evaluator(graph, topology, costs, budget=5, batch_size=8,
                        order=order)
  np.testing.assert_allclose(
      evaluator(placements),
      np.asarray(gplace.simulate(graph, placements, topology,
                                 order=order).runtime_s), rtol=1e-6)


@pytest.mark.parametrize("order, match", [
    (lambda n: np.arange(n)[::-1], "not a topological order"),
    (lambda n: np.arange(n - 1), "permutation"),
    (lambda n: np.zeros(n, np.int64), "not a permutation"),
])
def test_annealing_rejects_an_order_that_cannot_run(order, match, small):
  graph, topology = small
  with pytest.raises(ScheduleError, match=match):
    annealing(graph, topology, budget=64, order=order(graph.n_nodes))
