"""method="auto" ends LNS's time with annealing over placements in the
order LNS found (gplace.autoplace.phases.lns_phase, budget.
ORDER_SEARCH_SHARE)."""

import numpy as np
import pytest

import gplace
from gplace.autoplace import budget, phases
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace.inputs import Problem
from gplace.autoplace.progress import Progress
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

IN_ORDER = "annealing in the order of "


@pytest.fixture(scope="module")
def problem():
  return Problem(random_dag(60, seed=5), preset("1cpu+2gpu"))


def _lns(problem, order_search):
  runs = candidates_lib.baseline_runs(problem, seed=0)
  tried = list(runs.best)  # evaluations, not seconds, end both searches
  with Progress(30.0, enabled=False) as bar:
    phases.lns_phase(problem, runs, tried, lns_s=30.0, seed=0, bound_s=0.0,
                     max_evaluations=1024, hedge=False, bar=bar,
                     order_search=order_search)
  return tried


def test_lns_ends_with_annealing_in_the_order_it_found(problem):
  tried = _lns(problem, order_search=True)
  last = tried[-1]
  assert last.label.startswith(IN_ORDER + "lns (CP-SAT windows)")
  lns = [c for c in tried if c.label.startswith("lns (CP-SAT windows)")]
  start = min(lns, key=lambda c: c.runtime_s)
  np.testing.assert_array_equal(last.order, start.order)
  # Scored in that order, and never slower than where it started.
  again = candidates_lib.score(problem, last.placement[None], last.order)
  assert last.runtime_s == pytest.approx(float(again.runtime_s[0]),
                                         rel=1e-6)
  assert last.runtime_s <= start.runtime_s * (1 + 1e-6)


def test_without_it_lns_has_the_time_alone(problem):
  tried = _lns(problem, order_search=False)
  assert not any(c.label.startswith(IN_ORDER) for c in tried)


def test_auto_runs_it_after_lns(monkeypatch):
  monkeypatch.setattr(budget, "AUTO_SOLVER_MAX_NODES", 0)  # LNS, no solver
  monkeypatch.setattr(budget, "SOLVER_MAX_NODES", 0)
  result = gplace.optimize(random_dag(60, seed=5),
                           topology=preset("1cpu+2gpu"), budget_s=12.0,
                           progress=False, max_evaluations=2048)
  assert any(k.startswith(IN_ORDER) for k in result.candidates)
  assert 0 < budget.ORDER_SEARCH_SHARE < 1
