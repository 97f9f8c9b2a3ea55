"""The compiled kernel of :mod:`gplace.sim.planned` (numba): the reference's
float64 arithmetic (:func:`gplace.sim.list_scheduler.heft_schedule`),
operation for operation, so the planned orders are equal to it.
"""

from __future__ import annotations

import numpy as np

from gplace.sim.native_kernels import jit, pop, push


# Each compute group's busy intervals, sorted by start, live in chunks of
# at most CHUNK intervals (an unrolled list): finding where an op goes costs
# two binary searches, booking it shifts at most CHUNK intervals, and a full
# chunk splits in two (shifting the group's list of chunks). Sorted arrays
# instead spent most of the planning time shifting (gnmt4: 22 ms a
# placement, against 3.6 ms with appends only).
CHUNK = 64


@jit(inline="always")
def _bisect_right(values, row, lo, hi, x):
  """First index in ``lo..hi`` of ``values[row]`` whose value is greater
  than ``x``."""
  while lo < hi:
    mid = (lo + hi) >> 1
    if x < values[row, mid]:
      hi = mid
    else:
      lo = mid + 1
  return lo


@jit(inline="always")
def _first_gap(g, ready, duration, max_gaps, chunks, n_chunks, c_start,
               c_end, c_len, c_gap):
  """Where an op of ``duration``, ready at ``ready``, goes in group ``g``:
  ``(j, pos, start)``, to be inserted at position ``pos`` of the group's
  ``j``-th chunk. The first idle gap that holds it among the ``max_gaps``
  gaps that end at the first interval starting after ``ready`` and the ones
  after it; else after the last interval (HEFT's insertion rule)."""
  m_chunks = n_chunks[g]
  if m_chunks == 0:
    return 0, 0, ready
  last = chunks[g, m_chunks - 1]
  if ready >= c_start[last, c_len[last] - 1]:   # no interval starts later
    tail = c_end[last, c_len[last] - 1]
    return m_chunks - 1, c_len[last], ready if ready > tail else tail
  # The chunk holding the first interval that starts after ``ready``.
  lo, hi = 0, m_chunks
  while lo < hi:
    mid = (lo + hi) >> 1
    if ready < c_start[chunks[g, mid], 0]:
      hi = mid
    else:
      lo = mid + 1
  j = lo - 1 if lo > 0 else 0
  c = chunks[g, j]
  pos = _bisect_right(c_start, c, 0, c_len[c], ready)
  if pos == c_len[c] and j + 1 < m_chunks:
    j += 1
    pos = 0
  looked = 0
  while looked < max_gaps:
    c = chunks[g, j]
    if pos == c_len[c]:          # past the last interval
      break
    if pos > 0 and c_gap[c] * (1.0 + 1e-9) < duration:
      # No gap inside this chunk is long enough (an op starts no earlier
      # than its gap): skip them, counting them as looked at.
      looked += c_len[c] - pos
      pos = c_len[c]
      if j + 1 < m_chunks:
        j += 1
        pos = 0
      continue
    if pos > 0:
      gap_start = c_end[c, pos - 1]
    elif j > 0:
      before = chunks[g, j - 1]
      gap_start = c_end[before, c_len[before] - 1]
    else:
      gap_start = 0.0
    s = ready if ready > gap_start else gap_start
    if s + duration <= c_start[c, pos]:
      return j, pos, s
    looked += 1
    pos += 1
    if pos == c_len[c] and j + 1 < m_chunks:
      j += 1
      pos = 0
  j = m_chunks - 1
  c = chunks[g, j]
  tail = c_end[c, c_len[c] - 1]
  return j, c_len[c], ready if ready > tail else tail


@jit(inline="always")
def _widest_gap(c, c_start, c_end, c_len, c_gap):
  """Recomputes ``c_gap[c]``: the longest idle gap between two intervals
  of chunk ``c`` (not the one before its first)."""
  widest = 0.0
  for r in range(1, c_len[c]):
    gap = c_start[c, r] - c_end[c, r - 1]
    if gap > widest:
      widest = gap
  c_gap[c] = widest


