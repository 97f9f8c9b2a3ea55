"""Tests of gplace.search.common, the contract every search shares: never
worse than its start, the default start, budgets, determinism, units and
settings checks (run on every search), the Evaluator, and the registry."""

import numpy as np
import pytest

import gplace
from gplace import search
from gplace.errors import CoarseningError, SearchError
from gplace.graphs.graph import random_dag
from gplace.search.common import Evaluator, make_units, stack_best
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology
import search_cases
from search_cases import chains_graph, two_gpus

SEARCHES = sorted(search.SEARCHES.items())


@pytest.fixture(scope="module")
def small():
  return search_cases.small_case()


# -- contract: never worse, budget, determinism --------------------------------


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_never_worse_than_init_and_scores_are_true(name, fn, small):
  graph, topology = small
  init = np.random.default_rng(0).integers(0, 3, graph.n_nodes)
  result = fn(graph, topology, seed=1, budget=300, init=init)
  init_s = float(gplace.simulate(graph, init, topology).runtime_s)
  assert result.init_runtime_s == pytest.approx(init_s, rel=1e-6)
  assert result.runtime_s <= result.init_runtime_s
  assert result.runtime_s < init_s  # a random start is easy to improve
  again = gplace.simulate(graph, result.placement, topology)
  assert float(again.runtime_s) == pytest.approx(result.runtime_s, rel=1e-6)
  assert result.placement.dtype == np.int32
  assert result.placement.shape == (graph.n_nodes,)
  assert result.wall_s > 0


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_default_start_is_the_best_cheap_baseline(name, fn, small):
  graph, topology = small
  result = fn(graph, topology, budget=100)
  baseline_s = min(
      float(gplace.simulate(graph, gplace.baselines.get(b)(graph, topology),
                            topology).runtime_s)
      for b in search.INIT_BASELINES)
  assert result.init_runtime_s == pytest.approx(baseline_s, rel=1e-6)
  assert result.runtime_s <= result.init_runtime_s


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_init_may_hold_several_candidates(name, fn, small):
  graph, topology = small
  init, labels = search.initial_placements(graph, topology)
  assert init.shape == (len(labels), graph.n_nodes)
  assert labels == list(search.INIT_BASELINES)
  from_stack = fn(graph, topology, budget=100, init=init)
  by_default = fn(graph, topology, budget=100)
  np.testing.assert_array_equal(from_stack.placement, by_default.placement)
  assert from_stack.history.evaluations[0] == len(labels)


@pytest.mark.parametrize("name,fn", SEARCHES)
@pytest.mark.parametrize("budget", [1, 5, 70])
def test_respects_budget(name, fn, budget, small):
  graph, topology = small
  result = fn(graph, topology, seed=0, budget=budget, batch_size=16)
  assert result.evaluations <= budget
  assert result.evaluations == budget  # no time limit: the budget is spent
  history = result.history
  assert history.evaluations[-1] == result.evaluations
  assert np.all(np.diff(history.evaluations) > 0)
  assert np.all(np.diff(history.runtime_s) <= 0)
  assert history.runtime_s[-1] == result.runtime_s


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_a_huge_batch_size_is_cut_to_the_budget(name, fn, small):
  # Batches were padded to batch_size: 10**20 raised OverflowError.
  graph, topology = small
  result = fn(graph, topology, budget=5, batch_size=10**20)
  assert result.evaluations == 5


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_deterministic_for_a_seed(name, fn, small):
  graph, topology = small
  first = fn(graph, topology, seed=7, budget=200)
  second = fn(graph, topology, seed=7, budget=200)
  np.testing.assert_array_equal(first.placement, second.placement)
  np.testing.assert_array_equal(first.history.runtime_s,
                                second.history.runtime_s)
  assert first.runtime_s == second.runtime_s


def test_one_device_returns_the_start():
  graph = random_dag(12, seed=0)
  topology = Topology(devices=(Device("gpu:0", "gpu", 1e12, 1e11, 1e9),),
                      link_bandwidth=np.ones((1, 1)),
                      link_latency=np.zeros((1, 1)), compute_group=[0])
  for _, fn in SEARCHES:
    result = fn(graph, topology, budget=50)
    assert result.evaluations <= 50
    np.testing.assert_array_equal(result.placement, np.zeros(12))


# -- units ---------------------------------------------------------------------


