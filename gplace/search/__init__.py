"""Search placers: local search, simulated annealing and a genetic search.

A *search* improves placements by proposing candidates and keeping what the
simulator scores fastest; it learns nothing and carries nothing from one graph
to the next (compare ``gplace.rl``, whose policies learn to place). Searches
are placers in their own right, for users who want the fastest placement of
one graph, and the controls a learned placer must beat at an equal number of
simulator evaluations.

Every search has the interface of a baseline plus a budget::

    result = gplace.search.local_search(graph, topology, costs=None, seed=0,
                                        budget=10_000, init=None)
    result.placement   # [N] int32, never slower than the start
    result.runtime_s   # simulated seconds under the default schedule
    result.evaluations # <= budget
    result.history     # (evaluations [H], best runtime_s [H])
    result.wall_s

* :func:`local_search`: greedy; the best improving move of each batch.
* :func:`annealing`: Metropolis acceptance on the relative runtime change,
  geometric cooling.
* :func:`genetic`: tournament selection, uniform or segment crossover,
  mutation, elitism.

Shared rules (:mod:`gplace.search.common`):

* The budget counts simulator evaluations (``gplace.simulate`` of one
  placement), the starting placement(s) included. Candidates are simulated in
  batches of ``batch_size`` under the simulator's default schedule (no
  ``order`` or ``priority`` is passed, so the searches follow whatever the
  default is); a placement that runs out of memory is infeasible (``inf``).
* The start is ``init`` (``[N]``, or ``[C, N]`` candidates) or, by default,
  the fastest of the cheap baselines in :data:`INIT_BASELINES`;
  :func:`initial_placements` computes those once for several searches.
* A move redraws between 1 and ``move_size`` units to other devices; a unit
  is a node, or with ``groups=`` (``"colocation"``, ``"hsdag"``, a
  :class:`~gplace.Coarsening` or ``[N]`` labels) a group that moves whole.
* Deterministic for a seed (``np.random.default_rng(seed)``), unless a
  ``time_limit_s`` cuts the search short.
* Bad settings raise :class:`~gplace.errors.SearchError` saying what to
  change.

:data:`PLACERS` maps names to baseline-style placers ``fn(graph, topology,
*, costs=None, seed=0) -> [N] int32`` that run a search with its defaults.
"""

from gplace.search.annealing import annealing, annealing_placer
from gplace.search.common import (INIT_BASELINES, Evaluator, History,
                                  SearchResult, Units, initial_placements,
                                  make_units)
from gplace.search.genetic import genetic, genetic_placer
from gplace.search.local import local_search, local_search_placer
from gplace.search.moves import CROSSOVERS, crossover, redraw

PLACERS = {
    "local_search": local_search_placer,
    "annealing": annealing_placer,
    "genetic": genetic_placer,
}

SEARCHES = {
    "local_search": local_search,
    "annealing": annealing,
    "genetic": genetic,
}

__all__ = [
    "CROSSOVERS", "Evaluator", "History", "INIT_BASELINES", "PLACERS",
    "SEARCHES", "SearchResult", "Units", "annealing", "annealing_placer",
    "crossover", "genetic", "genetic_placer", "initial_placements",
    "local_search", "local_search_placer", "make_units", "redraw",
]