@jit(inline="always")
def _insert(g, j, pos, s, f, node, chunks, n_chunks, c_start, c_end,
            c_node, c_len, c_gap, n_pool):
  """Books ``node``'s interval ``[s, f)`` at position ``pos`` of group ``g``'s
  ``j``-th chunk (a new chunk if the group has none; a full chunk splits
  first). Returns the number of chunks taken from the pool."""
  if n_chunks[g] == 0:
    chunks[g, 0] = n_pool
    c_len[n_pool] = 0
    c_gap[n_pool] = 0.0
    n_chunks[g] = 1
    n_pool += 1
  c = chunks[g, j]
  if c_len[c] == CHUNK:            # split: the upper half to a new chunk
    half = CHUNK // 2
    new = n_pool
    n_pool += 1
    for r in range(half, CHUNK):
      c_start[new, r - half] = c_start[c, r]
      c_end[new, r - half] = c_end[c, r]
      c_node[new, r - half] = c_node[c, r]
    c_len[new] = CHUNK - half
    c_len[c] = half
    for r in range(n_chunks[g], j + 1, -1):
      chunks[g, r] = chunks[g, r - 1]
    chunks[g, j + 1] = new
    n_chunks[g] += 1
    _widest_gap(c, c_start, c_end, c_len, c_gap)
    _widest_gap(new, c_start, c_end, c_len, c_gap)
    if pos > half:
      c = new
      pos -= half
  n = c_len[c]
  # The gap the interval goes into, if it is one inside this chunk.
  split = c_start[c, pos] - c_end[c, pos - 1] if 0 < pos < n else -1.0
  for r in range(n, pos, -1):
    c_start[c, r] = c_start[c, r - 1]
    c_end[c, r] = c_end[c, r - 1]
    c_node[c, r] = c_node[c, r - 1]
  c_start[c, pos] = s
  c_end[c, pos] = f
  c_node[c, pos] = node
  c_len[c] = n + 1
  if split >= c_gap[c]:          # the widest gap shrank: look again
    _widest_gap(c, c_start, c_end, c_len, c_gap)
  else:                          # two new gaps at most as wide as it was
    if pos > 0 and s - c_end[c, pos - 1] > c_gap[c]:
      c_gap[c] = s - c_end[c, pos - 1]
    if pos < n and c_start[c, pos + 1] - f > c_gap[c]:
      c_gap[c] = c_start[c, pos + 1] - f
  return n_pool


@jit
def _plan_one(placement, node_order, costs, is_input, pred_ptr, pred_src,
              send_bytes, latency, hold_latency, inv_bandwidth,
              group_of_device, max_gaps, chunks, n_chunks, c_start, c_end,
              c_node, c_len, c_gap, arrival, link_free, start, finish):
  """One placement's planned schedule: fills ``start`` and ``finish``
  (``[N]`` float64; 0 for graph inputs). ``node_order``: the nodes by
  decreasing priority, a topological order. The rest are work arrays: the
  chunked busy intervals (``chunks [G, N]`` chunk ids per group in order,
  ``n_chunks [G]``, ``c_start``/``c_end``/``c_node [P, CHUNK]`` (the
  intervals and their nodes), ``c_len [P]``,
  ``c_gap [P]`` the longest gap inside each chunk),
  ``arrival [N, D]`` (-1: no copy sent yet), ``link_free [D, D]``. A
  copy keeps its link busy for its bytes and ``hold_latency`` (the
  latency, or none with pipelined links) and arrives after the latency."""
  n_chunks[:] = 0
  n_pool = 0
  arrival[:] = -1.0
  link_free[:] = 0.0
  start[:] = 0.0
  finish[:] = 0.0
  for j in range(node_order.shape[0]):
    i = node_order[j]
    if is_input[i]:
      continue
    d = placement[i]
    ready = 0.0
    for k in range(pred_ptr[i], pred_ptr[i + 1]):
      p = pred_src[k]
      dp = placement[p]
      if dp == d:
        t = finish[p]
      else:
        t = arrival[p, d]
        if t < 0.0:              # not booked yet: what booking it now gives
          t = link_free[dp, d]
          if finish[p] > t:
            t = finish[p]
          t += latency[dp, d] + send_bytes[p] * inv_bandwidth[dp, d]
      if t > ready:
        ready = t
    g = group_of_device[d]
    duration = costs[i, d]
    at, pos, s = _first_gap(g, ready, duration, max_gaps, chunks, n_chunks,
                            c_start, c_end, c_len, c_gap)
    f = s + duration
    if f > s:
      n_pool = _insert(g, at, pos, s, f, i, chunks, n_chunks, c_start,
                       c_end, c_node, c_len, c_gap, n_pool)
    start[i] = s
    finish[i] = f
    for k in range(pred_ptr[i], pred_ptr[i + 1]):
      p = pred_src[k]
      dp = placement[p]
      if dp != d and arrival[p, d] < 0.0:
        t = link_free[dp, d]
        if finish[p] > t:
          t = finish[p]
        carry = send_bytes[p] * inv_bandwidth[dp, d]
        link_free[dp, d] = t + (hold_latency[dp, d] + carry)
        arrival[p, d] = t + (latency[dp, d] + carry)


