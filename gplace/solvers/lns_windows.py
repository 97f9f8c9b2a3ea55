"""The windows of :func:`gplace.solvers.lns`: which ops a window frees, the
incumbent they are cut from, and the windows in flight.

:class:`Search` hands windows to worker threads (CP-SAT releases the GIL)
and takes their solutions back, scored with ``gplace.simulate`` in their
own order; :func:`neighbourhood` frees a connected region, the ops of a
device pair or a span of the order around a pivot op, and
:func:`choose_neighbourhood` draws which (evenly by default, or by what each
has gained lately).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace._compiled import njit
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.sim.simulator import simulate_in_order
from gplace.solvers.lns_constraints import live_kib
from gplace.solvers.lns_model import Context, Static, solve_window

MIN_WINDOW = 2
#: A window's span of the order holds at most this many times its freed ops.
CONTEXT_FACTOR = 3
#: Deterministic seconds of CP-SAT per wall second of a window's limit
#: (what binds with max_iterations, so that a run is reproducible; one
#: worker did about 0.1 per wall second on two loaded CPU cores).
DETERMINISTIC_PER_S = 0.1
#: A window proven optimal within this share of its limit grows by GROW;
#: one that runs out of time shrinks by SHRINK.
FAST_SHARE = 0.5
GROW = 1.25
SHRINK = 0.7
#: The neighbourhoods. Which one pays depends on the graph: 80 s from the
#: best hint baseline (paper train steps on 1 CPU + 4 GPUs, seed 0, taken
#: in turn), ms gained per window: rnnlm2 region 0.001, device pair 0.006,
#: time window 0.014; bert 0.024 / 0.033 / 0.024; wavenet2 0.002 / 0.002 /
#: 0.004.
NEIGHBOURHOODS = ("region", "device_pair", "time_window")
#: Share of the draws spread evenly; the rest follow each neighbourhood's
#: recent gains (adaptive LNS, as in Ropke & Pisinger 2006). Even by
#: default: drawing 70% by the gains was no better, -6.4 / -5.0 / -4.3%
#: against -7.3 / -5.5 / -4.6% evenly on rnnlm2 / wavenet2 / bert paper
#: (40 s, mean of seeds 0-2; experiments/results/lns_window/explore_*),
#: inside the seeds' spread, which the gains' noise does not overcome;
#: on gnmt2 small, 1 CPU + 2 acc. (45 s, seeds 0-4), 7.156 against 7.178
#: ms (lns_window/explore45_gnmt2_2acc_2026-12-07).
EXPLORE = 1.0
#: Weight of one window's relative gain in its neighbourhood's moving
#: average (a window that did not improve counts as no gain).
GAIN_RATE = 0.05
#: Share of windows centred on an op of the incumbent's critical path.
CRITICAL_SHARE = 0.5
#: Pivots tried for a window whose span is apart from those in flight.
OVERLAP_TRIES = 4
#: Windows check memory outside their span (``lns_constraints.
#: add_memory_outside``) when the start fills some device's memory to at
#: least this share (as ``lns_kicks.PRESSURE``): there a window's copies
#: of early values overfilled a device far before the span (1,103-op gnmt2
#: on 1 CPU + 2 acc.: 39-52 of about 1,300 windows in 30 s, 12 with it).
MEMORY_TIGHT = 0.8
#: Where memory is tight (:data:`MEMORY_TIGHT`), LNS starts with each graph
#: input (a weight) this many positions of the order before its first
#: consumer (:func:`late_inputs`), when that is not slower: a value's copy
#: on another device lives from its producer's position, and a start's
#: order (the default schedule's) puts the inputs first, so every weight a
#: device reads held its memory from the start.
#: No window moves an input further than its span. On 1,103-op gnmt2
#: small, 1 CPU + 2 acc. (accelerators' memory at 65% / 79% of the
#: weights), a lead of 20 lowers the fast accelerator's peak in a 60 s
#: answer by 84 KiB of its 736 at the same runtime, and LNS from HEFT
#: ends at a mean of 7.046 ms with a lead of 40, 7.065 with 20, against
#: 7.169 with the inputs first (45 s, seeds 0-4; experiments/results/
#: lns_window/inputs45_gnmt2_2acc_2026-12-07). A lead of the order's
#: length or more leaves the inputs where they are.
INPUT_LEAD = 40


class Scored(NamedTuple):
  """A placement and order scored by the simulator."""
  placement: np.ndarray
  order: np.ndarray
  runtime_s: float
  oom: bool
  excess_bytes: float
  finish_s: np.ndarray
  start_s: np.ndarray

  @property
  def key(self):
    return (self.oom, self.excess_bytes if self.oom else 0.0, self.runtime_s)


def score(graph, topology, costs, placement, order) -> Scored:
  """``placement`` simulated in ``order`` (checked by the caller;
  ``costs`` the full cost table, best frozen: ``gplace.sim.cache.freeze``).
  """
  result = simulate_in_order(graph, placement, topology, costs, order)
  excess = float(np.max(np.asarray(result.peak_bytes, np.float64)
                        - np.asarray(topology.memory_bytes, np.float64)))
  return Scored(np.asarray(placement, np.int32), np.asarray(order, np.int32),
                 float(result.runtime_s), bool(result.oom), max(excess, 0.0),
                 np.asarray(result.finish_s, np.float64),
                 np.asarray(result.start_s, np.float64))


def late_inputs(graph: Graph, order: np.ndarray, lead: int) -> np.ndarray:
  """``order`` (``[N]``, topological) with each graph input that has
  consumers moved to just before the node ``lead`` positions ahead of the
  first of them, when that is later than where it is; the rest keep their
  relative order."""
  order = np.asarray(order)
  n = order.size
  position = np.empty(n, np.int64)
  position[order] = np.arange(n)
  first = np.full(n, n, np.int64)
  np.minimum.at(first, np.asarray(graph.edge_src),
                position[np.asarray(graph.edge_dst)])
  key = position.astype(np.float64)
  moved = (graph.kind == NODE_INPUT) & (first < n)
  key[moved] = np.maximum(position[moved], first[moved] - lead) - 0.5
  return order[np.argsort(key[order], kind="stable")].astype(np.int32)


class Incumbent:
  """The current solution and what windows need of it (host-side).

  ``tail`` is valid for positions ``>= tail_from``; the rest is recomputed
  on demand, so an accepted window costs a pass over what follows it only
  once a later window needs it.
  """

  def __init__(self, static: Static, scored: Scored):
    self.static = static
    self.set(scored, 0)

  def set(self, scored: Scored, changed_upto: int) -> None:
    """Takes ``scored``, whose op order differs from the last one's only
    up to position ``changed_upto`` (the tails after it still hold)."""
    static = self.static
    n = scored.placement.size
    fresh = not hasattr(self, "scored")
    self.scored = scored
    self.position = np.empty(n, np.int64)
    self.position[scored.order] = np.arange(n)
    self.finish = np.floor(scored.finish_s / static.tick_s).astype(np.int64)
    self.finish[~static.executed] = 0
    ops = scored.order[static.executed[scored.order]]
    group = static.device_group[scored.placement[ops]]
    self.next_same = np.full(n, -1, np.int64)
    self.prev_same = np.full(n, -1, np.int64)
    link = njit(_link_same) or _link_same
    link(ops, group, self.next_same, self.prev_same,
         np.full(int(static.device_group.max()) + 1, -1, np.int64))
    if fresh:
      self.tail = np.zeros(n, np.int64)
      self.tail_from = n
    else:
      self.tail_from = max(self.tail_from, changed_upto + 1)
    self._critical = None
    self._live = None

  def live(self) -> np.ndarray:
    """``[D, N]`` KiB live per device and position (:func:`~gplace.
    solvers.lns_constraints.live_kib`), computed once per incumbent."""
    if self._live is None:
      self._live = live_kib(self.static, self.scored.placement,
                            self.position)
    return self._live

  def tails_after(self, hi: int) -> np.ndarray:
    """``tail`` valid for every position ``> hi``."""
    static, scored = self.static, self.scored
    if self.tail_from - 1 > hi:
      tails = njit(_tails) or _tails
      tails(scored.order, scored.placement, self.tail, self.next_same,
            static.succ_ptr, static.succ, static.executed, static.transfer,
            static.duration, self.tail_from, hi)
    self.tail_from = min(self.tail_from, hi + 1)
    return self.tail

  def critical(self) -> np.ndarray:
    """Node ids on a critical path of the simulated schedule: back from
    the last finish, each time to the producer or device predecessor that
    finished last (the first producer in CSR order of equals; the device
    predecessor only when it finished strictly later)."""
    if self._critical is None:
      static, scored = self.static, self.scored
      path = np.empty(scored.placement.size, np.int64)
      walk = njit(_walk_back) or _walk_back
      size = walk(int(np.argmax(scored.finish_s)), static.pred_ptr,
                  static.pred, self.prev_same, scored.finish_s,
                  scored.start_s, path)
      self._critical = path[:size]
    return self._critical


def _link_same(ops, group, next_same, prev_same, last) -> None:
  """Links each op of ``ops`` (in order) to the previous and the next op
  of its compute ``group``; ``last``: ``[G]`` scratch, all -1."""
  for i in range(ops.size):
    v, g = ops[i], group[i]
    u = last[g]
    if u >= 0:
      next_same[u] = v
      prev_same[v] = u
    last[g] = v


def _tails(order, placement, tail, next_same, succ_ptr, succ, executed,
           transfer, duration, upto, hi) -> None:
  """Fills ``tail`` of the nodes at positions ``upto - 1`` down to
  ``hi + 1`` of ``order`` (those after them already hold): each node's
  duration plus its longest way to the end through a consumer (after the
  transfer to it) or its device successor (``next_same``)."""
  for p in range(upto - 1, hi, -1):
    v = order[p]
    here = placement[v]
    best = tail[next_same[v]] if next_same[v] >= 0 else 0
    for e in range(succ_ptr[v], succ_ptr[v + 1]):
      w = succ[e]
      if executed[w]:
        reach = transfer[v, here, placement[w]] + tail[w]
        if reach > best:
          best = reach
    tail[v] = duration[v, here] + best


def _walk_back(v, pred_ptr, pred, prev_same, finish_s, start_s,
               path) -> int:
  """Writes the critical path back from ``v`` into ``path``; its length."""
  size = 0
  path[size] = v
  size += 1
  while start_s[v] > 0:
    step, latest = -1, -np.inf
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
      if finish_s[pred[e]] > latest:
        step, latest = pred[e], finish_s[pred[e]]
    if prev_same[v] >= 0 and finish_s[prev_same[v]] > latest:
      step = prev_same[v]
    if step < 0:
      break
    v = step
    path[size] = v
    size += 1
  return size


def choose_neighbourhood(rng, gains: np.ndarray,
                         explore: float = EXPLORE) -> int:
  """Index into :data:`NEIGHBOURHOODS` of the next window's: with
  probability ``explore / K + (1 - explore) * gains[k] / sum(gains)``
  (even while every gain is zero).

  Args:
    rng: a ``np.random.Generator``.
    gains: ``[K]`` each neighbourhood's moving average of its windows'
      relative gains (``>= 0``).
    explore: the share of draws spread evenly, in ``[0, 1]``.
  """
  k = gains.size
  total = float(gains.sum())
  share = gains / total if total > 0 else np.full(k, 1.0 / k)
  return int(rng.choice(k, p=explore / k + (1.0 - explore) * share))


def relative_gain(old: Scored, new: Scored) -> float:
  """What ``new`` gained over ``old`` (``>= 0`` when it is not worse): the
  share of the runtime saved, or while ``old`` runs out of memory, the
  share of the excess bytes removed (1 when ``new`` fits)."""
  if old.oom:
    if not new.oom:
      return 1.0
    return max(old.excess_bytes - new.excess_bytes, 0.0) / max(
        old.excess_bytes, 1.0)
  if not old.runtime_s > 0:
    return 0.0
  return max(old.runtime_s - new.runtime_s, 0.0) / old.runtime_s


def pivot(rng, incumbent: Incumbent, n: int) -> int:
  """A node: on the critical path (:data:`CRITICAL_SHARE`), else any."""
  if rng.random() < CRITICAL_SHARE:
    path = incumbent.critical()
    return int(path[rng.integers(path.size)])
  return int(rng.integers(n))


def neighbourhood(kind, rng, incumbent: Incumbent, window: int,
                   n_devices: int):
  """``(lo, hi, free)``: a span of positions and the nodes freed in it."""
  static, order = incumbent.static, incumbent.scored.order
  position, placement = incumbent.position, incumbent.scored.placement
  n = order.size
  reach = max(window, CONTEXT_FACTOR * window) // 2
  seed_node = pivot(rng, incumbent, n)
  p0 = int(position[seed_node])
  if kind == "region":
    chosen, queue, seen = [], [seed_node], {seed_node}
    while queue and len(chosen) < window:
      v = queue.pop(0)
      chosen.append(v)
      near = np.concatenate([
          static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]],
          static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]]])
      for w in rng.permutation(near).tolist():
        if w not in seen and abs(int(position[w]) - p0) <= reach:
          seen.add(w)
          queue.append(w)
    free = np.asarray(chosen, np.int64)
  elif kind == "device_pair" and n_devices > 1:
    first = int(placement[seed_node])
    second = int((first + 1 + rng.integers(n_devices - 1)) % n_devices)
    lo, hi = max(0, p0 - reach), min(n - 1, p0 + reach)
    nodes = order[lo:hi + 1]
    mine = nodes[np.isin(placement[nodes], (first, second))]
    distance = np.abs(position[mine] - p0)
    free = mine[np.argsort(distance, kind="stable")[:window]]
  else:
    lo = int(np.clip(p0 - window // 2, 0, max(n - window, 0)))
    free = np.asarray(order[lo:lo + window], np.int64)
  if free.size < 2:                  # too few: the span around the pivot
    lo = int(np.clip(p0 - window // 2, 0, max(n - window, 0)))
    free = np.asarray(order[lo:lo + window], np.int64)
  return int(position[free].min()), int(position[free].max()), free


class Window(NamedTuple):
  """A window in flight: its span and freed ops, the incumbent it left (as
  the number of candidates accepted by then), and its neighbourhood (an
  index into :data:`NEIGHBOURHOODS`)."""
  lo: int
  hi: int
  free: np.ndarray
  accepted: int
  kind: int


class Search:
  """The windows in flight and the incumbent they improve (host-side).

  :meth:`submit` frees a window of the incumbent and hands it to a worker
  thread (CP-SAT releases the GIL, so one window's model is built while
  another's is solved); :meth:`take` scores a finished one. A window that
  finishes after the incumbent moved on is merged into it: its ops'
  devices, and its span's order when the span still holds the same ops.
  """

  def __init__(self, static: Static, incumbent: Incumbent, score_fn, *,
               seed: int, window: int, max_window: int, solve_time_s: float,
               explore: float = EXPLORE):
    """``score_fn(placement, order) -> Scored``; ``window``: ops freed at
    first, adapted up to ``max_window``; ``explore``: see
    :func:`choose_neighbourhood`."""
    self.static, self.incumbent, self.score_fn = static, incumbent, score_fn
    self.seed, self.solve_time_s, self.explore = seed, solve_time_s, explore
    self.max_window = min(max_window, incumbent.scored.placement.size)
    self.tight = bool(np.any(
        incumbent.live().max(1, initial=0)
        >= MEMORY_TIGHT * static.capacity_kib))
    self.window = min(window, max(incumbent.scored.placement.size, 2))
    self.pending: dict = {}
    self.submitted = self.accepted = 0
    k = len(NEIGHBOURHOODS)
    self.gains = np.zeros(k)            # moving average, per neighbourhood
    self.windows = np.zeros(k, np.int64)
    self.improved_by = np.zeros(k, np.int64)
    self.saved_s = np.zeros(k)          # runtime saved (while it fits)

  @property
  def iterations(self) -> int:
    """Windows solved."""
    return int(self.windows.sum())

  @property
  def improved(self) -> int:
    """Windows whose candidate was strictly better."""
    return int(self.improved_by.sum())

  def restart(self, scored: Scored) -> None:
    """Goes on from ``scored`` (windows in flight are merged into it)."""
    self.incumbent = Incumbent(self.static, scored)
    self.accepted += 1

  def submit(self, pool, rng, n_devices: int, limit_s: float) -> None:
    """Frees the next window (its neighbourhood drawn by
    :func:`choose_neighbourhood`; a span apart from those in flight, when
    one of :data:`OVERLAP_TRIES` pivots gives one) and starts solving it."""
    incumbent, best = self.incumbent, self.incumbent.scored
    kind = choose_neighbourhood(rng, self.gains, self.explore)
    for _ in range(OVERLAP_TRIES):
      lo, hi, free = neighbourhood(NEIGHBOURHOODS[kind], rng, incumbent,
                                    self.window, n_devices)
      if not any(lo <= w.hi and w.lo <= hi for w in self.pending.values()):
        break
    ctx = Context(best.placement, best.order, incumbent.position,
                  incumbent.finish, incumbent.tails_after(hi).copy(), lo, hi,
                  free, incumbent.live() if self.tight else None)
    future = pool.submit(
        solve_window, self.static, ctx, limit_s=limit_s,
        deterministic_s=self.solve_time_s * DETERMINISTIC_PER_S,
        seed=(self.seed + self.submitted) % 2**31, memory=not best.oom)
    self.pending[future] = Window(lo, hi, free, self.accepted, kind)
    self.submitted += 1

  def take(self, future) -> bool:
    """Scores a finished window's candidates and keeps the first not worse
    than the incumbent; adapts the window size and the gain of the window's
    neighbourhood. True when it improved."""
    window, solution = self.pending.pop(future), future.result()
    self.windows[window.kind] += 1
    before = self.incumbent.scored
    improved, gain = self._keep(solution, window)
    self.improved_by[window.kind] += improved
    if improved and not before.oom:
      self.saved_s[window.kind] += (before.runtime_s
                                    - self.incumbent.scored.runtime_s)
    self.gains[window.kind] = ((1.0 - GAIN_RATE) * self.gains[window.kind]
                               + GAIN_RATE * gain)
    return improved

  def _keep(self, solution, window: Window) -> tuple[bool, float]:
    """Adapts the window size and keeps the first candidate not worse than
    the incumbent. ``(better, its relative_gain)``."""
    if solution.status == "OPTIMAL" and (
        solution.deterministic_s
        <= FAST_SHARE * DETERMINISTIC_PER_S * self.solve_time_s):
      self.window = min(self.max_window, max(self.window + 1,
                                             int(self.window * GROW)))
    elif solution.status != "OPTIMAL":
      self.window = max(MIN_WINDOW, int(self.window * SHRINK))
    best = self.incumbent.scored
    for placement, order in self._candidates(solution, window, best):
      candidate = self.score_fn(placement, order)
      if candidate.key <= best.key:
        self.accepted += 1
        self.incumbent.set(candidate, window.hi)
        if candidate.key < best.key:
          return True, relative_gain(best, candidate)
        return False, 0.0
    return False, 0.0

  def _candidates(self, solution, window: Window, best: Scored) -> list:
    """``(placement, order)`` to score: the window's devices in its order,
    then in the incumbent's (the model's links serve transfers in any
    order, the simulator's in the order's, so the model's reordering can
    lose what its devices gain); none that equal the incumbent. When the
    incumbent moved on since the window left, its devices and span order
    are put into the incumbent."""
    if solution.placement is None:
      return []
    placement, order = solution.placement, solution.order
    if window.accepted != self.accepted:
      placement = best.placement.copy()
      placement[window.free] = solution.placement[window.free]
      span = slice(window.lo, window.hi + 1)
      order = None
      if np.array_equal(np.sort(best.order[span]),
                        np.sort(solution.order[span])):
        order = best.order.copy()
        order[span] = solution.order[span]
    out = [(placement, order)] if order is not None else []
    if order is None or not np.array_equal(order, best.order):
      out.append((placement, best.order))
    return [(p, o) for p, o in out if not (np.array_equal(p, best.placement)
                                           and np.array_equal(o, best.order))]
