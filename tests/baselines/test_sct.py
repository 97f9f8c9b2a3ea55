"""Tests of Baechi's m-SCT (gplace.baselines.sct)."""

import numpy as np

from gplace.baselines import sct as baselines_sct
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim import list_scheduler
from gplace.sim.presets import preset


def test_sct_favourites_are_one_per_node(monkeypatch):
  graph = random_dag(500, seed=9)
  topology = preset("1cpu+4gpu")
  problem = list_scheduler.prepare(graph, topology, None)
  devices = np.arange(5)
  whole = baselines_sct.favourite_parents(problem, devices)
  # Windows of 100 nodes, and no time for LPs at all (greedy only).
  monkeypatch.setattr(baselines_sct, "SCT_LP_MAX_NODES", 100)
  windowed = baselines_sct.favourite_parents(problem, devices)
  monkeypatch.setattr(baselines_sct, "SCT_LP_TIME_BUDGET_S", -1.0)
  greedy = baselines_sct.favourite_parents(problem, devices)
  for favourite in (whole, windowed, greedy):
    has = favourite >= 0
    assert has.sum() > graph.n_nodes // 4
    parents = favourite[has]
    assert np.unique(parents).size == parents.size  # one child per parent
    assert np.all(graph.kind[parents] != NODE_INPUT)
    for child in np.flatnonzero(has)[:50]:
      assert favourite[child] in graph.predecessors(child)
