"""method="auto" moves whole op chains before single ops on big graphs
(candidates.chain_groups, budget.CHAIN_SEARCH_*)."""

import numpy as np
import pytest

import gplace
from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace.inputs import Problem
from gplace.sim.presets import preset
from gplace.workloads import load


@pytest.fixture(scope="module")
def problem():
  graph = load("rnnlm2", "tiny", "train").graph
  return Problem(graph, preset("1cpu+2gpu"))


def _one_device_per_chain(labels, placement):
  return all(np.unique(placement[labels == g]).size == 1
             for g in np.unique(labels))


def test_chains_join_an_op_to_its_only_consumer(problem):
  graph = problem.graph
  labels = candidates_lib.chain_groups(problem, 1, 1.0)
  assert labels.shape == (graph.n_nodes,)
  assert np.unique(labels).size < graph.n_nodes
  ptr, _ = graph.succ_csr
  single = np.flatnonzero(graph.out_degree == 1)
  consumer = graph.edge_dst[ptr[:-1][single]]
  np.testing.assert_array_equal(labels[single], labels[consumer])


def test_no_chains_on_a_small_graph_or_where_chains_are_single_ops(problem):
  n = problem.graph.n_nodes
  assert candidates_lib.chain_groups(problem, n + 1, 1.0) is None
  assert candidates_lib.chain_groups(problem, 1, 0.01) is None


def test_a_search_over_chains_keeps_each_chain_on_one_device(problem):
  labels = candidates_lib.chain_groups(problem, 1, 1.0)
  n = problem.graph.n_nodes
  start = candidates_lib.Candidate(
      "heft", np.zeros(n, np.int32), None,
      float(candidates_lib.score(problem, np.zeros((1, n), np.int32))
            .runtime_s[0]))
  found = candidates_lib.search_candidate(
      problem, "annealing", start, time_s=60.0, seed=0,
      max_evaluations=256, groups=labels)
  assert found.label == "annealing over op chains from heft"
  assert found.runtime_s <= start.runtime_s
  assert _one_device_per_chain(labels, found.placement)
  assert not np.array_equal(found.placement, start.placement)


def test_auto_searches_chains_then_ops_on_a_big_graph(problem, monkeypatch):
  monkeypatch.setattr(budget, "CHAIN_SEARCH_MIN_NODES", 1)
  monkeypatch.setattr(budget, "CHAIN_SEARCH_MAX_SHARE", 1.0)

  def run():
    return gplace.optimize(problem.graph, topology=problem.topology,
                           budget_s=30.0, progress=False,
                           max_evaluations=512)

  result = run()
  chains = [k for k in result.candidates
            if k.startswith("annealing over op chains from")]
  assert len(chains) == 1
  assert f"annealing from {chains[0]}" in result.candidates
  assert result.runtime_s <= min(result.candidates.values()) + 1e-12
  assert run().candidates == result.candidates   # reproducible for a seed


def test_auto_keeps_single_ops_below_the_size(problem, monkeypatch):
  # Chains would pay by their share; only the size keeps them out.
  monkeypatch.setattr(budget, "CHAIN_SEARCH_MIN_NODES",
                      problem.graph.n_nodes + 1)
  monkeypatch.setattr(budget, "CHAIN_SEARCH_MAX_SHARE", 1.0)
  result = gplace.optimize(problem.graph, topology=problem.topology,
                           budget_s=30.0, progress=False, max_evaluations=64)
  assert not any("over op chains" in k for k in result.candidates)
  assert any(k.startswith("annealing from ") for k in result.candidates)
