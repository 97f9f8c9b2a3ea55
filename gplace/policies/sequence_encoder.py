"""The encoder half of ColocRL and HDP: :func:`adjacency_encoding`,
:class:`OpEmbedding`, :class:`LSTMCell` and :class:`SequenceEncoder` (a
(bi)LSTM over the op sequence that skips masked steps).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from gplace.errors import PolicyError
from gplace.graphs import features as features_lib
from gplace.policies.go import relative_position_encoding

# Node-feature columns that describe an op's output (ColocRL's "output
# shape"): log1p of its bytes and of each dimension (0 past the rank).
SHAPE_FEATURE_COLUMNS: tuple[int, ...] = tuple(
    i for i, name in enumerate(features_lib.NODE_FEATURE_NAMES)
    if name == "log1p_out_bytes" or name.startswith("log1p_out_dim_"))
NODE_FEATURE_CHOICES = ("shape", "all")

# LSTM carry: (cell, hidden), each [B, H].
Carry = tuple[jax.Array, jax.Array]


# -- op embeddings -------------------------------------------------------------


def adjacency_encoding(graphs: jraph.GraphsTuple,
                       num_buckets: int) -> jax.Array:
  """Which positions feed each node and which it feeds, at a fixed width.

  ColocRL's one-hot adjacency (a row of length ``N``) does not fit a fixed
  input width nor 1k-node sequences; grappler's HDP kept the first 20
  neighbour indices as raw numbers. Here each forward edge ``u -> v``
  counts once in bucket ``floor(log2(|pos(v) - pos(u)|))`` (clipped to
  ``num_buckets - 1``) of ``v``'s "fed by" row and of ``u``'s "feeds" row:
  local chains (distance 1), skip connections and long-range edges (a layer
  feeding the loss) land in different buckets, independent of ``N`` and of
  padding. Counts are ``log1p``-scaled.

  Returns:
    ``f32 [N_pad, 2 * num_buckets]``: fed-by buckets, then feeds buckets
    (zeros for ``num_buckets == 0`` and on padding nodes).
  """
  n_pad = graphs.nodes["mask"].shape[0]
  if num_buckets == 0:
    return jnp.zeros((n_pad, 0), jnp.float32)
  position = graphs.nodes["position"]
  forward = (graphs.edges["mask"] & (graphs.edges["direction"] == 0))
  distance = jnp.abs(position[graphs.receivers] - position[graphs.senders])
  bucket = jnp.clip(
      jnp.floor(jnp.log2(jnp.maximum(distance, 1).astype(jnp.float32))),
      0, num_buckets - 1).astype(jnp.int32)
  one_hot = jax.nn.one_hot(bucket, num_buckets) * forward[:, None]
  fed_by = jax.ops.segment_sum(one_hot, graphs.receivers, n_pad)
  feeds = jax.ops.segment_sum(one_hot, graphs.senders, n_pad)
  return jnp.log1p(jnp.concatenate([fed_by, feeds], -1))


class OpEmbedding(nn.Module):
  """Per-node op embedding: ``Embed(op_type) ‖ LayerNorm(features ‖
  adjacency ‖ position)``.

  The float part is layer-normalised because the node features are
  unnormalised ``log1p`` values (up to ~25) that would saturate LSTM gates.

  Attributes:
    vocabulary_size: op-type ids (larger ids share the last row).
    op_embedding_size: width of the op-type embedding.
    adjacency_buckets: buckets of :func:`adjacency_encoding` per direction.
    node_features: ``"shape"`` (the output-shape columns, as ColocRL) or
      ``"all"`` (every column of ``NODE_FEATURE_NAMES``, or of whatever
      features the graphs carry).
    num_position_frequencies: frequencies of the node's relative position
      in topological order (:func:`gplace.policies.go.
      relative_position_encoding`; 0: only the fraction). The papers'
      adjacency carried absolute neighbour indices, i.e. where an op sits;
      this says so at a fixed width, and lets HDP's grouper tell apart ops
      that look alike (two copies of a layer).
  """

  vocabulary_size: int = features_lib.VOCABULARY_SIZE
  op_embedding_size: int = 16
  adjacency_buckets: int = 8
  node_features: str = "shape"
  num_position_frequencies: int = 4

  @nn.compact
  def __call__(self, graphs: jraph.GraphsTuple) -> jax.Array:
    """Returns ``f32 [N_pad, E]`` (zeros on padding nodes), ``E =
    op_embedding_size + F + 2 * adjacency_buckets + 1 + 2 *
    num_position_frequencies`` for ``F`` node-feature columns."""
    nodes = graphs.nodes
    feats = jnp.asarray(nodes["features"], jnp.float32)
    if self.node_features == "shape":
      if feats.shape[-1] != features_lib.n_node_features:
        raise PolicyError(
            f"node_features='shape' reads the output-shape columns of "
            f"gplace.graphs.features.NODE_FEATURE_NAMES, but the graphs "
            f"carry {feats.shape[-1]} feature columns, not "
            f"{features_lib.n_node_features}; build them with "
            "to_graphs_tuple or set config.policy.node_features='all'.")
      feats = feats[:, np.asarray(SHAPE_FEATURE_COLUMNS)]
    dense = jnp.concatenate(
        [feats, adjacency_encoding(graphs, self.adjacency_buckets),
         relative_position_encoding(graphs, self.num_position_frequencies)],
        -1)
    dense = nn.LayerNorm(name="feature_norm")(dense)
    op_type = jnp.clip(nodes["op_type"], 0, self.vocabulary_size - 1)
    embedded = nn.Embed(self.vocabulary_size, self.op_embedding_size,
                        name="op_type_embedding")(op_type)
    x = jnp.concatenate([embedded, dense], -1)
    return x * nodes["mask"][:, None].astype(x.dtype)


# -- encoder -------------------------------------------------------------------


def _forget_bias_init(key: jax.Array, shape: tuple[int, ...],
                      dtype=jnp.float32) -> jax.Array:
  """Bias of the four gates ``[i, f, g, o]``: 1 for the forget gate, as
  grappler's controllers (``forget_bias_init = 1.0``), else 0."""
  del key
  hidden = shape[-1] // 4
  return jnp.zeros(shape, dtype).at[..., hidden:2 * hidden].set(1.0)


