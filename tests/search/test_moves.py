"""Tests of gplace.search.moves: redraws move 1..move_size units (whole
groups) to other devices; crossovers inherit units from the parents."""

import numpy as np

from gplace.graphs.graph import random_dag
from gplace.search.common import Units, make_units
from gplace.search.moves import choose_distinct, crossover, redraw
from search_cases import chains_graph


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
