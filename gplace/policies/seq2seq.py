"""Sequence-to-sequence blocks of ColocRL and HDP: :class:`AttentionDecoder`
(one ``lax.scan`` to sample, decode greedily or teacher-force) and
:class:`Seq2SeqPlacer` over the encoder of
:mod:`gplace.policies.sequence_encoder`. Linen cannot create parameters inside a scan, so at init
each scanned body runs once outside it and ``init_with_output`` returns
zeros.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from gplace.errors import PolicyError
from gplace.graphs import features as features_lib
from gplace.policies.layers import NEG_INF
from gplace.policies.sequence_encoder import (
    NODE_FEATURE_CHOICES, Carry, LSTMCell, OpEmbedding)


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
