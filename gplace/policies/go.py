"""The GO placement policy: a graph encoder and a per-node placement head.

Zhou et al., "Transferable Graph Optimizers", NeurIPS 2020.
:class:`GOEncoder` (reusable) and :class:`GOPolicy` (one-shot, ``"go"``);
additions ``free_logits``, ``hint``, ``priority_levels``, ``fusion_head``:
``docs/design.md#go-as-built``.
"""

from __future__ import annotations

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError, is_int
from gplace.graphs import features
from gplace.policies import layers
from gplace.policies.base import module_fields, register_policy

# Op-type ids at or above the vocabulary size share the last embedding row.
DEFAULT_VOCABULARY_SIZE = features.VOCABULARY_SIZE
AGGREGATORS = ("max", "mean")
MODULATIONS = ("film", "gate", "none")


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


def hint_one_hot(graphs: jraph.GraphsTuple, num_devices: int) -> jax.Array:
  """``graphs.nodes["hint"]`` one-hot: ``f32 [N_pad, num_devices]``, a zero
  row where the hint is -1 (none).

  Raises:
    PolicyError: the graphs carry no ``"hint"`` (a ``GraphsTuple`` built by
      hand, not by :func:`gplace.graphs.features.to_graphs_tuple`).
  """
  if "hint" not in graphs.nodes:
    raise PolicyError(
        "This policy reads a classical plan per node (policy hint=True) but "
        "the graphs have no nodes['hint']; build them with "
        "gplace.graphs.features.to_graphs_tuple and gplace.rl.data.make_batch "
        "(which fills it from each graph's best baseline).")
  return jax.nn.one_hot(graphs.nodes["hint"], num_devices)


