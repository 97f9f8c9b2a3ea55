"""Tests of gplace.search.moves: redraws move 1..move_size units (whole
groups) to other devices; swaps exchange two units' devices; blocks move a
span of the order between two devices; crossovers inherit units from the
parents."""

import numpy as np
import pytest

import gplace
from gplace import search
from gplace.graphs.graph import random_dag
from gplace.search.common import Units, make_units
from gplace.search.moves import (BLOCK_KINDS, MIN_BLOCK, block, choose_distinct,
                                 crossover, redraw, swap, unit_order)
from gplace.sim import graph_files
from search_cases import chains_graph


def test_swap_exchanges_two_units_on_different_devices():
  graph = chains_graph([3, 3])
  units = make_units(graph, None)
  base = np.tile(np.arange(graph.n_nodes) % 2, (50, 1)).astype(np.int32)
  out = swap(np.random.default_rng(0), base, units)
  changed = (out != base).sum(axis=1)
  assert set(changed) <= {0, 2}            # two nodes, or none
  # Device counts are kept: an exchange, not a move.
  np.testing.assert_array_equal(np.sort(out, axis=1), np.sort(base, axis=1))
  assert (changed == 2).any()


def test_choose_distinct_draws_distinct_units_per_row():
  rng = np.random.default_rng(0)
  picks = choose_distinct(rng, 6, 500, 4)
  assert picks.shape == (500, 4)
  assert picks.min() >= 0 and picks.max() < 6
  assert all(len(set(row)) == 4 for row in picks)
  assert set(np.unique(picks)) == set(range(6))


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


def test_unit_order_ranks_units_by_their_first_node_in_the_order():
  units = Units(np.array([0, 1, 0, 2, 1], np.int32), 3,
                np.array([0, 1, 3], np.int32))
  np.testing.assert_array_equal(unit_order(np.array([3, 4, 2, 0, 1]), units),
                                [2, 1, 0])
  nodes = make_units(random_dag(12, seed=0))
  order = np.random.default_rng(0).permutation(12)
  np.testing.assert_array_equal(unit_order(order, nodes), order)


def test_block_moves_a_span_of_the_order_between_two_devices():
  rng = np.random.default_rng(0)
  n, d, k = 64, 4, 600
  units = make_units(random_dag(n, seed=1))
  ranked = rng.permutation(n)               # the order the units run in
  rank = np.argsort(ranked)
  base = rng.integers(0, d, (k, n)).astype(np.int32)
  out = block(rng, base, ranked, units, d)
  assert out.min() >= 0 and out.max() < d
  spans, swaps = [], 0
  for before, after in zip(base, out):
    changed = np.flatnonzero(before != after)
    if changed.size == 0:
      continue
    pairs = set(zip(before[changed].tolist(), after[changed].tolist()))
    a, c = min(pairs)
    assert pairs in ({(a, c)}, {(a, c), (c, a)})     # a move or a swap
    swaps += len(pairs) == 2
    # A contiguous run: every unit between the first and the last moved
    # one that was on a device of the pair moved.
    lo, hi = rank[changed].min(), rank[changed].max()
    inside = ranked[lo:hi + 1]
    paired = inside[np.isin(before[inside], [a, c] if len(pairs) == 2
                            else [a])]
    assert np.all(after[paired] != before[paired])
    spans.append(hi - lo + 1)
  assert len(spans) > 0.8 * k                  # most draws move something
  assert max(spans) > n // 2 and min(spans) <= MIN_BLOCK
  assert 0 < swaps < len(spans)
  rows = np.zeros(k, bool)
  rows[::3] = True
  out = block(rng, base, ranked, units, d, rows=rows)
  np.testing.assert_array_equal(out[~rows], base[~rows])
  assert len(BLOCK_KINDS) == 3


def test_block_moves_groups_whole_and_keeps_device_constraints():
  graph = random_dag(40, seed=7)
  allowed = np.ones((40, 3), bool)
  allowed[::2, 2] = False          # even nodes never on device 2
  colocation = np.full(40, -1, np.int32)
  colocation[[10, 11, 21]] = 0     # one class, moved as one unit
  graph = graph.replace(allowed_devices=allowed, colocation=colocation)
  units = make_units(graph)
  rng = np.random.default_rng(3)
  base = np.tile(np.arange(40) % 2, (400, 1)).astype(np.int32)
  base[:, [10, 11, 21]] = 1
  out = block(rng, base, unit_order(np.arange(40), units), units, 3)
  assert (out != base).any(axis=1).mean() > 0.5
  assert allowed[np.arange(40), out].all()
  assert (out[:, [10, 11]] == out[:, [21, 21]]).all()
  assert (out == 2).any()


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


