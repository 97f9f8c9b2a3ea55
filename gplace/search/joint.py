"""Simulated annealing over placement and schedule together.

A candidate is a placement and a priority per node (a random-key encoding of
the schedule: the simulator's default schedule, steered by these priorities
instead of the critical path, ``gplace.simulate(..., priority=)``); a move
redraws devices (as :mod:`gplace.search.annealing`) or rescales the
priorities of a few ops, and the Metropolis rule of annealing accepts it.
The result carries the op ``order`` its best candidate ran in, which
``gplace.simulate(..., order=)`` and ``gplace.place(..., schedule=)``
reproduce.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from gplace.errors import SearchError
from gplace.graphs.graph import NODE_OP, Graph
from gplace.search.annealing import (DEFAULT_T0, FINAL_TEMPERATURE_RATIO,
                                     check_schedule, metropolis,
                                     shared_start)
from gplace.search.common import (DEFAULT_BATCH_SIZE, DEFAULT_BUDGET,
                                  History, check_fraction)
from gplace.search import moves
from gplace.search.moves import block, choose_distinct, redraw, unit_order
from gplace.search.rounds import Exchange, run_rounds
from gplace.sim.priority import bottom_level
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

#: Share of moves that change the schedule (the rest move devices).
DEFAULT_SCHEDULE_SHARE = 0.5
#: Share of the device moves that move a block of the schedule
#: (:func:`gplace.search.moves.block`); the rest redraw a few units. 30 s
#: from the best baseline, paper train steps on 1 CPU + 4 GPUs: bert -4.7%
#: against -3.5% without, resnet50 -4.7 / -3.0%, inception_v3 -9.1 / -3.8%
#: (experiments/results/block_moves/paper_2026-12-03).
DEFAULT_BLOCK_SHARE = moves.BLOCK_SHARE
#: A schedule move multiplies a few ops' priorities by ``exp(sigma z)``.
DEFAULT_PRIORITY_SIGMA = 1.0
#: Ops whose priorities one schedule move rescales, at most.
PRIORITY_MOVE_SIZE = 3


class JointResult(NamedTuple):
  """The best placement and schedule a joint search found.

  Attributes:
    placement: ``[N]`` int32 device per node.
    priority: ``[N]`` float32 priorities that schedule it.
    order: ``[N]`` int32 op order it ran in (``gplace.simulate(...,
      order=order)`` gives ``runtime_s``).
    runtime_s: its simulated runtime (``inf``: nothing fitted in memory).
    init_runtime_s: the start's, in the default schedule.
    evaluations: simulator evaluations spent.
    history: best runtime after each batch.
  """

  placement: np.ndarray
  priority: np.ndarray
  order: np.ndarray
  runtime_s: float
  init_runtime_s: float
  evaluations: int
  history: History


def order_priority(order: np.ndarray) -> np.ndarray:
  """``[N]`` float32 priorities that run ``order`` first to last
  (``p[order[i]] = N - i``)."""
  order = np.asarray(order, np.int64)
  priority = np.empty(order.size, np.float32)
  priority[order] = np.arange(order.size, 0, -1, dtype=np.float32)
  return priority


def rescale(rng: np.random.Generator, base: np.ndarray, movable: np.ndarray,
            sigma: float, move_size: int) -> np.ndarray:
  """``[k, N]`` priorities: each row of ``base`` with between 1 and
  ``move_size`` of the ``movable`` node ids' priorities multiplied by
  ``exp(sigma z)``, ``z`` standard normal (priorities stay positive)."""
  base = np.asarray(base, np.float32)
  k = base.shape[0]
  out = base.copy()
  if k == 0 or movable.size == 0:
    return out
  m = min(move_size, movable.size)
  picks = movable[choose_distinct(rng, movable.size, k, m)]
  sizes = rng.integers(1, m + 1, k)
  factors = np.exp(sigma * rng.standard_normal((k, m))).astype(np.float32)
  factors[np.arange(m)[None, :] >= sizes[:, None]] = 1.0
  rows = np.repeat(np.arange(k), m)
  out[rows, picks.ravel()] *= factors.ravel()
  return out


def joint_annealing(graph: Graph, topology: Topology, *, costs=None,
                    seed: int = 0, budget: int = DEFAULT_BUDGET, init=None,
                    init_order: Optional[np.ndarray] = None,
                    groups=None, move_size: int | None = None,
                    schedule_share: float = DEFAULT_SCHEDULE_SHARE,
                    block_share: float = DEFAULT_BLOCK_SHARE,
                    sigma: float = DEFAULT_PRIORITY_SIGMA,
                    t0: float = DEFAULT_T0, decay: float | None = None,
                    batch_size: int = DEFAULT_BATCH_SIZE,
                    time_limit_s: float | None = None,
                    stall_s: float | None = None,
                    exchange: Exchange | None | bool = None,
                    round_evaluations: int | None = None) -> JointResult:
  """Simulated annealing over placements and their schedules.

  Args:
    graph, topology, costs, seed, budget, init, groups, move_size, t0,
      decay, batch_size, time_limit_s, stall_s, exchange,
      round_evaluations: as for :func:`gplace.search.annealing.annealing`
      (across processes the shared best carries its priorities too).
    init_order: ``[N]`` op order the start runs in (e.g. a list
      scheduler's own plan); default the critical path.
    schedule_share: share of moves that rescale priorities, in ``[0, 1]``
      (1: the placement stays; 0: a placement search in the start's
      schedule).
    block_share: share of the other moves that move a block of the
      schedule between two devices (:func:`gplace.search.moves.block`),
      in ``[0, 1]``; the rest redraw a few units' devices.
    sigma: spread of a priority rescale (``> 0``).

  Returns:
    A :class:`JointResult`, never slower than the start in its schedule.

  Raises:
    SearchError: a bad ``schedule_share``, ``block_share``, ``sigma`` or
      ``init_order``, and what :func:`gplace.search.annealing.annealing`
      raises.
  """
  t0, decay = check_schedule(t0, decay)
  schedule_share = check_fraction(schedule_share, "schedule_share")
  block_share = check_fraction(block_share, "block_share")
  if (not isinstance(sigma, (int, float)) or isinstance(sigma, bool)
      or not math.isfinite(sigma) or sigma <= 0):
    raise SearchError(f"sigma must be a positive number (the spread of a "
                      f"priority rescale), got {sigma!r}; e.g. sigma=1.0.")
  exchange, round_evaluations, setup, evaluator, rng = shared_start(
      graph, topology, costs, exchange=exchange,
      round_evaluations=round_evaluations, seed=seed, budget=budget,
      init=init, groups=groups, move_size=move_size, batch_size=batch_size,
      time_limit_s=time_limit_s, stall_s=stall_s)
  best = int(np.argmin(setup.runtime_s))
  placement = setup.placements[best].copy()
  init_s = float(setup.runtime_s[best])
  start_priority = _start_priority(graph, topology, evaluator.costs,
                                   init_order)
  priority = start_priority
  current_s = (float(evaluator(placement[None], priority[None])[0])
               if evaluator.remaining > 0 else init_s)
  movable = np.flatnonzero(graph.kind == NODE_OP)
  if decay is None:
    batches = max(1, math.ceil(evaluator.remaining / batch_size))
    decay = FINAL_TEMPERATURE_RATIO ** (1.0 / max(batches - 1, 1))
  temperature = t0
  ranked = None            # units in the order of ``priority``, once needed

  def active() -> bool:
    return evaluator.remaining > 0

  def step() -> None:
    nonlocal placement, priority, current_s, temperature, ranked
    k = min(batch_size, evaluator.remaining)
    schedule_rows = rng.random(k) < (schedule_share if setup.n_devices > 1
                                     else 1.0)
    base = np.broadcast_to(placement, (k, placement.size))
    block_rows = ~schedule_rows & (rng.random(k) < block_share)
    placements = redraw(rng, base, setup.units, setup.n_devices,
                        setup.move_size, rows=~schedule_rows & ~block_rows)
    if block_rows.any():
      if ranked is None:
        ranked = unit_order(np.argsort(-priority, kind="stable"),
                            setup.units)
      placements[block_rows] = block(rng, base[block_rows], ranked,
                                     setup.units, setup.n_devices)
    priorities = np.broadcast_to(priority, (k, priority.size)).copy()
    priorities[schedule_rows] = rescale(rng, priorities[schedule_rows],
                                        movable, sigma, PRIORITY_MOVE_SIZE)
    runtime_s = evaluator(placements, priorities)
    passed = metropolis(rng, runtime_s, current_s, temperature)
    if passed.any():
      chosen = int(np.argmin(np.where(passed, runtime_s, np.inf)))
      placement, priority = (placements[chosen].copy(),
                             priorities[chosen].copy())
      current_s = float(runtime_s[chosen])
      if schedule_rows[chosen]:
        ranked = None
    temperature *= decay

  def restart(best_placement, best_priority, runtime_s: float) -> None:
    nonlocal placement, priority, current_s, ranked
    placement = np.array(best_placement, np.int32)
    priority = np.array(
        best_priority if best_priority is not None else _start_priority(
            graph, topology, evaluator.costs, None), np.float32)
    current_s = runtime_s
    ranked = None

  if exchange is None:
    while active():
      step()
    return _result(graph, topology, evaluator, start_priority, init_s)
  total = run_rounds(evaluator, step, active, restart, exchange,
                     round_evaluations)
  return _result(graph, topology, evaluator, start_priority,
                 init_s)._replace(evaluations=total)


def _start_priority(graph: Graph, topology: Topology, costs,
                    init_order: Optional[np.ndarray]) -> np.ndarray:
  if init_order is None:
    return np.asarray(bottom_level(graph, topology, costs), np.float32) + 1.0
  init_order = np.asarray(init_order)
  if init_order.shape != (graph.n_nodes,) or not np.array_equal(
      np.sort(init_order), np.arange(graph.n_nodes)):
    raise SearchError(f"init_order must be a permutation of the "
                      f"{graph.n_nodes} node ids (an [N] op order), got shape "
                      f"{init_order.shape}.")
  return order_priority(init_order)


def _result(graph, topology, evaluator, start_priority,
            init_s) -> JointResult:
  """The evaluator's best, with the order it ran in (a best scored without
  priorities, a start, ran in the critical path's)."""
  placement = evaluator.best_placement
  priority = (evaluator.best_priority if evaluator.best_priority is not None
              else np.asarray(bottom_level(graph, topology, evaluator.costs),
                              np.float32) + 1.0)
  del start_priority
  result = simulate(graph, placement, topology, evaluator.costs,
                    priority=priority, return_schedule=True)
  history = evaluator.result(init_s).history
  return JointResult(np.asarray(placement, np.int32),
                     np.asarray(priority, np.float32),
                     np.asarray(result.order, np.int32),
                     evaluator.best_runtime_s, init_s, evaluator.evaluations,
                     history)
