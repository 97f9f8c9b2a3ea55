"""The operators searches build candidates with: :func:`redraw` and
:func:`crossover`, vectorized over a batch, every draw from the caller's
``np.random.Generator``.
"""

from __future__ import annotations

import math

import numpy as np

from gplace.errors import SearchError
from gplace.search.common import Start, Units

CROSSOVERS = ("uniform", "segment")


def choose_distinct(rng: np.random.Generator, n_units: int, k: int,
                    m: int) -> np.ndarray:
  """``[k, m]`` unit ids, distinct within each row, uniform over subsets.

  Draws with replacement first (cheap for ``m << n_units``) and redraws the
  rows that repeat a unit without replacement.
  """
  picks = rng.integers(0, n_units, (k, m))
  if m > 1:
    ordered = np.sort(picks, axis=1)
    repeats = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    for row in repeats:
      picks[row] = rng.choice(n_units, m, replace=False)
  return picks


def redraw(rng: np.random.Generator, base: np.ndarray, units: Units,
           n_devices: int, move_size: int, *,
           rows: np.ndarray | None = None) -> np.ndarray:
  """Moves between 1 and ``move_size`` units of each base placement.

  Each candidate draws its move size uniformly from ``1..move_size``, that
  many distinct units uniformly, and for each unit a new device uniformly
  among the ``D - 1`` devices other than the unit's current one (the device
  of its representative node; with ``units.allowed``, among the other
  devices the unit allows, and it stays if there is none); every node of
  the unit goes there. With one
  device there is nothing to move and the bases are returned unchanged.

  Args:
    rng: the search's generator.
    base: ``[k, N]`` int32 placements to move from.
    units: what a move redraws.
    n_devices: ``D``.
    move_size: at most this many units per candidate, ``1..G``.
    rows: optional ``[k]`` bool; only these rows are moved (the rest are
      copied).

  Returns:
    ``[k, N]`` int32 candidates.
  """
  base = np.asarray(base, np.int32)
  k = base.shape[0]
  out = base.copy()
  if n_devices < 2 or k == 0:
    return out
  moved = np.flatnonzero(np.ones(k, bool) if rows is None else rows)
  if moved.size == 0:
    return out
  sizes = rng.integers(1, move_size + 1, moved.size)
  picks = choose_distinct(rng, units.n_units, moved.size, move_size)
  shift = rng.integers(1, n_devices, (moved.size, move_size))
  used = np.arange(move_size)[None, :] < sizes[:, None]      # [k', m]
  row_of = np.broadcast_to(np.arange(moved.size)[:, None], used.shape)[used]
  unit = picks[used]
  current = base[moved[row_of], units.representative[unit]]
  new_device = (current + shift[used]) % n_devices
  if units.allowed is not None:  # uniformly among the unit's other devices
    choice = np.where(units.allowed[unit], rng.random((unit.size, n_devices)),
                      -1.0)
    choice[np.arange(unit.size), current] = -1.0
    new_device = np.where(choice.max(axis=1) >= 0, choice.argmax(axis=1),
                          current)
  if units.n_units == base.shape[1] and np.array_equal(
      units.group_of, np.arange(units.n_units)):
    out[moved[row_of], unit] = new_device
    return out
  unit_device = np.full((moved.size, units.n_units), -1, np.int32)
  unit_device[row_of, unit] = new_device
  node_device = unit_device[:, units.group_of]                 # [k', N]
  out[moved] = np.where(node_device >= 0, node_device, base[moved])
  return out


