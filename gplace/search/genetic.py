"""A genetic search over placements: tournament selection, crossover,
mutation and elitism.

:func:`genetic` starts from the starting candidates plus mutants of the
fastest. A generation breeds ``population`` children, each from two
tournament winners (the fastest of ``tournament`` drawn members) by uniform
or segment crossover of units, mutated with probability ``mutation_rate``
(always when identical to its first parent); the ``population`` fastest of
the ``elite`` best parents and all children survive.
"""

from __future__ import annotations

import numpy as np

from gplace.errors import SearchError, is_int
from gplace.graphs.graph import Graph
from gplace.search.common import (DEFAULT_BUDGET, SearchResult,
                                  check_fraction, check_positive_int,
                                  placer_from_search, start)
from gplace.search.moves import CROSSOVERS, crossover, redraw
from gplace.sim.topology import Topology

DEFAULT_POPULATION = 64


def check_settings(population, elite, tournament, crossover_kind,
                   mutation_rate) -> tuple[int, int, int, str, float]:
  """Validates the genetic search's own settings.

  Raises:
    SearchError: ``population < 2``, ``elite`` outside ``0..population-1``,
      ``tournament`` outside ``1..population``, an unknown crossover, or
      ``mutation_rate`` outside ``[0, 1]``.
  """
  if not is_int(population) or population < 2:
    raise SearchError(
        f"population must be an integer >= 2 (crossover needs two parents), "
        f"got {population!r}; e.g. population=64.")
  if not is_int(elite) or not 0 <= elite < population:
    raise SearchError(
        f"elite must be an integer in 0..{population - 1} (parents kept "
        f"into the next generation), got {elite!r}.")
  if not is_int(tournament) or not 1 <= tournament <= population:
    raise SearchError(
        f"tournament must be an integer in 1..{population} (members per "
        f"tournament; 1 picks parents uniformly), got {tournament!r}.")
  if not isinstance(crossover_kind, str) or crossover_kind not in CROSSOVERS:
    raise SearchError(f"Unknown crossover {crossover_kind!r}; choose one of "
                      f"{CROSSOVERS}.")
  mutation_rate = check_fraction(mutation_rate, "mutation_rate")
  return (int(population), int(elite), int(tournament), crossover_kind,
          mutation_rate)


def tournament_select(rng: np.random.Generator, runtime_s: np.ndarray,
                      k: int, size: int) -> np.ndarray:
  """``[k]`` indices of tournament winners: each the fastest of ``size``
  members drawn uniformly (with replacement) from the population."""
  members = rng.integers(0, runtime_s.shape[0], (k, size))
  winner = np.argmin(runtime_s[members], axis=1)
  return members[np.arange(k), winner]


def genetic(graph: Graph, topology: Topology, *, costs=None, seed: int = 0,
            budget: int = DEFAULT_BUDGET, init=None, groups=None,
            population: int = DEFAULT_POPULATION, elite: int = 2,
            tournament: int = 8, crossover_kind: str = "uniform",
            mutation_rate: float = 0.5, move_size: int | None = None,
            batch_size: int | None = None,
            time_limit_s: float | None = None) -> SearchResult:
  """A genetic search over placements, scored by the simulator.

  See the module docstring for one generation. Runtimes are simulated under
  the simulator's default schedule; placements that run out of memory count
  as infinitely slow (they lose every tournament against a feasible one).

  Args:
    graph, topology, costs, seed: as for
      :func:`gplace.search.local.local_search` (``N`` nodes, ``D`` devices).
    budget: simulator evaluations to spend, the starting population
      included; ``>= 1``.
    init: ``[N]`` starting placement, or ``[C, N]`` candidates, all of
      which join the first population (the fastest ``population`` if more);
      default the cheap baselines in
      :data:`gplace.search.common.INIT_BASELINES`.
    groups: inherit and mutate nodes (None) or whole groups: a coarsening
      rule, a :class:`~gplace.Coarsening` or ``[N]`` group labels.
    population: placements per generation (``P >= 2``).
    elite: the best parents that compete with the children for the next
      generation, ``0..P-1``.
    tournament: members per tournament, ``1..P``.
    crossover_kind: ``"uniform"`` or ``"segment"``.
    mutation_rate: probability that a child is mutated, in ``[0, 1]``.
    move_size: at most this many units redrawn per mutation, in ``1..G``;
      default 1 (:data:`gplace.search.common.DEFAULT_MOVE_SIZE`).
    batch_size: placements simulated at once; default ``population``.
    time_limit_s: optional wall-clock limit in seconds.

  Returns:
    :class:`~gplace.search.common.SearchResult`; the best placement seen,
    never slower than ``init``.

  Raises:
    SearchError: ``population < 2``, bad ``elite``, ``tournament``,
      ``crossover_kind`` or ``mutation_rate``, ``budget``/``batch_size`` not
      positive, ``move_size`` outside ``1..G``, bad ``groups`` or ``init``.
    GraphError, TopologyError: not a graph / topology, or a bad cost table.
  """
  population, elite, tournament, crossover_kind, mutation_rate = (
      check_settings(population, elite, tournament, crossover_kind,
                     mutation_rate))
  batch_size = population if batch_size is None else check_positive_int(
      batch_size, "batch_size",
      "it is how many placements are simulated at once, e.g. 64.")
  setup = start(graph, topology, costs=costs, seed=seed, budget=budget,
                init=init, groups=groups, move_size=move_size,
                batch_size=batch_size, time_limit_s=time_limit_s)
  evaluator, rng, units = setup.evaluator, setup.rng, setup.units
  n_devices, move_size = setup.n_devices, setup.move_size
  init_s = float(np.min(setup.runtime_s))
  if n_devices < 2:
    return evaluator.result(init_s)

  # First population: the starting candidates, then mutants of the best.
  order = np.argsort(setup.runtime_s, kind="stable")[:population]
  members, runtime_s = setup.placements[order], setup.runtime_s[order]
  missing = min(population - members.shape[0], evaluator.remaining)
  if missing > 0:
    base = np.broadcast_to(members[0], (missing, members.shape[1]))
    mutants = redraw(rng, base, units, n_devices, move_size)
    members = np.concatenate([members, mutants])
    runtime_s = np.concatenate([runtime_s, evaluator(mutants)])

  while evaluator.remaining > 0 and members.shape[0] >= 2:
    k = min(population, evaluator.remaining)
    first = members[tournament_select(rng, runtime_s, k, tournament)]
    second = members[tournament_select(rng, runtime_s, k, tournament)]
    children = crossover(rng, first, second, units, crossover_kind)
    mutate = (rng.random(k) < mutation_rate) | np.all(children == first,
                                                        axis=1)
    children = redraw(rng, children, units, n_devices, move_size, rows=mutate)
    children_s = evaluator(children)
    keep = np.argsort(runtime_s, kind="stable")[:elite]
    pool = np.concatenate([members[keep], children])
    pool_s = np.concatenate([runtime_s[keep], children_s])
    survivors = np.argsort(pool_s, kind="stable")[:population]
    members, runtime_s = pool[survivors], pool_s[survivors]
  return evaluator.result(init_s)


genetic_placer = placer_from_search(genetic)
