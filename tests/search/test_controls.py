"""gplace.search.controls: the equal-budget search controls."""

import numpy as np

import gplace
from gplace.search import controls

from search_cases import small_case


def test_random_search_keeps_the_best_of_its_budget():
  graph, topology = small_case()
  result = controls.random_search(graph, topology, budget=100, seed=1,
                                  batch_size=32)
  assert result.evaluations == 100
  np.testing.assert_array_equal(result.history.evaluations, [32, 64, 96, 100])
  assert np.all(np.diff(result.history.runtime_s) <= 0)
  assert result.runtime_s == result.history.runtime_s[-1]
  # The placement it reports is the one it scored.
  again = gplace.simulate(graph, result.placement, topology)
  np.testing.assert_allclose(float(again.runtime_s), result.runtime_s,
                             rtol=1e-6)
  # The same draws for the same seed.
  same = controls.random_search(graph, topology, budget=100, seed=1,
                                batch_size=32)
  np.testing.assert_array_equal(same.placement, result.placement)


def test_every_control_spends_the_budget():
  graph, topology = small_case()
  rows = controls.equal_budget(graph, topology, budget=64, seed=0,
                               batch_size=16)
  assert [name for name, _ in rows] == ["local search", "annealing",
                                        "genetic", "random"]
  for _, result in rows:
    assert result.evaluations == 64
    assert np.isfinite(result.runtime_s)
  no_random = controls.equal_budget(graph, topology, budget=64, seed=0,
                                    batch_size=16, random=False)
  assert [name for name, _ in no_random] == ["local search", "annealing",
                                             "genetic"]
  # Deterministic for a seed.
  assert [r.runtime_s for _, r in no_random] == [r.runtime_s
                                                 for _, r in rows[:3]]
