"""The HSDAG placement policy (Duan et al., "A Structure-Aware Framework for
Learning Device Placements on Computation Graphs", NeurIPS 2024): GCN node
embeddings, graph-parsing pooling into learned groups, one device
distribution per group.

Where this sits: the training loop coarsens each graph first
(``config.groups.rule = "hsdag"``: an op merges into its single successor
when that successor has no other parent, :func:`gplace.coarsen`), so
:class:`HSDAGPolicy` sees the coarse graph. It follows the one-shot policy
interface of :mod:`gplace.policies.base` and is registered as ``"hsdag"``.

Architecture (the public code, github.com/Esthesia/HSDAG: ``config.py``,
``model.py`` class ``GPN``, ``layer.py`` classes ``GNN``, ``MLP``,
``ParsingNet_GPU``, ``main.py`` class ``PPO``):

1. Input transform: an MLP of ``num_transform_layers`` (2) layers, each
   Dense, LayerNorm, ReLU, over ``[Embed(op_type) ‖ node features ‖
   position]``.
2. Per pooling level (Graph Parsing Network, Song et al. 2024):
   ``h1 = GCN_1(h)`` (``num_gcn_layers`` = 2 GCN layers, ReLU after each,
   then ``LayerNorm(h + .)``); edge scores ``sigmoid(MLP(h1[u] * h1[v]))``
   (``num_scorer_layers`` = 2, LayerNorm inside; symmetric in ``u, v``);
   every node keeps its highest-scoring incident edge; the groups are the
   connected components of the kept edges (their number is not fixed).
   Group features: ``h2 = GCN_2(h)`` (``num_pool_gcn_layers`` = 1, its own
   weights), ``post(sum over members of pre(h2))`` with ``pre``/``post`` one
   Dense + ReLU + ``LayerNorm(x + .)`` each (DeepSets), times the *sum of
   the scores of the edges inside the group* (the code multiplies by their
   mean and by their count; 1 for a single node). That product is how
   gradients reach the edge scorer: the choice of kept edges and groups is
   discrete. The coarse graph of the next level has one node per group and
   one edge per pair of adjacent groups.
3. Output transform (2 layers, Dense + ReLU) of each final group, then the
   placement head ``Dense(head_hidden_size = 128), ReLU, Dense(D)``; every
   node gets its group's logits.

Hyperparameters of the code: hidden 128 everywhere, the layer counts above,
dropout 0.2, Adam lr 1e-3, 20 placements per update, REINFORCE on
``1 / latency`` (see ``experiments/configs/hsdag.py`` for the RL side).

Deviations, and why:

* Pooling levels: the code repeats parsing until a level merges nothing,
  which (every non-isolated node keeps an edge) ends with one group per
  connected component: as we read ``model.py``, a connected graph then gets
  a single device, a placement its own reward rejects (1e10 for all-CPU or
  all-GPU). Here ``num_pooling_levels`` is fixed, default 1: on tiny
  rnnlm2's 256 coarse nodes, 1, 2 and 3 levels give 24, 6 and 1 groups at
  initialisation, and with 2 levels the score factor (which grows with the
  group size) compounded and saturated the policy on one device in a trial.
  A static count also keeps shapes static under jit.
* Groups live in the ``N_pad`` node slots of the input: a group is stored at
  its lowest member index (the label of min-label propagation, a
  ``lax.while_loop`` until no label changes), so every level has the same
  shapes and padding nodes (no edges) stay groups of their own.
* Kept-edge ties go to the lowest edge index (the code: a stable sort).
* No dropout (0.2 in the code): the same parameters must give the same
  logits when sampling and when scoring the samples (PPO ratios, REINFORCE
  log-probabilities).
* Features: gplace's node features (FLOPs, bytes, output shape, depth,
  degrees, kind) and a learned op-type embedding instead of the code's
  one-hot op type averaged over a coarse node's members; the relative
  topological position instead of the raw node index.
* The output transform ends at ``hidden_size`` (the code: the input feature
  width); the head's last layer starts near zero (as GO's), so the initial
  policy is near uniform.
* One-shot: the code adds the group features of the last placement to the
  node features before the next of 20 placements; here all samples of a
  step come from the same logits.
* Default ``hidden_size`` is the code's 128; the configs may use less to
  train on a CPU.
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
from gplace.policies.base import register_policy
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
  """An :class:`HSDAGPolicy` from flat hyperparameters (``config.policy``).

  Equal arguments return the same (immutable) module, so that compile
  caches keyed on ``policy.apply`` (a bound method: Python compares its
  ``__self__`` by identity) hit when one process trains twice.

  Raises:
    PolicyError: an unknown hyperparameter, or a value that cannot work.
  """
  fields = {f.name for f in dataclasses.fields(HSDAGPolicy)} - {
      "parent", "name", "num_devices"}
  unknown = set(hparams) - fields
  if unknown:
    raise PolicyError(
        f"Unknown HSDAG policy hyperparameters {sorted(unknown)}; remove "
        f"them from config.policy (the policy takes {sorted(fields)}).")
  policy = HSDAGPolicy(num_devices=num_devices, **hparams)  # validates
  return _POLICIES.setdefault((num_devices,) + tuple(sorted(hparams.items())),
                              policy)
