"""The list scheduler of :mod:`gplace.sim.dispatch` as compiled host code.

Where it sits: :func:`gplace.simulate` scores per-placement schedules (the
default, dynamic one included) on the host. The jitted list scheduler of
:mod:`gplace.sim.dispatch` is what runs *inside* a jitted training step, on
any backend; on the host it pays for XLA's one-kernel code, a few hundred
small ops per dispatched node (about 0.6 us a step). This module runs the
same rule, step for step, as native code compiled by numba, with the
candidates in bit sets and binary heaps, so a step costs ``O(G + log N +
out-degree + D)`` of plain machine instructions:

* ``dynamic=True``: per compute group ``g``, an *arrived* set (inputs
  there by the time the group is free, ordered by ``(-priority, id)``) and
  a *pending* heap (keyed ``(ready, -priority, id)``); before a step,
  pending nodes whose inputs arrived by the group's free time move over.
  The next node is the least ``(t, g, -priority, id)``: in each group the
  first of its arrived set at ``t = group free``, else the top of its
  pending heap at ``t = ready``; ties in ``t`` go to the lower group. Nodes
  that run nowhere (graph inputs) form one more set that always goes first,
  as the stream of :mod:`gplace.sim.list_kernel` does.
* ``dynamic=False``: one set ordered by ``(-priority, id)``: the
  priority-respecting topological order.

Priorities become ranks first (:func:`priority_ranks`), so an arrived set
is a 64-ary tree of bit words over ranks: adding a node and taking the
first cost four word operations each, whatever the number of candidates.

Times are float32 and computed with the same operations in the same order
as the jitted scheduler, so schedules (orders, start and finish times) are
bit-identical to it (``tests/sim/test_native.py``); peak memory follows
:func:`gplace.sim.dispatch.peak_by_position` (sums of float32 bytes, equal
up to the order of additions).

Placements are independent: :func:`schedule_batch` runs rows ``lo..hi`` of
the batch with the GIL released, so :func:`gplace.simulate` runs parts of a
batch from threads of their own, one per core.

Deviation from the design's "everything inside the jitted simulator": this
host path serves only :func:`gplace.simulate` (host-side by contract: it
validates its arguments and cannot be traced). Inside ``jax.jit`` the
jitted scheduler still runs, with identical results; set
``GPLACE_NATIVE=0`` to make ``gplace.simulate`` use it too.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

try:                                              # pragma: no cover - import
  import numba
  from llvmlite import ir as _ir
  from numba.extending import intrinsic as _intrinsic
except ImportError:                               # pragma: no cover
  numba = None

from gplace.sim.dispatch import DispatchProblem


def available() -> bool:
  """Whether :func:`gplace.simulate` uses this module: numba imports and
  the environment variable ``GPLACE_NATIVE`` is not ``0``."""
  return numba is not None and os.environ.get("GPLACE_NATIVE", "1") != "0"


class NativeProblem(NamedTuple):
  """The arrays of a :class:`~gplace.sim.dispatch.DispatchProblem` as numpy
  (``M = N + 1`` nodes with the sentinel, ``D`` devices, ``E`` edges)."""
  costs: np.ndarray            # [M, D] float32
  send_s: np.ndarray           # [M, D, D] float32
  executed: np.ndarray         # [M] bool
  succ_ptr: np.ndarray         # [M + 1] int32
  succ_dst: np.ndarray         # [E] int32
  in_degree: np.ndarray        # [M] int32
  edge_src: np.ndarray         # [E] int32
  edge_dst: np.ndarray         # [E] int32
  own_bytes: np.ndarray        # [M] float32
  send_bytes: np.ndarray       # [M] float32
  is_input: np.ndarray         # [M] bool NODE_INPUT (sentinel included)
  is_output: np.ndarray        # [M] bool NODE_OUTPUT
  group_of_device: np.ndarray  # [D] int32
  n_groups: int


def native_problem(problem: DispatchProblem) -> NativeProblem:
  """``problem`` (unpadded: built with the graph's own budgets) as numpy."""
  from gplace.graphs.graph import NODE_INPUT, NODE_OUTPUT
  as_np = lambda x, dtype: np.ascontiguousarray(np.asarray(x, dtype))
  kind = np.asarray(problem.kind)
  return NativeProblem(
      costs=as_np(problem.costs, np.float32),
      send_s=as_np(problem.send_s, np.float32),
      executed=as_np(problem.executed, np.bool_),
      succ_ptr=as_np(problem.succ_ptr, np.int32),
      succ_dst=as_np(problem.succ_dst, np.int32),
      in_degree=as_np(problem.in_degree, np.int32),
      edge_src=as_np(problem.edge_src, np.int32),
      edge_dst=as_np(problem.edge_dst, np.int32),
      own_bytes=as_np(problem.own_bytes, np.float32),
      send_bytes=as_np(problem.send_bytes, np.float32),
      is_input=kind == NODE_INPUT, is_output=kind == NODE_OUTPUT,
      group_of_device=as_np(problem.group_of_device, np.int32),
      n_groups=int(np.asarray(problem.group_ids).shape[0]))


def _jit(function=None, **options):
  """numba's ``njit`` (no GIL, cached on disk) where numba imports."""
  if function is None:
    return lambda f: _jit(f, **options)
  if numba is None:                               # pragma: no cover
    return function
  return numba.njit(nogil=True, cache=True, **options)(function)


_LOW = (1 << 32) - 1


@_jit(inline="always")
def _push(heap, sizes, h, key):
  """Pushes ``key`` (int64) on the min-heap in row ``h`` of ``heap``."""
  i = sizes[h]
  sizes[h] = i + 1
  while i > 0:
    parent = (i - 1) >> 1
    above = heap[h, parent]
    if above <= key:
      break
    heap[h, i] = above
    i = parent
  heap[h, i] = key


@_jit(inline="always")
def _pop(heap, sizes, h):
  """Pops and returns the least key of the min-heap in row ``h``."""
  top = heap[h, 0]
  n = sizes[h] - 1
  sizes[h] = n
  if n > 0:
    key = heap[h, n]
    i = 0
    while True:
      child = 2 * i + 1
      if child >= n:
        break
      if child + 1 < n and heap[h, child + 1] < heap[h, child]:
        child += 1
      if key <= heap[h, child]:
        break
      heap[h, i] = heap[h, child]
      i = child
    heap[h, i] = key
  return top


def _trailing_zeros(typingctx, word):
  """numba intrinsic: the index of the lowest set bit of a uint64 word."""
  del typingctx, word
  signature = numba.types.uint64(numba.types.uint64)

  def codegen(context, builder, sig, args):
    del context, sig
    return builder.cttz(args[0], _ir.Constant(_ir.IntType(1), 0))

  return signature, codegen


if numba is not None:
  _trailing_zeros = _intrinsic(_trailing_zeros)

#: Largest graph the bit sets hold: four levels of 64-bit words.
MAX_NODES = 64 ** 4


@_jit
def set_words(n):
  """Words of the three lower levels of a bit set of ``n`` ranks, and in
  all (with the root word)."""
  w0 = (n + 63) // 64
  w1 = (w0 + 63) // 64
  w2 = (w1 + 63) // 64
  return w0, w1, w2, w0 + w1 + w2 + 1


@_jit(inline="always")
def _add(bits, h, r, o1, o2, o3):
  """Adds rank ``r`` to the set in row ``h`` of ``bits``: a 64-ary tree of
  bit words (level 0 at offset 0, then ``o1``, ``o2``, the root word at
  ``o3``), so that the least rank is four lowest-bit lookups away."""
  one = np.uint64(1)
  bits[h, r >> 6] |= one << np.uint64(r & 63)
  r >>= 6
  bits[h, o1 + (r >> 6)] |= one << np.uint64(r & 63)
  r >>= 6
  bits[h, o2 + (r >> 6)] |= one << np.uint64(r & 63)
  r >>= 6
  bits[h, o3] |= one << np.uint64(r & 63)


@_jit(inline="always")
def _take_least(bits, h, o1, o2, o3):
  """Removes and returns the least rank of the (non-empty) set in row
  ``h``."""
  one = np.uint64(1)
  i3 = np.int64(_trailing_zeros(bits[h, o3]))
  i2 = i3 * 64 + np.int64(_trailing_zeros(bits[h, o2 + i3]))
  i1 = i2 * 64 + np.int64(_trailing_zeros(bits[h, o1 + i2]))
  r = i1 * 64 + np.int64(_trailing_zeros(bits[h, i1]))
  word = bits[h, i1] & ~(one << np.uint64(r & 63))
  bits[h, i1] = word
  if word == 0:
    word = bits[h, o1 + i2] & ~(one << np.uint64(i1 & 63))
    bits[h, o1 + i2] = word
    if word == 0:
      word = bits[h, o2 + i3] & ~(one << np.uint64(i2 & 63))
      bits[h, o2 + i3] = word
      if word == 0:
        bits[h, o3] &= ~(one << np.uint64(i3 & 63))
  return r


@_jit
def _schedule_one(placement, rank, node_of_rank, costs, send_s, executed,
                  succ_ptr, succ_dst, in_degree, group_of_device, n_groups,
                  dynamic, order, position, start, finish, ready, remaining,
                  arrived, n_arrived, pending, n_pending, group_free,
                  link_free, link_end, dest):
  """One placement's list schedule (see the module docstring); fills
  ``order``, ``position``, ``start`` and ``finish`` (``[N]``: the problem's
  sentinel is left out). The other arguments are work arrays.

  ``rank[v]`` is ``v``'s place in ``(-priority, id)`` order and
  ``node_of_rank`` its inverse, so candidates are integers: ranks in the
  arrived sets (``arrived``: one bit set per row, see :func:`_add`), and
  keys ``ready bits << 32 | rank`` in the pending heaps (the bits of a
  non-negative float32 order as the float does). Every set and heap is
  empty again at the end."""
  m = placement.shape[0]
  w0, w1, w2, _ = set_words(m)
  o1 = w0
  o2 = o1 + w1
  o3 = o2 + w2
  d = link_free.shape[0]
  zero = np.float32(0.0)
  ready_bits = ready.view(np.uint32)
  free_bits = group_free.view(np.uint32)
  free = n_groups                     # the heap of nodes that run nowhere
  for g in range(n_groups + 1):
    n_arrived[g] = 0
  for g in range(n_groups):
    n_pending[g] = 0
    group_free[g] = zero
  for a in range(d):
    for b in range(d):
      link_free[a, b] = zero
  for v in range(m):
    ready[v] = zero
    remaining[v] = in_degree[v]
    start[v] = zero
    finish[v] = zero
    position[v] = m
  for v in range(m):
    if in_degree[v] == 0:
      if dynamic and executed[v]:
        h = group_of_device[placement[v]]
      else:
        h = free
      n_arrived[h] += 1
      _add(arrived, h, np.int64(rank[v]), o1, o2, o3)
  for i in range(m):
    if not dynamic or n_arrived[free] > 0:
      n_arrived[free] -= 1
      v = node_of_rank[_take_least(arrived, free, o1, o2, o3)]
    else:
      best = -1
      best_t = np.float32(np.inf)
      for g in range(n_groups):
        gf = np.int64(free_bits[g])
        while n_pending[g] > 0 and (pending[g, 0] >> 32) <= gf:
          key = _pop(pending, n_pending, g)
          n_arrived[g] += 1
          _add(arrived, g, key & _LOW, o1, o2, o3)
        if n_arrived[g] > 0:
          t = group_free[g]
        elif n_pending[g] > 0:
          t = ready[node_of_rank[pending[g, 0] & _LOW]]
        else:
          continue
        if t < best_t:
          best_t = t
          best = g
      if n_arrived[best] > 0:
        n_arrived[best] -= 1
        v = node_of_rank[_take_least(arrived, best, o1, o2, o3)]
      else:
        v = node_of_rank[_pop(pending, n_pending, best) & _LOW]
    dev = placement[v]
    grp = group_of_device[dev]
    if executed[v]:
      s = max(ready[v], group_free[grp])
      f = s + costs[v, dev]
      group_free[grp] = f + zero      # never -0.0: its bits order as floats
    else:
      s = zero
      f = zero
    order[i] = v
    position[v] = i
    start[v] = s
    finish[v] = f
    for b in range(d):
      link_end[b] = max(f, link_free[dev, b]) + send_s[v, dev, b]
      dest[b] = False
    for e in range(succ_ptr[v], succ_ptr[v + 1]):
      w = succ_dst[e]
      there = placement[w]
      arrive = f if there == dev else link_end[there]
      if arrive > ready[w]:
        ready[w] = arrive + zero      # never -0.0
      dest[there] = True
      remaining[w] -= 1
      if remaining[w] == 0:
        r = np.int64(rank[w])
        g = group_of_device[there]
        if not dynamic or not executed[w]:
          n_arrived[free] += 1
          _add(arrived, free, r, o1, o2, o3)
        else:
          if ready[w] <= group_free[g]:
            n_arrived[g] += 1
            _add(arrived, g, r, o1, o2, o3)
          else:
            _push(pending, n_pending, g,
                  (np.int64(ready_bits[w]) << 32) | r)
    for b in range(d):
      if dest[b] and b != dev:
        link_free[dev, b] = link_end[b]


@_jit
def _peak_one(placement, position, edge_src, edge_dst, own_bytes,
              send_bytes, is_input, is_output, last, live, peak):
  """``peak[D]`` live bytes per device by dispatch position, the model of
  :func:`gplace.sim.dispatch.peak_by_position`. ``last`` (``[N, D]``) and
  ``live`` (``[D, N + 1]``) are work arrays."""
  m, d = last.shape
  end = m - 1
  zero = np.float32(0.0)
  for v in range(m):
    for b in range(d):
      last[v, b] = -1
  for e in range(edge_src.shape[0]):
    u = edge_src[e]
    w = edge_dst[e]
    b = placement[w]
    if position[w] > last[u, b]:
      last[u, b] = position[w]
  for b in range(d):
    for j in range(m + 1):
      live[b, j] = zero
  for u in range(m):
    home = placement[u]
    first = 0 if is_input[u] else position[u]
    if is_input[u] or is_output[u]:
      own_last = end
    else:
      own_last = max(position[u], last[u, home])
    live[home, first] += own_bytes[u]
    live[home, own_last + 1] -= own_bytes[u]
    for b in range(d):
      if b != home and last[u, b] >= 0:
        live[b, position[u]] += send_bytes[u]
        live[b, last[u, b] + 1] -= send_bytes[u]
  for b in range(d):
    total = zero
    top = zero
    for j in range(m + 1):
      total += live[b, j]
      if total > top:
        top = total
    peak[b] = top


@_jit
def _schedule_rows(lo, hi, placements, ranks, nodes_of_rank, costs, send_s, executed,
                   succ_ptr, succ_dst, in_degree, group_of_device, n_groups,
                   dynamic, edge_src, edge_dst, own_bytes, send_bytes,
                   is_input, is_output, order, start, finish, peak):
  """Rows ``lo..hi`` of a batch: schedules, then peak memory (``ranks``
  has one row per placement, or one row for all)."""
  m = placements.shape[1]
  d = send_s.shape[1]
  position = np.empty(m, np.int32)
  ready = np.empty(m, np.float32)
  remaining = np.empty(m, np.int32)
  arrived = np.zeros((n_groups + 1, set_words(m)[3]), np.uint64)
  n_arrived = np.zeros(n_groups + 1, np.int64)
  pending = np.empty((n_groups, m), np.int64)
  n_pending = np.zeros(n_groups, np.int64)
  group_free = np.empty(n_groups, np.float32)
  link_free = np.empty((d, d), np.float32)
  link_end = np.empty(d, np.float32)
  dest = np.empty(d, np.bool_)
  last = np.empty((m, d), np.int32)
  live = np.empty((d, m + 1), np.float32)
  shared = ranks.shape[0] == 1
  for k in range(lo, hi):
    r = 0 if shared else k
    _schedule_one(placements[k], ranks[r], nodes_of_rank[r], costs,
                  send_s, executed, succ_ptr, succ_dst, in_degree,
                  group_of_device, n_groups, dynamic, order[k], position, start[k], finish[k], ready,
                  remaining, arrived, n_arrived, pending, n_pending,
                  group_free, link_free, link_end, dest)
    _peak_one(placements[k], position, edge_src, edge_dst, own_bytes,
              send_bytes, is_input, is_output, last, live, peak[k])


def priority_ranks(priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Each node's place in ``(-priority, id)`` order, and its inverse.

  Args:
    priority: ``[N]``, ``[1, N]`` or ``[K, N]`` float32, larger first.

  Returns:
    ``(rank, node_of_rank)``, ``[R, N]`` int32 each (``R``: 1 or ``K``).
  """
  priority = np.atleast_2d(np.asarray(priority, np.float32))
  node_of_rank = np.argsort(-priority, axis=1, kind="stable").astype(
      np.int32)
  rank = np.empty_like(node_of_rank)
  np.put_along_axis(rank, node_of_rank,
                    np.arange(priority.shape[1], dtype=np.int32)[None], 1)
  return rank, node_of_rank


class Schedules(NamedTuple):
  """What :func:`schedule_batch` fills (``K`` placements, ``N`` nodes,
  ``D`` devices)."""
  order: np.ndarray     # [K, N] int32 dispatched node per step
  start: np.ndarray     # [K, N] float32
  finish: np.ndarray    # [K, N] float32
  peak: np.ndarray      # [K, D] float32


def empty_schedules(k: int, problem: NativeProblem) -> Schedules:
  """Output arrays for ``k`` placements of ``problem``."""
  n, d = problem.costs.shape[0] - 1, problem.costs.shape[1]
  return Schedules(order=np.empty((k, n), np.int32),
                   start=np.empty((k, n), np.float32),
                   finish=np.empty((k, n), np.float32),
                   peak=np.empty((k, d), np.float32))


def schedule_batch(problem: NativeProblem, placements: np.ndarray,
                   ranks: tuple[np.ndarray, np.ndarray], dynamic: bool,
                   out: Schedules, rows: slice) -> None:
  """List-schedules rows ``rows`` of ``placements`` into ``out``.

  Args:
    problem: from :func:`native_problem`.
    placements: ``[K, N]`` int32 device per node (C-contiguous).
    ranks: :func:`priority_ranks` of the ``[K, N]`` or ``[1, N]`` (shared)
      priorities.
    dynamic: the dynamic rule; else the priority-respecting order.
    out: from :func:`empty_schedules`, written in place.
    rows: the contiguous rows to schedule (runs without the GIL, so parts
      of a batch can run from threads of their own).
  """
  lo, hi, _ = rows.indices(placements.shape[0])
  p = problem
  rank, node_of_rank = ranks
  _schedule_rows(lo, hi, np.ascontiguousarray(placements, np.int32), rank,
                 node_of_rank, p.costs, p.send_s, p.executed, p.succ_ptr,
                 p.succ_dst, p.in_degree, p.group_of_device, p.n_groups,
                 bool(dynamic), p.edge_src, p.edge_dst, p.own_bytes,
                 p.send_bytes, p.is_input, p.is_output, out.order, out.start,
                 out.finish, out.peak)


def make_native_problem(graph, topology, costs=None) -> NativeProblem:
  """:func:`native_problem` of the graph's unpadded dispatch problem (a
  builder for :func:`gplace.sim.cache.cached_problem`)."""
  from gplace.sim.dispatch import make_dispatch_problem
  return native_problem(make_dispatch_problem(graph, topology, costs))
