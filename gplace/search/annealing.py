"""Simulated annealing over placements, with batched proposals.

:func:`annealing` proposes a batch of redraws of the current placement. A
candidate passes if ``delta = (candidate - current) / current <= 0`` or,
with probability ``exp(-delta / T)``, if slower; the chain moves to the
fastest candidate that passed (``batch_size=1``: textbook annealing).
``T_b = t0 * decay**b`` at batch ``b``; the best placement seen is returned.
With ``order``, every placement runs in that fixed op order (each device
its ops in it): a placement search in a schedule another search found,
e.g. LNS's (``gplace.solvers.lns``), instead of the default schedule.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from gplace.errors import SearchError
from gplace.graphs.graph import Graph
from gplace.search.common import (DEFAULT_BATCH_SIZE, DEFAULT_BUDGET,
                                  SearchResult, check_fraction,
                                  initial_placements, placer_from_search,
                                  stack_best, start)
from gplace.search.moves import BLOCK_SHARE, neighbours, unit_order
from gplace.search.rounds import (Exchange, check_round_evaluations,
                                  resolve_exchange, run_rounds, share)
from gplace.sim.problem import check_order
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

DEFAULT_T0 = 0.001
# With decay=None the temperature falls to this fraction of t0 by the last
# batch of the budget.
FINAL_TEMPERATURE_RATIO = 1e-3


def check_schedule(t0, decay) -> tuple[float, float | None]:
  """Validates a geometric temperature schedule.

  Raises:
    SearchError: ``t0`` not a positive finite number, or ``decay`` (unless
      None) not in ``(0, 1]``.
  """
  if (not isinstance(t0, numbers.Real) or isinstance(t0, bool)
      or not math.isfinite(t0) or t0 <= 0):
    raise SearchError(
        f"The temperature schedule must be positive: t0 must be a positive "
        f"number, got {t0!r}. It is a relative runtime change: t0=0.01 "
        "accepts a move 1% slower with probability 1/e.")
  if decay is not None and (
      not isinstance(decay, numbers.Real) or isinstance(decay, bool)
      or not math.isfinite(decay) or not 0 < decay <= 1):
    raise SearchError(
        f"The temperature schedule must be positive: decay must be in (0, 1] "
        f"(the temperature is multiplied by it after each batch), got "
        f"{decay!r}; or pass decay=None to cool to t0 * "
        f"{FINAL_TEMPERATURE_RATIO:g} over the budget.")
  return float(t0), None if decay is None else float(decay)


def metropolis(rng: np.random.Generator, runtime_s: np.ndarray,
               current_s: float, temperature: float) -> np.ndarray:
  """``[k]`` bool: which candidates pass the Metropolis test.

  ``delta = (runtime_s - current_s) / current_s``; a finite candidate passes
  if ``delta <= 0`` or ``u < exp(-delta / temperature)`` for a uniform ``u``.
  Infeasible (``inf``) candidates never pass; if the current placement is
  infeasible, every feasible candidate passes.
  """
  uniform = rng.random(runtime_s.shape)
  feasible = np.isfinite(runtime_s)
  if not math.isfinite(current_s):
    return feasible
  with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
    delta = (runtime_s - current_s) / max(current_s, 1e-30)
    probability = np.exp(-np.maximum(delta, 0.0) / temperature)
  return feasible & ((delta <= 0) | (uniform < probability))


def shared_start(graph: Graph, topology: Topology, costs, *, exchange,
                 round_evaluations, seed: int, budget, init, groups,
                 move_size: int, batch_size: int, time_limit_s, stall_s,
                 order=None):
  """``(exchange, round_evaluations, setup, evaluator, rng)``: a search's
  start
  (:func:`~gplace.search.common.start`) with, across processes, every
  process starting from the same placements and running its share of the
  budget with its own seed (:mod:`gplace.search.rounds`)."""
  exchange = resolve_exchange(exchange)
  if exchange is not None:
    round_evaluations = check_round_evaluations(round_evaluations,
                                                batch_size)
    if init is None:  # every process starts from the same placements
      init, _ = initial_placements(graph, topology, costs, None, seed)
    budget, seed = share(exchange, budget, seed)
  setup = start(graph, topology, costs=costs, seed=seed, budget=budget,
                init=init, groups=groups, move_size=move_size,
                batch_size=batch_size, time_limit_s=time_limit_s,
                stall_s=stall_s, order=order)
  return exchange, round_evaluations, setup, setup.evaluator, setup.rng


def annealing(graph: Graph, topology: Topology, *, costs=None, seed: int = 0,
              budget: int = DEFAULT_BUDGET, init=None, groups=None,
              move_size: int | None = None, t0: float = DEFAULT_T0,
              decay: float | None = None,
              batch_size: int = DEFAULT_BATCH_SIZE,
              time_limit_s: float | None = None,
              stall_s: float | None = None,
              exchange: Exchange | None | bool = None,
              round_evaluations: int | None = None,
              block_share: float = BLOCK_SHARE,
              order: np.ndarray | None = None) -> SearchResult:
  """Simulated annealing over placements, scored by the simulator.

  See the module docstring for the acceptance rule. Runtimes are simulated
  under the simulator's default schedule; placements that run out of memory
  count as infinitely slow and are never accepted.

  Args:
    graph, topology, costs, seed: as for
      :func:`gplace.search.local.local_search` (``N`` nodes, ``D`` devices).
    budget: simulator evaluations to spend, the starting placement(s)
      included; ``>= 1``.
    init: ``[N]`` starting placement, or ``[C, N]`` candidates whose
      fastest is the start (all count against the budget); default the
      cheap baselines in :data:`gplace.search.common.INIT_BASELINES`.
    groups: move nodes (None) or whole groups: a coarsening rule, a
      :class:`~gplace.Coarsening` or ``[N]`` group labels.
    move_size: at most this many units redrawn per candidate, in ``1..G``;
      default 1 (:data:`gplace.search.common.DEFAULT_MOVE_SIZE`).
    t0: starting temperature, on the relative runtime change (``> 0``).
    decay: temperature factor per batch, in ``(0, 1]``; default: cool to
      ``t0 * 1e-3`` by the end of the budget.
    batch_size: candidates simulated per step (``K``).
    time_limit_s: optional wall-clock limit in seconds.
    stall_s: stop once the best has not improved for this many seconds.
    exchange: the processes that search together
      (:mod:`gplace.search.rounds`): None, the processes of the
      ``jax.distributed`` run when it has several; False, this process
      alone. Process ``p`` of ``P`` spends its share of ``budget``
      (``budget // P``, one more for ``p < budget % P``) with a seed
      derived from ``seed`` and ``p``; every process returns the same
      result, with ``evaluations`` summed over processes.
    round_evaluations: evaluations each process spends between two
      exchanges of the best (default 4 batches); with one process unused.
    block_share: share of the moves that move a block of the start's
      schedule between two devices (:func:`gplace.search.moves.block`),
      in ``[0, 1]``.
    order: optional ``[N]`` topological op order (node ids, first to
      last) every placement is scored in (``gplace.simulate(...,
      order=)``); default the simulator's default schedule.

  Returns:
    :class:`~gplace.search.common.SearchResult`; the best placement seen,
    never slower than ``init``. Across processes ``history`` is this
    process's own (its last entry the shared best).

  Raises:
    SearchError: a schedule that is not positive (``t0 <= 0``, ``decay``
      outside ``(0, 1]``), ``budget``/``batch_size`` not positive,
      ``move_size`` outside ``1..G``, bad ``groups``, ``init`` or
      ``block_share``.
    ScheduleError: ``order`` is not a topological order of the nodes.
    GraphError, TopologyError: not a graph / topology, or a bad cost table.
  """
  t0, decay = check_schedule(t0, decay)
  block_share = check_fraction(block_share, "block_share")
  if order is not None:
    order = check_order(order, graph.n_nodes, graph)
  exchange, round_evaluations, setup, evaluator, rng = shared_start(
      graph, topology, costs, exchange=exchange,
      round_evaluations=round_evaluations, seed=seed, budget=budget,
      init=init, groups=groups, move_size=move_size, batch_size=batch_size,
      time_limit_s=time_limit_s, stall_s=stall_s, order=order)
  current, current_s = stack_best(setup.placements, setup.runtime_s)
  init_s = current_s
  ranked = None
  if block_share > 0 and setup.n_devices > 1:  # blocks of the start's order
    ranked = unit_order(order if order is not None else simulate(
        graph, current, topology, evaluator.costs,
        return_schedule=True).order, setup.units)
  if decay is None:
    batches = max(1, math.ceil(evaluator.remaining / batch_size))
    decay = FINAL_TEMPERATURE_RATIO ** (1.0 / max(batches - 1, 1))
  temperature = t0

  def active() -> bool:
    return setup.n_devices > 1 and evaluator.remaining > 0

  def step() -> None:
    nonlocal current, current_s, temperature
    candidates, runtime_s = neighbours(setup, current, batch_size,
                                       ranked=ranked, block_share=block_share)
    passed = metropolis(rng, runtime_s, current_s, temperature)
    if passed.any():
      chosen = int(np.argmin(np.where(passed, runtime_s, np.inf)))
      current, current_s = candidates[chosen].copy(), float(runtime_s[chosen])
    temperature *= decay

  def restart(placement, _, runtime_s: float) -> None:
    nonlocal current, current_s
    current, current_s = np.array(placement, np.int32), runtime_s

  if exchange is None:
    while active():
      step()
    return evaluator.result(init_s)
  total = run_rounds(evaluator, step, active, restart, exchange,
                     round_evaluations)
  return evaluator.result(init_s)._replace(evaluations=total)


annealing_placer = placer_from_search(annealing)
