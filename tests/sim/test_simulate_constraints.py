"""gplace.simulate flags placements that break a graph's device
constraints as infeasible, like OOM."""

import numpy as np
import pytest

import gplace
from gplace.errors import PlacementError
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

N = 12


@pytest.fixture(scope="module")
def topology():
  return preset("1cpu+2gpu")


def test_violations_are_flagged_like_oom(topology):
  plain = random_dag(N, seed=4)
  mask = np.ones((N, 3), bool)
  mask[5] = [False, True, False]
  colocation = np.full(N, -1)
  colocation[[2, 8]] = 0
  graph = plain.replace(allowed_devices=mask, colocation=colocation)
  placements = np.ones((3, N), np.int32)
  placements[1, 5] = 2          # node 5 where it may not run
  placements[2, 8] = 0          # class 0 split
  result = gplace.simulate(graph, placements, topology)
  assert result.constraint_violated.tolist() == [False, True, True]
  assert result.oom.tolist() == [False, True, True]
  plain_result = gplace.simulate(plain, placements, topology)
  np.testing.assert_array_equal(result.runtime_s, plain_result.runtime_s)
  assert not plain_result.constraint_violated.any()
  single = gplace.simulate(graph, placements[1], topology)
  assert bool(single.oom) and bool(single.constraint_violated)


def test_constraints_for_another_topology(topology):
  graph = random_dag(N, seed=4).replace(
      allowed_devices=np.ones((N, 5), bool))
  with pytest.raises(PlacementError, match="for 5 devices"):
    gplace.simulate(graph, np.zeros(N, np.int32), topology)