def test_groups_accept_coarsening_and_labels():
  graph = chains_graph([3, 3])
  by_rule = make_units(graph, "colocation")
  by_coarsening = make_units(graph, gplace.coarsen(graph, "colocation"))
  labels = gplace.coarsen(graph, "colocation").group_of * 10 + 7
  by_labels = make_units(graph, labels)
  for units in (by_coarsening, by_labels):
    np.testing.assert_array_equal(units.group_of, by_rule.group_of)


def test_size_rule_without_max_groups_says_how(small):
  graph, topology = small
  with pytest.raises(CoarseningError, match="max_groups"):
    search.local_search(graph, topology, groups="size")


# -- evaluation ----------------------------------------------------------------


def test_evaluator_counts_scores_and_keeps_the_best():
  graph = chains_graph([4])
  topology = two_gpus(memory=(1e9, 8.0))      # everything on GPU 1: OOM
  costs = search_cases.op_costs(graph, [2e-3, 1e-3])
  evaluator = Evaluator(graph, topology, costs, budget=5, batch_size=4)
  placements = np.stack([np.zeros(graph.n_nodes, np.int32),
                         np.ones(graph.n_nodes, np.int32)] * 2 + [
                             np.zeros(graph.n_nodes, np.int32)])
  runtime_s = evaluator(placements[:2])
  assert runtime_s[0] == pytest.approx(8e-3) and runtime_s[1] == np.inf
  assert evaluator.evaluations == 2 and evaluator.remaining == 3
  np.testing.assert_array_equal(evaluator.best_placement, placements[0])
  with pytest.raises(SearchError, match="exceed the budget"):
    evaluator(placements)
  evaluator(placements[2:])                  # 3 of a batch of 4: padded
  assert evaluator.remaining == 0
  result = evaluator.result(init_runtime_s=8e-3)
  np.testing.assert_array_equal(result.history.evaluations, [2, 5])
  assert result.runtime_s == pytest.approx(8e-3)


def test_stack_best_is_the_first_fastest():
  placements = np.arange(12).reshape(3, 4)
  best, runtime_s = stack_best(placements, np.array([2.0, 1.0, 1.0]))
  np.testing.assert_array_equal(best, placements[1])
  assert best.dtype == np.int32 and runtime_s == 1.0


# -- registry ------------------------------------------------------------------


def test_placers_return_valid_placements():
  graph, topology = random_dag(16, seed=5), preset("1cpu+2gpu")
  assert set(search.PLACERS) == {"local_search", "annealing", "genetic"}
  for name, placer in search.PLACERS.items():
    placement = placer(graph, topology, seed=0)
    assert placement.shape == (16,) and placement.dtype == np.int32, name
    assert placement.min() >= 0 and placement.max() < 3


# -- errors --------------------------------------------------------------------


@pytest.mark.parametrize("name,fn", SEARCHES)
@pytest.mark.parametrize("kwargs,match", [
    (dict(budget=0), "budget"),
    (dict(budget=-5), "budget"),
    (dict(budget=2.5), "budget"),
    (dict(budget=True), "budget"),
    (dict(move_size=0), "move_size"),
    (dict(move_size=31), "move_size"),
    (dict(batch_size=0), "batch_size"),
    (dict(time_limit_s=0), "time_limit_s"),
    (dict(init=np.zeros(29, np.int32)), "init"),
    (dict(init=np.full(30, 3)), "init"),
    (dict(init=np.full(30, 0.5)), "init"),
    (dict(init=np.zeros((0, 30), np.int32)), "init"),
    (dict(init=np.zeros((2, 29), np.int32)), "init"),
    (dict(init=[[0] * 30, [0] * 29]), "init"),  # numpy's ValueError before
    (dict(groups=np.zeros(5, np.int32)), "groups"),
    (dict(groups="colocation", move_size=30), "move_size"),
    (dict(seed=-1), "seed"),              # numpy's ValueError before
    (dict(seed=0.5), "seed"),             # numpy's TypeError before
    (dict(seed="1"), "seed"),
    (dict(seed=np.zeros(3)), "seed"),
    (dict(seed=2**40), "seed"),
])
def test_bad_settings_raise_search_error(name, fn, kwargs, match, small):
  graph, topology = small
  with pytest.raises(SearchError, match=match):
    fn(graph, topology, **kwargs)
