"""Tests that `optimize` takes the exact solver's answer as proven only when
the simulator runs it at the bound the solver proved: a model optimum
(links uncontended) that simulates slower is labelled so, and "auto" goes
on with LNS after it."""

import numpy as np
import pytest

import gplace
from gplace import solvers
from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace.inputs import Problem
from gplace.graphs.graph import random_dag
from gplace.sim.topology import Device, Topology, uniform_links

LNS = "lns (CP-SAT windows) from "


def two_gpus():
  devices = tuple(
      Device(f"gpu:{i}", "gpu", peak_flops=flops, mem_bandwidth=240e9,
             memory_bytes=12e9, launch_overhead_s=1e-6)
      for i, flops in enumerate((3e12, 1e12)))
  bandwidth, latency = uniform_links(2, 50e9, 1e-6)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(2),
                  name="gpus")


@pytest.fixture
def loose_bound(monkeypatch):
  """The real solver, its proven bound halved: as where the model's
  uncontended links make its optimum slower in the simulator."""
  real = solvers.solve

  def solve(*args, **kwargs):
    result = real(*args, **kwargs)
    assert result.status == "OPTIMAL"
    return result._replace(bound_s=0.5 * result.runtime_s)

  monkeypatch.setattr(solvers, "solve", solve)


def test_the_solver_proves_its_answer_when_the_simulator_agrees():
  outcome = candidates_lib.solver_candidate(
      Problem(random_dag(8, seed=0), two_gpus(), None), None, time_s=5.0,
      seed=0)
  assert outcome.status == "OPTIMAL"
  assert outcome.candidate.label == "solver (CP-SAT, optimal)"
  assert outcome.candidate.runtime_s <= outcome.bound_s * (
      1 + candidates_lib.SOLVER_AGREES)


def test_a_model_optimum_slower_simulated_is_not_proven(loose_bound):
  outcome = candidates_lib.solver_candidate(
      Problem(random_dag(8, seed=0), two_gpus(), None), None, time_s=5.0,
      seed=0)
  assert outcome.status == "MODEL_OPTIMAL"
  assert outcome.candidate.label == "solver (CP-SAT, optimal in its model)"
  assert outcome.candidate.runtime_s == pytest.approx(2 * outcome.bound_s)


def test_auto_goes_on_with_lns_after_a_model_optimum(loose_bound,
                                                     monkeypatch):
  monkeypatch.setattr(budget, "MIN_LNS_S", 0.5)
  result = gplace.optimize(random_dag(8, seed=0), topology=two_gpus(),
                           budget_s=12.0, progress=False)
  labels = list(result.candidates)
  assert "solver (CP-SAT, optimal in its model)" in labels
  assert any(label.startswith(LNS) for label in labels)
