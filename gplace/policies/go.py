"""Placement policies, and the one interface every policy in gplace follows.

The policy interface
--------------------
A placement policy is a flax module whose ``__call__`` maps a padded batch of
graphs (the ``jraph.GraphsTuple`` layout of ``gplace.features``) to one row of
device logits per node::

    logits = policy.apply(params, graphs, device_mask=None)  # f32 [N_pad, D]

* ``device_mask``: optional ``bool [D]`` or ``[N_pad, D]``; disallowed devices
  get a large negative logit.
* Rows of padding nodes (``graphs.nodes["mask"] == False``) are ignored by
  :mod:`gplace.rl` (they never count in log-probabilities or entropies).
* The logits define a factorised distribution: each node's device is an
  independent categorical given the graph ("one-shot" placement, as in GO).
  ``gplace.rl.sample_placements(logits, rng, K) -> [K, N_pad]`` and
  ``gplace.rl.log_prob(logits, placements, node_mask) -> [K]`` are the only
  two things RL needs from a policy.

Policies that decide op by op (ColocRL's seq2seq, HDP's grouper-placer) fit the
same interface by teacher forcing: given ``placements=[K, N_pad]`` they return
logits ``[K, N_pad, D]`` conditioned on the earlier decisions, which
``gplace.rl.log_prob`` accepts unchanged (it broadcasts over a leading ``K``);
they add a ``sample(graphs, rng, num_samples, device_mask=None)`` method for
the decoding loop. Groupers return node logits by gathering each node's group
row, so the RL side never knows about groups.

This module holds :class:`GOEncoder` (node embeddings, reusable in other
models) and :class:`GOPolicy` (encoder + :class:`~gplace.layers.PlacementHead`).
"""

from __future__ import annotations

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.policies import layers

# Default op-type vocabulary size when gplace.features does not say
# (op ids at or above it share the last embedding row).
DEFAULT_VOCABULARY_SIZE = 256


def default_vocabulary_size() -> int:
  """The op-type vocabulary size of ``gplace.features`` (or a default)."""
  try:
    from gplace.graphs import features  # pylint: disable=g-import-not-at-top
  except ImportError:
    return DEFAULT_VOCABULARY_SIZE
  for name in ("VOCABULARY_SIZE", "vocabulary_size", "VOCABULARY", "OP_TYPES",
               "OP_VOCABULARY"):
    value = getattr(features, name, None)
    if value is None:
      continue
    value = value() if callable(value) else value
    return int(value) if isinstance(value, int) else len(value)
  return DEFAULT_VOCABULARY_SIZE


def relative_position_encoding(graphs: jraph.GraphsTuple,
                               num_frequencies: int) -> jax.Array:
  """Where each node sits in its graph's topological order, as features.

  ``t = position / n_node`` in ``[0, 1)``, encoded as ``[t, sin(pi 2^i t),
  cos(pi 2^i t)]`` for ``i < num_frequencies``: layer-wise placements (the
  experts' and the list schedulers') are mostly a function of ``t``.

  Returns:
    ``f32 [N_pad, 1 + 2 * num_frequencies]``.
  """
  sizes = jnp.maximum(graphs.n_node, 1).astype(jnp.float32)
  t = graphs.nodes["position"].astype(jnp.float32) / sizes[
      graphs.nodes["graph_index"]]
  angles = t[:, None] * (jnp.pi * 2.0 ** jnp.arange(num_frequencies))
  return jnp.concatenate([t[:, None], jnp.sin(angles), jnp.cos(angles)], -1)


