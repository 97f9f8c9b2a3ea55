"""Every baseline keeps a graph's device constraints (allowed devices and
co-location classes)."""

import numpy as np
import pytest

from gplace import baselines
from gplace.errors import PlacementError
from gplace.graphs import constraints
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

N = 60


@pytest.fixture(scope="module")
def topology():
  return preset("1cpu+2gpu")


@pytest.fixture(scope="module")
def graph():
  plain = random_dag(N, seed=5, name="constrained")
  rng = np.random.default_rng(1)
  mask = rng.random((N, 3)) < 0.5
  mask[np.arange(N), rng.integers(0, 3, N)] = True
  mask[::7] = [True, False, False]         # CPU-only ops, as a host callback
  colocation = np.full(N, -1)
  for label, nodes in enumerate(([2, 30, 41], [10, 11], [50, 55, 59])):
    mask[nodes] = True
    colocation[nodes] = label
  mask[[50, 55, 59], 0] = False
  return plain.replace(allowed_devices=mask, colocation=colocation)


@pytest.mark.parametrize("name", baselines.names())
def test_baseline_keeps_constraints(graph, topology, name):
  placement = baselines.get(name)(graph, topology, seed=0)
  assert placement.shape == (N,) and placement.dtype == np.int32
  assert not constraints.violations(graph, placement[None]).any()


@pytest.mark.parametrize("name", baselines.schedulers())
def test_plans_keep_constraints(graph, topology, name):
  plan = baselines.plan(name, graph, topology)
  assert not constraints.violations(graph, plan.placement[None]).any()


def test_unconstrained_graph_is_placed_as_before(topology):
  plain = random_dag(N, seed=5)
  mask = np.ones((N, 3), bool)
  for name in ("heft", "round_robin", "m_topo"):
    np.testing.assert_array_equal(
        baselines.get(name)(plain, topology),
        baselines.get(name)(plain.replace(allowed_devices=mask), topology))


def test_single_device_picks_a_device_every_node_allows(topology):
  plain = random_dag(N, seed=5)
  mask = np.ones((N, 3), bool)
  mask[:, 1] = False
  placement = baselines.single_device(plain.replace(allowed_devices=mask),
                                      topology)
  assert np.all(placement == placement[0]) and placement[0] != 1


def test_constraints_for_another_topology(graph):
  with pytest.raises(PlacementError, match="for 3 devices"):
    baselines.heft(graph, preset("1cpu+4gpu"))
