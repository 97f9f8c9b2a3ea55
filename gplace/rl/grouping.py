"""Group-level actions: the policy places groups of ops, the simulator ops.

:func:`coarsen_for_policy` coarsens graphs of more than ``min_nodes`` nodes;
:func:`expand_to_nodes` (jittable) and :func:`expand_on_host` give each op
its group's device; :func:`order_priority` turns an order into a priority
(``docs/design.md#group-level-actions``).
"""

from __future__ import annotations

from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import CoarseningError
from gplace.graphs import coarsening as coarsening_lib
from gplace.graphs.coarsening import Coarsening
from gplace.graphs.graph import Graph


def expand_to_nodes(placements: jax.Array,
                    group_of: Optional[jax.Array]) -> jax.Array:
  """Group placements -> node placements, per graph.

  Args:
    placements: ``int [B, ..., G_pad]``, a device per group.
    group_of: ``int32 [B, N_pad]``, the group of every node (padding nodes
      point at any group), or None: ``placements`` are already per node.

  Returns:
    ``int [B, ..., N_pad]`` (``placements`` itself for ``group_of=None``).
  """
  if group_of is None:
    return placements
  return jax.vmap(lambda p, g: p[..., g])(placements, group_of)


def expand_on_host(placements: np.ndarray,
                   group_of: Optional[np.ndarray]) -> np.ndarray:
  """:func:`expand_to_nodes` in numpy, for host-side rewards (no eager JAX
  op per call): ``int [B, ..., G_pad]`` -> ``int [B, ..., N_pad]``.
  Padding nodes that point past the groups take the last group's device,
  as JAX's clamped gather gives them."""
  placements = np.asarray(placements)
  if group_of is None:
    return placements
  return np.stack([np.take(p, g, axis=-1, mode="clip")
                   for p, g in zip(placements, np.asarray(group_of))])


def group_placement(node_placements: jax.Array,
                    group_of: Optional[jax.Array], num_groups: int,
                    num_devices: int) -> jax.Array:
  """Node placements -> group placements: each group takes the device most
  of its nodes are on (ties: the lowest device; a group without nodes:
  device 0). Jittable (``num_groups``, ``num_devices`` static).

  Args:
    node_placements: ``int [B, N_sim]``.
    group_of: ``int32 [B, N_sim]`` (padding nodes point past the last group
      and do not vote), or None (no groups).
    num_groups: ``G_pad``.
    num_devices: ``D``.

  Returns:
    ``int32 [B, G_pad]`` (``node_placements`` for ``group_of=None``).
  """
  if group_of is None:
    return node_placements

  def one(placement, groups):
    votes = jax.ops.segment_sum(jax.nn.one_hot(placement, num_devices),
                                groups, num_segments=num_groups)
    return jnp.argmax(votes, -1).astype(jnp.int32)

  return jax.vmap(one)(node_placements, group_of)


def order_priority(order: jax.Array,
                   group_of: Optional[jax.Array]) -> jax.Array:
  """A policy's scheduling order -> a node priority (earlier, higher).

  The loop scores an ordering policy's placement in ``gplace.simulate``'s
  dynamic schedule with this priority: a free device runs, among its ops
  whose inputs have arrived, the one the policy scheduled first (groups:
  every node of a group in its group's place, by id within it); it never
  waits for an op that has not arrived. (The static schedule with the same
  priority runs exactly the order, waiting when needed; with groups,
  which put long chains in one place of the order, that serialises far
  more than the policy meant.)

  Args:
    order: ``int [B, ..., G_pad]``, node (or group) ids, first scheduled
      first.
    group_of: ``int32 [B, N_sim]`` (groups), or None: ``order`` is per node.

  Returns:
    ``f32 [B, ..., N_sim]``, larger first: ``-(rank)`` with ranks ``0 ..
    N_sim - 1`` (exact in float32).
  """
  position = jnp.argsort(order, axis=-1)  # the inverse permutation
  if group_of is not None:
    position = expand_to_nodes(position, group_of)
  num_nodes = position.shape[-1]
  key = position.astype(jnp.int32) * num_nodes + jnp.arange(num_nodes)
  rank = jnp.argsort(jnp.argsort(key, axis=-1), axis=-1)
  return -rank.astype(jnp.float32)


