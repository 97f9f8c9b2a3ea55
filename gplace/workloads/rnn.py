"""Recurrent workloads unrolled in time as in the papers' graphs: GNMT (Wu et
al. 2016; hidden 1024, vocabulary 32k, batch 128, length 50) and the RNN LM
(after Jozefowicz et al. 2016; hidden 2048, batch 64, 20 steps, a full 40k
softmax: the paper's sampled 800k one is not modelled). Adam. A layer's
weights and names are shared over steps.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from gplace.workloads.common import BatchField, WorkloadSpec, cross_entropy

# size -> (hidden, vocab, batch, source length, target length)
GNMT_SIZES = {
    "tiny": dict(hidden=16, vocab=32, batch=2, source_len=3, target_len=3),
    "small": dict(hidden=64, vocab=256, batch=8, source_len=10, target_len=10),
    "paper": dict(hidden=1024, vocab=32000, batch=128, source_len=50,
                  target_len=50),
}
# size -> (hidden, vocab, batch, steps)
RNNLM_SIZES = {
    "tiny": dict(hidden=16, vocab=32, batch=2, steps=4),
    "small": dict(hidden=128, vocab=1000, batch=8, steps=20),
    "paper": dict(hidden=2048, vocab=40000, batch=64, steps=20),
}


class LSTMCell(nn.Module):
  """One LSTM step. Carry ``(c, h)``, each ``[B, hidden]``; input ``[B, I]``."""
  hidden: int

  @nn.compact
  def __call__(self, carry, x):
    c, h = carry
    gates = (nn.Dense(4 * self.hidden, use_bias=False, name="input")(x)
             + nn.Dense(4 * self.hidden, name="recurrent")(h))  # [B, 4H]
    i, g, f, o = jnp.split(gates, 4, axis=-1)
    c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (c, h), h


def zero_carry(batch: int, hidden: int, dtype=jnp.float32):
  return (jnp.zeros((batch, hidden), dtype), jnp.zeros((batch, hidden), dtype))


def unroll(cell: LSTMCell, xs: list[jax.Array], reverse: bool = False):
  """Applies ``cell`` along the list ``xs`` (each ``[B, I]``); returns the
  list of outputs, each ``[B, hidden]``, in the order of ``xs``."""
  carry = zero_carry(xs[0].shape[0], cell.hidden, xs[0].dtype)
  order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
  outputs = [None] * len(xs)
  for t in order:
    carry, outputs[t] = cell(carry, xs[t])
  return outputs


class BidirectionalLayer(nn.Module):
  """Forward and backward LSTMs over a sequence, outputs concatenated."""
  hidden: int

  @nn.compact
  def __call__(self, xs: list[jax.Array]) -> list[jax.Array]:
    forward = unroll(LSTMCell(self.hidden, name="forward"), xs)
    backward = unroll(LSTMCell(self.hidden, name="backward"), xs, reverse=True)
    return [jnp.concatenate([f, b], -1) for f, b in zip(forward, backward)]


class GNMTEncoder(nn.Module):
  """Token ids ``[B, S]`` -> encoder states ``[B, S, hidden]``."""
  n_layers: int
  hidden: int
  vocab: int

  @nn.compact
  def __call__(self, source: jax.Array) -> jax.Array:
    embedded = nn.Embed(self.vocab, self.hidden, name="embedding")(source)
    xs = [embedded[:, t] for t in range(source.shape[1])]
    xs = BidirectionalLayer(self.hidden, name="layer_0")(xs)
    for i in range(1, self.n_layers):
      hs = unroll(LSTMCell(self.hidden, name=f"layer_{i}"), xs)
      xs = [x + h for x, h in zip(xs, hs)] if i >= 2 else hs
    return jnp.stack(xs, axis=1)


class AdditiveAttention(nn.Module):
  """Bahdanau attention over encoder states.

  ``__call__(None, memory [B, S, H]) -> keys [B, S, H]`` projects the memory,
  once per sequence; ``__call__(query [B, H], memory, keys) -> context
  [B, H]`` attends, once per step. (One entry point, so that every op of the
  attention is named ``.../attention/...``.)
  """
  hidden: int

  def setup(self):
    self.memory_layer = nn.Dense(self.hidden, use_bias=False)
    self.query_layer = nn.Dense(self.hidden, use_bias=False)
    self.score = self.param("score", nn.initializers.normal(0.1),
                            (self.hidden,))

  def __call__(self, query, memory, keys=None):
    if query is None:
      return self.memory_layer(memory)
    energy = jnp.tanh(keys + self.query_layer(query)[:, None, :])  # [B, S, H]
    weights = jax.nn.softmax(jnp.sum(energy * self.score, -1), -1)  # [B, S]
    return jnp.einsum("bs,bsh->bh", weights, memory)


class GNMTDecoder(nn.Module):
  """Teacher-forced decoder: ``(memory [B, S, H], target_in [B, T]) ->
  logits [B, T, vocab]``."""
  n_layers: int
  hidden: int
  vocab: int

  @nn.compact
  def __call__(self, memory: jax.Array, target_in: jax.Array) -> jax.Array:
    batch, steps = target_in.shape
    embedded = nn.Embed(self.vocab, self.hidden, name="embedding")(target_in)
    cells = [LSTMCell(self.hidden, name=f"layer_{i}")
             for i in range(self.n_layers)]
    attention = AdditiveAttention(self.hidden, name="attention")
    keys = attention(None, memory)  # [B, S, H]
    carries = [zero_carry(batch, self.hidden, memory.dtype)
               for _ in range(self.n_layers)]
    context = jnp.zeros((batch, self.hidden), memory.dtype)
    outputs = []
    for t in range(steps):
      carries[0], x = cells[0](
          carries[0], jnp.concatenate([embedded[:, t], context], -1))
      context = attention(x, memory, keys)
      for i in range(1, self.n_layers):
        carries[i], h = cells[i](carries[i], jnp.concatenate([x, context], -1))
        x = x + h if i >= 2 else h
      outputs.append(jnp.concatenate([x, context], -1))
    hidden = jnp.stack(outputs, axis=1)  # [B, T, 2H]
    return nn.Dense(self.vocab, name="softmax")(hidden)


class GNMT(nn.Module):
  """``(source [B, S], target_in [B, T]) -> logits [B, T, vocab]``."""
  n_layers: int
  hidden: int
  vocab: int

  @nn.compact
  def __call__(self, source, target_in):
    memory = GNMTEncoder(self.n_layers, self.hidden, self.vocab,
                         name="Encoder")(source)
    return GNMTDecoder(self.n_layers, self.hidden, self.vocab,
                       name="Decoder")(memory, target_in)


class RNNLM(nn.Module):
  """``tokens [B, T] -> logits [B, T, vocab]``, a stack of unrolled LSTMs."""
  n_layers: int
  hidden: int
  vocab: int

  @nn.compact
  def __call__(self, tokens):
    embedded = nn.Embed(self.vocab, self.hidden, name="embedding")(tokens)
    xs = [embedded[:, t] for t in range(tokens.shape[1])]
    for i in range(self.n_layers):
      xs = unroll(LSTMCell(self.hidden, name=f"layer_{i}"), xs)
    hidden = jnp.stack(xs, axis=1)  # [B, T, H]
    return nn.Dense(self.vocab, name="softmax")(hidden)


def gnmt_spec(n_layers: int, size: str) -> WorkloadSpec:
  """GNMT with ``n_layers`` encoder and ``n_layers`` decoder layers."""
  cfg = GNMT_SIZES[size]
  b, s, t, v = cfg["batch"], cfg["source_len"], cfg["target_len"], cfg["vocab"]
  model = GNMT(n_layers, cfg["hidden"], v, name="GNMT")
  return WorkloadSpec(
      model=model,
      batch={"source": BatchField((b, s), jnp.int32, v),
             "target_in": BatchField((b, t), jnp.int32, v),
             "target_out": BatchField((b, t), jnp.int32, v)},
      model_inputs=lambda batch: (batch["source"], batch["target_in"]),
      loss=lambda logits, batch: cross_entropy(logits, batch["target_out"]),
      optimizer=optax.adam(1e-3))


def rnnlm_spec(n_layers: int, size: str) -> WorkloadSpec:
  """RNN language model with ``n_layers`` LSTM layers."""
  cfg = RNNLM_SIZES[size]
  b, t, v = cfg["batch"], cfg["steps"], cfg["vocab"]
  model = RNNLM(n_layers, cfg["hidden"], v, name="RNNLM")
  return WorkloadSpec(
      model=model,
      batch={"tokens": BatchField((b, t), jnp.int32, v),
             "labels": BatchField((b, t), jnp.int32, v)},
      model_inputs=lambda batch: (batch["tokens"],),
      loss=lambda logits, batch: cross_entropy(logits, batch["labels"]),
      optimizer=optax.adam(1e-3))
