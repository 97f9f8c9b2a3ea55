"""Sequence-to-sequence blocks of ColocRL and HDP: :func:`adjacency_encoding`,
:class:`OpEmbedding`, :class:`SequenceEncoder` (skips masked steps) and
:class:`AttentionDecoder` (one ``lax.scan`` to sample, decode greedily or
teacher-force). Linen cannot create parameters inside a scan, so at init
each scanned body runs once outside it and ``init_with_output`` returns
zeros.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from gplace.errors import PolicyError
from gplace.graphs import features as features_lib
from gplace.policies.go import relative_position_encoding
from gplace.policies.layers import NEG_INF

# Node-feature columns that describe an op's output (ColocRL's "output
# shape"): log1p of its bytes and of each dimension (0 past the rank).
SHAPE_FEATURE_COLUMNS: tuple[int, ...] = tuple(
    i for i, name in enumerate(features_lib.NODE_FEATURE_NAMES)
    if name == "log1p_out_bytes" or name.startswith("log1p_out_dim_"))
NODE_FEATURE_CHOICES = ("shape", "all")

# LSTM carry: (cell, hidden), each [B, H].
Carry = tuple[jax.Array, jax.Array]


# -- validation helpers (shared by the policy factories) -----------------------


def check_positive(owner: str, **values: int) -> None:
  """Raises PolicyError unless every value is a positive integer."""
  for name, value in values.items():
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise PolicyError(
          f"{owner}: {name}={value!r} must be a positive integer; set "
          f"config.policy.{name} to e.g. 64 (hidden sizes) or 8.")


def check_choice(owner: str, name: str, value, choices) -> None:
  """Raises PolicyError unless ``value`` is one of ``choices``."""
  if value not in choices:
    raise PolicyError(f"{owner}: {name}={value!r} is not one of {choices}; "
                      f"set config.policy.{name} to one of them.")


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


# -- decoder -------------------------------------------------------------------


class Decoded(NamedTuple):
  """One decoding of ``K`` rows of ``L`` steps.

  Attributes:
    actions: ``int32 [K, L]``, the device of each step (0 on masked steps).
    log_probs: ``f32 [K, L]``, log-probability of each action (0 on masked
      steps).
    entropy: ``f32 [K, L]``, entropy of each step's distribution (0 on
      masked steps).
  """

  actions: jax.Array
  log_probs: jax.Array
  entropy: jax.Array


def device_mask_rows(device_mask: Optional[jax.Array], num_rows: int,
                     num_devices: int) -> jax.Array:
  """A policy's ``device_mask`` (None, ``[D]`` or ``[rows, D]``) as
  ``bool [num_rows, D]``."""
  if device_mask is None:
    return jnp.ones((num_rows, num_devices), bool)
  device_mask = jnp.asarray(device_mask, bool)
  if device_mask.shape[-1] != num_devices or device_mask.ndim > 2:
    raise PolicyError(
        f"device_mask has shape {device_mask.shape}; expected "
        f"[{num_devices}] or [{num_rows}, {num_devices}] for a policy of "
        f"{num_devices} devices (check config.topology).")
  return jnp.broadcast_to(device_mask, (num_rows, num_devices))


def sampling_noise(keys: jax.Array, shape: tuple[int, ...],
                   greedy) -> jax.Array:
  """Gumbel noise ``f32 [K, *shape]``, one draw per key (``keys [K, 2]``),
  or zeros where ``greedy``: ``argmax(logits + noise)`` then samples the
  softmax of ``logits`` (the Gumbel-max trick), or takes its argmax.

  Drawing all steps' noise up front keeps the random-number generator out
  of the decoding loop (the loop body stays small and compiles fast).
  ``greedy`` is a Python bool or a traced bool scalar.
  """
  if isinstance(greedy, bool) and greedy:
    return jnp.zeros((keys.shape[0],) + shape, jnp.float32)
  noise = jax.vmap(lambda key: jax.random.gumbel(key, shape))(keys)
  if isinstance(greedy, bool):
    return noise
  return jnp.where(greedy, 0.0, noise)


class AttentionDecoder(nn.Module):
  """LSTM decoder with additive (Bahdanau) attention, one device per step.

  Step ``t`` of row ``k``: the LSTM reads the embedding of the device chosen
  at ``t - 1`` (a learned "go" embedding at ``t = 0``), with
  ``feed_encoder_state`` also the encoder state of step ``t``; its output
  ``h`` attends over the encoder states ``m_j`` with scores
  ``v . tanh(W_m m_j + W_h h)``; logits ``= Dense([h ‖ context])``, with
  ``logit_tanh_constant`` ``c > 0`` squashed to ``c tanh(logits)``;
  disallowed devices get ``NEG_INF``.

  Attributes:
    num_devices: ``D``.
    hidden_size: ``H``, the LSTM width (= the encoder's).
    attention_size: width of the attention's hidden layer.
    device_embedding_size: width of the fed-back device embedding.
    feed_encoder_state: also feed the encoder state of the step being
      decided (so the decoder need not learn the alignment by attention).
    logit_tanh_constant: ``c`` (0: no squashing).
  """

  num_devices: int
  hidden_size: int
  attention_size: int
  device_embedding_size: int
  feed_encoder_state: bool = True
  logit_tanh_constant: float = 0.0

  def setup(self):
    self.cell = LSTMCell(self.hidden_size, name="cell")
    # Row D is the "go" embedding of step 0.
    self.device_embedding = nn.Embed(self.num_devices + 1,
                                     self.device_embedding_size,
                                     name="device_embedding")
    self.memory_projection = nn.Dense(self.attention_size,
                                      name="memory_projection")
    self.query_projection = nn.Dense(self.attention_size, use_bias=False,
                                     name="query_projection")
    self.attention_vector = nn.Dense(1, use_bias=False,
                                     name="attention_vector")
    self.output = nn.Dense(self.num_devices, name="output")

  def __call__(self, memory: jax.Array, memory_mask: jax.Array,
               carry: Carry, device_mask: jax.Array, *,
               actions: Optional[jax.Array] = None,
               keys: Optional[jax.Array] = None,
               greedy: bool = False) -> Decoded:
    """Decodes ``K`` rows: teacher-forced (``actions``), greedy
    (``greedy=True``, with ``keys`` for the row count) or sampled (``keys``).

    Args:
      memory: encoder states ``f32 [B, L, H]``, ``B`` 1 (shared by all
        rows) or ``K``.
      memory_mask: ``bool [B, L]``: real steps; masked steps are skipped
        (carry unchanged, action 0, log-prob and entropy 0) and never
        attended to.
      carry: the decoder's initial ``(c, h)``, each ``[B, H]``.
      device_mask: ``bool [B, L, D]`` or ``[L, D]``, allowed devices per
        step.
      actions: ``int [K, L]`` to score by teacher forcing.
      keys: ``[K, 2]`` PRNG keys, one per row (sampling and greedy).
      greedy: argmax at every step: a Python bool, or a traced bool
        scalar (one compiled function then samples and decodes greedily).

    Returns:
      A :class:`Decoded` of ``[K, L]`` arrays.
    """
    if (actions is None) == (keys is None):
      raise ValueError("Pass exactly one of actions (teacher forcing) and "
                       "keys (sampling, greedy).")
    rows = (actions if actions is not None else keys).shape[0]
    length = memory.shape[1]
    keys_projected = self.memory_projection(memory)  # [B, L, A]
    device_mask = jnp.broadcast_to(
        device_mask, memory.shape[:1] + (length, self.num_devices))

    def step(state, xs):
      carry, previous = state
      memory_t, mask_t, allowed_t, choice_t = xs
      x = self.device_embedding(previous)                      # [K, De]
      if self.feed_encoder_state:
        x = jnp.concatenate(
            [x, jnp.broadcast_to(memory_t, (rows, memory_t.shape[-1]))], -1)
      new_carry, h = self.cell(carry, x)                       # [K, H]
      query = self.query_projection(h)[:, None, :]             # [K, 1, A]
      scores = self.attention_vector(
          jnp.tanh(keys_projected + query))[..., 0]            # [K, L]
      weights = jax.nn.softmax(jnp.where(memory_mask, scores, NEG_INF), -1)
      if memory.shape[0] == 1:  # one memory shared by all rows
        context = weights @ memory[0]                          # [K, H]
      else:
        context = jnp.einsum("kl,klh->kh", weights, memory)
      logits = self.output(jnp.concatenate([h, context], -1))  # [K, D]
      if self.logit_tanh_constant > 0:
        logits = self.logit_tanh_constant * jnp.tanh(logits)
      logits = jnp.where(allowed_t, logits, NEG_INF)
      log_p = jax.nn.log_softmax(logits, -1)
      if actions is not None:  # choice_t: the given actions [K]
        action = jnp.clip(choice_t, 0, self.num_devices - 1)
      else:  # choice_t: Gumbel noise [K, D] (zeros when greedy)
        action = jnp.argmax(logits + choice_t, -1)
      action = action.astype(jnp.int32)
      log_prob = jnp.take_along_axis(log_p, action[:, None], -1)[:, 0]
      entropy = -jnp.sum(jnp.exp(log_p) * log_p, -1)
      real = jnp.broadcast_to(mask_t, (rows,))
      keep = real[:, None]
      carry = jax.tree.map(lambda new, old: jnp.where(keep, new, old),
                           new_carry, carry)
      previous = jnp.where(real, action, previous)
      action = jnp.where(real, action, 0)
      out = (action, jnp.where(real, log_prob, 0.0),
             jnp.where(real, entropy, 0.0))
      return (carry, previous), out

    carry = jax.tree.map(
        lambda a: jnp.broadcast_to(a, (rows, self.hidden_size)), carry)
    start = jnp.full((rows,), self.num_devices, jnp.int32)
    if actions is not None:
      choices = actions.T
    else:
      choices = jnp.swapaxes(
          sampling_noise(keys, (length, self.num_devices), greedy), 0, 1)
    xs = (jnp.swapaxes(memory, 0, 1),
          jnp.swapaxes(memory_mask, 0, 1), jnp.swapaxes(device_mask, 0, 1),
          choices)
    if self.is_initializing():  # see the module docstring
      step((carry, start), jax.tree.map(lambda a: a[0], xs))
      zeros = jnp.zeros((rows, length))
      return Decoded(zeros.astype(jnp.int32), zeros, zeros)
    # Rematerialised in the backward pass: otherwise autodiff keeps every
    # step's [K, L, A] attention activations (L^2 K A floats; 0.5 GB at
    # L=256, K=32, A=64), and the gradient is several times slower.
    _, (taken, log_probs, entropy) = jax.lax.scan(
        jax.checkpoint(step), (carry, start), xs)
    return Decoded(taken.T, log_probs.T, entropy.T)


# -- the placers' shared part ----------------------------------------------------


class Seq2SeqPlacer(nn.Module):
  """The hyperparameters and layers ColocRL and HDP share: an
  :class:`OpEmbedding` and an :class:`AttentionDecoder` built from them in
  :meth:`setup`; a subclass adds its own fields, calls ``super().setup()``
  and adds its encoder.

  Attributes:
    num_devices: ``D``.
    hidden_size: LSTM width ``H`` of the encoder and the decoder.
    attention_size: width of the additive attention's hidden layer.
    device_embedding_size: width of the fed-back device embedding.
    op_embedding_size: width of the op-type embedding.
    adjacency_buckets: log-distance buckets of the adjacency encoding per
      direction (0: no adjacency).
    num_position_frequencies: frequencies of the relative-position
      encoding in the op embedding (0: only the fraction).
    node_features: ``"shape"`` (the papers' output shapes) or ``"all"``.
    feed_encoder_state: the decoder also reads the encoder state of the
      step being placed (False: the papers' decoder).
    logit_tanh_constant: ``c > 0`` squashes device logits to
      ``c tanh(logits)`` (0: off).
    vocabulary_size: op-type ids (larger ids share the last row).
  """

  num_devices: int
  hidden_size: int = 64
  attention_size: int = 64
  device_embedding_size: int = 16
  op_embedding_size: int = 16
  adjacency_buckets: int = 8
  num_position_frequencies: int = 4
  node_features: str = "shape"
  feed_encoder_state: bool = True
  logit_tanh_constant: float = 0.0
  vocabulary_size: int = features_lib.VOCABULARY_SIZE

  def setup(self):
    self.op_embedding = OpEmbedding(
        self.vocabulary_size, self.op_embedding_size, self.adjacency_buckets,
        self.node_features, self.num_position_frequencies)
    self.decoder = AttentionDecoder(
        self.num_devices, self.hidden_size, self.attention_size,
        self.device_embedding_size, self.feed_encoder_state,
        self.logit_tanh_constant)


def validate_seq2seq_fields(module: Seq2SeqPlacer, owner: str) -> None:
  """Checks the hyperparameters of :class:`Seq2SeqPlacer` (PolicyError
  naming ``owner``)."""
  check_positive(
      owner, num_devices=module.num_devices, hidden_size=module.hidden_size,
      attention_size=module.attention_size,
      device_embedding_size=module.device_embedding_size,
      op_embedding_size=module.op_embedding_size,
      vocabulary_size=module.vocabulary_size)
  for name in ("adjacency_buckets", "num_position_frequencies"):
    value = getattr(module, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      raise PolicyError(
          f"{owner}: {name}={value!r} must be a non-negative integer; set "
          f"config.policy.{name} to e.g. 4 (0: none).")
  check_choice(owner, "node_features", module.node_features,
               NODE_FEATURE_CHOICES)
  if not module.logit_tanh_constant >= 0:
    raise PolicyError(
        f"{owner}: logit_tanh_constant={module.logit_tanh_constant!r} must "
        "be >= 0; set config.policy.logit_tanh_constant to 0 (off) or e.g. "
        "2.5.")
