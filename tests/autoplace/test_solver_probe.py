"""Tests that "auto" probes the exact solver above
`AUTO_SOLVER_MAX_NODES` ops: it keeps its time only when its answer beats
the best so far in the simulator; otherwise LNS gets the rest."""

import numpy as np
import pytest

import gplace
from gplace.autoplace import budget, measured, outcome, phases
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace.candidates import Candidate, SolverOutcome
from gplace.autoplace.inputs import Problem
from gplace.autoplace.progress import Progress
from gplace.graphs.graph import random_dag

from tests.search.search_cases import two_gpus

START = Candidate("heft (default)", np.zeros(8, np.int32), None, 2.0)


class FakeSolver:
  """Stands in for `solver_candidate`: records each call's hint and time;
  its answers run in ``runtimes`` (one per call)."""

  def __init__(self, runtimes, status="FEASIBLE"):
    self.runtimes, self.status, self.calls = list(runtimes), status, []

  def __call__(self, problem, hint, *, time_s, seed):
    del problem, seed
    self.calls.append((hint, time_s))
    runtime = self.runtimes[len(self.calls) - 1]
    candidate = Candidate("solver (CP-SAT, feasible)", hint.placement, None,
                          runtime)
    return SolverOutcome(candidate, 1.0, self.status)


def run_phase(monkeypatch, fake, *, probe, solver_s=40.0):
  monkeypatch.setattr(candidates_lib, "solver_candidate", fake)
  tried = [START]
  problem = Problem(random_dag(8, seed=0), two_gpus(), None)
  with Progress(solver_s, False) as bar:
    bound_s, proven = phases.solver_phase(problem, tried, solver_s=solver_s,
                                          probe=probe, seed=0, bar=bar)
  return tried, bound_s, proven


def test_a_probe_that_gains_nothing_leaves_the_rest(monkeypatch):
  fake = FakeSolver([2.0])              # its answer is the hint's speed
  tried, bound_s, proven = run_phase(monkeypatch, fake, probe=True)
  assert len(fake.calls) == 1
  assert fake.calls[0][1] == pytest.approx(budget.SOLVER_PROBE_SHARE * 40)
  assert fake.calls[0][1] >= budget.MIN_SOLVER_S
  assert len(tried) == 2 and bound_s == 1.0 and not proven


def test_a_probe_is_at_least_the_solver_minimum(monkeypatch):
  fake = FakeSolver([2.0])
  run_phase(monkeypatch, fake, probe=True, solver_s=10.0)
  assert fake.calls[0][1] == budget.MIN_SOLVER_S


def test_a_probe_that_gains_goes_on_from_its_answer(monkeypatch):
  fake = FakeSolver([1.5, 1.2])
  tried, _, _ = run_phase(monkeypatch, fake, probe=True)
  assert len(fake.calls) == 2
  assert fake.calls[1][0] is tried[1]   # hinted with the probe's answer
  # The rest of the solver's 40 s (the fake probe took no time).
  assert 39.0 < fake.calls[1][1] <= 40.0
  assert [c.runtime_s for c in tried] == [2.0, 1.5, 1.2]


def test_a_proof_ends_the_probe(monkeypatch):
  fake = FakeSolver([1.0], status="OPTIMAL")
  _, _, proven = run_phase(monkeypatch, fake, probe=True)
  assert len(fake.calls) == 1 and proven


def test_without_a_probe_the_solver_gets_all_its_time(monkeypatch):
  fake = FakeSolver([2.0])
  run_phase(monkeypatch, fake, probe=False)
  assert [t for _, t in fake.calls] == [40.0]


@pytest.mark.parametrize("auto_max, probed", [(4, True), (120, False)])
def test_auto_probes_the_solver_above_its_size(monkeypatch, auto_max,
                                               probed):
  seen = []
  real = phases.solver_phase

  def spy(*args, **kwargs):
    seen.append(kwargs["probe"])
    return real(*args, **kwargs)

  monkeypatch.setattr(phases, "solver_phase", spy)
  monkeypatch.setattr(budget, "AUTO_SOLVER_MAX_NODES", auto_max)
  monkeypatch.setattr(budget, "memory_pressure", lambda *a, **k: True)
  monkeypatch.setattr(budget, "MIN_SOLVER_S", 1.0)
  gplace.optimize(random_dag(8, seed=0), topology=two_gpus(), budget_s=6.0,
                  progress=False)
  assert seen == [probed]


def test_a_label_tried_twice_reports_its_fastest():
  # A probe that gains and goes on leaves two solver candidates, one label.
  problem = Problem(random_dag(8, seed=0), two_gpus(), None)
  placements = [np.zeros(8, np.int32), np.arange(8, dtype=np.int32) % 2]
  tried = []
  for placement in placements:
    runtime = float(candidates_lib.score(problem, placement[None],
                                         None).runtime_s[0])
    tried.append(Candidate("solver (CP-SAT, feasible)", placement, None,
                           runtime))
  fast, slow = sorted(tried, key=lambda c: c.runtime_s)
  assert fast.runtime_s < slow.runtime_s
  result = outcome.placement_result(problem, tried, 0.0, 0.0, {},
                                    measured.PRESET_TIE)
  assert result.candidates == {fast.label: fast.runtime_s}
  np.testing.assert_array_equal(result.placements[fast.label],
                                fast.placement)
