"""Layers of the GO policy on padded ``jraph.GraphsTuple`` s, for any flax
model: :class:`GraphSAGE`, :class:`FeatureModulation`,
:class:`SegmentRecurrentAttention`, :class:`PlacementHead`. Sizes come from
shapes; padding nodes get zeros.
"""

from __future__ import annotations

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError

# Finite "minus infinity": keeps softmax rows that are fully masked NaN-free.
NEG_INF = -1e9


def node_mask(graphs: jraph.GraphsTuple) -> jax.Array:
  """``bool [N_pad]``: True for real nodes."""
  return graphs.nodes["mask"]


def device_rows(device_mask: Optional[jax.Array], num_nodes: int,
                num_devices: int, family: str = "the policy") -> jax.Array:
  """``bool [N, D]`` allowed devices per node from None (all), ``[D]`` or
  ``[N, D]``.

  Raises:
    PolicyError: another shape (the message names ``family``).
  """
  if device_mask is None:
    return jnp.ones((num_nodes, num_devices), bool)
  device_mask = jnp.asarray(device_mask, bool)
  if device_mask.shape not in ((num_devices,), (num_nodes, num_devices)):
    raise PolicyError(
        f"device_mask of shape {device_mask.shape}; {family} takes "
        f"[{num_devices}] or [{num_nodes}, {num_devices}] (devices allowed "
        "for every node, or per node).")
  return jnp.broadcast_to(device_mask, (num_nodes, num_devices))


def graph_embedding(node_states: jax.Array,
                    graphs: jraph.GraphsTuple) -> jax.Array:
  """Masked mean of node states per graph.

  Args:
    node_states: ``[N_pad, H]``.
    graphs: the batch the states belong to.

  Returns:
    ``[G_pad, H]``; zeros for graphs without real nodes (the padding graph).
  """
  num_graphs = graphs.n_node.shape[0]
  mask = graphs.nodes["mask"].astype(node_states.dtype)[:, None]
  index = graphs.nodes["graph_index"]
  total = jax.ops.segment_sum(node_states * mask, index, num_graphs)
  count = jax.ops.segment_sum(mask, index, num_graphs)
  return total / jnp.maximum(count, 1.0)


def _aggregate(messages, receivers, weight, num_nodes, aggregator):
  """Mean or max of ``messages [E, H]`` at ``receivers`` where ``weight``.

  Nodes with no incoming message get zeros.
  """
  if aggregator == "mean":
    total = jax.ops.segment_sum(messages * weight[:, None], receivers,
                                num_nodes)
    count = jax.ops.segment_sum(weight, receivers, num_nodes)
    return total / jnp.maximum(count, 1.0)[:, None]
  if aggregator == "max":
    masked = jnp.where(weight[:, None] > 0, messages, NEG_INF)
    result = jax.ops.segment_max(masked, receivers, num_nodes)
    # Empty segments come back as the dtype's lowest value or NEG_INF.
    return jnp.where(result <= NEG_INF / 2, 0.0, result)
  raise PolicyError(f"Unknown aggregator {aggregator!r}; use 'mean' or 'max'.")


class GraphSAGE(nn.Module):
  """A direction-aware GraphSAGE layer.

  ``h'_v = act(W [h_v ‖ agg_{u -> v} m(h_u) ‖ agg_{v -> w} m'(h_w)])``: the
  producers (predecessors) and consumers (successors) of a node are
  aggregated separately, each message a learned projection of the neighbour
  state followed by ``act``. Masked (padding) edges contribute nothing.

  Attributes:
    features: output width ``H'``.
    aggregator: ``"max"`` (GO's max-pool aggregator) or ``"mean"``.
    activation: nonlinearity applied to messages and to the output.
    normalize: L2-normalise outputs (as in the GraphSAGE paper).
  """

  features: int
  aggregator: str = "max"
  activation: callable = nn.relu
  normalize: bool = False

  @nn.compact
  def __call__(self, node_states: jax.Array,
               graphs: jraph.GraphsTuple) -> jax.Array:
    """Args: ``node_states [N_pad, H]``; returns ``[N_pad, features]``."""
    num_nodes = node_states.shape[0]
    direction = graphs.edges["direction"]
    edge_mask = graphs.edges["mask"]
    # One gather and one segment reduction for both directions: messages
    # [N, 2, H'] are read at (sender, direction) and reduced into 2N segments
    # (receiver, direction).
    messages = jnp.stack([
        self.activation(nn.Dense(self.features, name=f"{name}_message")(
            node_states)) for name in ("predecessor", "successor")], 1)
    gathered = messages[graphs.senders, direction]  # [E, H']
    segment = graphs.receivers * 2 + direction
    aggregated = _aggregate(gathered, segment,
                            edge_mask.astype(node_states.dtype),
                            2 * num_nodes, self.aggregator)
    pieces = [node_states, aggregated.reshape(num_nodes, 2 * self.features)]
    out = self.activation(
        nn.Dense(self.features, name="update")(jnp.concatenate(pieces, -1)))
    if self.normalize:
      out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True),
                              1e-6)
    return out * node_mask(graphs)[:, None].astype(out.dtype)


