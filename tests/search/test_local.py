"""Tests of gplace.search.local: greedy local search finds the known optima
of tiny graphs, moving single nodes or whole groups, and stops on time."""

import pytest

import numpy as np

from gplace import search
from gplace.search.local import local_search, local_search_placer
import search_cases
from search_cases import MS, chains_graph, op_costs, two_gpus


@pytest.fixture(scope="module")
def small():
  return search_cases.small_case()


def test_chain_goes_to_the_fastest_device():
  search_cases.check_chain_goes_to_the_fastest_device(local_search)


def test_two_chains_split_across_two_gpus():
  search_cases.check_two_chains_split_across_two_gpus(local_search)


def test_out_of_memory_is_infeasible():
  search_cases.check_out_of_memory_is_infeasible(local_search)


def test_node_moves_split_two_chains():
  graph = chains_graph([6, 6])
  topology = two_gpus()
  costs = op_costs(graph, [1 * MS, 1 * MS])
  result = search.local_search(graph, topology, costs=costs, budget=3000,
                               init=np.zeros(graph.n_nodes, np.int32))
  assert result.runtime_s == pytest.approx(6 * MS, rel=1e-5)


def test_time_limit_stops_early(small):
  graph, topology = small
  result = search.local_search(graph, topology, budget=10**9,
                               time_limit_s=0.3)
  assert result.evaluations < 10**9
  assert result.runtime_s <= result.init_runtime_s


def test_exports():
  assert search.local_search is local_search
  assert search.PLACERS["local_search"] is local_search_placer
