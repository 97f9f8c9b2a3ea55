"""Fusion as a searched decision: simulated annealing over fusion labels.

:func:`fusion_annealing` starts from the best of no fusion, XLA's default
(:func:`gplace.graphs.fusion.default_fusion`) and a given decision, and
proposes batches of :mod:`gplace.search.fusion_moves` (merge an op's group
into a consumer's on the same device, split an op out), optionally mixed
with placement moves that move whole groups; candidates are scored with
``gplace.simulate(..., fusion=)`` by a :class:`FusionEvaluator` (the
search :class:`~gplace.search.common.Evaluator`, one batched simulation
per distinct decision) and accepted by the Metropolis rule of
:mod:`gplace.search.annealing`. ``docs/design.md#fusion``.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from gplace.errors import SearchError, check_seed
from gplace.graphs.fusion import default_fusion, fuse, group_placements
from gplace.graphs.graph import Graph, check_graph
from gplace.graphs.placement import check_placements
from gplace.search.annealing import (DEFAULT_T0, FINAL_TEMPERATURE_RATIO,
                                     check_schedule, metropolis)
from gplace.search.common import (DEFAULT_BATCH_SIZE, DEFAULT_BUDGET,
                                  Evaluator, History, check_budget,
                                  check_fraction, check_positive_int,
                                  check_time_limit, make_units)
from gplace.search.fusion_moves import canonical, perturb, unit_labels
from gplace.search.moves import redraw
from gplace.sim.list_scheduler import prepare
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

#: Most fusion moves (merges and splits) chained into one candidate.
DEFAULT_FUSION_MOVE_SIZE = 3
#: Share of fusion moves that merge (the rest split).
DEFAULT_MERGE_SHARE = 0.6


class FusionResult(NamedTuple):
  """The best fusion decision (and placement) a fusion search found.

  Attributes:
    fusion: ``[N]`` int64 canonical labels (a group labelled by its lowest
      member, ``-1`` alone), legal for ``placement``.
    placement: ``[N]`` int32 (the given one unless placement moves ran).
    runtime_s: simulated runtime with ``fusion`` (``inf``: nothing fitted).
    start_runtime_s: the start's: the best of the starting decisions.
    default_runtime_s: XLA's default decision's
      (:func:`gplace.graphs.fusion.default_fusion`) on the given placement.
    unfused_runtime_s: no fusion's on the given placement.
    evaluations: simulator evaluations spent, the starts included.
    history: best runtime after the starts and after each batch.
    wall_s: wall-clock seconds of the whole search.
  """

  fusion: np.ndarray
  placement: np.ndarray
  runtime_s: float
  start_runtime_s: float
  default_runtime_s: float
  unfused_runtime_s: float
  evaluations: int
  history: History
  wall_s: float

  @property
  def gain_over_default(self) -> float:
    """Relative runtime saved against the default decision (0.1: 10%)."""
    return _gain(self.default_runtime_s, self.runtime_s)

  @property
  def gain_over_unfused(self) -> float:
    """Relative runtime saved against no fusion (0.1: 10%)."""
    return _gain(self.unfused_runtime_s, self.runtime_s)


def _gain(before_s: float, after_s: float) -> float:
  if not (math.isfinite(before_s) and before_s > 0):
    return math.nan
  return 1.0 - after_s / before_s


class FusionEvaluator(Evaluator):
  """An :class:`~gplace.search.common.Evaluator` of (placement, fusion)
  pairs, in a fixed schedule.

  :meth:`score` simulates the rows that share a decision together
  (``gplace.simulate(..., fusion=)``), with the shared ``order`` or
  ``priority`` (or the default schedule); budget, time limit, history and
  best are the Evaluator's, and :attr:`best_fusion` goes with the best.

  Args:
    graph, topology, budget, batch_size, time_limit_s, start_time: as for
      the Evaluator.
    costs: ``[N, D]`` measured seconds, or None (the roofline).
    order: ``[N]`` op order to run in, or None.
    priority: ``[N]`` float32 priorities steering the schedule, or None.
  """

  def __init__(self, graph: Graph, topology: Topology, costs, budget: int,
               batch_size: int, time_limit_s: float = math.inf,
               start_time: float | None = None, order=None, priority=None):
    super().__init__(graph, topology, costs, budget, batch_size,
                     time_limit_s, start_time)
    self.order = order
    self.priority = priority
    self.best_fusion: np.ndarray | None = None

  def score(self, placements: np.ndarray, fusions: np.ndarray) -> np.ndarray:
    """``[k]`` float64 simulated runtimes of ``[k, N]`` placements with
    ``[k, N]`` legal fusion labels (``inf``: out of memory)."""
    placements = np.asarray(placements, np.int32)
    fusions = np.asarray(fusions, np.int64)
    k = placements.shape[0]
    if k > self.budget - self.evaluations:
      raise SearchError(f"{k} candidates would exceed the budget "
                        f"({self.evaluations} of {self.budget} spent).")
    _, first, which = np.unique(fusions, axis=0, return_index=True,
                                return_inverse=True)
    which = which.reshape(-1)
    runtimes = np.empty(k, np.float64)
    for decision, row in enumerate(first.tolist()):
      rows = np.flatnonzero(which == decision)
      for lo in range(0, rows.size, self.batch_size):
        chunk = rows[lo:lo + self.batch_size]
        result = simulate(self.graph, placements[chunk], self.topology,
                          self.costs, self.order, priority=self.priority,
                          fusion=fusions[row])
        runtime = np.asarray(result.runtime_s, np.float64)
        runtimes[chunk] = np.where(
            np.asarray(result.oom) | ~np.isfinite(runtime), np.inf, runtime)
    improved = self.record(placements, runtimes)
    if improved is not None:
      self.best_fusion = fusions[improved].copy()
    return runtimes


def fusion_annealing(graph: Graph, topology: Topology, *, placement,
                     costs=None, order=None, priority=None,
                     start_fusion=None, seed: int = 0,
                     budget: int = DEFAULT_BUDGET,
                     time_limit_s: float | None = None,
                     batch_size: int = DEFAULT_BATCH_SIZE,
                     move_size: int = DEFAULT_FUSION_MOVE_SIZE,
                     merge_share: float = DEFAULT_MERGE_SHARE,
                     placement_share: float = 0.0,
                     t0: float = DEFAULT_T0,
                     decay: float | None = None) -> FusionResult:
  """Simulated annealing over fusion decisions of a placement.

  Args:
    graph, topology: what is placed (``N`` nodes, ``D`` devices).
    placement: ``[N]`` int device per node.
    costs: ``[N, D]`` measured seconds, or None (the roofline).
    order: ``[N]`` op order every candidate runs in, or None;
    priority: ``[N]`` priorities steering the default schedule, or None
      (the critical path); at most one of the two.
    start_fusion: ``[N]`` labels to start from, or None; the start is the
      fastest of it, :func:`gplace.graphs.fusion.default_fusion` and no
      fusion (all scored, against the budget).
    seed: of every draw.
    budget: simulator evaluations (``>= 1``; the starts are always scored).
    time_limit_s: optional wall-clock limit in seconds.
    batch_size: candidates per batch.
    move_size: at most this many merges and splits chained per candidate
      (``>= 1``).
    merge_share: share of fusion moves that merge, in ``[0, 1]``.
    placement_share: share of candidates that move a whole group (or an
      unfused op) to another device instead, in ``[0, 1]``; 0 keeps the
      placement.
    t0, decay: the temperature schedule, as for
      :func:`gplace.search.annealing.annealing`.

  Returns:
    A :class:`FusionResult`, legal and never slower than the start.

  Raises:
    GraphError, TopologyError: not a graph / topology, or a bad cost table.
    PlacementError: ``placement`` is not a placement of the graph.
    FusionError: a ``start_fusion`` that is not legal for the placement.
    SearchError: a bad budget, batch size, move size, share, seed, time
      limit, temperature schedule, ``order`` or ``priority``.
  """
  wall_start = time.perf_counter()
  check_graph(graph, "gplace.search.fusion_annealing")
  prepare(graph, topology, costs)
  placement = check_placements(placement, graph, topology.n_devices,
                               device_names=topology.device_names,
                               batched=False)
  budget = check_budget(budget)
  batch_size = check_positive_int(batch_size, "batch_size",
                                  "candidates scored per batch, e.g. 64.")
  move_size = check_positive_int(
      move_size, "move_size", "fusion moves chained per candidate, e.g. 3.")
  merge_share = check_fraction(merge_share, "merge_share")
  placement_share = check_fraction(placement_share, "placement_share")
  time_limit_s = check_time_limit(time_limit_s)
  t0, decay = check_schedule(t0, decay)
  rng = np.random.default_rng(check_seed(seed, "gplace.search.fusion",
                                         SearchError))
  order, priority = _check_steering(graph, order, priority)
  starts = [np.full(graph.n_nodes, -1, np.int64),
            canonical(default_fusion(graph, placement))]
  if start_fusion is not None:
    group_placements(fuse(graph, start_fusion), placement[None])
    starts.append(canonical(start_fusion))
  evaluator = FusionEvaluator(graph, topology, costs,
                              max(budget, len(starts)), batch_size,
                              time_limit_s, wall_start, order, priority)
  start_s = evaluator.score(np.repeat(placement[None], len(starts), 0),
                            np.stack(starts))
  best = int(np.argmin(start_s))
  fusion, current, current_s = starts[best], placement.copy(), start_s[best]
  units = make_units(graph, unit_labels(fusion))
  if decay is None:
    batches = max(1, math.ceil(evaluator.remaining / batch_size))
    decay = FINAL_TEMPERATURE_RATIO ** (1.0 / max(batches - 1, 1))
  temperature = t0
  moving = placement_share if topology.n_devices > 1 else 0.0
  while evaluator.remaining > 0:
    k = min(batch_size, evaluator.remaining)
    moved = rng.random(k) < moving
    placements = redraw(rng, np.broadcast_to(current, (k, current.size)),
                        units, topology.n_devices, 1, rows=moved)
    fusions = np.stack([
        fusion if moved[i] else perturb(
            rng, graph, current, fusion,
            int(rng.integers(1, move_size + 1)), merge_share)
        for i in range(k)])
    runtime_s = evaluator.score(placements, fusions)
    passed = metropolis(rng, runtime_s, current_s, temperature)
    if passed.any():
      chosen = int(np.argmin(np.where(passed, runtime_s, np.inf)))
      current, current_s = placements[chosen].copy(), runtime_s[chosen]
      if not np.array_equal(fusions[chosen], fusion):
        fusion = fusions[chosen].copy()
        units = make_units(graph, unit_labels(fusion))
    temperature *= decay
  history = evaluator.result(float(start_s[best])).history
  return FusionResult(
      fusion=evaluator.best_fusion, placement=evaluator.best_placement,
      runtime_s=evaluator.best_runtime_s,
      start_runtime_s=float(start_s[best]),
      default_runtime_s=float(start_s[1]),
      unfused_runtime_s=float(start_s[0]),
      evaluations=evaluator.evaluations, history=history,
      wall_s=time.perf_counter() - wall_start)


def _check_steering(graph: Graph, order, priority):
  """``(order, priority)`` validated: an ``[N]`` permutation and ``[N]``
  finite numbers, at most one given.

  Raises:
    SearchError: both given, or either malformed.
  """
  if order is not None and priority is not None:
    raise SearchError("fusion_annealing takes order= or priority=, not "
                      "both: an order is already a schedule.")
  n = graph.n_nodes
  if order is not None:
    order = np.asarray(order)
    if order.shape != (n,) or not np.array_equal(np.sort(order),
                                                 np.arange(n)):
      raise SearchError(f"order must be a permutation of the {n} node ids "
                        f"(an [N] op order), got shape {order.shape}; pass "
                        "e.g. gplace.optimize(...).order, or None.")
    order = order.astype(np.int32)
  if priority is not None:
    try:
      priority = np.asarray(priority, np.float32)
    except (TypeError, ValueError):
      priority = np.asarray([np.nan])
    if priority.shape != (n,) or not np.all(np.isfinite(priority)):
      raise SearchError(f"priority must be [N] = [{n}] finite numbers (the "
                        f"schedule's priorities), got shape "
                        f"{priority.shape}; or pass None.")
  return order, priority

