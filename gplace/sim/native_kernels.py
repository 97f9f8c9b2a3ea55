"""The compiled kernels of :mod:`gplace.sim.native` (numba, compiled on
first call; imported where numba is installed): the rule of
:mod:`gplace.sim.dispatch` on the data structures :mod:`gplace.sim.native`
describes.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic


def jit(function=None, **options):
  """numba's ``njit``: no GIL, compiled once per machine (cached on disk)."""
  if function is None:
    return lambda f: jit(f, **options)
  return numba.njit(nogil=True, cache=True, **options)(function)


_LOW = (1 << 32) - 1


@jit(inline="always")
def push(heap, sizes, h, key):
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


@jit(inline="always")
def pop(heap, sizes, h):
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


@intrinsic
def _trailing_zeros(typingctx, word):
  """numba intrinsic: the index of the lowest set bit of a uint64 word."""
  del typingctx, word
  signature = numba.types.uint64(numba.types.uint64)

  def codegen(context, builder, sig, args):
    del context, sig
    return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

  return signature, codegen


@jit
def set_words(n):
  """Words of the three lower levels of a bit set of ``n`` ranks, and in
  all (with the root word)."""
  w0 = (n + 63) // 64
  w1 = (w0 + 63) // 64
  w2 = (w1 + 63) // 64
  return w0, w1, w2, w0 + w1 + w2 + 1


@jit(inline="always")
def _add(bits, h, r, o1, o2, o3):
  """Adds rank ``r`` to the set in row ``h`` of ``bits``: a 64-ary tree of
  bit words (level 0 at offset 0, then ``o1``, ``o2``, and, for more than
  ``64**3`` ranks, a root word at ``o3``; ``o3 < 0`` without it), so that
  the least rank is three or four lowest-bit lookups away."""
  one = np.uint64(1)
  bits[h, r >> 6] |= one << np.uint64(r & 63)
  r >>= 6
  bits[h, o1 + (r >> 6)] |= one << np.uint64(r & 63)
  r >>= 6
  bits[h, o2 + (r >> 6)] |= one << np.uint64(r & 63)
  if o3 >= 0:
    r >>= 6
    bits[h, o3] |= one << np.uint64(r & 63)


@jit(inline="always")
def _take_least(bits, h, o1, o2, o3):
  """Removes and returns the least rank of the (non-empty) set in row
  ``h`` (levels as in :func:`_add`)."""
  one = np.uint64(1)
  if o3 >= 0:
    i3 = np.int64(_trailing_zeros(bits[h, o3]))
  else:
    i3 = np.int64(0)
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
      if word == 0 and o3 >= 0:
        bits[h, o3] &= ~(one << np.uint64(i3 & 63))
  return r


