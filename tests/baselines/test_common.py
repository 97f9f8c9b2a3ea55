"""Tests of gplace.baselines.common."""

import numpy as np

from gplace import baselines
from gplace.baselines import common
from gplace import simulate
from gplace.graphs.graph import random_dag
from gplace.sim import list_scheduler
from gplace.sim.presets import preset

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


def test_single_device_default_peak_is_the_default_schedules():
  # The default (dynamic) schedule runs one device's ops in another order
  # than node ids, with another peak; the baselines count it without
  # simulating (common.single_device_default_peak_bytes).
  topology = preset("1cpu+2gpu")
  graph = random_dag(SIM_NODES, seed=2, n_inputs=16)
  expect = common.single_device_default_peak_bytes(
      list_scheduler.prepare(graph, topology, None))
  assert expect > 1.1 * baselines.single_device_peak_bytes(graph)
  placements = np.repeat(np.arange(3, dtype=np.int32)[:, None],
                         graph.n_nodes, axis=1)
  peaks = np.asarray(simulate(graph, placements, topology).peak_bytes)
  np.testing.assert_allclose(np.diag(peaks), expect, rtol=1e-6)
  # copies_bytes bounds the peak in every order.
  for placement, peak in zip(placements, peaks):
    assert np.all(peak <= common.copies_bytes(graph, placement, 3))


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