def swap(rng: np.random.Generator, base: np.ndarray, units: Units, *,
         rows: np.ndarray | None = None) -> np.ndarray:
  """Exchanges the devices of two units on different devices in each base
  placement: under tight memory caps, where moving either alone overfills
  the other's device, the exchange keeps both fitting. A row whose draw
  finds the two units on one device, or a unit not allowed on the other's
  device (``units.allowed``), stays as it is.

  Args:
    rng: the search's generator.
    base: ``[k, N]`` int32 placements.
    units: what a move exchanges.
    rows: optional ``[k]`` bool; only these rows are swapped.

  Returns:
    ``[k, N]`` int32 candidates.
  """
  out = np.asarray(base, np.int32).copy()
  moved = np.flatnonzero(np.ones(out.shape[0], bool) if rows is None
                         else rows)
  if moved.size == 0 or units.n_units < 2:
    return out
  pairs = choose_distinct(rng, units.n_units, moved.size, 2)
  first, second = pairs[:, 0], pairs[:, 1]
  rep = units.representative
  device_a = out[moved, rep[first]]
  device_b = out[moved, rep[second]]
  ok = device_a != device_b
  if units.allowed is not None:
    ok &= units.allowed[first, device_b] & units.allowed[second, device_a]
  rows_ok, a, b = moved[ok], first[ok], second[ok]
  if units.n_units == out.shape[1] and np.array_equal(
      units.group_of, np.arange(units.n_units)):  # units are nodes
    out[rows_ok, a], out[rows_ok, b] = device_b[ok], device_a[ok]
    return out
  for row, unit_a, unit_b, da, db in zip(rows_ok, a, b, device_a[ok],
                                         device_b[ok]):
    out[row, units.group_of == unit_a] = db
    out[row, units.group_of == unit_b] = da
  return out


#: The kinds of :func:`block` move.
BLOCK_KINDS = ("swap", "move", "split")
#: A block spans at least this many units of the order.
MIN_BLOCK = 4


def unit_order(order: np.ndarray, units: Units) -> np.ndarray:
  """``[G]`` unit ids in the order their first nodes run in ``order``
  (``[N]`` node ids, first to last)."""
  order = np.asarray(order, np.int64)
  first = np.full(units.n_units, order.size, np.int64)
  np.minimum.at(first, units.group_of[order], np.arange(order.size))
  return np.argsort(first, kind="stable")


def block(rng: np.random.Generator, base: np.ndarray, ranked: np.ndarray,
          units: Units, n_devices: int, *,
          rows: np.ndarray | None = None) -> np.ndarray:
  """Moves a block of the schedule between two devices.

  Each candidate draws a span of ``ranked`` (units in the order they run,
  :func:`unit_order`) of log-uniform length between :data:`MIN_BLOCK` and
  ``G``, two devices ``a != c`` and one of :data:`BLOCK_KINDS`: ``swap``
  exchanges the span's units on ``a`` and on ``c``; ``move`` sends the
  span's units on ``a`` to ``c``; ``split`` sends the first or the last
  part of them (cut at a uniform point) to ``c``. Where a single move
  shifts one op, a block moves a stage of a pipeline: what a schedule
  whose devices are out of balance needs (on the rnnlm2 paper train step,
  a best-of-64 search over blocks from HEFT reached -14.6% in 30 s). A
  unit not allowed on its new device (``units.allowed``) stays.

  Args:
    rng: the search's generator.
    base: ``[k, N]`` int32 placements, each run in the order ``ranked``
      gives.
    ranked: ``[G]`` unit ids, first to last.
    units: what a move sends as a whole.
    n_devices: ``D``.
    rows: optional ``[k]`` bool; only these rows are moved.

  Returns:
    ``[k, N]`` int32 candidates.
  """
  out = np.asarray(base, np.int32).copy()
  g = int(ranked.size)
  moved = np.flatnonzero(np.ones(out.shape[0], bool) if rows is None
                         else rows)
  if n_devices < 2 or moved.size == 0 or g == 0:
    return out
  low = math.log(min(MIN_BLOCK, g))
  lengths = np.exp(rng.uniform(low, math.log(g + 1), moved.size)).astype(int)
  lengths = np.clip(lengths, 1, g)
  starts = rng.integers(0, g - lengths + 1)
  first = rng.integers(0, n_devices, moved.size)
  second = (first + rng.integers(1, n_devices, moved.size)) % n_devices
  kinds = rng.integers(0, len(BLOCK_KINDS), moved.size)
  cuts, heads = rng.random(moved.size), rng.random(moved.size) < 0.5
  nodes = units.n_units == out.shape[1] and np.array_equal(
      units.group_of, np.arange(units.n_units))
  for i, row in enumerate(moved):
    span = ranked[starts[i]:starts[i] + lengths[i]]
    device = out[row, units.representative[span]]
    a, c = int(first[i]), int(second[i])
    on_a = span[device == a]
    if BLOCK_KINDS[kinds[i]] == "split":
      cut = int(cuts[i] * (on_a.size + 1))
      on_a = on_a[:cut] if heads[i] else on_a[cut:]
    sends = [(on_a, c)]
    if BLOCK_KINDS[kinds[i]] == "swap":
      sends.append((span[device == c], a))
    for unit, target in sends:
      if units.allowed is not None:
        unit = unit[units.allowed[unit, target]]
      if nodes:
        out[row, unit] = target
      else:
        out[row, np.isin(units.group_of, unit)] = target
  return out


