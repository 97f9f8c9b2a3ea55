"""The list scheduler's inner loop for ``K`` placements, each with a
``W``-slot candidate buffer, for :mod:`gplace.sim.dispatch`.

Arrays carry a leading ``K`` axis with per-lane gathers and scatters, so a
step costs ``O(W + out-degree)``; a placement with more than ``W``
candidates sets ``overflow`` and is scheduled again wider. On CPU, one
native kernel per placement.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gplace.sim.kernel import per_member_kernel


class ListState(NamedTuple):
  """The list scheduler's state, ``K`` placements (``M`` nodes with the
  sentinel, ``W`` buffer slots, ``G`` compute groups, ``D`` devices)."""
  remaining: jax.Array      # [K, M] int32 producers not yet dispatched
                            # (M once the node itself is)
  ready: jax.Array          # [K, M] latest arrival so far of its inputs
  start: jax.Array          # [K, M]
  finish: jax.Array         # [K, M]
  group_free: jax.Array     # [K, G] finish of the group's latest node
  link_free: jax.Array      # [K, D, D] end of the link's latest transfer
  order: jax.Array          # [K, M - 1] int32 dispatched node per step
  position: jax.Array       # [K, M] int32 dispatch step per node
  slot_node: jax.Array      # [K, W] int32 buffered candidate (empty: the
                            # sentinel)
  slot_ready: jax.Array     # [K, W] its inputs' arrival (empty: +inf)
  slot_group: jax.Array     # [K, W] int32 its compute group (-1: none)
  slot_priority: jax.Array  # [K, W] its priority
  free_slots: jax.Array     # [K, W] int32 stack of empty slots ...
  n_free: jax.Array         # [K] int32 ... of this height
  head: jax.Array           # [K] int32 next position in the input stream
  overflow: jax.Array       # [K] bool a candidate found the buffer full


class LaneArrays(NamedTuple):
  """Per-placement inputs of the loop, ``[K, M]`` each (``n_stream``:
  ``[K]``)."""
  placement: jax.Array      # int32 device per node
  priority: jax.Array       # float32, larger first
  group: jax.Array          # int32 compute group per node
  group_key: jax.Array      # int32 compute group, -1 if it runs nowhere
  cost: jax.Array           # float32 seconds on its device
  stream: jax.Array         # int32 nodes of the input stream, in order
  n_stream: jax.Array       # int32 length of the stream


class GraphArrays(NamedTuple):
  """The shared graph arrays the loop reads."""
  succ_ptr: jax.Array       # [M + 1] int32 CSR offsets of consumers
  succ_dst: jax.Array       # [E'] int32 consumers
  executed: jax.Array       # [M] bool runs on a compute group
  send_s: jax.Array         # [M, D, D] float32 transfer seconds
  in_degree: jax.Array      # [M] int32 producers (sentinel: 1)


def _at(x: jax.Array, index: jax.Array) -> jax.Array:
  """``x[k, index[k]]`` for every lane ``k`` (``index``: ``[K]``)."""
  return x[jnp.arange(x.shape[0]), index]


def _set(x: jax.Array, index: jax.Array, value) -> jax.Array:
  """``x`` with ``x[k, index[k]] = value[k]`` in every lane."""
  return x.at[jnp.arange(x.shape[0]), index].set(
      jnp.asarray(value, x.dtype))


def _lex_less(a: tuple, b: tuple) -> jax.Array:
  """``a < b`` lexicographically, elementwise over equal-length tuples."""
  less = a[-1] < b[-1]
  for x, y in zip(a[-2::-1], b[-2::-1]):
    less = (x < y) | ((x == y) & less)
  return less


def init_state(graph: GraphArrays, lanes: LaneArrays, n_groups: int,
               width: int) -> ListState:
  """The state before the first step: every executed node without
  producers buffered (``overflow`` if there are more than ``width``)."""
  k, m = lanes.placement.shape
  d = graph.send_s.shape[1]
  sentinel = m - 1
  roots = graph.executed & (graph.in_degree == 0)
  slot_node = jnp.nonzero(roots, size=width, fill_value=sentinel)[0]
  slot_node = jnp.broadcast_to(slot_node.astype(jnp.int32), (k, width))
  n_roots = jnp.sum(roots, dtype=jnp.int32)
  zeros = jnp.zeros((k, m), jnp.float32)
  lane = lambda x: jnp.broadcast_to(x, (k,) + jnp.shape(x))
  return ListState(
      remaining=lane(graph.in_degree), ready=zeros, start=zeros,
      finish=zeros, group_free=jnp.zeros((k, n_groups), jnp.float32),
      link_free=jnp.zeros((k, d, d), jnp.float32),
      order=jnp.zeros((k, m - 1), jnp.int32),
      position=jnp.full((k, m), m - 1, jnp.int32),
      slot_node=slot_node,
      slot_ready=jnp.where(slot_node != sentinel, 0.0,
                           jnp.inf).astype(jnp.float32),
      slot_group=jnp.take_along_axis(lanes.group_key, slot_node, 1),
      slot_priority=jnp.take_along_axis(lanes.priority, slot_node, 1),
      free_slots=lane(width - 1 - jnp.arange(width, dtype=jnp.int32)),
      n_free=lane(jnp.maximum(width - n_roots, 0)),
      head=jnp.zeros((k,), jnp.int32), overflow=lane(n_roots > width))


#: Widest buffer compiled as one kernel (XLA's one-kernel path fails on
#: the wide reductions of a much wider buffer; the plain loop runs those).
MAX_KERNEL_WIDTH = 1024


def run_steps(state: ListState, lanes: LaneArrays, graph: GraphArrays, *,
              dynamic: bool) -> ListState:
  """All ``M - 1`` dispatch steps (one native kernel per placement on CPU
  within :func:`gplace.sim.kernel.one_kernel_loops`, for buffers up to
  :data:`MAX_KERNEL_WIDTH` slots)."""
  steps = functools.partial(_steps, dynamic=dynamic)
  if state.slot_node.shape[1] > MAX_KERNEL_WIDTH:
    return steps(state, lanes, graph)
  return per_member_kernel(steps, (state, lanes), (graph,))


def _steps(state: ListState, lanes: LaneArrays, graph: GraphArrays, *,
           dynamic: bool) -> ListState:
  """The loop of :func:`run_steps` over a batch."""
  k, m = lanes.placement.shape
  sentinel = m - 1
  d = graph.send_s.shape[1]
  g = state.group_free.shape[1]
  devices = jnp.arange(d, dtype=jnp.int32)
  inf = jnp.float32(jnp.inf)
  done_mark = jnp.int32(m)

  def best_buffered(s: ListState):
    """Per lane, the buffered candidate of least ``(t, group, -priority,
    id)``: its slot and that key."""
    empty = s.slot_node == sentinel
    if dynamic:
      free = jnp.broadcast_to(s.group_free[:, g - 1:], s.slot_group.shape)
      for row in range(g - 1):
        free = jnp.where(s.slot_group == row, s.group_free[:, row:row + 1],
                         free)
      t = jnp.where(s.slot_group >= 0, jnp.maximum(free, s.slot_ready), 0.0)
      grp = s.slot_group
    else:
      t = jnp.zeros(s.slot_ready.shape, jnp.float32)
      grp = jnp.zeros_like(s.slot_group)
    t = jnp.where(empty, inf, t)
    t_min = jnp.min(t, axis=1, keepdims=True)
    chosen = t == t_min
    g_min = jnp.min(jnp.where(chosen, grp, g), axis=1, keepdims=True)
    chosen &= grp == g_min
    p_max = jnp.max(jnp.where(chosen, s.slot_priority, -inf), axis=1,
                    keepdims=True)
    chosen &= s.slot_priority == p_max
    id_min = jnp.min(jnp.where(chosen, s.slot_node, sentinel), axis=1,
                     keepdims=True)
    slot = jnp.argmax(chosen & (s.slot_node == id_min), axis=1)
    return (slot.astype(jnp.int32),
            (t_min[:, 0], g_min[:, 0], -p_max[:, 0], id_min[:, 0]))

  def deliver(j, carry):
    """The ``j``-th consumer edge of each lane's dispatched node: counts the
    node as dispatched there and makes the consumer a candidate when that
    was its last producer."""
    s, lo, count, dev, finish, link_end, dest = carry
    valid = j < count
    w = jnp.where(valid, graph.succ_dst[jnp.minimum(lo + j,
                                                    graph.succ_dst.shape[0]
                                                    - 1)], sentinel)
    there = _at(lanes.placement, w)
    arrive = jnp.where(there == dev, finish, _at(link_end, there))
    rows = jnp.arange(k)
    # Update first, then read back: a read of the old array that XLA fuses
    # elsewhere would force a copy of the whole array each iteration.
    ready = s.ready.at[rows, w].max(jnp.where(valid, arrive, -inf))
    remaining = s.remaining.at[rows, w].add(valid.astype(jnp.int32) * -1)
    becomes = valid & (_at(remaining, w) == 0)
    insert = becomes & (s.n_free > 0)
    slot = _at(s.free_slots, jnp.maximum(s.n_free - 1, 0))
    keep = lambda x, new: _set(x, slot, jnp.where(insert, new, _at(x, slot)))
    s = s._replace(
        ready=ready, remaining=remaining,
        slot_node=keep(s.slot_node, w),
        slot_ready=keep(s.slot_ready, _at(ready, w)),
        slot_group=keep(s.slot_group, _at(lanes.group_key, w)),
        slot_priority=keep(s.slot_priority, _at(lanes.priority, w)),
        n_free=s.n_free - insert.astype(jnp.int32),
        overflow=s.overflow | (becomes & ~insert))
    dest = dest | ((devices[None, :] == there[:, None]) & valid[:, None])
    return s, lo, count, dev, finish, link_end, dest

  def step(i, s: ListState) -> ListState:
    slot, buffered_key = best_buffered(s)
    head_node = _at(lanes.stream, jnp.minimum(s.head, m - 1))
    head_key = (jnp.zeros((k,), jnp.float32),
                jnp.full((k,), -1 if dynamic else 0, jnp.int32),
                -_at(lanes.priority, head_node), head_node)
    take_head = (s.head < lanes.n_stream) & _lex_less(head_key, buffered_key)
    v = jnp.where(take_head, head_node, buffered_key[3])
    from_buffer = ~take_head
    push = jnp.minimum(s.n_free, s.free_slots.shape[1] - 1)
    dev = _at(lanes.placement, v)
    grp = _at(lanes.group, v)
    group_was = _at(s.group_free, grp)
    link_row = _at(s.link_free, dev)                               # [K, D]
    # When its inputs arrived (stream nodes have none); read from the slot,
    # not ``ready``, so no read of ``ready`` outlives the consumer loop.
    ready_v = jnp.where(take_head, 0.0, _at(s.slot_ready, slot))
    runs = graph.executed[v]
    start = jnp.where(runs, jnp.maximum(ready_v, group_was), 0.0)
    finish = jnp.where(runs, start + _at(lanes.cost, v), 0.0)
    link_end = (jnp.maximum(finish[:, None], link_row)
                + graph.send_s[v, dev])                            # [K, D]
    s = s._replace(
        slot_node=_set(s.slot_node, slot, jnp.where(
            from_buffer, sentinel, _at(s.slot_node, slot))),
        slot_ready=_set(s.slot_ready, slot, jnp.where(
            from_buffer, inf, _at(s.slot_ready, slot))),
        free_slots=_set(s.free_slots, push, jnp.where(
            from_buffer, slot, _at(s.free_slots, push))),
        n_free=s.n_free + from_buffer.astype(jnp.int32),
        head=s.head + take_head.astype(jnp.int32),
        remaining=_set(s.remaining, v, done_mark),
        group_free=_set(s.group_free, grp,
                        jnp.where(runs, finish, group_was)),
        start=_set(s.start, v, start), finish=_set(s.finish, v, finish),
        order=s.order.at[:, i].set(v), position=_set(s.position, v, i))
    lo = graph.succ_ptr[v]
    count = graph.succ_ptr[v + 1] - lo
    s, *_, dest = jax.lax.fori_loop(
        0, jnp.max(count), deliver,
        (s, lo, count, dev, finish, link_end, jnp.zeros((k, d), bool)))
    return s._replace(link_free=_set(s.link_free, dev, jnp.where(
        dest & (devices[None, :] != dev[:, None]), link_end, link_row)))

  return jax.lax.fori_loop(0, m - 1, step, state)
