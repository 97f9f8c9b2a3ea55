"""Tests of gplace.search.genetic: tournament selection, the settings'
checks, and the known optima of tiny graphs."""

import numpy as np
import pytest

from gplace import search
from gplace.errors import SearchError
from gplace.search.genetic import genetic, genetic_placer, tournament_select
import search_cases


@pytest.fixture(scope="module")
def small():
  return search_cases.small_case()


def test_chain_goes_to_the_fastest_device():
  search_cases.check_chain_goes_to_the_fastest_device(genetic)


def test_two_chains_split_across_two_gpus():
  search_cases.check_two_chains_split_across_two_gpus(genetic)


def test_out_of_memory_is_infeasible():
  search_cases.check_out_of_memory_is_infeasible(genetic)


def test_tournament_select_prefers_the_fast():
  rng = np.random.default_rng(0)
  runtime_s = np.arange(10, dtype=np.float64)[::-1]   # member 9 is fastest
  uniform = tournament_select(rng, runtime_s, 5000, 1)
  assert uniform.shape == (5000,) and set(uniform) == set(range(10))
  strong = tournament_select(rng, runtime_s, 5000, 8)
  assert strong.mean() > uniform.mean() + 2
  assert np.mean(strong == 9) > 0.5     # 1 - 0.9**8 ~ 0.57


@pytest.mark.parametrize("kwargs,match", [
    (dict(population=1), "population"),
    (dict(population=0), "population"),
    (dict(elite=64), "elite"),
    (dict(elite=-1), "elite"),
    (dict(tournament=0), "tournament"),
    (dict(tournament=65), "tournament"),
    (dict(crossover_kind="onepoint"), "crossover"),
    (dict(crossover_kind=np.array(["uniform", "segment"])), "crossover"),
    (dict(mutation_rate=1.5), "mutation_rate"),
])
def test_genetic_rejects_bad_settings(kwargs, match, small):
  graph, topology = small
  with pytest.raises(SearchError, match=match):
    search.genetic(graph, topology, **kwargs)


def test_exports():
  assert search.genetic is genetic
  assert search.PLACERS["genetic"] is genetic_placer