class LSTMCell(nn.Module):
  """An LSTM cell with one kernel over ``[x ‖ h]`` (glorot-uniform, as
  grappler's ``lstm``) and forget-gate bias 1.

  One matmul per step keeps the scanned bodies small, so they compile
  quickly on CPU (flax's cells use orthogonal recurrent kernels, whose QR
  decomposition alone takes seconds to compile).

  Attributes:
    hidden_size: ``H``.
  """

  hidden_size: int

  @nn.compact
  def __call__(self, carry: Carry, x: jax.Array) -> tuple[Carry, jax.Array]:
    """Args: carry ``(c, h)`` each ``[B, H]``, x ``[B, E]``.

    Returns:
      the new carry and the output ``h`` ``[B, H]``.
    """
    c, h = carry
    gates = nn.Dense(4 * self.hidden_size, name="gates",
                     kernel_init=nn.initializers.glorot_uniform(),
                     bias_init=_forget_bias_init)(
                         jnp.concatenate([x, h], -1))
    i, f, g, o = jnp.split(gates, 4, -1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (c, h), h


class SequenceEncoder(nn.Module):
  """LSTM encoder over ``[B, L, E]`` that skips masked steps, uni- or
  bidirectional (each direction ``H / 2`` wide, concatenated, as grappler's
  HDP).

  A masked step leaves a direction's carry as it was and outputs zeros, so
  padding at the end (and HDP's empty groups anywhere) changes nothing the
  real steps compute. Both directions run in one ``lax.scan`` (step ``t``
  of the forward pass and step ``L - 1 - t`` of the backward one), which
  compiles about as fast as one direction; two scans take twice as long.

  Attributes:
    hidden_size: ``H``, width of the states and of the final carry (even
      when bidirectional).
    bidirectional: a forward and a backward pass.
  """

  hidden_size: int
  bidirectional: bool = False

  def setup(self):
    width = self.hidden_size // 2 if self.bidirectional else self.hidden_size
    self.forward_cell = LSTMCell(width)
    if self.bidirectional:
      self.backward_cell = LSTMCell(width)

  def __call__(self, inputs: jax.Array,
               mask: jax.Array) -> tuple[jax.Array, Carry]:
    """Args: inputs ``[B, L, E]``, mask ``bool [B, L]``.

    Returns:
      states ``f32 [B, L, H]`` (0 on masked steps; the decoder's attention
      memory) and the carry after the last unmasked step of each direction
      (``(c, h)``, each ``[B, H]``; the decoder's initial state).
    """
    cells = [self.forward_cell]
    xs = [(jnp.swapaxes(inputs, 0, 1), jnp.swapaxes(mask, 0, 1))]
    if self.bidirectional:
      cells.append(self.backward_cell)
      xs.append(jax.tree.map(lambda a: jnp.flip(a, 0), xs[0]))
    width = self.hidden_size // len(cells)
    zeros = jnp.zeros((inputs.shape[0], width), jnp.float32)
    initial = tuple((zeros, zeros) for _ in cells)

    def step(carries, xs):
      new_carries, outputs = [], []
      for cell, carry, (x, m) in zip(cells, carries, xs):
        new_carry, h = cell(carry, x)
        keep = m[:, None]
        new_carries.append(jax.tree.map(
            lambda new, old: jnp.where(keep, new, old), new_carry, carry))
        outputs.append(jnp.where(keep, h, 0.0))
      return tuple(new_carries), tuple(outputs)

    if self.is_initializing():  # see the module docstring
      step(initial, jax.tree.map(lambda a: a[0], tuple(xs)))
      return (jnp.zeros(inputs.shape[:2] + (self.hidden_size,)),
              (jnp.zeros((inputs.shape[0], self.hidden_size)),) * 2)
    carries, outputs = jax.lax.scan(step, initial, tuple(xs))
    outputs = list(outputs)
    if self.bidirectional:
      outputs[1] = jnp.flip(outputs[1], 0)
    states = jnp.concatenate([jnp.swapaxes(o, 0, 1) for o in outputs], -1)
    return states, (jnp.concatenate([c for c, _ in carries], -1),
                    jnp.concatenate([h for _, h in carries], -1))
