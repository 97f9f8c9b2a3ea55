"""Tests of the search placers (gplace.search): local search, simulated
annealing and the genetic search, on tiny graphs with known optima."""

import math

import numpy as np
import pytest

import gplace
from gplace import search
from gplace.errors import CoarseningError, SearchError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.graphs.graph import random_dag
from gplace.search.common import Units, make_units
from gplace.search.moves import crossover, redraw
from gplace.sim.topology import Device, Topology, preset, uniform_links

SEARCHES = sorted(search.SEARCHES.items())
MS = 1e-3


def chains_graph(lengths, name="chains"):
  """Independent chains, each ``input -> ops -> output``, 4-byte tensors.

  Nodes are interleaved across chains so that node ids mix them.
  """
  names, kinds, edges, chain_of = [], [], [], []
  previous = {}
  for c in range(len(lengths)):
    names.append(f"chain{c}/x")
    kinds.append(NODE_INPUT)
    chain_of.append(c)
    previous[c] = len(names) - 1
  for step in range(max(lengths) + 1):
    for c, length in enumerate(lengths):
      if step > length:
        continue
      is_output = step == length
      names.append(f"chain{c}/output" if is_output else f"chain{c}/op{step}")
      kinds.append(NODE_OUTPUT if is_output else NODE_OP)
      chain_of.append(c)
      edges.append((previous[c], len(names) - 1, 4))
      previous[c] = len(names) - 1
  n = len(names)
  graph = Graph.build(
      names=names, op_type=["dot_general"] * n, kind=kinds,
      out_shapes=[(1,)] * n, out_dtype=["float32"] * n, out_bytes=[4] * n,
      flops=[1e9 if k == NODE_OP else 0.0 for k in kinds],
      bytes_accessed=[8.0] * n, edges=edges, name=name)
  return graph


def op_costs(graph, per_device_s):
  """``[N, D]`` costs: ``per_device_s[d]`` for every op on device ``d``."""
  is_op = (graph.kind == NODE_OP)[:, None]
  return np.where(is_op, np.asarray(per_device_s)[None, :], 0.0)


def two_gpus(memory=(1e9, 1e9)):
  devices = tuple(Device(f"gpu:{i}", "gpu", peak_flops=1e12,
                         mem_bandwidth=1e11, memory_bytes=m)
                  for i, m in enumerate(memory))
  bandwidth, latency = uniform_links(2, 12e9, 25e-6)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(2),
                  name="2gpu")


@pytest.fixture(scope="module")
def small():
  return random_dag(30, seed=3), preset("1cpu+2gpu")


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
def test_deterministic_for_a_seed(name, fn, small):
  graph, topology = small
  first = fn(graph, topology, seed=7, budget=200)
  second = fn(graph, topology, seed=7, budget=200)
  np.testing.assert_array_equal(first.placement, second.placement)
  np.testing.assert_array_equal(first.history.runtime_s,
                                second.history.runtime_s)
  assert first.runtime_s == second.runtime_s


def test_time_limit_stops_early(small):
  graph, topology = small
  result = search.local_search(graph, topology, budget=10**9,
                               time_limit_s=0.3)
  assert result.evaluations < 10**9
  assert result.runtime_s <= result.init_runtime_s


def test_one_device_returns_the_start():
  graph = random_dag(12, seed=0)
  topology = Topology(devices=(Device("gpu:0", "gpu", 1e12, 1e11, 1e9),),
                      link_bandwidth=np.ones((1, 1)),
                      link_latency=np.zeros((1, 1)), compute_group=[0])
  for _, fn in SEARCHES:
    result = fn(graph, topology, budget=50)
    assert result.evaluations <= 50
    np.testing.assert_array_equal(result.placement, np.zeros(12))


# -- known optima --------------------------------------------------------------


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_chain_goes_to_the_fastest_device(name, fn):
  # One chain of 8 heavy ops; device 2 is the fastest by far, transfers take
  # 25 us: everything on device 2 (8 ms) is the unique optimum.
  graph = chains_graph([8])
  topology = preset("1cpu+2gpu")
  costs = op_costs(graph, [10 * MS, 2 * MS, 1 * MS])
  init = np.zeros(graph.n_nodes, np.int32)
  result = fn(graph, topology, costs=costs, seed=0, budget=3000, init=init)
  np.testing.assert_array_equal(result.placement, np.full(graph.n_nodes, 2))
  assert result.runtime_s == pytest.approx(8 * MS, rel=1e-5)


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_two_chains_split_across_two_gpus(name, fn):
  # Two independent chains of 6 ops on two equal GPUs, all on GPU 0 at the
  # start (12 ms): one chain per GPU halves the runtime. With colocation
  # groups each chain is one group, so one move finds it.
  graph = chains_graph([6, 6])
  topology = two_gpus()
  costs = op_costs(graph, [1 * MS, 1 * MS])
  init = np.zeros(graph.n_nodes, np.int32)
  result = fn(graph, topology, costs=costs, seed=0, budget=500, init=init,
              groups="colocation")
  assert result.init_runtime_s == pytest.approx(12 * MS, rel=1e-5)
  assert result.runtime_s == pytest.approx(6 * MS, rel=1e-5)
  chain = np.array([int(n.split("/")[0][5:]) for n in graph.names])
  for c in (0, 1):
    assert len(set(result.placement[chain == c])) == 1
  assert result.placement[chain == 0][0] != result.placement[chain == 1][0]


