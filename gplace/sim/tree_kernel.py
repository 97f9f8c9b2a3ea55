"""The list scheduler for wide frontiers: candidates in segment trees over
priority ranks, ``O(log N)`` a step.

:func:`tree_steps` runs where a batch overflows the 64-slot buffer (one
native CPU kernel per placement), with the buffer loop's results; its loop
is arranged so XLA never copies a whole array per step
(``docs/design.md#making-it-fast``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gplace.sim.list_kernel import (GraphArrays, LaneArrays, at, consumer,
                                   deliver, dispatch, release_links, set_at)


class TreeState(NamedTuple):
  """The scheduler's state, ``K`` placements (``M`` nodes with the sentinel,
  ``T`` trees of ``2 R`` entries, ``G`` groups, ``D`` devices)."""
  remaining: jax.Array      # [K, M] int32 producers not yet dispatched
  ready: jax.Array          # [K, M] latest arrival so far of its inputs
  start: jax.Array          # [K, M]
  finish: jax.Array         # [K, M]
  group_free: jax.Array     # [K, G] finish of the group's latest node
  link_free: jax.Array      # [K, D, D] end of the link's latest transfer
  order: jax.Array          # [K, M - 1] int32 dispatched node per step
  position: jax.Array       # [K, M] int32 dispatch step per node
  tree_time: jax.Array      # [K, T * 2 R] float32 least time below
  tree_rank: jax.Array      # [K, T * 2 R] int32 its rank (absent: R)
  root_time: jax.Array      # [K, T] each tree's root (a copy, so that
  root_rank: jax.Array      # [K, T] choosing reads no tree array)
  head: jax.Array           # [K] int32 next position in the input stream


class RankArrays(NamedTuple):
  """Each lane's ranks: ``rank [K, M]`` int32 and ``node [K, R]`` int32, the
  node of each rank (the sentinel past ``M``)."""
  rank: jax.Array
  node: jax.Array


def tree_size(n_nodes: int) -> int:
  """``R``: leaves per tree, the power of two at or above ``n_nodes``."""
  return 1 << max(int(n_nodes) - 1, 0).bit_length()


def ranks(priority: jax.Array, size: int) -> RankArrays:
  """Ranks of ``[K, M]`` priorities (larger first, ties: lower id), trees of
  ``size`` leaves."""
  k, m = priority.shape
  by_rank = jnp.argsort(-(priority + 0.0), axis=1, stable=True)  # -0.0 = 0.0
  rows = jnp.arange(k)[:, None]
  rank = jnp.zeros((k, m), jnp.int32).at[rows, by_rank].set(
      jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), (k, m)))
  node = jnp.concatenate([by_rank.astype(jnp.int32),
                          jnp.full((k, size - m), m - 1, jnp.int32)], 1)
  return RankArrays(rank=rank, node=node)


def _winner(time_a, rank_a, time_b, rank_b, by_time):
  """The lesser of two ``(time, rank)`` pairs: by ``(time, rank)`` where
  ``by_time``, else by rank alone (the time then rides along)."""
  b = rank_b < rank_a
  b = jnp.where(by_time, (time_b < time_a) | ((time_b == time_a) & b), b)
  return jnp.where(b, time_b, time_a), jnp.where(b, rank_b, rank_a)


def _build(present: jax.Array, time: jax.Array, size: int,
           by_time: jax.Array):
  """Trees over leaves ``present [K, T, R]`` (with ``time``; ``by_time
  [T]``, see :func:`_winner`): ``[K, T * 2 R]`` time and rank arrays, entry
  ``1`` of each tree its root, ``[2^l, 2^(l+1))`` level ``l``, the leaves
  last; entry ``0`` is scratch."""
  k, t, _ = present.shape
  leaf_rank = jnp.broadcast_to(jnp.arange(size, dtype=jnp.int32), (k, t, size))
  level = (jnp.where(present, time, jnp.inf),
           jnp.where(present, leaf_rank, size))
  levels = [level]
  while level[0].shape[2] > 1:
    pairs = [x.reshape(k, t, -1, 2) for x in level]
    level = _winner(pairs[0][..., 0], pairs[1][..., 0], pairs[0][..., 1],
                    pairs[1][..., 1], by_time[None, :, None])
    levels.append(level)
  scratch = (jnp.full((k, t, 1), jnp.inf), jnp.full((k, t, 1), size,
                                                    jnp.int32))
  levels.append(scratch)
  flat = lambda i: jnp.concatenate([lv[i] for lv in reversed(levels)],
                                   2).reshape(k, -1)
  return flat(0), flat(1)


def _update(state: TreeState, tree: jax.Array, rank: jax.Array,
            present, time: jax.Array, active: jax.Array, size: int,
            by_time: jax.Array) -> TreeState:
  """Sets leaf ``rank`` of tree ``tree`` to ``time`` (or absent), in the
  lanes where ``active`` (all ``[K]``), and recomputes its ancestors.

  It reads first (the siblings along the leaf's path, which the update does
  not change, in one gather), then writes the path in a loop of its own (an
  inactive lane writes the scratch entry): a read of an array after a write
  to it, or one that XLA fuses into a later write, would make XLA copy the
  whole array every step."""
  levels = size.bit_length() - 1
  base = (tree * (2 * size))[:, None]
  path = (size + rank)[:, None] >> jnp.arange(levels + 1)[None, :]  # leaf..root
  rows = jnp.arange(path.shape[0])[:, None]
  siblings = base + (path[:, :-1] ^ 1)                             # [K, L]
  sibling_time = state.tree_time[rows, siblings]
  sibling_rank = state.tree_rank[rows, siblings]
  value = (jnp.where(present, time, jnp.inf).astype(jnp.float32),
           jnp.where(present, rank, size).astype(jnp.int32))
  times, ranks_ = [value[0]], [value[1]]
  for level in range(levels):
    value = _winner(*value, sibling_time[:, level], sibling_rank[:, level],
                    by_time)
    times.append(value[0])
    ranks_.append(value[1])
  times, ranks_ = jnp.stack(times, 1), jnp.stack(ranks_, 1)      # [K, L + 1]
  where = jnp.where(active[:, None], base + path, base)

  def write(level, trees):
    tree_time, tree_rank = trees
    entry = where[:, level]
    return (set_at(tree_time, entry, times[:, level]),
            set_at(tree_rank, entry, ranks_[:, level]))

  tree_time, tree_rank = jax.lax.fori_loop(
      0, levels + 1, write, (state.tree_time, state.tree_rank))
  keep = lambda roots, new: set_at(roots, tree, jnp.where(
      active, new, at(roots, tree)))
  return state._replace(tree_time=tree_time, tree_rank=tree_rank,
                        root_time=keep(state.root_time, times[:, levels]),
                        root_rank=keep(state.root_rank, ranks_[:, levels]))


def _descend(state: TreeState, tree: jax.Array, limit: jax.Array,
             size: int):
  """In each lane's tree ``tree``, the candidate of least rank among those
  whose time is at most ``limit`` (all ``[K]``; one must exist): its rank
  and time. One loop of its own over the levels: its reads then end before
  the tree is next written (see :func:`_update`)."""
  base = tree * (2 * size)

  def down(_, carry):
    node, _ = carry
    left = 2 * node
    left_time = at(state.tree_time, base + left)
    right_time = at(state.tree_time, base + left + 1)
    go_left = left_time <= limit
    return (jnp.where(go_left, left, left + 1),
            jnp.where(go_left, left_time, right_time))

  leaf, time = jax.lax.fori_loop(
      0, size.bit_length() - 1, down,
      (jnp.ones(tree.shape, jnp.int32), jnp.zeros(tree.shape, jnp.float32)))
  return leaf - size, time


def tree_steps(lanes: LaneArrays, order_ranks: RankArrays, graph: GraphArrays,
               n_groups: int, *, dynamic: bool) -> TreeState:
  """All ``M - 1`` dispatch steps of ``K`` placements (see the module
  docstring; same results as :func:`gplace.sim.list_kernel.run_steps` with a
  buffer that never overflows)."""
  k, m = lanes.placement.shape
  d = graph.send_s.shape[1]
  g = n_groups
  size = order_ranks.node.shape[1]
  n_trees = g + 1 if dynamic else 1
  nowhere_tree = g                      # dynamic: candidates that run nowhere
  inf = jnp.float32(jnp.inf)
  zero = jnp.zeros((k,), jnp.float32)
  # With the dynamic rule a group's tree orders by (arrival, rank); the
  # single tree of the other rule by rank alone, its time the candidate's
  # arrival, carried along (a start time read from ``ready`` before the
  # consumer loop updates it would make XLA copy it).
  by_time = jnp.full((n_trees,), dynamic)

  # The executed nodes without producers start as candidates, arrived at 0.
  roots = graph.executed & (graph.in_degree == 0)
  leaf_node = order_ranks.node                                       # [K, R]
  root_leaf = roots[leaf_node] & (jnp.arange(size)[None, :] < m)
  if dynamic:
    leaf_group = jnp.take_along_axis(lanes.group, leaf_node, 1)
    present = root_leaf[:, None, :] & (
        jnp.arange(n_trees)[None, :, None] == leaf_group[:, None, :])
  else:
    present = root_leaf[:, None, :]
  tree_time, tree_rank = _build(present, jnp.zeros(present.shape,
                                                   jnp.float32), size,
                                by_time)
  zeros = jnp.zeros((k, m), jnp.float32)
  state = TreeState(
      remaining=jnp.broadcast_to(graph.in_degree, (k, m)), ready=zeros,
      start=zeros, finish=zeros,
      group_free=jnp.zeros((k, g), jnp.float32),
      link_free=jnp.zeros((k, d, d), jnp.float32),
      order=jnp.zeros((k, m - 1), jnp.int32),
      position=jnp.full((k, m), m - 1, jnp.int32),
      tree_time=tree_time, tree_rank=tree_rank,
      root_time=tree_time.reshape(k, n_trees, 2 * size)[:, :, 1],
      root_rank=tree_rank.reshape(k, n_trees, 2 * size)[:, :, 1],
      head=jnp.zeros((k,), jnp.int32))

  def root(s, tree):
    """Each lane's least ``(time, rank)`` of ``tree`` (``[K]`` or int)."""
    where = jnp.broadcast_to(tree, (k,))
    return at(s.root_time, where), at(s.root_rank, where)

  def update(s, tree, rank, present, time, active):
    return _update(s, tree, rank, present, time, active, size, dynamic)

  def next_candidate(s):
    """The least candidate: its tree, rank and arrival, and whether there
    is one.

    With the dynamic rule, a group whose least arrival is by its free time
    has arrived candidates, which could all start then: its best is the
    least rank among them (:func:`_descend`). Otherwise its best is its
    least ``(arrival, rank)``, starting at that arrival."""
    if not dynamic:
      ready, rank = root(s, 0)
      return jnp.zeros((k,), jnp.int32), rank, ready, rank < size
    best_ready, best_rank = root(s, nowhere_tree)
    best_tree = jnp.full((k,), nowhere_tree, jnp.int32)
    best_time = jnp.where(best_rank < size, -inf, inf)   # runs nowhere: first
    for group in range(g):
      ready, rank = root(s, group)
      free = s.group_free[:, group]
      time = jnp.maximum(ready, free)
      better = time < best_time        # ties: the lower group, found first
      best_time = jnp.where(better, time, best_time)
      best_rank = jnp.where(better, rank, best_rank)
      best_ready = jnp.where(better, ready, best_ready)
      best_tree = jnp.where(better, group, best_tree)
    found = best_rank < size
    free = at(s.group_free, jnp.minimum(best_tree, g - 1))
    arrived = found & (best_tree < g) & (best_ready <= free)
    arrived_rank, arrived_ready = _descend(
        s, jnp.where(arrived, best_tree, 0), jnp.where(arrived, free, inf),
        size)
    return (best_tree, jnp.where(arrived, arrived_rank, best_rank),
            jnp.where(arrived, arrived_ready, best_ready), found)

  def admit(j, carry):
    """The ``j``-th consumer of each lane's dispatched node becomes a
    candidate if that was its last producer. (A loop of its own, after
    ``deliver``'s: in the same loop, XLA would copy ``ready`` at every
    edge.)"""
    s, node = carry
    valid, w = consumer(graph, node, j)
    becomes = valid & (at(s.remaining, w) == 0)
    ready_w = at(s.ready, w)
    tree = jnp.zeros((k,), jnp.int32)
    if dynamic:
      group = at(lanes.group_key, w)
      runs = group >= 0
      tree = jnp.where(runs, group, nowhere_tree)
      ready_w = jnp.where(runs, ready_w, 0.0)    # no group: by rank alone
    return update(s, tree, at(order_ranks.rank, w), True, ready_w,
                  becomes), node

  def step(i, s: TreeState) -> TreeState:
    tree, rank, ready, found = next_candidate(s)
    head_node = at(lanes.stream, jnp.minimum(s.head, m - 1))
    streaming = s.head < lanes.n_stream
    # Stream nodes start at 0 in no group: before any group's candidate, and
    # by rank against candidates that run nowhere too.
    ahead = found & (rank < at(order_ranks.rank, head_node))
    if dynamic:
      ahead &= tree == nowhere_tree
    take_head = streaming & ~ahead
    v = jnp.where(take_head, head_node,
                  at(order_ranks.node, jnp.minimum(rank, size - 1)))
    s = update(s, tree, rank, False, zero, ~take_head & found)
    s, node = dispatch(s, v, i, ready, lanes, graph)
    s, dest = deliver(s._replace(head=s.head + take_head.astype(jnp.int32)),
                      node, lanes, graph)
    s = jax.lax.fori_loop(0, jnp.max(node.n_edges), admit, (s, node))[0]
    return release_links(s, node, dest)

  return jax.lax.fori_loop(0, m - 1, step, state)
