"""gplace.baselines.best: the fastest baseline in the default schedule and in
any schedule, against every baseline simulated one by one."""

import numpy as np
import pytest

from gplace import baselines, simulate
from gplace.errors import BaselineError
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

from baseline_cases import SIM_NODES, cpu, gpu, make_topology


def _reference(graph, topology):
  """``{(name, schedule): runtime_s}`` of every feasible baseline run."""
  runs = {}
  for name in baselines.names():
    plan = baselines.plan(name, graph, topology)
    schedules = [("default", None)]
    if name in baselines.schedulers():
      schedules.append(("own plan", plan.order))
    for schedule, order in schedules:
      result = simulate(graph, plan.placement, topology, order=order)
      if not bool(result.oom):
        runs[name, schedule] = float(result.runtime_s)
  return runs


def test_best_is_the_fastest_run_in_each_set_of_schedules():
  graph = random_dag(SIM_NODES, seed=4)
  topology = preset("1cpu+4gpu")
  found = baselines.best(graph, topology)
  runs = _reference(graph, topology)
  default = min((r, n) for (n, s), r in runs.items() if s == "default")
  fastest = min(runs.values())
  assert (found.default.name, found.default.schedule) == (default[1],
                                                          "default")
  np.testing.assert_allclose(found.default.runtime_s, default[0], rtol=1e-6)
  np.testing.assert_allclose(found.any.runtime_s, fastest, rtol=1e-6)
  assert found.any.runtime_s <= found.default.runtime_s
  # Each choice carries what reproduces it.
  for choice in found:
    assert choice.label == f"{choice.name} ({choice.schedule})"
    assert choice.placement.dtype == np.int32
    assert (choice.order is None) == (choice.schedule == "default")
    again = simulate(graph, choice.placement, topology, order=choice.order)
    np.testing.assert_allclose(float(again.runtime_s), choice.runtime_s,
                               rtol=1e-6)
  assert found.any.schedule == "default" or (
      found.any.name in baselines.schedulers())


def test_only_some_baselines():
  graph = random_dag(SIM_NODES, seed=5)
  topology = preset("1cpu+2gpu")
  found = baselines.best(graph, topology, only=["round_robin"])
  assert found.default.name == found.any.name == "round_robin"
  assert found.any.schedule == "default"
  with pytest.raises(BaselineError, match="nope"):
    baselines.best(graph, topology, only=["round_robin", "nope"])


def test_when_nothing_fits_the_first_baseline_is_inf():
  graph = random_dag(SIM_NODES, seed=6)
  tiny = make_topology([cpu(memory=1.0), gpu(0, memory=1.0)])
  found = baselines.best(graph, tiny, only=["single_device", "heft"])
  assert found.default.name == "single_device"
  assert found.default.runtime_s == np.inf
  assert found.any == found.default