def level_priority(levels: jax.Array, group_of: Optional[jax.Array],
                   critical_path: jax.Array) -> jax.Array:
  """A policy's priority levels -> a node priority: the level first, then
  the critical path.

  The loop scores a placement whose policy also chose priority levels
  (:class:`gplace.policies.GOPolicy` ``priority_levels``) in
  ``gplace.simulate``'s dynamic schedule with this priority: a free device
  runs, among its ops whose inputs have arrived, one of the highest level,
  and among those the one on the longest path to the end, as the default
  schedule does. Every level 0 gives the default schedule exactly.

  Args:
    levels: ``int [B, ..., G_pad]``, a level per node (or group).
    group_of: ``int32 [B, N_sim]`` (groups), or None: per node.
    critical_path: ``f32 [B, N_sim]``, the default priority (non-negative).

  Returns:
    ``f32 [B, ..., N_sim]``: ``critical_path + level * (2 max + 1)``, so a
    level outranks any difference of critical path.
  """
  node_levels = expand_to_nodes(levels, group_of).astype(jnp.float32)
  path = critical_path.reshape(critical_path.shape[:1] + (1,) * (
      node_levels.ndim - 2) + critical_path.shape[1:])
  scale = 2.0 * jnp.max(path, axis=-1, keepdims=True) + 1.0
  return path + node_levels * scale


# -- host side -----------------------------------------------------------------


def coarsen_for_policy(graph: Graph, *, max_groups: int, rule: str,
                       min_nodes: int) -> Optional[Coarsening]:
  """The groups the policy places for ``graph``, or None when it places ops
  (``max_groups == 0``, or ``graph`` has at most ``min_nodes`` or
  ``max_groups`` nodes). Host-side numpy.

  Args:
    graph: ``N`` nodes.
    max_groups: ``G``, at most this many groups; 0 turns grouping off.
    rule: a :func:`gplace.coarsen` rule.
    min_nodes: graphs this small are placed op by op.

  Raises:
    CoarseningError: an unknown rule.
  """
  if rule not in coarsening_lib.RULES:
    raise CoarseningError(f"Unknown grouping rule {rule!r}; choose one of "
                          f"{coarsening_lib.RULES}.")
  if max_groups == 0 or graph.n_nodes <= max(min_nodes, max_groups):
    return None
  return coarsening_lib.coarsen(graph, rule, max_groups=max_groups)


def group_index(coarsenings: Sequence[Optional[Coarsening]],
                num_nodes: Sequence[int], num_padded_nodes: int,
                num_padded_groups: int) -> np.ndarray:
  """``group_of`` of a batch (host-side numpy).

  A graph without a coarsening is its own grouping (group ``n`` = node
  ``n``). Padding nodes point at ``G_pad``, past the last group: gathers
  clamp it (the simulator ignores their device) and
  :func:`group_placement` drops their votes.

  Args:
    coarsenings: ``B`` coarsenings or None.
    num_nodes: ``B`` real node counts.
    num_padded_nodes: ``N_sim``, the simulator problems' node budget.
    num_padded_groups: ``G_pad``, the policy graphs' node budget.

  Returns:
    ``int32 [B, N_sim]``.
  """
  group_of = np.full((len(num_nodes), num_padded_nodes), num_padded_groups,
                     np.int32)
  for b, (c, n) in enumerate(zip(coarsenings, num_nodes)):
    group_of[b, :n] = np.arange(n) if c is None else np.asarray(c.group_of)
  return group_of


def num_simulated_nodes(batch) -> int:
  """``N_sim``: the node budget of the placements the simulator scores
  (``batch.group_of``'s, else the policy graphs')."""
  if batch.group_of is not None:
    return int(batch.group_of.shape[1])
  return int(batch.graphs.nodes["mask"].shape[1])