def test_moves_keep_device_constraints_and_co_location_classes():
  graph = random_dag(40, seed=7)
  allowed = np.ones((40, 4), bool)
  allowed[::2, 3] = False          # even nodes never on device 3
  allowed[5] = [False, True, False, False]   # node 5 only on device 1
  colocation = np.full(40, -1, np.int32)
  colocation[[10, 11, 20]] = 0     # one class, moved as one unit
  graph = graph.replace(allowed_devices=allowed, colocation=colocation)
  units = make_units(graph)
  assert units.n_units == 38 and units.allowed.shape == (38, 4)
  assert len({int(units.group_of[v]) for v in (10, 11, 20)}) == 1
  rng = np.random.default_rng(0)
  base = np.tile(np.where(allowed[:, 0], 0, 1), (256, 1)).astype(np.int32)
  moved = redraw(rng, base, units, 4, move_size=8)
  assert (moved != base).any(axis=1).mean() > 0.9       # most rows move
  assert allowed[np.arange(40), moved].all()
  assert (moved[:, [10, 11]] == moved[:, [20, 20]]).all()
  assert (moved[:, 5] == 1).all()                     # nowhere else to go
  assert set(np.unique(moved[:, 1::2])) == {0, 1, 2, 3}


def test_a_search_on_a_constrained_graph_returns_a_feasible_placement():
  from gplace import search  # pylint: disable=import-outside-toplevel
  from gplace.graphs import constraints  # pylint: disable=import-outside-toplevel
  from gplace.sim.presets import preset  # pylint: disable=import-outside-toplevel
  graph = random_dag(30, seed=3)
  allowed = np.ones((30, 3), bool)
  allowed[1::2, 0] = False
  colocation = np.full(30, -1, np.int32)
  colocation[[4, 9]] = 0
  graph = graph.replace(allowed_devices=allowed, colocation=colocation)
  init = np.zeros(30, np.int32)    # breaks the constraints: repaired first
  result = search.annealing(graph, preset("1cpu+2gpu"), budget=256, seed=0,
                            init=init, batch_size=64)
  assert np.isfinite(result.runtime_s)
  assert not constraints.violations(graph, result.placement[None])[0]


def swap_only_graph(path):
  """Two weights that fill one accelerator each, and the op that reads
  each (co-located with it): moving either pair alone puts both weights on
  one device (out of memory), so only an exchange leaves the slow start
  (each op on the device where it is slow, 10 ms) for the optimum (1 ms)."""
  import json  # pylint: disable=import-outside-toplevel
  ms, weight = 1e-3, 1_000_000
  document = {
      "topology": {"devices": [
          {"name": f"gpu:{i}", "kind": "gpu", "peak_flops": 1e13,
           "mem_bandwidth": 1e12, "memory_bytes": 1.5 * weight}
          for i in range(2)],
                   "links": {"bandwidth": 1e12, "latency_s": 0.0}},
      "nodes": [
          {"id": "wa", "kind": "input", "out_bytes": weight,
           "colocation": "a"},
          {"id": "wb", "kind": "input", "out_bytes": weight,
           "colocation": "b"},
          {"id": "a", "out_bytes": 4, "cost_s": [10 * ms, 1 * ms],
           "colocation": "a"},
          {"id": "b", "out_bytes": 4, "cost_s": [1 * ms, 10 * ms],
           "colocation": "b"},
          {"id": "out", "kind": "output", "out_bytes": 4}],
      "edges": [{"src": "wa", "dst": "a"}, {"src": "wb", "dst": "b"},
                {"src": "a", "dst": "out"}, {"src": "b", "dst": "out"}]}
  with open(path, "w") as f:
    json.dump(document, f)


def test_a_swap_reaches_what_no_single_move_can(tmp_path):
  path = str(tmp_path / "caps.json")
  swap_only_graph(path)
  loaded = graph_files.load(path)
  graph, topology, costs = loaded.graph, loaded.topology, loaded.costs
  start = np.array([0, 1, 0, 1, 0], np.int32)   # each op where it is slow
  slow = gplace.simulate(graph, start, topology, costs=costs)
  assert not bool(slow.oom)
  for unit in ("a", "b"):                        # every single move OOMs
    moved = start.copy()
    members = [i for i, name in enumerate(graph.names)
               if name in (unit, "w" + unit)]
    moved[members] = 1 - moved[members]
    assert bool(gplace.simulate(graph, moved, topology, costs=costs).oom)
  found = search.annealing(graph, topology, costs=costs, budget=256,
                           init=start, seed=0)
  assert found.runtime_s < float(slow.runtime_s) / 5
  result = gplace.optimize(path, method="annealing", budget_s=10,
                           progress=False, max_evaluations=256)
  assert result.runtime_s == pytest.approx(found.runtime_s)
