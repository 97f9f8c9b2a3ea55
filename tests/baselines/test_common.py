"""Tests of gplace.baselines.common."""

import numpy as np

from gplace import baselines
from gplace import simulate
from gplace.graphs.graph import random_dag
from gplace.sim.topology import preset

from baseline_cases import SIM_NODES


def test_single_device_peak_matches_simulator():
  topology = preset("1cpu+2gpu")
  for seed in (0, 1):
    graph = random_dag(SIM_NODES, seed=seed)
    result = simulate(graph, np.ones(graph.n_nodes, np.int32), topology,
                      schedule="static")
    np.testing.assert_allclose(float(np.asarray(result.peak_bytes)[1]),
                               baselines.single_device_peak_bytes(graph),
                               rtol=1e-6)


def test_simulated_peak_bytes_is_the_simulators_count():
  topology = preset("1cpu+2gpu")
  graph = random_dag(SIM_NODES, seed=4)
  rng = np.random.default_rng(0)
  placements = rng.integers(0, topology.n_devices, (3, graph.n_nodes))
  order = baselines.plan("m_etf", graph, topology).order
  for priority_order in (None, order):
    result = simulate(graph, placements, topology, order=priority_order,
                      schedule="static")
    for placement, expect in zip(placements,
                                 np.asarray(result.peak_bytes)):
      np.testing.assert_allclose(
          baselines.simulated_peak_bytes(graph, placement,
                                         topology.n_devices, priority_order),
          expect, rtol=1e-6)
