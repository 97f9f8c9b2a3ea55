"""method="auto" trains GO on large graphs before its searches
(budget.AUTO_POLICY_MIN_NODES): the wiring, with the training faked."""

import numpy as np
import pytest

import gplace
from gplace.autoplace import budget
from gplace.autoplace import policy as learned
from gplace.autoplace.candidates import Candidate
from gplace.graphs.graph import random_dag


@pytest.fixture
def fake_training(monkeypatch):
  """GO "trained" on the graph: everything on device 1, and the time it was
  given."""
  calls = []

  def fake(problem, *, time_s, seed, notes=None):
    del seed, notes
    calls.append(time_s)
    placement = np.ones(problem.graph.n_nodes, np.int32)
    runtime = float(gplace.simulate(problem.graph, placement,
                                    problem.topology).runtime_s)
    return [Candidate("GO trained on this graph (10 steps): greedy",
                      placement, None, runtime)]

  monkeypatch.setattr(learned, "policy_candidates", fake)
  monkeypatch.setattr(budget, "AUTO_POLICY_MIN_S", 2.0)
  return calls


def test_a_large_graph_gets_go_trained_on_it(fake_training, monkeypatch):
  monkeypatch.setattr(budget, "AUTO_POLICY_MIN_NODES", 30)
  result = gplace.optimize(random_dag(40, seed=1), topology="1cpu+2gpu",
                           budget_s=3.0, progress=False, max_evaluations=64)
  assert len(fake_training) == 1
  assert 0 < fake_training[0] <= budget.AUTO_POLICY_SHARE * 3.0
  assert "GO trained on this graph (10 steps): greedy" in result.candidates
  assert result.runtime_s <= min(result.candidates.values()) + 1e-12


def test_a_small_graph_or_budget_does_not(fake_training, monkeypatch):
  monkeypatch.setattr(budget, "AUTO_POLICY_MIN_NODES", 50)
  gplace.optimize(random_dag(40, seed=1), topology="1cpu+2gpu",
                  budget_s=3.0, progress=False, max_evaluations=64)
  monkeypatch.setattr(budget, "AUTO_POLICY_MIN_NODES", 30)
  gplace.optimize(random_dag(40, seed=1), topology="1cpu+2gpu",
                  budget_s=1.5, progress=False, max_evaluations=64)
  gplace.optimize(random_dag(40, seed=1), topology="1cpu+2gpu",
                  method="annealing", budget_s=3.0, progress=False,
                  max_evaluations=64)
  assert not fake_training
