"""What the DOPPLER-style policy sees of a graph (jittable): normalised
features, cost and transfer proxies (no device speeds), bottom and top
levels on them, and the producer matrix an episode updates.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jraph

from gplace.graphs import features as features_lib

_FLOPS = features_lib.NODE_FEATURE_NAMES.index("log1p_flops")
_BYTES_ACCESSED = features_lib.NODE_FEATURE_NAMES.index("log1p_bytes_accessed")


class DopplerContext(NamedTuple):
  """What a DOPPLER step needs of the graphs, computed once per call.

  Attributes:
    features: ``f32 [N, F + 2]``: node features over their per-graph max,
      then bottom and top level over the critical path.
    node_mask: ``bool [N]``.
    cost: ``f32 [N]``, an op's cost proxy over the critical path.
    transfer: ``f32 [N, N]``, ``[u, v]``: bytes ``u -> v`` over the critical
      path (0 without an edge).
    producer: ``bool [N, N]``, ``[u, v]``: ``u`` feeds ``v``.
    waiting: ``int32 [N]``, producers of each node.
  """

  features: jax.Array
  node_mask: jax.Array
  cost: jax.Array
  transfer: jax.Array
  producer: jax.Array
  waiting: jax.Array


def _over_graph_max(x: jax.Array, graph_index: jax.Array,
                    num_graphs: int) -> jax.Array:
  scale = jax.ops.segment_max(jnp.abs(x), graph_index, num_graphs)
  scale = jnp.where(scale > 0, scale, 1.0)
  return x / scale[graph_index]


def critical_path_levels(cost: jax.Array, transfer: jax.Array,
                         senders: jax.Array, receivers: jax.Array,
                         edge_valid: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``(bottom, top)`` levels ``f32 [N]`` of a DAG with node ``cost [N]`` and
  per-edge ``transfer [E]`` (``edge_valid`` False: ignored).

  ``bottom[v] = cost[v] + max_{v -> w} (transfer + bottom[w])`` (0 past the
  sinks), ``top[v] = max_{u -> v} (top[u] + cost[u] + transfer)``; a
  fixed-point iteration, one pass per level of the DAG.
  """
  num_nodes = cost.shape[0]

  def relax(levels):
    bottom, top = levels
    down = jnp.where(edge_valid, transfer + bottom[receivers], 0.0)
    bottom = cost + jnp.maximum(jax.ops.segment_max(down, senders, num_nodes),
                                0.0)
    up = jnp.where(edge_valid, top[senders] + cost[senders] + transfer, 0.0)
    top = jnp.maximum(jax.ops.segment_max(up, receivers, num_nodes), 0.0)
    return bottom, top

  def changed(carry):
    old, new = carry
    return jnp.any(old[0] != new[0]) | jnp.any(old[1] != new[1])

  start = (cost, jnp.zeros_like(cost))
  _, levels = jax.lax.while_loop(
      changed, lambda carry: (carry[1], relax(carry[1])),
      (start, relax(start)))
  return levels


def doppler_context(graphs: jraph.GraphsTuple) -> DopplerContext:
  """The :class:`DopplerContext` of a padded batch (jittable)."""
  graphs = jax.tree.map(jnp.asarray, graphs)
  node_mask = graphs.nodes["mask"]
  graph_index = graphs.nodes["graph_index"]
  num_nodes, num_graphs = node_mask.shape[0], graphs.n_node.shape[0]
  raw = jnp.where(node_mask[:, None],
                  graphs.nodes["features"].astype(jnp.float32), 0.0)
  features = _over_graph_max(raw, graph_index, num_graphs)
  flops = _over_graph_max(jnp.expm1(raw[:, _FLOPS]), graph_index, num_graphs)
  accessed = _over_graph_max(jnp.expm1(raw[:, _BYTES_ACCESSED]), graph_index,
                             num_graphs)
  cost = jnp.where(node_mask, 0.5 * (flops + accessed), 0.0)
  forward = graphs.edges["mask"] & (graphs.edges["direction"] == 0)
  edge_bytes = jnp.expm1(graphs.edges["features"][:, 0].astype(jnp.float32))
  edge_graph = graph_index[graphs.senders]
  scale = jax.ops.segment_max(jnp.where(forward, edge_bytes, 0.0), edge_graph,
                              num_graphs)
  edge_transfer = jnp.where(forward, edge_bytes / jnp.where(
      scale > 0, scale, 1.0)[edge_graph], 0.0)
  bottom, top = critical_path_levels(cost, edge_transfer, graphs.senders,
                                     graphs.receivers, forward)
  critical = jax.ops.segment_max(bottom, graph_index, num_graphs)
  critical = jnp.where(critical > 0, critical, 1.0)[graph_index]
  transfer = jnp.zeros((num_nodes, num_nodes), jnp.float32).at[
      graphs.senders, graphs.receivers].max(edge_transfer)
  producer = jnp.zeros((num_nodes, num_nodes), bool).at[
      graphs.senders, graphs.receivers].max(forward)
  return DopplerContext(
      features=jnp.concatenate(
          [features, (bottom / critical)[:, None], (top / critical)[:, None]],
          1),
      node_mask=node_mask, cost=cost / critical,
      transfer=transfer / critical[:, None], producer=producer,
      waiting=producer.sum(0).astype(jnp.int32))
