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


def at(x: jax.Array, index: jax.Array) -> jax.Array:
  """``x[k, index[k]]`` for every lane ``k`` (``index``: ``[K]``)."""
  return x[jnp.arange(x.shape[0]), index]


def set_at(x: jax.Array, index: jax.Array, value) -> jax.Array:
  """``x`` with ``x[k, index[k]] = value[k]`` in every lane."""
  return x.at[jnp.arange(x.shape[0]), index].set(
      jnp.asarray(value, x.dtype))


class Dispatched(NamedTuple):
  """The node each lane dispatched at a step (``[K]`` each): what its
  consumers and its device's links are told."""
  device: jax.Array         # int32 where it runs
  finish: jax.Array         # its finish (0 if it runs nowhere)
  link_row: jax.Array       # [K, D] its device's links' free times before it
  link_end: jax.Array       # [K, D] end of its transfer to each device
  first_edge: jax.Array     # int32 its first consumer in ``succ_dst``
  n_edges: jax.Array        # int32 its consumers


def dispatch(state, v: jax.Array, i, ready: jax.Array, lanes: LaneArrays,
             graph: GraphArrays):
  """Dispatches node ``v [K]`` as step ``i`` of every lane, its inputs
  arrived at ``ready [K]`` (a node that runs nowhere starts at 0).

  Returns:
    ``(state, Dispatched)``: ``state`` (a :class:`ListState`, or a tree
    kernel's state with the same timing fields) with ``v``'s start, finish,
    step and position, ``v`` done, and its group busy until it finishes.
  """
  dev = at(lanes.placement, v)
  grp = at(lanes.group, v)
  group_was = at(state.group_free, grp)
  link_row = at(state.link_free, dev)                              # [K, D]
  runs = graph.executed[v]
  start = jnp.where(runs, jnp.maximum(ready, group_was), 0.0)
  finish = jnp.where(runs, start + at(lanes.cost, v), 0.0)
  link_end = (jnp.maximum(finish[:, None], link_row)
              + graph.send_s[v, dev])                              # [K, D]
  done_mark = state.remaining.shape[1]
  state = state._replace(
      remaining=set_at(state.remaining, v, done_mark),
      group_free=set_at(state.group_free, grp,
                        jnp.where(runs, finish, group_was)),
      start=set_at(state.start, v, start),
      finish=set_at(state.finish, v, finish),
      order=state.order.at[:, i].set(v),
      position=set_at(state.position, v, i))
  lo = graph.succ_ptr[v]
  return state, Dispatched(device=dev, finish=finish, link_row=link_row,
                           link_end=link_end, first_edge=lo,
                           n_edges=graph.succ_ptr[v + 1] - lo)


def consumer(graph: GraphArrays, node: Dispatched, j):
  """``(valid, w)``: each lane's ``j``-th consumer ``w [K]`` of the
  dispatched node, where ``valid`` (the sentinel past its last)."""
  valid = j < node.n_edges
  w = jnp.where(valid, graph.succ_dst[jnp.minimum(
      node.first_edge + j, graph.succ_dst.shape[0] - 1)],
                graph.in_degree.shape[0] - 1)
  return valid, w


def deliver(state, node: Dispatched, lanes: LaneArrays, graph: GraphArrays,
            admit=None):
  """Sends the dispatched node's output to each of its consumers: their
  inputs' latest arrival (``ready``) and one producer fewer to wait for
  (``remaining``); ``admit(state, w, valid)``, if given, then runs on each
  consumer edge in the same loop.

  Returns:
    ``(state, dest [K, D] bool)``: the devices its output went to.
  """
  k, d = node.link_row.shape
  rows = jnp.arange(k)
  devices = jnp.arange(d, dtype=jnp.int32)

  def edge(j, carry):
    s, dest = carry
    valid, w = consumer(graph, node, j)
    there = at(lanes.placement, w)
    arrive = jnp.where(there == node.device, node.finish,
                       at(node.link_end, there))
    # Update first, then read back (in ``admit``): a read of the old array
    # that XLA fuses elsewhere would force a copy of the whole array each
    # iteration.
    s = s._replace(
        ready=s.ready.at[rows, w].max(jnp.where(valid, arrive, -jnp.inf)),
        remaining=s.remaining.at[rows, w].add(valid.astype(jnp.int32) * -1))
    if admit is not None:
      s = admit(s, w, valid)
    dest = dest | ((devices[None, :] == there[:, None]) & valid[:, None])
    return s, dest

  return jax.lax.fori_loop(0, jnp.max(node.n_edges), edge,
                           (state, jnp.zeros((k, d), bool)))


def release_links(state, node: Dispatched, dest: jax.Array):
  """``state`` with the links from the dispatched node's device to
  ``dest [K, D]`` (other devices) busy until its transfers end."""
  devices = jnp.arange(dest.shape[1], dtype=jnp.int32)
  sent = dest & (devices[None, :] != node.device[:, None])
  return state._replace(link_free=set_at(
      state.link_free, node.device,
      jnp.where(sent, node.link_end, node.link_row)))


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
  g = state.group_free.shape[1]
  inf = jnp.float32(jnp.inf)

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

  def buffer_candidate(s: ListState, w, valid) -> ListState:
    """Buffers consumer ``w`` if the dispatched node was its last producer
    (``overflow`` if the buffer is full)."""
    becomes = valid & (at(s.remaining, w) == 0)
    insert = becomes & (s.n_free > 0)
    slot = at(s.free_slots, jnp.maximum(s.n_free - 1, 0))
    keep = lambda x, new: set_at(x, slot, jnp.where(insert, new, at(x, slot)))
    return s._replace(
        slot_node=keep(s.slot_node, w),
        slot_ready=keep(s.slot_ready, at(s.ready, w)),
        slot_group=keep(s.slot_group, at(lanes.group_key, w)),
        slot_priority=keep(s.slot_priority, at(lanes.priority, w)),
        n_free=s.n_free - insert.astype(jnp.int32),
        overflow=s.overflow | (becomes & ~insert))

  def step(i, s: ListState) -> ListState:
    slot, buffered_key = best_buffered(s)
    head_node = at(lanes.stream, jnp.minimum(s.head, m - 1))
    head_key = (jnp.zeros((k,), jnp.float32),
                jnp.full((k,), -1 if dynamic else 0, jnp.int32),
                -at(lanes.priority, head_node), head_node)
    take_head = (s.head < lanes.n_stream) & _lex_less(head_key, buffered_key)
    v = jnp.where(take_head, head_node, buffered_key[3])
    from_buffer = ~take_head
    push = jnp.minimum(s.n_free, s.free_slots.shape[1] - 1)
    # When its inputs arrived (stream nodes have none); read from the slot,
    # not ``ready``, so no read of ``ready`` outlives the consumer loop.
    ready_v = jnp.where(take_head, 0.0, at(s.slot_ready, slot))
    s, node = dispatch(s, v, i, ready_v, lanes, graph)
    s = s._replace(
        slot_node=set_at(s.slot_node, slot, jnp.where(
            from_buffer, sentinel, at(s.slot_node, slot))),
        slot_ready=set_at(s.slot_ready, slot, jnp.where(
            from_buffer, inf, at(s.slot_ready, slot))),
        free_slots=set_at(s.free_slots, push, jnp.where(
            from_buffer, slot, at(s.free_slots, push))),
        n_free=s.n_free + from_buffer.astype(jnp.int32),
        head=s.head + take_head.astype(jnp.int32))
    s, dest = deliver(s, node, lanes, graph, admit=buffer_candidate)
    return release_links(s, node, dest)

  return jax.lax.fori_loop(0, m - 1, step, state)
