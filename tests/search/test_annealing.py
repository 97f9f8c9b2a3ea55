"""Tests of gplace.search.annealing: the Metropolis rule, the temperature
schedule's checks, and the known optima of tiny graphs."""

import math

import numpy as np
import pytest

from gplace import search
from gplace.errors import SearchError
from gplace.search.annealing import (annealing, annealing_placer,
                                     check_schedule, metropolis)
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