class GOEncoder(nn.Module):
  """GO's graph encoder: op embedding, GraphSAGE, modulation, attention.

  ``x0 = [Embed(op_type) ‖ Dense(features) ‖ position encoding]``; then
  ``num_sage_layers`` :class:`~gplace.layers.GraphSAGE` layers (residual) and
  ``num_attention_layers`` :class:`~gplace.layers.SegmentRecurrentAttention`
  layers, the input of every layer modulated by
  :class:`~gplace.layers.FeatureModulation` from the graph's embedding (masked
  mean of the input projection's states).

  Attributes:
    hidden_size: width ``H`` of every layer (divisible by ``num_heads``).
    num_sage_layers: GraphSAGE layers.
    num_attention_layers: segment-recurrent attention layers.
    num_heads: attention heads.
    segment_length: nodes per attention segment.
    aggregator: ``"max"`` or ``"mean"`` GraphSAGE aggregation.
    modulation: ``"film"``, ``"gate"`` or ``"none"``.
    vocabulary_size: number of op-type ids (larger ids share the last row).
    op_embedding_size: width of the op-type embedding.
    num_position_frequencies: frequencies of
      :func:`relative_position_encoding` (0: only the raw fraction).
  """

  hidden_size: int = 64
  num_sage_layers: int = 2
  num_attention_layers: int = 2
  num_heads: int = 4
  segment_length: int = 128
  aggregator: str = "max"
  modulation: str = "film"
  vocabulary_size: int = DEFAULT_VOCABULARY_SIZE
  op_embedding_size: int = 16
  num_position_frequencies: int = 8

  @nn.compact
  def __call__(self, graphs: jraph.GraphsTuple) -> jax.Array:
    """Returns node embeddings ``f32 [N_pad, hidden_size]`` (0 on padding)."""
    nodes = graphs.nodes
    op_type = jnp.clip(nodes["op_type"], 0, self.vocabulary_size - 1)
    x = jnp.concatenate([
        nn.Embed(self.vocabulary_size, self.op_embedding_size,
                 name="op_embedding")(op_type),
        nn.Dense(self.hidden_size, name="feature_projection")(
            nodes["features"].astype(jnp.float32)),
        relative_position_encoding(graphs, self.num_position_frequencies),
    ], -1)
    x = nn.relu(nn.Dense(self.hidden_size, name="input_projection")(x))
    x = x * nodes["mask"][:, None].astype(x.dtype)
    conditioning = layers.graph_embedding(x, graphs)  # [G_pad, H]

    def modulate(x, i):
      if self.modulation == "none":
        return x
      return layers.FeatureModulation(self.modulation,
                                      name=f"modulation_{i}")(
                                          x, conditioning, graphs)

    layer = 0
    for i in range(self.num_sage_layers):
      # Residual so that deep stacks and the attention see the raw features.
      x = x + layers.GraphSAGE(self.hidden_size, self.aggregator,
                               name=f"sage_{i}")(modulate(x, layer), graphs)
      layer += 1
    for i in range(self.num_attention_layers):
      x = layers.SegmentRecurrentAttention(
          self.num_heads, self.segment_length, name=f"attention_{i}")(
              modulate(x, layer), graphs)
      layer += 1
    return x


class GOPolicy(nn.Module):
  """The GO placement policy: :class:`GOEncoder` + placement head.

  Follows the policy interface of this module: ``__call__(graphs,
  device_mask=None) -> logits f32 [N_pad, num_devices]``.

  Attributes:
    num_devices: ``D``, devices of the topology.
    hidden_size, num_sage_layers, num_attention_layers, num_heads,
    segment_length, aggregator, modulation, vocabulary_size,
    op_embedding_size, num_position_frequencies: see :class:`GOEncoder`.
    head_hidden_size: hidden width of the placement head.
  """

  num_devices: int
  hidden_size: int = 64
  num_sage_layers: int = 2
  num_attention_layers: int = 2
  num_heads: int = 4
  segment_length: int = 128
  aggregator: str = "max"
  modulation: str = "film"
  vocabulary_size: int = DEFAULT_VOCABULARY_SIZE
  op_embedding_size: int = 16
  num_position_frequencies: int = 8
  head_hidden_size: int = 64

  @nn.compact
  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None) -> jax.Array:
    states = GOEncoder(
        hidden_size=self.hidden_size, num_sage_layers=self.num_sage_layers,
        num_attention_layers=self.num_attention_layers,
        num_heads=self.num_heads, segment_length=self.segment_length,
        aggregator=self.aggregator, modulation=self.modulation,
        vocabulary_size=self.vocabulary_size,
        op_embedding_size=self.op_embedding_size,
        num_position_frequencies=self.num_position_frequencies,
        name="encoder")(graphs)
    return layers.PlacementHead(self.num_devices, self.head_hidden_size,
                                name="head")(states, device_mask)