class GOEncoder(nn.Module):
  """GO's graph encoder: op embedding, GraphSAGE, modulation, attention.

  ``x0 = [Embed(op_type) ‖ Dense(features) ‖ position encoding]``; then
  ``num_sage_layers`` :class:`~gplace.policies.layers.GraphSAGE` layers
  (residual) and ``num_attention_layers``
  :class:`~gplace.policies.layers.SegmentRecurrentAttention` layers, the input
  of every layer modulated by :class:`~gplace.policies.layers.FeatureModulation`
  from the graph's embedding (masked mean of the input projection's states).

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
    normalize_features: layer-normalise the projected node features.
    hint_devices: ``D`` > 0 adds the one-hot ``graphs.nodes["hint"]`` (a
      classical plan's device per node, all zero where it is -1) to the
      input, so that the layers see where each node's neighbours are
      placed by that plan; 0 (default): no hint input.
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
  normalize_features: bool = True
  hint_devices: int = 0

  def __post_init__(self):
    for name in ("hidden_size", "num_heads", "num_sage_layers",
                 "op_embedding_size"):
      if not is_int(getattr(self, name)) or getattr(self, name) < 1:
        raise PolicyError(f"{name}={getattr(self, name)!r} must be a "
                          "positive integer.")
    if not is_int(self.segment_length):
      raise PolicyError(f"segment_length={self.segment_length!r} must be a "
                        "positive integer.")
    if self.hidden_size % self.num_heads:
      raise PolicyError(f"hidden_size={self.hidden_size} must be divisible by "
                        f"num_heads={self.num_heads}.")
    if self.modulation not in MODULATIONS:
      raise PolicyError(f"modulation must be one of {MODULATIONS}, got "
                        f"{self.modulation!r}.")
    if self.aggregator not in AGGREGATORS:
      raise PolicyError(f"aggregator must be one of {AGGREGATORS}, got "
                        f"{self.aggregator!r}.")
    if self.segment_length < 1:
      raise PolicyError(f"segment_length={self.segment_length} must be "
                        "positive.")
    super().__post_init__()

  @nn.compact
  def __call__(self, graphs: jraph.GraphsTuple) -> jax.Array:
    """Returns node embeddings ``f32 [N_pad, hidden_size]`` (0 on padding)."""
    nodes = graphs.nodes
    op_type = jnp.clip(nodes["op_type"], 0, self.vocabulary_size - 1)
    inputs = [
        nn.Embed(self.vocabulary_size, self.op_embedding_size,
                 name="op_embedding")(op_type),
        self._project_features(nodes["features"].astype(jnp.float32)),
        relative_position_encoding(graphs, self.num_position_frequencies),
    ]
    if self.hint_devices:
      inputs.append(hint_one_hot(graphs, self.hint_devices))
    x = jnp.concatenate(inputs, -1)
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

  def _project_features(self, features: jax.Array) -> jax.Array:
    """``[N_pad, F] -> [N_pad, hidden_size]``; with ``normalize_features``
    layer-normalised, so that unnormalised log-scale features (up to ~26)
    do not drown the position encoding (in ``[-1, 1]``), the only input
    that tells structurally identical nodes apart."""
    x = nn.Dense(self.hidden_size, name="feature_projection")(features)
    if self.normalize_features:
      x = nn.LayerNorm(name="feature_norm")(x)
    return x


class GOPolicy(nn.Module):
  """The GO placement policy: a :class:`GOEncoder` and a placement head.

  Follows the policy interface of :mod:`gplace.policies.base`:
  ``__call__(graphs, device_mask=None) -> logits f32 [N_pad, num_devices]``.

  Attributes:
    num_devices: ``D``, devices of the topology.
    encoder: the node encoder with all its hyperparameters (its parameters
      live under ``"encoder"``).
    head_hidden_size: hidden width of the placement head.
    free_logits: ``P`` > 0 adds a learned logit offset per node position
      (``[P, D]``, zero at init; positions ``>= P`` share the last row),
      times ``free_logit_scale``. The encoder gives structurally identical
      nodes (two copies of a layer, two independent chains) almost the same
      logits, and with them the same device; these offsets let RL place them
      apart (a coordinated move such as one chain per GPU). They are tied to
      node positions, so they help a policy trained on one graph, not one
      meant to transfer to unseen graphs. 0 (default): off.
    free_logit_scale: multiplies the offsets (Adam steps each parameter by
      about the learning rate, so this is their learning rate multiplier).
    hint: read a classical plan per node (``graphs.nodes["hint"]``, each
      graph's best baseline, :func:`gplace.rl.data.hint_placements`): the
      encoder sees it (``GOEncoder.hint_devices``) and the head adds a
      learned ``hint_logit`` (initially ``hint_init``) to the hinted
      device's logit. The policy then starts at the plan (its greedy
      placement *is* the plan while the head's own logits are small) and
      learns where to leave it, on any graph, seen or not. Not in GO
      (why: ``docs/design.md``, "Pretraining, and why the shipped policy is
      given a plan"). Its placements are the policy's own, but every report
      says which plan it was given.
    hint_init: the initial ``hint_logit`` (4: the plan's device has
      probability e^4 / (e^4 + D - 1), 0.93 on five devices, before any
      training).
    priority_levels: ``P`` >= 2 adds a scheduling head (GO's joint
      placement + scheduling, as its multi-task setting): each node (group)
      also takes a priority level ``0 .. P-1``, and the loop runs the
      placement in the dynamic schedule ranked by level first, then by the
      critical path (:func:`gplace.rl.grouping.level_priority`); with every
      level 0 that is the default schedule. The logits are then joint,
      ``[N_pad, D * P]`` (action ``device * P + level``), the sum of the
      device logits and the level head's, so device and level are drawn
      independently. 0 (default): placement only.
    priority_init: the level head's initial logit for level 0 over the
      others (3: level 0 has probability e^3 / (e^3 + P - 1) before any
      training, so the policy starts near the default schedule).
    fusion_head: adds GO's fusion task: each node also decides whether to
      fuse into its first consumer on the same device
      (:func:`gplace.graphs.fusion_decisions.decision_labels` turns the
      choices into legal fusion labels). As in GO's multi-task setting the
      head has its own recurrent attention layer (``fusion_attention``)
      over the shared encoder, then its own two-way head
      (``fusion_head``). The logits become ``[N_pad, D * max(P, 1) * 2]``
      (action ``(device * max(P, 1) + level) * 2 + fuse``), the sum of the
      three heads' logits, so the decisions are drawn independently and
      their log-probabilities add. Needs a host reward
      (``rl.reward="simulator_host"``). False (default): no fusion
      decision.
    fusion_init: the fusion head's initial logit of "fuse" over "do not
      fuse" (0: a fair coin before any training).
  """

  num_devices: int
  encoder: GOEncoder = GOEncoder()
  head_hidden_size: int = 64
  free_logits: int = 0
  free_logit_scale: float = 10.0
  hint: bool = False
  hint_init: float = 4.0
  priority_levels: int = 0
  priority_init: float = 3.0
  fusion_head: bool = False
  fusion_init: float = 0.0

  def __post_init__(self):
    if not isinstance(self.fusion_head, bool):
      raise PolicyError(
          f"fusion_head={self.fusion_head!r}: give True (a fusion decision "
          "per node) or False (placement only).")
    if self.priority_levels == 1 or self.priority_levels < 0:
      raise PolicyError(
          f"priority_levels={self.priority_levels}: give 0 (no scheduling "
          "head) or at least 2 levels.")
    super().__post_init__()

  @nn.compact
  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None) -> jax.Array:
    states = self.encoder(graphs)  # [N_pad, hidden_size]
    offsets = None
    if self.free_logits:
      table = self.param("free_logits", nn.initializers.zeros,
                         (self.free_logits, self.num_devices))
      position = jnp.clip(graphs.nodes["position"], 0, self.free_logits - 1)
      offsets = self.free_logit_scale * table[position]  # [N_pad, D]
    if self.hint:
      weight = self.param("hint_logit", nn.initializers.constant(
          self.hint_init), ())
      hinted = weight * hint_one_hot(graphs, self.num_devices)
      offsets = hinted if offsets is None else offsets + hinted
    logits = layers.PlacementHead(self.num_devices, self.head_hidden_size,
                                  name="head")(states, device_mask,
                                               offsets=offsets)
    if not self.priority_levels and not self.fusion_head:
      return logits
    num_nodes = states.shape[0]
    if self.priority_levels:
      bias = jnp.zeros((self.priority_levels,)).at[0].set(self.priority_init)
      levels = layers.PlacementHead(
          self.priority_levels, self.head_hidden_size, name="priority_head")(
              states, offsets=jnp.broadcast_to(bias, (num_nodes,) + bias.shape))
    else:
      levels = jnp.zeros((num_nodes, 1), jnp.float32)
    joint = logits[:, :, None] + levels[:, None, :]     # [N_pad, D, P]
    if self.fusion_head:
      fuse = self._fusion_logits(states, graphs)        # [N_pad, 2]
      joint = joint[..., None] + fuse[:, None, None, :]  # [N_pad, D, P, 2]
    return joint.reshape(num_nodes, -1)

  def _fusion_logits(self, states: jax.Array,
                     graphs: jraph.GraphsTuple) -> jax.Array:
    """GO's per-task layer: ``[N_pad, H] -> [N_pad, 2]`` logits of (keep
    alone, fuse into the consumer), from a recurrent attention layer of
    its own over the shared encoder's states."""
    task_states = layers.SegmentRecurrentAttention(
        self.encoder.num_heads, self.encoder.segment_length,
        name="fusion_attention")(states, graphs)
    bias = jnp.array([0.0, self.fusion_init], jnp.float32)
    return layers.PlacementHead(2, self.head_hidden_size, name="fusion_head")(
        task_states, offsets=jnp.broadcast_to(bias, (states.shape[0], 2)))


@register_policy("go")
def create_go_policy(num_devices: int, **hparams) -> GOPolicy:
  """A :class:`GOPolicy` from flat hyperparameters: the fields of
  :class:`GOEncoder` and ``head_hidden_size`` (``PolicySettings.hparams``).

  Raises:
    PolicyError: an unknown hyperparameter, or values the encoder rejects.
  """
  encoder_fields = module_fields(GOEncoder)
  policy_fields = module_fields(GOPolicy) - {"num_devices", "encoder"}
  unknown = set(hparams) - encoder_fields - policy_fields
  if unknown:
    raise PolicyError(
        f"Unknown GO policy hyperparameters {sorted(unknown)}; the policy "
        f"takes {sorted(encoder_fields | policy_fields)}.")
  encoder_hparams = {k: v for k, v in hparams.items() if k in encoder_fields}
  if hparams.get("hint"):
    encoder_hparams["hint_devices"] = num_devices
  encoder = GOEncoder(**encoder_hparams)
  return GOPolicy(num_devices=num_devices, encoder=encoder,
                  **{k: v for k, v in hparams.items() if k in policy_fields})
