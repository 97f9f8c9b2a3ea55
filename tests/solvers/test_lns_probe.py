"""Tests of LNS's target and of optimize's plan probe: LNS from the best
classical plan stops once it beats gplace's critical-chain plan; when it
does, optimize follows it (no searches, no race), and when it does not,
its chain is the one that races the searches' answer."""

import math

import numpy as np
import pytest

import gplace
from gplace import solvers
from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace import phases
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

PROBE_LABEL = candidates_lib.LNS_LABEL + " from heft" + candidates_lib.PROBE


class Bar:
  """A progress bar that shows nothing."""

  def stage(self, *args):
    pass

  def best(self, *args):
    pass


def test_lns_stops_once_it_meets_its_target():
  graph, topology = random_dag(60, seed=3), preset("1cpu+4gpu")
  start = np.zeros(graph.n_nodes, np.int32)       # everything on the CPU
  first = solvers.lns(graph, topology, start=start, time_limit_s=60.0,
                      max_iterations=6, seed=0)
  assert first.runtime_s < first.start_runtime_s
  target = 0.5 * (first.runtime_s + first.start_runtime_s)
  result = solvers.lns(graph, topology, start=start, time_limit_s=60.0,
                       seed=0, target_s=target)
  assert result.runtime_s <= target and not result.oom
  assert result.wall_s < 30.0      # it did not run to its time limit
  # the windows in flight when it met the target are the last ones
  reached = int(np.argmax(result.history[:, 1] <= target))
  assert result.iterations <= reached + solvers.lns_default_workers()


def probe_problem():
  graph = random_dag(40, seed=6)
  problem = candidates_lib.Problem(graph, preset("1cpu+4gpu"))
  runs = candidates_lib.baseline_runs(problem, seed=0)
  return problem, runs


@pytest.mark.parametrize("lead", [0.9, 0.999])
def test_the_probe_runs_lns_from_the_plan_until_it_beats_the_chain(lead):
  problem, runs = probe_problem()
  plan = candidates_lib.best_of(runs.best)
  rival = plan._replace(label=candidates_lib.CHAIN + " (own plan)",
                        runtime_s=lead * plan.runtime_s)
  tried = list(runs.best) + [rival]
  won = phases.plan_probe(problem, runs, tried, probe_s=3.0, seed=0,
                          bound_s=0.0, bar=Bar())
  probe = tried[-1]
  assert len(tried) == len(runs.best) + 2
  assert probe.label == candidates_lib.LNS_LABEL + " from " + \
      plan.label.split(" (")[0] + candidates_lib.PROBE
  assert probe.runtime_s <= plan.runtime_s
  assert won == (probe.runtime_s < rival.runtime_s)
  assert probe.runtime_s == pytest.approx(float(gplace.simulate(
      problem.graph, probe.placement, problem.topology,
      order=probe.order).runtime_s), rel=1e-6)


def test_no_probe_when_the_chain_is_not_ahead_of_the_plan():
  problem, runs = probe_problem()
  plan = candidates_lib.best_of(runs.best)
  for tried in (list(runs.best), list(runs.best) + [plan._replace(
      label=candidates_lib.CHAIN + " (default)",
      runtime_s=plan.runtime_s * 1.01)]):
    before = list(tried)
    assert not phases.plan_probe(problem, runs, tried, probe_s=3.0, seed=0,
                                 bound_s=0.0, bar=Bar())
    assert tried == before


def test_a_probe_that_lost_is_the_race_plan_on_large_graphs(monkeypatch):
  problem, runs = probe_problem()
  monkeypatch.setattr(budget, "LNS_LARGE_MIN_NODES", 10)
  plan = candidates_lib.best_of(runs.best)
  probe = plan._replace(label=PROBE_LABEL, runtime_s=0.9 * plan.runtime_s)
  tried = list(runs.best) + [plan._replace(label="annealing from heft",
                                           runtime_s=0.5 * plan.runtime_s)]
  assert phases.race_plan(problem, runs, tried) == plan
  assert phases.race_plan(problem, runs, tried + [probe]) == probe


def optimize_with_probe(monkeypatch, won):
  """``optimize`` on a 40-node graph counted large and under memory
  pressure, its plan probe replaced by one that says ``won``: the
  result, the starts LNS raced and what the probe was given."""
  monkeypatch.setattr(budget, "LNS_LARGE_MIN_NODES", 10)
  monkeypatch.setattr(budget, "AUTO_SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "MIN_LNS_S", 0.5)
  monkeypatch.setattr(budget, "memory_pressure",
                      lambda baselines, share=None: True)
  asked, raced = [], []

  def probe(problem, runs, tried, **kw):
    asked.append(kw)
    best = candidates_lib.best_of(tried)   # a hair ahead of the rest
    tried.append(best._replace(label=PROBE_LABEL,
                               runtime_s=best.runtime_s * (1 - 1e-6)))
    return won
  monkeypatch.setattr(phases, "plan_probe", probe)
  race = candidates_lib.lns_candidates
  monkeypatch.setattr(candidates_lib, "lns_candidates",
                      lambda problem, starts, **kw: raced.append(starts)
                      or race(problem, starts, **kw))
  result = gplace.optimize(random_dag(40, seed=6), topology="1cpu+4gpu",
                           budget_s=6.0, progress=False)
  return result, raced, asked


@pytest.mark.parametrize("won", [True, False])
def test_optimize_follows_a_probe_that_won(monkeypatch, won):
  result, raced, asked = optimize_with_probe(monkeypatch, won)
  (kw,), (starts,) = asked, raced
  assert 0 < kw["probe_s"] <= budget.PLAN_PROBE_SHARE * 6.0
  searched = [k for k in result.candidates
              if k.startswith(("annealing from", "joint annealing"))]
  if won:   # no searches, LNS from the probe alone
    assert not searched and [c.label for c in starts] == [PROBE_LABEL]
    assert PROBE_LABEL.removesuffix(candidates_lib.PROBE) in \
        result.candidates
  else:
    assert searched
  assert result.runtime_s == min(result.candidates.values())
  assert math.isfinite(result.runtime_s)


def test_no_probe_with_an_evaluation_budget(monkeypatch):
  monkeypatch.setattr(budget, "LNS_LARGE_MIN_NODES", 10)
  monkeypatch.setattr(budget, "memory_pressure",
                      lambda baselines, share=None: True)
  monkeypatch.setattr(phases, "plan_probe",
                      lambda *a, **k: pytest.fail("probed"))
  gplace.optimize(random_dag(40, seed=6), topology="1cpu+4gpu",
                  budget_s=4.0, max_evaluations=1024, progress=False)
