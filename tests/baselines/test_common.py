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
    result = simulate(graph, np.ones(graph.n_nodes, np.int32), topology)
    np.testing.assert_allclose(float(np.asarray(result.peak_bytes)[1]),
                               baselines.single_device_peak_bytes(graph),
                               rtol=1e-6)
