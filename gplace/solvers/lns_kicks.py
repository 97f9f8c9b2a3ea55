"""Memory kicks of :func:`gplace.solvers.lns`: a way out of a basin that
its windows cannot leave under tight device memory.

A window frees ops within a span of the incumbent's order, but the weights
(graph inputs) sit before their first consumers and the consumers spread
across all of it, so no window moves a weight together with its users.
When the accelerators are full, the incumbent's critical path can then be
stuck on a slow device for want of one weight's room on a fast one: the
op that would run faster next to its critical predecessor does not fit
there. :func:`memory_kick` finds such ops (moved alone, the step would be
faster but runs out of memory), brings the op's weights and all their
consumers to that device, and makes room by moving one or two other weight
groups (a weight and its consumers there) off it, whichever combination is
fastest in the incumbent's order. When no critical op is blocked, the
kick moves the weight group of a critical op that reads a weight to
the device where that op alone is fastest (:func:`weight_moves`). The
result is usually slower than the incumbent: LNS goes on from it and
keeps whichever ends faster.

Measured on 1,103-op gnmt2 small inference, 1 CPU + 4 accelerators
(memory at 52-62% of the weights), from a 6.565 ms answer that LNS did not
improve past 6.555 in 40 s: the kick moved the decoder's first-layer input
matmuls and their 128 KiB kernel onto the fastest accelerator (moving the
second layer's input kernel off it), 6.604 ms, and LNS reached 6.086 ms
from there in the same 40 s.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Optional

import numpy as np

from gplace.sim.simulator import simulate
from gplace.solvers.lns_windows import Incumbent

#: Kick only when some device's peak is at least this share of its memory.
PRESSURE = 0.8
#: Device changes on the critical path probed for a blocked op, at most.
MAX_PROBES = 64
#: Blocked ops (the fastest first) whose weights a kick tries to move.
MAX_BLOCKED = 2
#: Weight groups moved off the target device to make room: at most this
#: many at once.
MAX_EJECTED = 2
#: A kick follows ``kick_after`` windows that made the search's incumbent
#: less than this much faster (relative).
MIN_GAIN = 0.005
#: Candidate placements scored per kick, at most (drawn when more).
MAX_CANDIDATES = 512

#: ``simulate_fn(placements [K, N]) -> (runtime_s [K], oom [K])`` in the
#: incumbent's order.
SimulateFn = Callable[[np.ndarray], tuple]


def _colocation_members(static) -> dict:
  labels = static.colocation
  members = {}
  for v in np.flatnonzero(labels >= 0).tolist():
    members.setdefault(int(labels[v]), []).append(v)
  return {k: np.asarray(v, np.int64) for k, v in members.items()}


def _move(static, classes, placement, nodes, device) -> bool:
  """Moves ``nodes`` (and their co-location classes) to ``device`` in
  place; False (``placement`` then partly moved) when one may not go."""
  nodes = np.asarray(nodes, np.int64)
  labels = static.colocation[nodes]
  extra = [classes[int(k)] for k in np.unique(labels[labels >= 0])]
  if extra:
    nodes = np.unique(np.concatenate([nodes] + extra))
  if not np.all(static.allowed[nodes, device]):
    return False
  placement[nodes] = device
  return True


def _consumers(static, v: int) -> np.ndarray:
  succ = static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]]
  return succ[static.executed[succ]]


def _weights(static, v: int) -> list:
  """The inputs ``v`` reads that hold memory."""
  preds = static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]]
  return [int(u) for u in preds
          if static.is_input[u] and static.out_kib[u] > 0]


def _probe(placement: np.ndarray, moves: list, simulate_fn: SimulateFn,
           rng) -> tuple:
  """``(moves, runtime [M], oom [M])``: each ``(op, device)`` of ``moves``
  (at most :data:`MAX_PROBES`, drawn when more) made alone."""
  if len(moves) > MAX_PROBES:
    moves = [moves[i] for i in sorted(rng.choice(len(moves), MAX_PROBES,
                                                 replace=False))]
  if not moves:
    return [], np.zeros(0), np.zeros(0, bool)
  rows = np.repeat(placement[None], len(moves), 0)
  for i, (v, t) in enumerate(moves):
    rows[i, v] = t
  runtime, oom = simulate_fn(rows)
  return moves, np.asarray(runtime, np.float64), np.asarray(oom, bool)


def blocked_moves(static, scored, path: np.ndarray, simulate_fn: SimulateFn,
                  rng) -> list:
  """``[(op, device)]``: ops of the critical ``path`` (``[P]`` node ids,
  first to last) that would make the step faster next to their critical
  predecessor but run out of memory there, the fastest first."""
  placement = scored.placement
  moves = []
  for u, v in zip(path[:-1].tolist(), path[1:].tolist()):
    t = int(placement[u])
    if placement[v] != t and static.executed[v] and static.allowed[v, t]:
      moves.append((v, t))
  moves, runtime, oom = _probe(placement, moves, simulate_fn, rng)
  found = [(float(runtime[i]), moves[i]) for i in range(len(moves))
           if oom[i] and runtime[i] < scored.runtime_s]
  return [move for _, move in sorted(found)]


def weight_moves(static, scored, path: np.ndarray, simulate_fn: SimulateFn,
                 rng) -> list:
  """``[(op, device)]``: ops of the critical ``path`` that read a weight,
  each to each other device it may take, the fastest first (moved alone,
  in the incumbent's order, fitting in memory or not): where a kick goes
  when :func:`blocked_moves` finds nothing.

  Measured from ``optimize``'s state before LNS (resnet50 tiny, 1 CPU +
  4 acc., 0.899 ms; 30 s of LNS, seeds 0-3): without them kicks fired
  0-1 times and LNS ended at 0.8695 / 0.8243 / 0.8384 / 0.8695 ms (mean
  0.850), stuck for up to 28 s at 0.8789; with them, 6-12 kicks and
  0.8385 / 0.8351 / 0.8250 / 0.8346 (mean 0.833).
  """
  n_devices = static.allowed.shape[1]
  moves = [(v, t) for v in path.tolist()
           if static.executed[v] and _weights(static, v)
           for t in range(n_devices)
           if t != scored.placement[v] and static.allowed[v, t]]
  moves, runtime, _ = _probe(scored.placement, moves, simulate_fn, rng)
  return [moves[i] for i in np.argsort(runtime, kind="stable")]


def kick_candidates(static, placement: np.ndarray, op: int, device: int,
                    rng) -> list:
  """``[N]`` placements that bring ``op``'s weights and all their
  consumers to ``device``, with none, one or up to :data:`MAX_EJECTED`
  other weight groups moved off it to each other device."""
  classes = _colocation_members(static)
  base = placement.copy()
  own = _weights(static, op)
  for w in own:
    if not _move(static, classes, base, [w], device):
      return []
    users = _consumers(static, w)
    _move(static, classes, base, users[static.allowed[users, device]],
          device)
  if not _move(static, classes, base, [op], device):
    return []
  others = []
  for w in np.flatnonzero(static.is_input & (static.out_kib > 0)).tolist():
    users = _consumers(static, w)
    here = users[base[users] == device]
    if w not in own and (base[w] == device or here.size):
      others.append((w, here))
  n_devices = static.allowed.shape[1]
  targets = [d for d in range(n_devices) if d != device]
  combos = [()] + _ejections(len(others), targets, rng)
  out = []
  for combo in combos:
    row = base.copy()
    ok = True
    for g, d in (zip(*combo) if combo else ()):
      w, here = others[g]
      nodes = here if base[w] != device else np.append(here, w)
      ok = ok and _move(static, classes, row, nodes, d)
    if ok:
      out.append(row)
  return out


def _ejections(n_groups: int, targets: list, rng) -> list:
  """``[(groups, devices)]``: each way to move one or up to
  :data:`MAX_EJECTED` of ``n_groups`` groups to ``targets``, or
  ``MAX_CANDIDATES - 1`` of them drawn evenly (without listing them all:
  a large graph has thousands of weight groups)."""
  sizes = [math.comb(n_groups, k) * len(targets) ** k
           for k in range(1, MAX_EJECTED + 1)]
  if sum(sizes) < MAX_CANDIDATES:
    return [(groups, devices) for k in range(1, MAX_EJECTED + 1)
            for groups in itertools.combinations(range(n_groups), k)
            for devices in itertools.product(targets, repeat=k)]
  drawn = set()
  while len(drawn) < MAX_CANDIDATES - 1:
    k = 1 + int(rng.choice(len(sizes), p=np.divide(sizes, sum(sizes))))
    groups = tuple(sorted(rng.choice(n_groups, k, replace=False).tolist()))
    devices = tuple(int(d) for d in rng.choice(targets, k))
    drawn.add((groups, devices))
  return sorted(drawn)


def memory_kick(static, scored, path: np.ndarray, peak_share: float,
                simulate_fn: SimulateFn, rng, rank: int = 0
                ) -> Optional[np.ndarray]:
  """A ``[N]`` placement away from ``scored``'s basin, or None.

  Args:
    static: the problem (:class:`gplace.solvers.lns_model.Static`).
    scored: the incumbent (:class:`gplace.solvers.lns_windows.Scored`).
    path: ``[P]`` its critical path, first op to last.
    peak_share: its largest peak over a device's memory.
    simulate_fn: scores ``[K, N]`` placements in ``scored.order``.
    rng: a ``np.random.Generator``.
    rank: return the ``rank``-th fastest (0: the fastest).

  Returns:
    The ``rank``-th fastest candidate of :func:`kick_candidates` that
    fits in memory, for the fastest :data:`MAX_BLOCKED` moves of
    :func:`blocked_moves` (else of :func:`weight_moves`; often slower
    than ``scored``); None when memory is not tight (:data:`PRESSURE`)
    or nothing fits.
  """
  if scored.oom or peak_share < PRESSURE:
    return None
  moves = (blocked_moves(static, scored, path, simulate_fn, rng)
           or weight_moves(static, scored, path, simulate_fn, rng))
  rows = []
  for op, device in moves[:MAX_BLOCKED]:
    rows.extend(kick_candidates(static, scored.placement, op, device, rng))
  if not rows:
    return None
  rows = np.stack(rows)
  runtime, oom = simulate_fn(rows)
  runtime = np.where(np.asarray(oom, bool), np.inf,
                     np.asarray(runtime, np.float64))
  fits = np.flatnonzero(np.isfinite(runtime))
  if rank >= fits.size:
    return None
  return rows[fits[np.argsort(runtime[fits], kind="stable")[rank]]]


class Kicker:
  """When and from where :func:`gplace.solvers.lns` kicks (host-side).

  It keeps the best solution seen; when ``kick_after`` windows made the
  search's incumbent less than :data:`MIN_GAIN` faster (it crawls in a
  basin, or a kick led nowhere), it restarts the search
  (``Search.restart``) from a memory kick of the best: the fastest
  candidate the first time, the next fastest on each later kick from the
  same best.
  """

  def __init__(self, graph, topology, costs, kick_after: int, seed: int):
    self.graph, self.topology, self.costs = graph, topology, costs
    self.kick_after = kick_after
    self.rng = np.random.default_rng(seed)
    self.best = None
    self.stale = 0
    self.anchor = math.inf    # the incumbent's runtime kick_after ago
    self.rank = 0
    self.kicks = 0

  def observe(self, scored):
    """After each window: ``scored`` is the search's incumbent. Returns
    the best seen."""
    if self.best is None or scored.key < self.best.key:
      if self.best is not None:
        self.rank = 0
      self.best = scored
    self.stale += 1
    return self.best

  def _simulate(self, order):
    def simulate_fn(rows):
      result = simulate(self.graph, rows, self.topology, self.costs,
                        order=order)
      return (np.asarray(result.runtime_s, np.float64),
              np.asarray(result.oom, bool))
    return simulate_fn

  def maybe_kick(self, search) -> bool:
    """Restarts ``search`` from a kick once it has stalled; True if so."""
    if self.best is None or self.stale < self.kick_after:
      return False
    now, best = search.incumbent.scored, self.best
    self.stale, anchor, self.anchor = 0, self.anchor, now.runtime_s
    if best.oom or now.oom or now.runtime_s < (1.0 - MIN_GAIN) * anchor:
      return False
    result = simulate(self.graph, best.placement, self.topology, self.costs,
                      order=best.order)
    share = float(np.max(np.asarray(result.peak_bytes, np.float64)
                         / np.asarray(self.topology.memory_bytes,
                                      np.float64)))
    if share < PRESSURE:
      return False
    path = Incumbent(search.static, best).critical()[::-1]
    placement = memory_kick(search.static, best, path, share,
                            self._simulate(best.order), self.rng,
                            rank=self.rank)
    if placement is None:
      return False
    self.rank += 1
    self.kicks += 1
    kicked = search.score_fn(placement, best.order)
    search.restart(kicked)
    self.anchor = kicked.runtime_s
    return True

  def final(self, search):
    """The best of the search's incumbent and the best seen."""
    now = search.incumbent.scored
    return now if self.best is None or now.key <= self.best.key \
        else self.best
