"""Tests of gplace.solvers.placer: the solver with the baselines' interface
(its behaviour is tested with the solver in test_cpsat.py)."""

import numpy as np
import pytest

from gplace import solvers
from gplace.errors import SearchError
from gplace.graphs.graph import random_dag
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset


def test_exact_is_a_valid_placement_no_slower_than_its_hints():
  graph = random_dag(10, seed=3)
  topology = preset("1cpu+2gpu")
  placement = solvers.exact(graph, topology, time_limit_s=5.0)
  assert placement.shape == (10,) and placement.dtype == np.int32
  runtime = float(simulate(graph, placement, topology).runtime_s)
  from gplace import baselines  # pylint: disable=g-import-not-at-top
  for name in solvers.HINT_BASELINES:
    hint = baselines.get(name)(graph, topology)
    assert runtime <= float(simulate(graph, hint, topology).runtime_s) * (
        1 + 1e-6)


def test_exact_checks_its_budget():
  with pytest.raises(SearchError, match="time_limit_s"):
    solvers.exact(random_dag(5, seed=0), preset("1cpu+2gpu"), time_limit_s=0)
