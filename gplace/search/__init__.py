"""Search placers: local search, simulated annealing and a genetic search.

Placers in their own right and the equal-budget controls of learning::

    result = gplace.search.local_search(graph, topology, costs=None, seed=0,
                                        budget=10_000, init=None)
    result.placement    # int32 [N], never slower than the start
    result.runtime_s    # simulated, in the default schedule
    result.evaluations  # <= budget
    result.history      # (evaluations [H], best runtime_s [H])

Deterministic for a seed; :data:`PLACERS` has them as baseline-style
placers (``docs/design.md``, section 4). :func:`fusion_annealing` searches
fusion decisions of a placement (``docs/design.md#fusion``).
"""

from gplace.search.annealing import annealing, annealing_placer
from gplace.search.common import (INIT_BASELINES, Evaluator, History,
                                  SearchResult, Units, initial_placements,
                                  make_units)
from gplace.search.fusion import (FusionEvaluator, FusionResult,
                                  fusion_annealing)
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
    "CROSSOVERS", "Evaluator", "FusionEvaluator", "FusionResult", "History",
    "INIT_BASELINES", "PLACERS", "SEARCHES", "SearchResult", "Units",
    "annealing", "annealing_placer", "crossover", "fusion_annealing",
    "genetic", "genetic_placer", "initial_placements", "local_search",
    "local_search_placer", "make_units", "redraw",
]
