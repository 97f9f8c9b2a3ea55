"""Tests of the list schedulers' shared state: memory stays within capacity."""

import numpy as np
import pytest

from gplace import baselines
from gplace import simulate
from gplace.graphs.graph import random_dag

from baseline_cases import SIM_NODES, make_topology, gpu, tight_topology


@pytest.mark.parametrize("name", baselines.schedulers())
def test_schedulers_keep_live_bytes_within_capacity(name):
  graph = random_dag(600, seed=2)
  # HEFT commits nodes in rank order, far from time order, which keeps many
  # more tensors live at once: it needs more room to find a fitting plan.
  topology = tight_topology(graph, 1.0 if name == "heft" else 0.7)
  plan = baselines.plan(name, graph, topology)
  assert np.all(plan.peak_bytes <= topology.memory_bytes), plan.peak_bytes
  assert np.unique(plan.placement).size >= 2  # it had to spread


@pytest.mark.parametrize("name", ["m_topo", "ordered_eft"])
def test_id_order_baselines_fit_in_simulator(name):
  # m_topo and ordered_eft commit nodes in id order (schedule="static"), so
  # their memory bound holds there too.
  graph = random_dag(SIM_NODES, seed=2)
  topology = tight_topology(graph)
  placement = baselines.get(name)(graph, topology)
  result = simulate(graph, placement, topology, schedule="static")
  assert not bool(result.oom), np.asarray(result.peak_bytes)


def test_memory_aware_schedulers_skip_a_full_fast_device():
  graph = random_dag(300, seed=5)
  peak = baselines.single_device_peak_bytes(graph)
  # A roomy slow GPU, and a fast GPU that holds a third of the peak.
  topology = make_topology([gpu(0, memory=2 * peak, flops=0.3e12),
                            gpu(1, memory=0.3 * peak, flops=30e12)])
  for name in baselines.schedulers():
    plan = baselines.plan(name, graph, topology)
    assert plan.peak_bytes[1] <= 0.3 * peak, name
    assert np.any(plan.placement == 1), name


# -- individual baselines ------------------------------------------------------