@jit
def plan_rows(lo, hi, placements, node_order, costs, is_input, pred_ptr,
              pred_src, send_bytes, latency, hold_latency, inv_bandwidth,
              group_of_device, n_groups, max_gaps, order, rank):
  """The planned schedules of rows ``lo..hi`` of ``placements`` (``[K,
  N]``): ``order`` (``[K, N]`` int32: graph inputs first, then nodes by
  planned start, ties by id) and its inverse ``rank`` (each node's place
  in it). ``node_order``: ``[1, N]`` (shared) or ``[K, N]``."""
  n = placements.shape[1]
  n_devices = latency.shape[0]
  # A split leaves two chunks at least half full: at most 2 N / CHUNK + G.
  pool = 2 * n // CHUNK + n_groups + 2
  chunks = np.empty((n_groups, pool), np.int64)
  n_chunks = np.zeros(n_groups, np.int64)
  c_start = np.empty((pool, CHUNK))
  c_end = np.empty((pool, CHUNK))
  c_node = np.empty((pool, CHUNK), np.int64)
  head_j = np.empty(n_groups, np.int64)
  head_pos = np.empty(n_groups, np.int64)
  head_s = np.empty(n_groups)
  head_i = np.empty(n_groups, np.int64)
  zeros = np.empty(n, np.int64)
  c_len = np.zeros(pool, np.int64)
  c_gap = np.zeros(pool)
  arrival = np.empty((n, n_devices))
  link_free = np.empty((n_devices, n_devices))
  start = np.empty(n)
  finish = np.empty(n)
  shared = node_order.shape[0] == 1
  for row in range(lo, hi):
    _plan_one(placements[row], node_order[0 if shared else row], costs,
              is_input, pred_ptr, pred_src, send_bytes, latency,
              hold_latency, inv_bandwidth, group_of_device, max_gaps, chunks,
              n_chunks, c_start, c_end, c_node, c_len, c_gap, arrival,
              link_free, start, finish)
    _merge_order(row, n_groups, is_input, start, finish, chunks, n_chunks,
                 c_start, c_node, c_len, head_j, head_pos, head_s, head_i,
                 zeros, order, rank)


@jit(inline="always")
def _merge_order(row, n_groups, is_input, start, finish, chunks, n_chunks,
                 c_start, c_node, c_len, head_j, head_pos, head_s, head_i,
                 zeros, order, rank):
  """Row ``row`` of ``order`` and ``rank``: graph inputs by id, then the
  other nodes by ``(start, id)``. Each group's booked intervals are already
  sorted by start (and no two in a group start together), so this merges
  those lists and the short list of zero-length ops instead of sorting N
  starts."""
  out = 0
  n_zero = 0
  for i in range(start.shape[0]):
    if is_input[i]:
      order[row, out] = i
      rank[row, i] = out
      out += 1
    elif finish[i] == start[i]:      # zero length: never booked in a group
      zeros[n_zero] = i
      n_zero += 1
  if n_zero > 1:                     # by start, ties by id (stable)
    by_start = np.argsort(start[zeros[:n_zero]], kind="mergesort")
    zeros[:n_zero] = zeros[:n_zero][by_start]
  z = 0
  for g in range(n_groups):       # each group's next interval: its start
    head_j[g] = 0                 # and node, cached (inf: none left)
    head_pos[g] = 0
    _head(g, chunks, n_chunks, c_start, c_node, head_j, head_pos, head_s,
          head_i)
  while True:
    best_g = -1
    best_s = 0.0
    best_i = 0
    if z < n_zero:
      best_i = zeros[z]
      best_s = start[best_i]
      best_g = n_groups
    for g in range(n_groups):
      s = head_s[g]
      i = head_i[g]
      if i >= 0 and (best_g < 0 or s < best_s or (s == best_s and
                                                  i < best_i)):
        best_g, best_s, best_i = g, s, i
    if best_g < 0:
      break
    order[row, out] = best_i
    rank[row, best_i] = out
    out += 1
    if best_g == n_groups:
      z += 1
    else:
      head_pos[best_g] += 1
      if head_pos[best_g] == c_len[chunks[best_g, head_j[best_g]]]:
        head_j[best_g] += 1
        head_pos[best_g] = 0
      _head(best_g, chunks, n_chunks, c_start, c_node, head_j, head_pos,
            head_s, head_i)


@jit(inline="always")
def _head(g, chunks, n_chunks, c_start, c_node, head_j, head_pos, head_s,
          head_i):
  """Caches group ``g``'s next interval in the merge: its start and node
  (node -1 when the group has none left)."""
  if head_j[g] >= n_chunks[g]:
    head_i[g] = -1
  else:
    c = chunks[g, head_j[g]]
    head_s[g] = c_start[c, head_pos[g]]
    head_i[g] = c_node[c, head_pos[g]]


@jit
def topological_rows(rows, rank, node_of_rank, succ_ptr, succ_dst,
                     in_degree, order):
  """The priority-respecting topological order of each row in ``rows``:
  repeatedly the ready node of least ``rank`` (its place in ``(-priority,
  id)`` order), into ``order`` (``[K, N]`` int64)."""
  n = rank.shape[1]
  heap = np.empty((1, n), np.int64)
  sizes = np.zeros(1, np.int64)
  waiting = np.empty(n, np.int64)
  for row in rows:
    waiting[:] = in_degree
    sizes[0] = 0
    for v in range(n):
      if waiting[v] == 0:
        push(heap, sizes, 0, rank[row, v])
    for position in range(n):
      v = node_of_rank[row, pop(heap, sizes, 0)]
      order[row, position] = v
      for k in range(succ_ptr[v], succ_ptr[v + 1]):
        w = succ_dst[k]
        waiting[w] -= 1
        if waiting[w] == 0:
          push(heap, sizes, 0, rank[row, w])