#: Share of a batch of neighbours that swap two units (the rest redraw).
SWAP_SHARE = 0.25
#: Share of a batch of neighbours that move a block of the schedule
#: (:func:`block`), when the search knows the order its units run in.
#: Paper train steps on 1 CPU + 4 GPUs, 30 s of annealing over ops from the
#: best baseline: bert -6.8% at this share against -4.2% without, resnet50
#: -7.2 / -2.6%, inception_v3 -10.4 / -4.0%
#: (experiments/results/block_moves/paper_2026-12-03).
BLOCK_SHARE = 0.5


def neighbours(setup: Start, placement: np.ndarray, batch_size: int, *,
               ranked: np.ndarray | None = None,
               block_share: float = BLOCK_SHARE
               ) -> tuple[np.ndarray, np.ndarray]:
  """``(candidates [K, N], runtime_s [K])``: neighbours of ``placement``,
  ``K`` of them (``batch_size``, or what the budget leaves):
  :func:`redraw` moves, of which a :data:`SWAP_SHARE` are replaced by a
  :func:`swap` of two units where one exchanges something and, with
  ``ranked`` (``[G]`` units in the order they run, :func:`unit_order`), a
  ``block_share`` by a :func:`block` move; simulated by the search's
  evaluator."""
  k = min(batch_size, setup.evaluator.remaining)
  base = np.broadcast_to(placement, (k, placement.size))
  candidates = redraw(setup.rng, base, setup.units, setup.n_devices,
                      setup.move_size)
  if np.unique(placement).size > 1:  # else there is nothing to exchange
    swaps = setup.rng.random(k) < SWAP_SHARE
    exchanged = swap(setup.rng, base, setup.units, rows=swaps)
    changed = (exchanged != base).any(axis=1)
    candidates = np.where(changed[:, None], exchanged, candidates)
  if ranked is not None and block_share > 0:
    rows = setup.rng.random(k) < block_share
    candidates[rows] = block(setup.rng, base[rows], ranked, setup.units,
                             setup.n_devices)
  return candidates, setup.evaluator(candidates)


def crossover(rng: np.random.Generator, first: np.ndarray, second: np.ndarray,
              units: Units, kind: str = "uniform") -> np.ndarray:
  """Children of pairs of parents, mixed unit by unit.

  ``"uniform"``: each unit (all its nodes) comes from either parent with
  probability 1/2. ``"segment"``: a contiguous run of unit ids (node ids are
  a topological order, and so are coarse group ids), of uniform random start
  and end, comes from ``second``, the rest from ``first``; it keeps
  neighbouring ops together, as a pipeline split does.

  Args:
    rng: the search's generator.
    first, second: ``[k, N]`` int32 parent placements.
    units: what is inherited as a whole.
    kind: one of :data:`CROSSOVERS`.

  Returns:
    ``[k, N]`` int32 children.
  """
  first = np.asarray(first, np.int32)
  second = np.asarray(second, np.int32)
  k, g = first.shape[0], units.n_units
  if kind == "uniform":
    take_second = rng.random((k, g)) < 0.5
  elif kind == "segment":
    ends = np.sort(rng.integers(0, g + 1, (k, 2)), axis=1)
    ids = np.arange(g)[None, :]
    take_second = (ids >= ends[:, :1]) & (ids < ends[:, 1:])
  else:  # validated by the caller; belt and braces.
    raise SearchError(f"Unknown crossover {kind!r}; use one of "
                      f"{CROSSOVERS}.")
  return np.where(take_second[:, units.group_of], second, first)