class FeatureModulation(nn.Module):
  """Per-graph feature modulation from a conditioning vector per graph.

  ``mode="film"``: ``h * (1 + gamma_g) + beta_g``; ``mode="gate"``:
  ``h * 2 sigmoid(s_g)`` (both start at the identity: the projections are
  zero-initialised, so a freshly initialised policy is unmodulated).
  ``gamma, beta, s`` are linear in the graph's conditioning vector, usually
  :func:`graph_embedding` of the node states.

  Attributes:
    mode: ``"film"`` or ``"gate"``.
  """

  mode: str = "film"

  @nn.compact
  def __call__(self, node_states: jax.Array, conditioning: jax.Array,
               graphs: jraph.GraphsTuple) -> jax.Array:
    """Args: ``node_states [N_pad, H]``, ``conditioning [G_pad, C]``.

    Returns:
      ``[N_pad, H]``, zero on padding nodes.
    """
    width = node_states.shape[-1]
    index = graphs.nodes["graph_index"]
    dense = lambda n, name: nn.Dense(n, kernel_init=nn.initializers.zeros,
                                     name=name)
    if self.mode == "film":
      gamma, beta = jnp.split(dense(2 * width, "film")(conditioning), 2, -1)
      out = node_states * (1.0 + gamma[index]) + beta[index]
    elif self.mode == "gate":
      gate = 2.0 * nn.sigmoid(dense(width, "gate")(conditioning))
      out = node_states * gate[index]
    else:
      raise PolicyError(f"Unknown modulation mode {self.mode!r}; use 'film' "
                       "or 'gate'.")
    return out * node_mask(graphs)[:, None].astype(out.dtype)


