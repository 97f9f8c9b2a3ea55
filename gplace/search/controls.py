"""The equal-budget search controls a learned placer is compared against.

:func:`random_search` (the best of uniform random placements) and
:func:`equal_budget` (local search, annealing and genetic search from the
best cheap baseline, then random placements), each spending the same number
of simulator evaluations as the placer they control for. Their numbers are
search, never learning. Host-side numpy around the jitted simulator.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from gplace.graphs.graph import Graph
from gplace.search.annealing import annealing
from gplace.search.common import History, SearchResult, initial_placements
from gplace.search.genetic import genetic
from gplace.search.local import local_search
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

#: The searches :func:`equal_budget` runs, by the name its rows carry.
SEARCH_CONTROLS = (("local search", local_search), ("annealing", annealing),
                   ("genetic", genetic))


def random_search(graph: Graph, topology: Topology, *, budget: int,
                  seed: int, batch_size: int = 256) -> SearchResult:
  """The best of ``budget`` uniform random placements, simulated in batches
  of ``batch_size`` under the default schedule (out of memory: ``inf``).

  ``init_runtime_s`` is NaN: it has no start.
  """
  start = time.perf_counter()
  rng = np.random.default_rng(seed)
  best, best_placement = np.inf, None
  evaluations, history = [], []
  done = 0
  while done < budget:
    k = min(batch_size, budget - done)
    placements = rng.integers(0, topology.n_devices, (k, graph.n_nodes))
    result = simulate(graph, placements, topology)
    runtime = np.where(np.asarray(result.oom), np.inf,
                       np.asarray(result.runtime_s, np.float64))
    if best_placement is None or runtime.min() < best:
      best_placement = placements[int(np.argmin(runtime))]
    best = min(best, float(runtime.min()))
    done += k
    evaluations.append(done)
    history.append(best)
  return SearchResult(
      np.asarray(best_placement, np.int32), best, done,
      History(np.array(evaluations), np.array(history)),
      time.perf_counter() - start, float("nan"))


def equal_budget(graph: Graph, topology: Topology, *, budget: int, seed: int,
                 batch_size: int, init: Optional[np.ndarray] = None,
                 random: bool = True) -> list[tuple[str, SearchResult]]:
  """``(name, result)`` of local search, annealing and genetic search with
  ``budget`` evaluations each, started from ``init`` (``[C, N]``; default
  the cheap baselines of :func:`gplace.search.initial_placements`), and,
  with ``random``, of :func:`random_search` with as many.

  ``batch_size`` is the local search's and annealing's (genetic search uses
  its population).
  """
  if init is None:
    init, _ = initial_placements(graph, topology)
  rows = []
  for name, search in SEARCH_CONTROLS:
    kwargs = {} if search is genetic else {"batch_size": batch_size}
    rows.append((name, search(graph, topology, seed=seed, budget=budget,
                              init=init, **kwargs)))
  if random:
    rows.append(("random", random_search(graph, topology, budget=budget,
                                         seed=seed)))
  return rows
