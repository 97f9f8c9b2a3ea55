"""What every search shares: :class:`SearchResult`, checked settings,
:func:`make_units` (nodes or groups), :func:`initial_placements`, and the
:class:`Evaluator` that simulates batches (in the default schedule or a
given op order), counts them against the budget and keeps the best.
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from gplace import baselines
from gplace.errors import (GplaceError, GraphError, PlacementError,
                           SearchError, check_seed, is_int)
from gplace.graphs.coarsening import Coarsening, coarsen
from gplace.graphs.constraints import (coarse_constraints, has_constraints,
                                       repair)
from gplace.graphs.graph import Graph
from gplace.graphs.placement import check_placements
from gplace.sim.list_scheduler import prepare
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

# Baselines tried as the starting placement when the caller gives none, in
# this order (single_device first: it is the one kept when the budget is too
# small to score them all). All place an 80k-node graph in about a second.
INIT_BASELINES = ("single_device", "expert", "m_topo", "m_etf", "heft",
                  "ordered_eft")

DEFAULT_BUDGET = 10_000
DEFAULT_BATCH_SIZE = 64
DEFAULT_MOVE_SIZE = 1


class History(NamedTuple):
  """The best runtime found as a function of evaluations spent.

  Attributes:
    evaluations: ``[H]`` int64 simulator evaluations spent so far,
      increasing; one entry after the starting placement(s) and after each
      batch.
    runtime_s: ``[H]`` float64 best simulated runtime after that many
      evaluations (``inf`` while nothing feasible was seen).
  """
  evaluations: np.ndarray
  runtime_s: np.ndarray


class SearchResult(NamedTuple):
  """What a search returns.

  Attributes:
    placement: ``[N]`` int32 the best placement found (never slower than the
      starting one).
    runtime_s: its simulated runtime in seconds in the search's schedule
      (``inf`` if every placement seen runs out of memory).
    evaluations: simulator evaluations spent, ``<= budget``.
    history: :class:`History` of the best runtime against evaluations.
    wall_s: wall-clock seconds of the whole search (set-up included).
    init_runtime_s: simulated runtime of the starting placement.
  """
  placement: np.ndarray
  runtime_s: float
  evaluations: int
  history: History
  wall_s: float
  init_runtime_s: float


class Units(NamedTuple):
  """What a move redraws: single nodes, or whole groups of nodes.

  Attributes:
    group_of: ``[N]`` int32 unit of each node (``arange(N)`` for nodes).
    n_units: number of units ``G``.
    representative: ``[G]`` int32 lowest-id node of each unit; its device is
      the unit's "current" device when a move picks a new one.
    allowed: ``[G, D]`` bool, the devices every node of a unit allows (the
      graph's ``allowed_devices``), or None: any device.
  """
  group_of: np.ndarray
  n_units: int
  representative: np.ndarray
  allowed: Optional[np.ndarray] = None


# -- validated settings ----------------------------------------------------------


def check_positive_int(value, name: str, hint: str) -> int:
  """``value`` as an int if it is an integer ``>= 1``, else SearchError."""
  if not is_int(value) or value < 1:
    raise SearchError(f"{name} must be a positive integer, got {value!r}; "
                      f"{hint}")
  return int(value)


def check_budget(budget) -> int:
  """The evaluation budget as an int ``>= 1``."""
  return check_positive_int(
      budget, "budget",
      "it counts simulator evaluations, e.g. budget=10_000.")


def check_move_size(move_size, units: Units) -> int:
  """``move_size`` (default :data:`DEFAULT_MOVE_SIZE`, at most ``G``) as an
  int in ``1..G``."""
  if move_size is None:
    return min(DEFAULT_MOVE_SIZE, units.n_units)
  what = "nodes" if units.n_units == len(units.group_of) else "groups"
  if not is_int(move_size) or not 1 <= move_size <= units.n_units:
    raise SearchError(
        f"move_size must be an integer in 1..{units.n_units} (the number of "
        f"{what} a move can redraw), got {move_size!r}; pass a value in that "
        "range or leave it unset for the default.")
  return int(move_size)


def check_fraction(value, name: str, *, low_open: bool = False) -> float:
  """``value`` as a float in ``[0, 1]`` (``(0, 1]`` if ``low_open``)."""
  ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and (
      math.isfinite(value) and (0 < value if low_open else 0 <= value)
      and value <= 1)
  if not ok:
    interval = "(0, 1]" if low_open else "[0, 1]"
    raise SearchError(f"{name} must be a number in {interval}, got "
                      f"{value!r}.")
  return float(value)


def check_time_limit(seconds, name: str = "time_limit_s",
                     meaning: str = "") -> float:
  """``seconds`` as a positive float, ``inf`` for None (``name`` and
  ``meaning`` go into the error's message)."""
  if seconds is None:
    return math.inf
  if (not isinstance(seconds, numbers.Real) or isinstance(seconds, bool)
      or not seconds > 0):
    raise SearchError(f"{name} must be a positive number of seconds or "
                      f"None{meaning}, got {seconds!r}.")
  return float(seconds)


def make_units(graph: Graph, groups=None) -> Units:
  """The units a move redraws.

  A graph with device constraints keeps them under every move: the nodes of
  a co-location class (``Graph.colocation``) form one unit (with every
  group that holds one of them), and a unit moves only to a device all its
  nodes allow (``Units.allowed``).

  Args:
    graph: the graph placed (``N`` nodes).
    groups: None (every node is a unit), a coarsening rule name passed to
      ``gplace.coarsen(graph, rule)`` (``"colocation"`` or ``"hsdag"``), a
      :class:`~gplace.Coarsening` of ``graph``, or ``[N]`` integer labels
      (nodes with the same label form a group).

  Raises:
    SearchError: labels of the wrong shape or type.
    CoarseningError: an unknown rule, or ``"size"`` (which needs
      ``max_groups``: pass ``gplace.coarsen(graph, "size", max_groups=...)``).
  """
  n = graph.n_nodes
  if groups is None and not has_constraints(graph):
    nodes = np.arange(n, dtype=np.int32)
    return Units(nodes, n, nodes)
  if groups is None:
    groups = np.arange(n)
  if isinstance(groups, str):
    groups = coarsen(graph, groups)
  labels = groups.group_of if isinstance(groups, Coarsening) else groups
  labels = np.asarray(labels)
  if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
    raise SearchError(
        f"groups must give one integer group label per node, shape ({n},), "
        f"got shape {labels.shape} and dtype {labels.dtype}; pass "
        "gplace.coarsen(graph, 'colocation') or its group_of.")
  _, first, group_of = np.unique(labels, return_index=True,
                                 return_inverse=True)
  group_of = group_of.astype(np.int32).reshape(n)
  if not has_constraints(graph):
    return Units(group_of, int(first.size), first.astype(np.int32))
  return _constrained_units(graph, group_of, int(first.size))


def _constrained_units(graph: Graph, group_of: np.ndarray,
                       n_groups: int) -> Units:
  """Groups merged along co-location classes, with the devices each allows.

  Raises:
    GraphError: a unit whose nodes allow no device in common.
  """
  _, colocation = coarse_constraints(graph, group_of, n_groups)
  if colocation is not None:  # groups of one class become one unit
    merged = np.where(colocation >= 0, colocation,
                      colocation.max(initial=-1) + 1 + np.arange(n_groups))
    _, group_of = np.unique(merged[group_of], return_inverse=True)
    group_of = group_of.astype(np.int32).reshape(graph.n_nodes)
  n_units = int(group_of.max(initial=-1)) + 1
  first = np.full(n_units, graph.n_nodes, np.int64)
  np.minimum.at(first, group_of, np.arange(graph.n_nodes))
  allowed = None
  if graph.allowed_devices is not None:
    allowed = np.ones((n_units, graph.allowed_devices.shape[1]), bool)
    np.logical_and.at(allowed, group_of, graph.allowed_devices)
    if not allowed.any(axis=1).all():
      raise GraphError(
          f"graph {graph.name!r}: a search unit (a group merged with its "
          "co-location class) allows no device in common; relax the graph's "
          "allowed_devices or colocation, or search with other groups.")
  return Units(group_of, n_units, first.astype(np.int32), allowed)


# -- the starting placement ----------------------------------------------------


def initial_placements(graph: Graph, topology: Topology, costs=None,
                       init=None, seed: int = 0) -> tuple[np.ndarray, list[str]]:
  """Candidate starting placements ``[C, N]`` int32 and their labels.

  ``init`` given: that ``[N]`` placement, or those ``[C, N]`` placements
  (validated). Otherwise the :data:`INIT_BASELINES` (a baseline that fails
  here is skipped). Compute this once and pass it as ``init=`` to run several
  searches from the same start without planning the baselines again.

  Raises:
    SearchError: ``init`` is not a valid placement of ``graph`` (or a stack
      of them).
    GraphError, TopologyError: not a graph / topology, or a bad cost table.
  """
  costs = prepare(graph, topology, costs).costs
  if init is not None:
    try:
      batched = np.ndim(init) == 2
    except ValueError:  # ragged nested lists: check_placements says so
      batched = False
    try:
      placements = check_placements(init, graph, topology.n_devices,
                                    device_names=topology.device_names,
                                    batched=batched)
    except PlacementError as err:
      raise SearchError(f"init is not a valid placement: {err} Pass an [N] "
                        "int array of device indices (or [C, N] of them), or "
                        "init=None to start from the best cheap "
                        "baseline.") from err
    if placements.shape[0] == 0:
      raise SearchError("init holds no placement; pass [N] or [C, N] with "
                        "C >= 1, or init=None.")
    placements = placements if batched else placements[None]
    labels = [f"init[{i}]" for i in range(placements.shape[0])]
    return placements, labels if batched else ["init"]
  rows, labels = [], []
  for name in INIT_BASELINES:
    try:
      rows.append(baselines.get(name)(graph, topology, costs=costs, seed=seed))
    except GplaceError:
      continue  # a baseline that cannot place this graph is no start.
    labels.append(name)
  return np.stack(rows).astype(np.int32), labels


# -- evaluation ----------------------------------------------------------------


class Evaluator:
  """Scores placements with ``gplace.simulate`` in fixed-size batches.

  Every placement counts as one evaluation against ``budget``; callers pass
  at most :attr:`remaining`. Batches of ``batch_size`` (the last padded with
  copies of its first row, neither counted nor returned: one compiled
  shape); out of memory scores ``inf``. The best placement seen and the
  :class:`History` are kept here, so a search cannot forget its best.

  Args:
    graph, topology: what is placed (``N`` nodes, ``D`` devices).
    costs: ``[N, D]`` float64 seconds, validated.
    budget: evaluations allowed.
    batch_size: placements per simulator call (``K``).
    time_limit_s: wall-clock seconds after which :attr:`remaining` is 0.
    start_time: ``time.perf_counter()`` when that clock started (now).
    stall_s: wall-clock seconds without a better placement after which
      :attr:`remaining` is 0 (a search that stalls gives its time back).
    order: optional ``[N]`` op order every placement without priorities
      is scored in (``gplace.simulate(..., order=)``).

  Host-side; not thread-safe.
  """

  def __init__(self, graph: Graph, topology: Topology, costs: np.ndarray,
               budget: int, batch_size: int,
               time_limit_s: float = math.inf,
               start_time: float | None = None,
               stall_s: float = math.inf,
               order: np.ndarray | None = None):
    self.graph = graph
    self.order = order
    self.topology = topology
    self.costs = costs
    self.budget = budget
    self.batch_size = batch_size
    self.time_limit_s = time_limit_s
    self.start = time.perf_counter() if start_time is None else start_time
    self.stall_s = stall_s
    self.improved_at = self.start
    self.evaluations = 0
    self.best_placement: np.ndarray | None = None
    self.best_priority: np.ndarray | None = None
    self.best_runtime_s = math.inf
    self._history_evaluations: list[int] = []
    self._history_runtime_s: list[float] = []

  @property
  def remaining(self) -> int:
    """Evaluations left: 0 once the budget or the time limit is spent, or
    the best has not improved for ``stall_s``."""
    now = time.perf_counter()
    if (now - self.start > self.time_limit_s
        or now - self.improved_at > self.stall_s):
      return 0
    return self.budget - self.evaluations

  def __call__(self, placements: np.ndarray,
               priorities: np.ndarray | None = None) -> np.ndarray:
    """Simulated runtimes of ``[k, N]`` placements: ``[k]`` float64 seconds,
    ``inf`` where a placement runs out of memory. With ``[k, N]``
    ``priorities``, each placement's schedule is steered by its own
    priorities (``gplace.simulate(..., priority=)``), else in the
    evaluator's ``order`` when it has one, else by the critical path."""
    placements = np.asarray(placements, np.int32)
    if priorities is not None:
      priorities = np.asarray(priorities, np.float32)
    k = placements.shape[0]
    if k > self.budget - self.evaluations:
      raise SearchError(
          f"{k} placements would exceed the budget ({self.evaluations} of "
          f"{self.budget} evaluations spent); propose at most "
          f"{self.budget - self.evaluations}.")
    runtimes = np.empty(k, np.float64)
    for lo in range(0, k, self.batch_size):
      batch = _padded(placements[lo:lo + self.batch_size], self.batch_size)
      priority = None if priorities is None else _padded(
          priorities[lo:lo + self.batch_size], self.batch_size)
      size = min(self.batch_size, k - lo)
      fixed = self.order if priority is None else None
      result = simulate(self.graph, batch, self.topology, costs=self.costs,
                        order=fixed, priority=priority)
      runtime = np.asarray(result.runtime_s, np.float64)[:size]
      oom = np.asarray(result.oom)[:size]
      runtimes[lo:lo + size] = np.where(oom | ~np.isfinite(runtime), np.inf,
                                        runtime)
    self.record(placements, runtimes, priorities)
    return runtimes

  def record(self, placements: np.ndarray, runtimes: np.ndarray,
             priorities: np.ndarray | None = None) -> int | None:
    """Counts ``[k]`` scored candidates, keeps the best and extends the
    history; returns the row that became the best, or None."""
    k = runtimes.shape[0]
    self.evaluations += k
    improved = None
    if k:
      best = int(np.argmin(runtimes))
      if self.best_placement is None or runtimes[best] < self.best_runtime_s:
        self.best_runtime_s = float(runtimes[best])
        self.improved_at = time.perf_counter()
        self.best_placement = placements[best].copy()
        self.best_priority = (None if priorities is None
                              else priorities[best].copy())
        improved = best
    self._history_evaluations.append(self.evaluations)
    self._history_runtime_s.append(self.best_runtime_s)
    return improved

  def adopt(self, placement: np.ndarray, priority: np.ndarray | None,
            runtime_s: float) -> None:
    """Another process's best as this one's, no evaluation counted."""
    if runtime_s < self.best_runtime_s:
      self.improved_at = time.perf_counter()
    self.best_placement = np.array(placement, np.int32)
    self.best_priority = (None if priority is None else np.array(priority,
                                                                 np.float32))
    self.best_runtime_s = float(runtime_s)
    self._history_runtime_s[-1] = self.best_runtime_s  # the start was scored

  def result(self, init_runtime_s: float) -> SearchResult:
    """The :class:`SearchResult` of everything evaluated so far."""
    history = History(np.asarray(self._history_evaluations, np.int64),
                      np.asarray(self._history_runtime_s, np.float64))
    return SearchResult(placement=self.best_placement.astype(np.int32),
                        runtime_s=self.best_runtime_s,
                        evaluations=self.evaluations, history=history,
                        wall_s=time.perf_counter() - self.start,
                        init_runtime_s=init_runtime_s)


def _padded(rows: np.ndarray, size: int) -> np.ndarray:
  """``rows`` padded to ``size`` rows with copies of its first."""
  if rows.shape[0] == size:
    return rows
  return np.concatenate([rows, np.repeat(rows[:1], size - rows.shape[0],
                                         axis=0)])


class Start(NamedTuple):
  """A search's validated set-up (see :func:`start`).

  Attributes:
    evaluator: the :class:`Evaluator`, with the starting placements scored.
    units: the :class:`Units` moves act on.
    rng: the search's ``np.random.Generator``.
    placements: ``[C, N]`` int32 starting candidates that were scored.
    runtime_s: ``[C]`` float64 their runtimes.
    n_devices: ``D``.
    move_size: the validated ``move_size`` (see :func:`check_move_size`).
  """
  evaluator: Evaluator
  units: Units
  rng: np.random.Generator
  placements: np.ndarray
  runtime_s: np.ndarray
  n_devices: int
  move_size: int


def start(graph: Graph, topology: Topology, *, costs, seed: int, budget,
          init, groups, move_size, batch_size, time_limit_s,
          stall_s: float | None = None,
          order: np.ndarray | None = None) -> Start:
  """Validates the settings every search shares and scores the start.

  Call it after validating a search's own settings: it spends evaluations.

  Starting candidates beyond the budget are dropped (``init`` or the first
  of :data:`INIT_BASELINES` is always scored). With ``order`` (validated by
  the caller), every placement is scored in that op order.

  Raises:
    GraphError, TopologyError: not a graph / topology, or a bad cost table.
    SearchError: a bad budget, batch size, seed, time limit or
      ``stall_s``, ``groups``, ``move_size`` or ``init``.
  """
  wall_start = time.perf_counter()
  problem = prepare(graph, topology, costs)
  budget = check_budget(budget)
  # Batches are padded: one beyond the budget would simulate padding only.
  batch_size = min(max(budget, DEFAULT_BATCH_SIZE), check_positive_int(
      batch_size, "batch_size",
      "it is how many placements are simulated at once, e.g. 64."))
  time_limit_s = check_time_limit(time_limit_s)
  stall_s = check_time_limit(stall_s, "stall_s", " (stop once the best has "
                             "not improved for that long)")
  units = make_units(graph, groups)
  move_size = check_move_size(move_size, units)
  rng = np.random.default_rng(check_seed(seed, "gplace.search", SearchError))
  placements, _ = initial_placements(graph, topology, problem.costs, init,
                                     seed)
  if has_constraints(graph):  # moves keep the constraints; so must the start
    placements = np.stack([repair(graph, p, problem.costs)
                           for p in placements])
  placements = placements[:budget]
  evaluator = Evaluator(graph, topology, problem.costs, budget, batch_size,
                        time_limit_s, start_time=wall_start, stall_s=stall_s,
                        order=order)
  runtime_s = evaluator(placements)
  return Start(evaluator, units, rng, placements, runtime_s,
               topology.n_devices, move_size)


def stack_best(placements: Sequence[np.ndarray] | np.ndarray,
               runtime_s: np.ndarray) -> tuple[np.ndarray, float]:
  """The fastest of ``[C, N]`` placements and its runtime (first on ties)."""
  best = int(np.argmin(runtime_s))
  return np.array(placements[best], np.int32), float(runtime_s[best])


def placer_from_search(search: Callable[..., SearchResult]
                       ) -> Callable[..., np.ndarray]:
  """A baseline-style placer that runs ``search`` with its defaults.

  Args:
    search: ``search(graph, topology, *, costs, seed, ...) -> SearchResult``.

  Returns:
    ``placer(graph, topology, *, costs=None, seed=0) -> [N] int32``.
  """

  def placer(graph: Graph, topology: Topology, *, costs=None,
             seed: int = 0) -> np.ndarray:
    return search(graph, topology, costs=costs, seed=seed).placement

  placer.__name__ = placer.__qualname__ = f"{search.__name__}_placer"
  placer.__doc__ = (f":func:`{search.__name__}` with its defaults, as a "
                    "baseline-style placer.\n\nReturns:\n  ``[N]`` int32 "
                    "placement.\n")
  return placer