def _pad_to_segments(x: jax.Array, segment_length: int, fill=0):
  """Pads axis 0 to a multiple of ``segment_length`` -> ``[S, L, ...]``."""
  n = x.shape[0]
  num_segments = -(-n // segment_length)
  pad = num_segments * segment_length - n
  if pad:
    widths = [(0, pad)] + [(0, 0)] * (x.ndim - 1)
    x = jnp.pad(x, widths, constant_values=fill)
  return x.reshape((num_segments, segment_length) + x.shape[1:])


class SegmentRecurrentAttention(nn.Module):
  """One Transformer-XL-style layer over nodes in topological order.

  Nodes (already in topological order within each graph, graphs one after
  another) are cut into ``S = ceil(N_pad / L)`` segments of ``L =
  segment_length`` nodes. A ``lax.scan`` walks the segments; its carry is the
  previous segment's keys and values, computed from ``stop_gradient`` states
  (the cached memory of Transformer-XL). Each segment's queries attend to the
  ``2L`` keys ``[memory ‖ segment]``, so information travels one segment per
  layer and the cost is ``O(N_pad * L)``.

  Attention is *full* (not causal) within the segment and the memory: GO
  places the whole graph in one shot, so there is no decoding order to
  respect, and a node benefits from seeing its consumers as well as its
  producers. Keys from another graph (``graph_index``) or padding are masked.
  Positions are encoded by a learned per-head bias on the relative offset
  ``query - key`` (as in Transformer-XL's relative encodings).

  Pre-norm residual block: ``x + Attn(LN(x))`` then ``x + MLP(LN(x))``.

  Attributes:
    num_heads: attention heads; the width must divide by it.
    segment_length: ``L``, nodes per segment.
    mlp_ratio: hidden width of the MLP over the model width.
  """

  num_heads: int = 4
  segment_length: int = 128
  mlp_ratio: int = 2

  @nn.compact
  def __call__(self, node_states: jax.Array,
               graphs: jraph.GraphsTuple) -> jax.Array:
    """Args: ``node_states [N_pad, H]``; returns ``[N_pad, H]``."""
    num_nodes, width = node_states.shape
    if width % self.num_heads:
      raise PolicyError(f"Width {width} is not divisible by num_heads "
                       f"{self.num_heads}.")
    heads, head_dim, length = self.num_heads, width // self.num_heads, (
        self.segment_length)
    mask = node_mask(graphs)
    index = graphs.nodes["graph_index"]

    normed = nn.LayerNorm(name="attention_norm")(node_states)
    project = lambda name: nn.DenseGeneral((heads, head_dim), name=name)
    query_proj, key_proj, value_proj = (project("query"), project("key"),
                                        project("value"))
    query = query_proj(normed) / jnp.sqrt(head_dim).astype(normed.dtype)
    key, value = key_proj(normed), value_proj(normed)
    # The cache of Transformer-XL: the same projections of gradient-free
    # states; gradients still reach the projection weights.
    frozen = jax.lax.stop_gradient(normed)
    memory_key, memory_value = key_proj(frozen), value_proj(frozen)

    # Relative offsets query - key lie in [-(L - 1), 2L - 1]: one bias each.
    rel_bias = self.param("relative_bias", nn.initializers.zeros,
                          (heads, 3 * length - 1))
    query_pos = jnp.arange(length) + length
    key_pos = jnp.arange(2 * length)
    offset = query_pos[:, None] - key_pos[None, :] + (length - 1)
    bias = rel_bias[:, offset]  # [heads, L, 2L]

    segments = lambda x, fill=0: _pad_to_segments(x, length, fill)
    xs = dict(query=segments(query), key=segments(key),
              value=segments(value), memory_key=segments(memory_key),
              memory_value=segments(memory_value),
              index=segments(index, -1), mask=segments(mask, False))

    def attend(carry, seg):
      keys = jnp.concatenate([carry["key"], seg["key"]], 0)  # [2L, h, d]
      values = jnp.concatenate([carry["value"], seg["value"]], 0)
      key_index = jnp.concatenate([carry["index"], seg["index"]], 0)
      key_mask = jnp.concatenate([carry["mask"], seg["mask"]], 0)
      allowed = key_mask[None, :] & (seg["index"][:, None] == key_index[None])
      scores = jnp.einsum("qhd,khd->hqk", seg["query"], keys) + bias
      scores = jnp.where(allowed[None], scores, NEG_INF)
      weights = jax.nn.softmax(scores, axis=-1)
      out = jnp.einsum("hqk,khd->qhd", weights, values)
      new_carry = dict(key=seg["memory_key"], value=seg["memory_value"],
                       index=seg["index"], mask=seg["mask"])
      return new_carry, out

    zeros = jnp.zeros((length, heads, head_dim), query.dtype)
    first = dict(key=zeros, value=zeros,
                 index=jnp.full((length,), -1, index.dtype),
                 mask=jnp.zeros((length,), bool))
    _, attended = jax.lax.scan(attend, first, xs)
    attended = attended.reshape((-1, heads, head_dim))[:num_nodes]
    x = node_states + nn.DenseGeneral(width, axis=(-2, -1),
                                      name="output")(attended)
    hidden = nn.LayerNorm(name="mlp_norm")(x)
    hidden = nn.gelu(nn.Dense(self.mlp_ratio * width, name="mlp_in")(hidden))
    x = x + nn.Dense(width, name="mlp_out")(hidden)
    return x * mask[:, None].astype(x.dtype)


class PlacementHead(nn.Module):
  """Node states to per-device placement logits.

  The logits layer starts near zero (orthogonal, scale ``logit_init_scale``,
  as policy heads in purejaxrl and brax do), so an untrained policy samples
  nearly uniformly. With the default Lecun init, GO's node states gave
  logit spreads of ~12 nats at initialization: a "uniform start" that
  already put every op on one device with probability ~1 and left pure RL
  nothing to explore.

  Attributes:
    num_devices: ``D``.
    hidden_size: width of the hidden layer (0 for a single linear layer).
    logit_init_scale: scale of the logits layer's orthogonal init.
  """

  num_devices: int
  hidden_size: int = 64
  logit_init_scale: float = 0.01

  @nn.compact
  def __call__(self, node_states: jax.Array,
               device_mask: Optional[jax.Array] = None,
               offsets: Optional[jax.Array] = None) -> jax.Array:
    """Args:
      node_states: ``[N_pad, H]``.
      offsets: optional ``[N_pad, D]`` added to the logits (before the
        mask).
      device_mask: optional ``bool [D]`` (devices allowed for every node) or
        ``bool [N_pad, D]`` (per node); disallowed entries get ``NEG_INF``.
        Every real node must keep at least one allowed device.

    Returns:
      ``float32 [N_pad, D]`` logits.
    """
    x = node_states
    if self.hidden_size:
      x = nn.relu(nn.Dense(self.hidden_size, name="hidden")(x))
    logits = nn.Dense(
        self.num_devices, name="logits",
        kernel_init=nn.initializers.orthogonal(self.logit_init_scale))(x)
    logits = logits.astype(jnp.float32)
    if offsets is not None:
      logits = logits + offsets.astype(jnp.float32)
    if device_mask is not None:
      logits = jnp.where(device_mask, logits, NEG_INF)
    return logits
