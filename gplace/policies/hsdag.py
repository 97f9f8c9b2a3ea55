"""The HSDAG placement policy: GCN embeddings, graph-parsing pooling into
learned groups, a device distribution per group (one-shot, ``"hsdag"``).

Duan et al., "A Structure-Aware Framework for Learning Device Placements on
Computation Graphs", NeurIPS 2024; code: github.com/Esthesia/HSDAG. An input
MLP; per pooling level (:class:`ParsingPool`) GCN embeddings score edges
``sigmoid(MLP(h[u] * h[v]))``, each node keeps its best edge, groups are
the connected components, pooled by DeepSets times the sum of their kept
edges' scores (how gradients reach the scorer); an output MLP and the head
give each group's logits. Deviations: ``num_pooling_levels`` fixed (default
1); no dropout; one-shot, not 20 sequential placements; gplace's features.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError, is_int
from gplace.graphs import features
from gplace.policies import layers
from gplace.policies.base import module_fields, register_policy
from gplace.policies.go import relative_position_encoding


class LevelGraph(NamedTuple):
  """The graph of one pooling level, in the ``N_pad`` slots of the input.

  Attributes:
    senders, receivers: ``int32 [E_pad]``, node slots (both directions).
    edge_mask: ``bool [E_pad]``: real, not a self loop, first of its pair.
    node_mask: ``bool [N_pad]``: slots holding a node of this level.
  """

  senders: jax.Array
  receivers: jax.Array
  edge_mask: jax.Array
  node_mask: jax.Array


def unique_edge_mask(senders: jax.Array, receivers: jax.Array,
                     valid: jax.Array) -> jax.Array:
  """``bool [E]``: valid edges that are the first (lowest index) of their
  ``(sender, receiver)`` pair."""
  index = jnp.arange(senders.shape[0])
  invalid, s, r, order = jax.lax.sort(
      ((~valid).astype(jnp.int32), senders, receivers, index), num_keys=4)
  first = jnp.concatenate([jnp.ones(1, bool),
                           (s[1:] != s[:-1]) | (r[1:] != r[:-1])])
  return jnp.zeros_like(valid).at[order].set(first & (invalid == 0))


def dominant_edges(scores: jax.Array, senders: jax.Array, valid: jax.Array,
                   num_nodes: int) -> jax.Array:
  """``bool [E]``: each node's highest-scoring valid edge (as sender; ties:
  the lowest edge index)."""
  masked = jnp.where(valid, scores, -jnp.inf)
  best = jax.ops.segment_max(masked, senders, num_nodes)
  index = jnp.arange(scores.shape[0])
  candidate = valid & (masked >= best[senders])
  first = jax.ops.segment_min(jnp.where(candidate, index, scores.shape[0]),
                              senders, num_nodes)
  return valid & (index == first[senders])


def connected_components(senders: jax.Array, receivers: jax.Array,
                         kept: jax.Array, num_nodes: int) -> jax.Array:
  """``int32 [N]``: the lowest node index of each node's component in the
  undirected graph of the ``kept`` edges (min-label propagation with
  pointer jumping, until no label changes)."""
  none = jnp.int32(num_nodes)

  def step(carry):
    labels, _ = carry
    new = jnp.minimum(labels, jax.ops.segment_min(
        jnp.where(kept, labels[senders], none), receivers, num_nodes))
    new = jnp.minimum(new, jax.ops.segment_min(
        jnp.where(kept, labels[receivers], none), senders, num_nodes))
    new = new[new]  # labels only decrease and stay in the component
    return new, jnp.any(new != labels)

  labels = jnp.arange(num_nodes, dtype=jnp.int32)
  return jax.lax.while_loop(lambda c: c[1], step, (labels, True))[0]


class GCNLayer(nn.Module):
  """``D^-1/2 (A + I) D^-1/2 h W + b`` over a :class:`LevelGraph` (Kipf and
  Welling; PyG's ``GCNConv``); zero outside ``node_mask``."""

  features: int

  @nn.compact
  def __call__(self, h: jax.Array, graph: LevelGraph) -> jax.Array:
    """Args: ``h [N_pad, H]``; returns ``[N_pad, features]``."""
    n = h.shape[0]
    x = nn.Dense(self.features, use_bias=False, name="linear")(h)
    weight = graph.edge_mask.astype(x.dtype)
    degree = 1.0 + jax.ops.segment_sum(weight, graph.receivers, n)
    inv_sqrt = jax.lax.rsqrt(degree)
    norm = inv_sqrt[graph.senders] * weight * inv_sqrt[graph.receivers]
    out = jax.ops.segment_sum(x[graph.senders] * norm[:, None],
                              graph.receivers, n) + x / degree[:, None]
    out = out + self.param("bias", nn.initializers.zeros, (self.features,))
    return out * graph.node_mask[:, None].astype(out.dtype)


class GCNStack(nn.Module):
  """HSDAG's ``GNN``: ``num_layers`` GCN layers with ReLU, then
  ``LayerNorm(h + .)``; the identity for 0 layers."""

  num_layers: int

  @nn.compact
  def __call__(self, h: jax.Array, graph: LevelGraph) -> jax.Array:
    x = h
    for i in range(self.num_layers):
      x = nn.relu(GCNLayer(h.shape[-1], name=f"gcn_{i}")(x, graph))
    if self.num_layers:
      x = nn.LayerNorm(name="norm")(h + x)
    return x


class MLP(nn.Module):
  """HSDAG's ``MLP``: Dense layers (the last one ``out_features`` wide);
  ``insert_norm``: LayerNorm before each ReLU; ``activate_last``: ReLU after
  the last layer too; ``residual_norm``: ``LayerNorm(input + output)``."""

  num_layers: int
  features: int
  out_features: int
  insert_norm: bool = False
  activate_last: bool = True
  residual_norm: bool = False

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    inputs = x
    for i in range(self.num_layers):
      last = i == self.num_layers - 1
      x = nn.Dense(self.out_features if last else self.features,
                   name=f"dense_{i}")(x)
      if not last or self.activate_last:
        if self.insert_norm:
          x = nn.LayerNorm(name=f"norm_{i}")(x)
        x = nn.relu(x)
    if self.residual_norm:
      x = nn.LayerNorm(name="residual_norm")(inputs + x)
    return x


class ParsingPool(nn.Module):
  """One level of graph-parsing pooling (see the module docstring).

  Attributes:
    num_gcn_layers: layers of the GCN whose embeddings score the edges.
    num_pool_gcn_layers: layers of the GCN whose embeddings are pooled.
    num_scorer_layers: layers of the edge-score MLP.
  """

  num_gcn_layers: int = 2
  num_pool_gcn_layers: int = 1
  num_scorer_layers: int = 2

  @nn.compact
  def __call__(self, h: jax.Array, graph: LevelGraph):
    """Args: ``h [N_pad, H]`` (zero outside ``graph.node_mask``).

    Returns:
      ``(group_states [N_pad, H], coarse LevelGraph, labels int32 [N_pad],
      edge_scores f32 [E_pad])``: each slot's group (its lowest member
      slot); group states at those slots, zero elsewhere.
    """
    n, width = h.shape
    s, r = graph.senders, graph.receivers
    h1 = GCNStack(self.num_gcn_layers, name="gcn")(h, graph)
    scores = nn.sigmoid(MLP(self.num_scorer_layers, width, 1, insert_norm=True,
                            activate_last=False, name="edge_scorer")(
                                h1[s] * h1[r])[:, 0].astype(jnp.float32))
    kept = dominant_edges(jax.lax.stop_gradient(scores), s, graph.edge_mask, n)
    labels = connected_components(s, r, kept, n)
    h2 = GCNStack(self.num_pool_gcn_layers, name="pool_gcn")(h, graph)
    deep_set = lambda name: MLP(1, width, width, residual_norm=True, name=name)
    members = deep_set("pre")(h2) * graph.node_mask[:, None].astype(h.dtype)
    pooled = deep_set("post")(jax.ops.segment_sum(members, labels, n))
    inside = graph.edge_mask & (labels[s] == labels[r])
    score_sum = jax.ops.segment_sum(jnp.where(inside, scores, 0.0), labels[s],
                                    n)
    has_inside = jax.ops.segment_sum(inside.astype(jnp.int32), labels[s], n)
    factor = jnp.where(has_inside > 0, score_sum, 1.0)
    node_mask = graph.node_mask & (labels == jnp.arange(n))
    states = pooled * (factor * node_mask)[:, None].astype(pooled.dtype)
    cs, cr = labels[s], labels[r]
    coarse = LevelGraph(cs, cr, unique_edge_mask(
        cs, cr, graph.edge_mask & (cs != cr)), node_mask)
    return states, coarse, labels, scores


class HSDAGPolicy(nn.Module):
  """The HSDAG placement policy (module docstring): GCN, graph-parsing
  pooling, a device distribution per group.

  ``__call__(graphs, device_mask=None) -> logits f32 [N_pad, num_devices]``
  (:mod:`gplace.policies.base`); nodes of one group share their logits.

  Attributes:
    num_devices: ``D``.
    hidden_size: width ``H`` of every layer (the code: 128).
    num_pooling_levels: graph-parsing levels (0: one group per node).
    num_gcn_layers, num_pool_gcn_layers, num_scorer_layers: see
      :class:`ParsingPool` (the code: 2, 1, 2).
    num_transform_layers: layers of the input and output MLPs (the code: 2).
    head_hidden_size: hidden width of the placement head (the code: 128).
    op_embedding_size: width of the op-type embedding.
    vocabulary_size: op-type ids (larger ids share the last row).
    num_position_frequencies: of the position encoding
      (:func:`gplace.policies.go.relative_position_encoding`).
  """

  num_devices: int
  hidden_size: int = 128
  num_pooling_levels: int = 1
  num_gcn_layers: int = 2
  num_pool_gcn_layers: int = 1
  num_scorer_layers: int = 2
  num_transform_layers: int = 2
  head_hidden_size: int = 128
  op_embedding_size: int = 16
  vocabulary_size: int = features.VOCABULARY_SIZE
  num_position_frequencies: int = 0

  def __post_init__(self):
    defaults = {f.name: f.default for f in dataclasses.fields(HSDAGPolicy)}
    for name, minimum in (
        ("num_devices", 1), ("hidden_size", 1), ("num_scorer_layers", 1),
        ("num_transform_layers", 1), ("op_embedding_size", 1),
        ("vocabulary_size", 1), ("num_pooling_levels", 0),
        ("num_gcn_layers", 0), ("num_pool_gcn_layers", 0),
        ("head_hidden_size", 0), ("num_position_frequencies", 0)):
      value = getattr(self, name)
      if not is_int(value) or value < minimum:
        example = defaults[name] if isinstance(defaults[name], int) else 2
        raise PolicyError(f"HSDAG {name}={value!r} must be an integer >= "
                          f"{minimum}; e.g. {name}={example}.")
    super().__post_init__()

  def setup(self):
    width = self.hidden_size
    self.op_embedding = nn.Embed(self.vocabulary_size, self.op_embedding_size)
    self.input_transform = MLP(self.num_transform_layers, width, width,
                               insert_norm=True)
    self.pools = [ParsingPool(self.num_gcn_layers, self.num_pool_gcn_layers,
                              self.num_scorer_layers)
                  for _ in range(self.num_pooling_levels)]
    self.output_transform = MLP(self.num_transform_layers, width, width)
    self.head = layers.PlacementHead(self.num_devices, self.head_hidden_size)

  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None) -> jax.Array:
    return self.logits_and_groups(graphs, device_mask)[0]

  def logits_and_groups(self, graphs: jraph.GraphsTuple,
                        device_mask: Optional[jax.Array] = None
                        ) -> tuple[jax.Array, jax.Array]:
    """``(logits f32 [N_pad, D], group int32 [N_pad])``: the policy's
    logits and each node's group (``method="logits_and_groups"``)."""
    group_states, group = self.encode(graphs)
    logits = self.head(self.output_transform(group_states)[group],
                       device_mask)
    return logits, group

  def encode(self, graphs: jraph.GraphsTuple) -> tuple[jax.Array, jax.Array]:
    """``(group_states f32 [N_pad, H], group int32 [N_pad])``: each node's
    final group (its lowest member slot) and the groups' states at those
    slots."""
    nodes = graphs.nodes
    node_mask = nodes["mask"]
    op_type = jnp.clip(nodes["op_type"], 0, self.vocabulary_size - 1)
    x = jnp.concatenate([
        self.op_embedding(op_type), nodes["features"].astype(jnp.float32),
        relative_position_encoding(graphs, self.num_position_frequencies)], -1)
    h = self.input_transform(x) * node_mask[:, None].astype(jnp.float32)
    s, r = graphs.senders, graphs.receivers
    level = LevelGraph(s, r, unique_edge_mask(
        s, r, graphs.edges["mask"] & (s != r)), node_mask)
    group = jnp.arange(h.shape[0], dtype=jnp.int32)
    for pool in self.pools:
      h, level, labels, _ = pool(h, level)
      group = labels[group]
    return h, group


_POLICIES: dict = {}


@register_policy("hsdag")
def create_hsdag_policy(num_devices: int, **hparams) -> HSDAGPolicy:
  """An :class:`HSDAGPolicy` from flat hyperparameters
  (``PolicySettings.hparams``).

  Equal arguments return the same (immutable) module, so that compile
  caches keyed on ``policy.apply`` (a bound method: Python compares its
  ``__self__`` by identity) hit when one process trains twice.

  Raises:
    PolicyError: an unknown hyperparameter, or a value that cannot work.
  """
  fields = module_fields(HSDAGPolicy) - {"num_devices"}
  unknown = set(hparams) - fields
  if unknown:
    raise PolicyError(
        f"Unknown HSDAG policy hyperparameters {sorted(unknown)}; remove "
        f"them from config.policy (the policy takes {sorted(fields)}).")
  policy = HSDAGPolicy(num_devices=num_devices, **hparams)  # validates
  return _POLICIES.setdefault((num_devices,) + tuple(sorted(hparams.items())),
                              policy)
