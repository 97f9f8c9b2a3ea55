"""Where optimize's placement search starts (candidates.search_starts,
and the critical-chain plan among its candidates)."""

import numpy as np

from gplace.autoplace.candidates import (Candidate, chain_candidates,
                                         search_starts)
from gplace.autoplace.inputs import Problem
from gplace.graphs import constraints
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim.presets import preset


def _candidate(label, runtime_s, order=None):
  return Candidate(label, np.zeros(4, np.int32), order, runtime_s)


def test_a_baseline_start_is_searched_alone():
  default = [_candidate("heft", 2.0), _candidate("metis", 3.0)]
  tried = default + [_candidate("pretrained GO zero-shot: greedy", 2.5)]
  assert [c.label for c in search_starts(default, tried)] == ["heft"]


def test_a_learned_start_is_searched_beside_the_best_baseline():
  default = [_candidate("heft", 2.0), _candidate("metis", 3.0)]
  policy = _candidate("pretrained GO zero-shot: best of 16 samples", 1.9)
  starts = search_starts(default, default + [policy])
  assert [c.label for c in starts] == [policy.label, "heft"]


def test_a_start_in_its_own_order_is_not_a_placement_start():
  default = [_candidate("heft", 2.0)]
  own = _candidate("heft (own plan)", 1.0, order=np.arange(4))
  assert [c.label for c in search_starts(default, default + [own])] == ["heft"]


def test_no_feasible_start_falls_back_to_the_first_baseline():
  default = [_candidate("heft", np.inf), _candidate("metis", np.inf)]
  assert [c.label for c in search_starts(default, default)] == ["heft"]


def test_the_critical_chain_candidates_keep_device_constraints():
  graph = random_dag(120, seed=3)
  topology = preset("1cpu+2gpu")
  problem = Problem(graph, topology, None)
  free = chain_candidates(problem)
  assert free[0].label == "critical chain (default)" and free[0].order is None
  assert all(np.isfinite(c.runtime_s) for c in free)
  # Forbid each op the device the free plan put it on, where it has another.
  allowed = np.ones((graph.n_nodes, topology.n_devices), bool)
  ops = np.flatnonzero(graph.kind != NODE_INPUT)
  allowed[ops, free[0].placement[ops]] = False
  bound = graph.replace(allowed_devices=allowed)
  kept = chain_candidates(Problem(bound, topology, None))
  assert kept
  for candidate in kept:
    assert not constraints.violations(bound, candidate.placement[None])[0]
    assert np.isfinite(candidate.runtime_s)
    if candidate.order is not None:   # its own plan is faster
      assert candidate.runtime_s < kept[0].runtime_s