def test_node_moves_split_two_chains():
  graph = chains_graph([6, 6])
  topology = two_gpus()
  costs = op_costs(graph, [1 * MS, 1 * MS])
  result = search.local_search(graph, topology, costs=costs, budget=3000,
                               init=np.zeros(graph.n_nodes, np.int32))
  assert result.runtime_s == pytest.approx(6 * MS, rel=1e-5)


@pytest.mark.parametrize("name,fn", SEARCHES)
def test_out_of_memory_is_infeasible(name, fn):
  # GPU 1 is faster but holds only a few tensors: the whole chain there runs
  # out of memory, so the search must not return it.
  graph = chains_graph([8])
  topology = two_gpus(memory=(1e9, 8.0))
  costs = op_costs(graph, [2 * MS, 1 * MS])
  result = fn(graph, topology, costs=costs, budget=400,
              init=np.zeros(graph.n_nodes, np.int32))
  assert math.isfinite(result.runtime_s)
  assert not bool(gplace.simulate(graph, result.placement, topology,
                                  costs=costs).oom)
  everything_fast = np.ones(graph.n_nodes, np.int32)
  assert bool(gplace.simulate(graph, everything_fast, topology,
                              costs=costs).oom)


# -- moves ---------------------------------------------------------------------


def test_redraw_moves_one_to_move_size_units_to_other_devices():
  rng = np.random.default_rng(0)
  n, d, m = 40, 4, 5
  units = make_units(random_dag(n, seed=0))
  base = rng.integers(0, d, (200, n)).astype(np.int32)
  out = redraw(rng, base, units, d, m)
  changed = out != base
  assert np.all((changed.sum(1) >= 1) & (changed.sum(1) <= m))
  assert set(np.unique(changed.sum(1))) == set(range(1, m + 1))
  assert out.min() >= 0 and out.max() < d
  rows = np.zeros(200, bool)
  rows[::2] = True
  out = redraw(rng, base, units, d, m, rows=rows)
  np.testing.assert_array_equal(out[1::2], base[1::2])
  assert np.all((out[::2] != base[::2]).any(1))


def test_redraw_moves_groups_whole():
  graph = chains_graph([5, 5, 5])
  units = make_units(graph, "colocation")
  assert units.n_units == 3
  rng = np.random.default_rng(1)
  base = np.zeros((50, graph.n_nodes), np.int32)
  out = redraw(rng, base, units, 3, 1)
  for row in out:
    moved = np.unique(units.group_of[row != 0])
    assert moved.size == 1
    assert np.all(row[units.group_of == moved[0]] == row[
        units.representative[moved[0]]])


def test_crossover_inherits_units_from_parents():
  rng = np.random.default_rng(2)
  n = 30
  units = Units(np.arange(n, dtype=np.int32), n, np.arange(n, dtype=np.int32))
  first = np.zeros((100, n), np.int32)
  second = np.ones((100, n), np.int32)
  children = crossover(rng, first, second, units, "uniform")
  assert 0.4 < children.mean() < 0.6
  children = crossover(rng, first, second, units, "segment")
  for child in children:  # one contiguous run from the second parent
    assert np.count_nonzero(np.diff(np.r_[0, child, 0])) <= 2
  groups = make_units(chains_graph([4, 4]), "colocation")
  children = crossover(rng, first[:, :groups.group_of.size],
                       second[:, :groups.group_of.size], groups, "uniform")
  for child in children:
    for g in range(groups.n_units):
      assert len(set(child[groups.group_of == g])) == 1


def test_groups_accept_coarsening_and_labels():
  graph = chains_graph([3, 3])
  by_rule = make_units(graph, "colocation")
  by_coarsening = make_units(graph, gplace.coarsen(graph, "colocation"))
  labels = gplace.coarsen(graph, "colocation").group_of * 10 + 7
  by_labels = make_units(graph, labels)
  for units in (by_coarsening, by_labels):
    np.testing.assert_array_equal(units.group_of, by_rule.group_of)


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
    (dict(groups=np.zeros(5, np.int32)), "groups"),
    (dict(groups="colocation", move_size=30), "move_size"),
])
def test_bad_settings_raise_search_error(name, fn, kwargs, match, small):
  graph, topology = small
  with pytest.raises(SearchError, match=match):
    fn(graph, topology, **kwargs)


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


@pytest.mark.parametrize("kwargs,match", [
    (dict(population=1), "population"),
    (dict(population=0), "population"),
    (dict(elite=64), "elite"),
    (dict(elite=-1), "elite"),
    (dict(tournament=0), "tournament"),
    (dict(tournament=65), "tournament"),
    (dict(crossover_kind="onepoint"), "crossover"),
    (dict(mutation_rate=1.5), "mutation_rate"),
])
def test_genetic_rejects_bad_settings(kwargs, match, small):
  graph, topology = small
  with pytest.raises(SearchError, match=match):
    search.genetic(graph, topology, **kwargs)


def test_size_rule_without_max_groups_says_how(small):
  graph, topology = small
  with pytest.raises(CoarseningError, match="max_groups"):
    search.local_search(graph, topology, groups="size")