@jit
def _schedule_one(placement, rank, node_of_rank, costs, send_s, hold_s,
                  executed,
                  succ_ptr, succ_dst, in_degree, group_of_device, n_groups,
                  dynamic, order, position, start, finish, ready, remaining,
                  arrived, n_arrived, pending, n_pending, group_free,
                  link_free, cand):
  """One placement's list schedule (see the module docstring); fills
  ``order``, ``position``, ``start`` and ``finish`` (``[N]``: the problem's
  sentinel is left out). The other arguments are work arrays.

  ``rank[v]`` is ``v``'s place in ``(-priority, id)`` order and
  ``node_of_rank`` its inverse, so candidates are integers: ranks in the
  arrived sets (``arrived``: one bit set per row, see :func:`_add`), and
  keys ``ready bits << 32 | rank`` in the pending heaps (the bits of a
  non-negative float32 order as the float does). ``cand[g]`` is when
  group ``g``'s next node would start (its free time if a node has arrived
  there, else its pending top's ready time, else infinity), kept current
  as the group's sets and free time change, so that picking the next group
  reads ``G`` floats. Every set and heap is empty again at the end."""
  m = placement.shape[0]
  w0, w1, w2, _ = set_words(m)
  o1 = w0
  o2 = o1 + w1
  o3 = o2 + w2 if w2 > 1 else -1
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
  for g in range(n_groups):
    cand[g] = zero if n_arrived[g] > 0 else np.float32(np.inf)
  for i in range(m):
    if not dynamic or n_arrived[free] > 0:
      n_arrived[free] -= 1
      v = node_of_rank[_take_least(arrived, free, o1, o2, o3)]
    else:
      best = 0
      best_t = cand[0]
      for g in range(1, n_groups):
        if cand[g] < best_t:
          best_t = cand[g]
          best = g
      if n_arrived[best] > 0:
        n_arrived[best] -= 1
        v = node_of_rank[_take_least(arrived, best, o1, o2, o3)]
      else:
        v = node_of_rank[pop(pending, n_pending, best) & _LOW]
    dev = placement[v]
    grp = group_of_device[dev]
    if executed[v]:
      s = max(ready[v], group_free[grp])
      f = s + costs[v, dev]
      group_free[grp] = f + zero      # never -0.0: its bits order as floats
    else:
      s = zero
      f = zero
    if dynamic and executed[v]:       # grp is free later: nodes pending
      gf = np.int64(free_bits[grp])   # there may have arrived by then
      while n_pending[grp] > 0 and (pending[grp, 0] >> 32) <= gf:
        key = pop(pending, n_pending, grp)
        n_arrived[grp] += 1
        _add(arrived, grp, key & _LOW, o1, o2, o3)
      if n_arrived[grp] > 0:
        cand[grp] = group_free[grp]
      elif n_pending[grp] > 0:
        cand[grp] = ready[node_of_rank[pending[grp, 0] & _LOW]]
      else:
        cand[grp] = np.float32(np.inf)
    order[i] = v
    position[v] = i
    start[v] = s
    finish[v] = f
    sent = np.uint64(0)                # devices v's value goes to
    for e in range(succ_ptr[v], succ_ptr[v + 1]):
      w = succ_dst[e]
      there = placement[w]
      if there == dev:
        arrive = f
      else:
        arrive = max(f, link_free[dev, there]) + send_s[v, dev, there]
        sent |= np.uint64(1) << np.uint64(there)
      if arrive > ready[w]:
        ready[w] = arrive + zero      # never -0.0
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
            cand[g] = group_free[g]
          else:
            push(pending, n_pending, g,
                  (np.int64(ready_bits[w]) << 32) | r)
            if n_arrived[g] == 0:
              cand[g] = ready[node_of_rank[pending[g, 0] & _LOW]]
    while sent:                        # one transfer per device, after
      b = np.int64(_trailing_zeros(sent))   # all consumers have read it
      sent &= sent - np.uint64(1)
      link_free[dev, b] = max(f, link_free[dev, b]) + hold_s[v, dev, b]


@jit
def _peak_one(placement, position, edge_src, edge_dst, own_bytes,
              send_bytes, is_input, is_output, last, live, total, peak):
  """``peak[D]`` live bytes per device by dispatch position, the model of
  :func:`gplace.sim.dispatch.peak_by_position`. ``last`` (``[N, D]``),
  ``live`` (``[N + 1, D]``: the devices' running sums advance together)
  and ``total`` (``[D]``) are work arrays."""
  m, d = last.shape
  end = m - 1
  zero = np.float32(0.0)
  last[:, :] = -1
  for e in range(edge_src.shape[0]):
    u = edge_src[e]
    w = edge_dst[e]
    b = placement[w]
    p = position[w]
    if p > last[u, b]:
      last[u, b] = p
  live[:, :] = zero
  for u in range(m):
    home = placement[u]
    pu = position[u]
    first = 0 if is_input[u] else pu
    if is_input[u] or is_output[u]:
      own_last = end
    else:
      own_last = max(pu, last[u, home])
    live[first, home] += own_bytes[u]
    live[own_last + 1, home] -= own_bytes[u]
    sb = send_bytes[u]
    for b in range(d):
      lb = last[u, b]
      val = sb if (b != home and lb >= 0) else zero
      live[pu, b] += val
      live[lb + 1, b] -= val
  for b in range(d):
    peak[b] = zero
    total[b] = zero
  for j in range(m + 1):
    for b in range(d):
      total[b] += live[j, b]
      if total[b] > peak[b]:
        peak[b] = total[b]


@jit
def schedule_rows(lo, hi, placements, ranks, nodes_of_rank, costs, send_s,
                  hold_s, executed, succ_ptr, succ_dst, in_degree, group_of_device,
                  n_groups, dynamic, edge_src, edge_dst, own_bytes,
                  send_bytes, is_input, is_output, order, start, finish,
                  peak):
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
  cand = np.empty(n_groups, np.float32)
  last = np.empty((m, d), np.int32)
  live = np.empty((m + 1, d), np.float32)
  total = np.empty(d, np.float32)
  shared = ranks.shape[0] == 1
  for k in range(lo, hi):
    r = 0 if shared else k
    _schedule_one(placements[k], ranks[r], nodes_of_rank[r], costs,
                  send_s, hold_s, executed, succ_ptr, succ_dst, in_degree,
                  group_of_device, n_groups, dynamic, order[k], position,
                  start[k], finish[k], ready, remaining, arrived, n_arrived,
                  pending, n_pending, group_free, link_free, cand)
    _peak_one(placements[k], position, edge_src, edge_dst, own_bytes,
              send_bytes, is_input, is_output, last, live, total, peak[k])
