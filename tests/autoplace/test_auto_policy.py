"""method="auto" trains GO on large graphs before its searches
(budget.AUTO_POLICY_MIN_NODES): the wiring, with the training faked."""

import numpy as np
import pytest

import gplace
from gplace.autoplace import budget
from gplace.autoplace import policy as learned
from gplace.autoplace.candidates import Candidate
from gplace.autoplace.inputs import Problem
from gplace.graphs.graph import random_dag


@pytest.fixture
def fake_training(monkeypatch):
  """GO "trained" on the graph: everything on device 1, and the time it was
  given."""
  calls = []

  def fake(problem, *, time_s, seed, notes=None, give_up=None):
    del seed, notes
    calls.append((time_s, give_up))
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
  time_s, give_up = fake_training[0]
  assert 0 < time_s <= budget.AUTO_POLICY_SHARE * 3.0
  # GO gives its time back when, after a share of it, it is behind the best
  # baseline (a baseline's runtime: the fastest of the default schedule's).
  assert give_up.after_s == pytest.approx(
      budget.AUTO_POLICY_PROBE_SHARE * time_s)
  assert give_up.after_s == pytest.approx(budget.policy_probe_s(time_s))
  baselines = [v for k, v in result.candidates.items()
               if not k.startswith(("GO", "annealing", "joint", "lns",
                                    "local", "CP-SAT", "solver"))]
  assert give_up.unless_below_s == pytest.approx(min(baselines))
  # ... and when its best sample stalls.
  assert give_up.stall_s == pytest.approx(
      budget.AUTO_POLICY_STALL_SHARE * time_s)
  assert give_up.min_gain == budget.AUTO_POLICY_MIN_GAIN
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


def test_the_probe_comes_after_a_share_of_the_time_at_most_a_cap():
  assert budget.policy_probe_s(50.0) == pytest.approx(
      budget.AUTO_POLICY_PROBE_SHARE * 50.0)
  long = 10 * budget.AUTO_POLICY_PROBE_MAX_S / budget.AUTO_POLICY_PROBE_SHARE
  assert budget.policy_probe_s(long) == budget.AUTO_POLICY_PROBE_MAX_S


def test_training_stops_when_spent_or_behind():
  give_up = learned.GiveUp(after_s=10.0, unless_below_s=1.0)
  # began 0, deadline 30: a next chunk of 5 s fits until 25.
  assert learned.stop_reason(5.0, 0.0, 30.0, 5.0, 2.0, give_up) is None
  assert learned.stop_reason(26.0, 0.0, 30.0, 5.0, 0.5, give_up) == "spent"
  # After 10 s, behind (or nothing sampled fitted) stops; ahead goes on.
  assert learned.stop_reason(11.0, 0.0, 30.0, 5.0, 2.0, give_up) == "behind"
  assert learned.stop_reason(11.0, 0.0, 30.0, 5.0, 1.0, give_up) == "behind"
  assert learned.stop_reason(11.0, 0.0, 30.0, 5.0, float("inf"),
                             give_up) == "behind"
  assert learned.stop_reason(11.0, 0.0, 30.0, 5.0, float("nan"),
                             give_up) == "behind"
  assert learned.stop_reason(11.0, 0.0, 30.0, 5.0, 0.9, give_up) is None
  assert learned.stop_reason(11.0, 0.0, 30.0, 5.0, 2.0, None) is None


def test_training_stops_when_its_best_sample_stalls():
  give_up = learned.GiveUp(after_s=10.0, unless_below_s=1.0, stall_s=20.0,
                           min_gain=0.01)
  # 1% faster than 20 s ago goes on, less stops; no best then goes on.
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 0.5, give_up,
                             0.506) is None
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 0.5, give_up,
                             0.504) == "stalled"
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 0.5, give_up,
                             float("nan")) is None
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 0.5, give_up,
                             float("inf")) is None
  # Behind the baseline is said first; a run without give_up never stalls.
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 2.0, give_up,
                             2.0) == "behind"
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 0.5, None, 0.5) is None
  # The default GiveUp never stalls.
  assert learned.stop_reason(40.0, 0.0, 100.0, 5.0, 0.5,
                             learned.GiveUp(10.0, 1.0), 0.5) is None
  history = [(5.0, 0.9), (12.0, 0.7), (25.0, 0.6)]
  assert learned.best_before(history, 30.0, 20.0) == 0.9
  assert learned.best_before(history, 33.0, 20.0) == 0.7
  assert np.isnan(learned.best_before(history, 20.0, 20.0))


def test_go_that_stalls_gives_its_time_back():
  graph = random_dag(40, seed=1)
  problem = Problem(graph, gplace.topology.preset("1cpu+2gpu"))
  notes = []
  # No chunk can gain 100%: the run stops after its second chunk.
  found = learned.policy_candidates(
      problem, time_s=3600.0, seed=0, notes=notes,
      give_up=learned.GiveUp(after_s=3600.0, unless_below_s=0.0,
                             stall_s=0.0, min_gain=1.0))
  assert found and all(", stalled)" in c.label for c in found)
  assert any("gained less than 100.0%" in line for line in notes)


def test_go_behind_the_best_so_far_stops_after_its_first_chunk():
  graph = random_dag(40, seed=1)
  problem = Problem(graph, gplace.topology.preset("1cpu+2gpu"))
  notes = []
  # A long budget: "spent" is checked before "behind", and a first chunk
  # on a loaded machine can take a minute.
  found = learned.policy_candidates(
      problem, time_s=3600.0, seed=0, notes=notes,
      give_up=learned.GiveUp(after_s=0.0, unless_below_s=0.0))
  assert found and all(", stopped behind)" in c.label for c in found)
  assert any("was not faster than" in line for line in notes)
