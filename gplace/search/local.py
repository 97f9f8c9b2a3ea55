"""Local search: :func:`local_search` redraws a few nodes (or groups) of one
incumbent per candidate and moves to the fastest candidate of a batch when
it is faster.
"""

from __future__ import annotations

import numpy as np

from gplace.graphs.graph import Graph
from gplace.search.common import (DEFAULT_BATCH_SIZE, DEFAULT_BUDGET,
                                  SearchResult, placer_from_search, stack_best,
                                  start)
from gplace.search.moves import neighbours
from gplace.sim.topology import Topology


def local_search(graph: Graph, topology: Topology, *, costs=None,
                 seed: int = 0, budget: int = DEFAULT_BUDGET, init=None,
                 groups=None, move_size: int | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE,
                 time_limit_s: float | None = None) -> SearchResult:
  """Greedy local search over placements, scored by the simulator.

  Each step proposes ``batch_size`` candidates, each the incumbent with
  between 1 and ``move_size`` units (uniform) redrawn to other devices, and
  accepts the fastest candidate if it is strictly faster than the incumbent
  (the best improving move of the batch). Placements that run out of memory
  count as infinitely slow. Runtimes are simulated under the simulator's
  default schedule.

  Args:
    graph: the graph to place (``N`` nodes).
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds (default: the roofline).
    seed: seeds every random draw; the result is deterministic for a seed
      (unless ``time_limit_s`` cuts it short).
    budget: simulator evaluations to spend, the starting placement(s)
      included; ``>= 1``.
    init: ``[N]`` starting placement, or ``[C, N]`` candidates whose
      fastest is the start (all count against the budget); default the
      cheap baselines in :data:`gplace.search.common.INIT_BASELINES`.
    groups: move nodes one by one (None), or whole groups: a coarsening rule
      (``"colocation"``, ``"hsdag"``), a :class:`~gplace.Coarsening` or
      ``[N]`` group labels.
    move_size: at most this many units redrawn per candidate, in ``1..G``
      (``G`` units); default 1
      (:data:`gplace.search.common.DEFAULT_MOVE_SIZE`).
    batch_size: candidates simulated per step (``K``).
    time_limit_s: optional wall-clock limit in seconds.

  Returns:
    :class:`~gplace.search.common.SearchResult`; its placement is never
    slower than ``init``.

  Raises:
    SearchError: ``budget``, ``batch_size`` or ``time_limit_s`` not positive,
      ``move_size`` outside ``1..G``, bad ``groups`` or ``init``.
    GraphError, TopologyError: not a graph / topology, or a bad cost table.
  """
  setup = start(graph, topology, costs=costs, seed=seed, budget=budget,
                init=init, groups=groups, move_size=move_size,
                batch_size=batch_size, time_limit_s=time_limit_s)
  evaluator = setup.evaluator
  incumbent, incumbent_s = stack_best(setup.placements, setup.runtime_s)
  init_s = incumbent_s
  while setup.n_devices > 1 and evaluator.remaining > 0:
    candidates, runtime_s = neighbours(setup, incumbent, batch_size)
    best = int(np.argmin(runtime_s))
    if runtime_s[best] < incumbent_s:
      incumbent, incumbent_s = candidates[best].copy(), float(runtime_s[best])
  return evaluator.result(init_s)


local_search_placer = placer_from_search(local_search)
