"""Attention workloads: the BERT-base encoder (HSDAG) and Transformer-XL
(GO). Paper sizes: BERT 12 layers, hidden 768, 12 heads, sequence 128,
batch 32, masked-LM loss; Transformer-XL d_model 512, 8 heads, segment and
memory 128, batch 32, memory ``[L, B, M, D]`` an input, a full 32k softmax
(wt103's adaptive softmax is not modelled). Adam.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplace.workloads.common import BatchField, WorkloadSpec, cross_entropy

BERT_SIZES = {
    "tiny": dict(n_layers=2, hidden=16, heads=2, ffn=32, vocab=64, seq=8,
                 batch=2),
    "small": dict(n_layers=4, hidden=64, heads=4, ffn=256, vocab=1000, seq=32,
                  batch=4),
    "paper": dict(n_layers=12, hidden=768, heads=12, ffn=3072, vocab=30522,
                  seq=128, batch=32),
}
TXL_SIZES = {
    "tiny": dict(hidden=16, heads=2, ffn=32, vocab=64, seq=8, memory=8,
                 batch=2),
    "small": dict(hidden=64, heads=4, ffn=256, vocab=1000, seq=32, memory=32,
                  batch=4),
    "paper": dict(hidden=512, heads=8, ffn=2048, vocab=32000, seq=128,
                  memory=128, batch=32),
}


def _split_heads(x: jax.Array, heads: int) -> jax.Array:
  """``[B, T, D] -> [B, T, heads, D // heads]``."""
  return x.reshape(x.shape[:-1] + (heads, x.shape[-1] // heads))


class SelfAttention(nn.Module):
  """BERT multi-head self-attention: ``x [B, T, D]``, ``mask [B, T]`` (1 for
  real tokens) -> ``[B, T, D]``."""
  heads: int

  @nn.compact
  def __call__(self, x, mask):
    dim = x.shape[-1]
    q = _split_heads(nn.Dense(dim, name="query")(x), self.heads)
    k = _split_heads(nn.Dense(dim, name="key")(x), self.heads)
    v = _split_heads(nn.Dense(dim, name="value")(x), self.heads)
    scores = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(q.shape[-1])
    scores = jnp.where(mask[:, None, None, :] > 0, scores, -1e9)
    weights = jax.nn.softmax(scores, axis=-1)
    context = jnp.einsum("bhts,bshd->bthd", weights, v).reshape(x.shape)
    return nn.Dense(dim, name="output")(context)


class FeedForward(nn.Module):
  """Position-wise MLP ``[B, T, D] -> [B, T, D]``."""
  hidden: int
  activation: str = "gelu"

  @nn.compact
  def __call__(self, x):
    act = jax.nn.gelu if self.activation == "gelu" else jax.nn.relu
    h = act(nn.Dense(self.hidden, name="intermediate")(x))
    return nn.Dense(x.shape[-1], name="output")(h)


class PostNormLayer(nn.Module):
  """Attention then feed-forward, each residual and post-LayerNorm (BERT,
  Transformer-XL). ``attention(heads)(x, context)``: context is BERT's mask or
  Transformer-XL's memory."""
  heads: int
  ffn: int
  attention: type
  activation: str = "gelu"

  @nn.compact
  def __call__(self, x, context):
    x = nn.LayerNorm(name="attention_norm")(
        x + self.attention(self.heads, name="attention")(x, context))
    return nn.LayerNorm(name="output_norm")(
        x + FeedForward(self.ffn, self.activation, name="feed_forward")(x))


class BertEncoder(nn.Module):
  """``tokens [B, T]``, ``segments [B, T]``, ``mask [B, T]`` -> ``[B, T, D]``."""
  n_layers: int
  hidden: int
  heads: int
  ffn: int
  vocab: int
  max_len: int = 512

  @nn.compact
  def __call__(self, tokens, segments, mask):
    positions = jnp.arange(tokens.shape[1])[None, :]
    x = (nn.Embed(self.vocab, self.hidden, name="word_embedding")(tokens)
         + nn.Embed(self.max_len, self.hidden,
                    name="position_embedding")(positions)
         + nn.Embed(2, self.hidden, name="segment_embedding")(segments))
    x = nn.LayerNorm(name="embedding_norm")(x)
    for i in range(self.n_layers):
      x = PostNormLayer(self.heads, self.ffn, SelfAttention,
                        name=f"layer_{i}")(x, mask)
    return x


class Bert(nn.Module):
  """BERT encoder plus a masked-LM head: -> logits ``[B, T, vocab]``."""
  n_layers: int
  hidden: int
  heads: int
  ffn: int
  vocab: int

  @nn.compact
  def __call__(self, tokens, segments, mask):
    x = BertEncoder(self.n_layers, self.hidden, self.heads, self.ffn,
                    self.vocab, name="BertEncoder")(tokens, segments, mask)
    return nn.Dense(self.vocab, name="mlm_head")(x)


def sinusoid(length: int, dim: int) -> np.ndarray:
  """``[length, dim]`` sinusoidal embedding of distances ``0..length-1``."""
  inv_freq = 1.0 / (10000 ** (np.arange(0, dim, 2) / dim))
  angles = np.arange(length)[:, None] * inv_freq[None, :]
  return np.concatenate([np.sin(angles), np.cos(angles)], -1).astype(
      np.float32)


class RelativeAttention(nn.Module):
  """Transformer-XL attention of a segment over ``[memory; segment]``.

  ``x [B, T, D]``, ``memory [B, M, D]`` -> ``[B, T, D]``. Query ``t`` (at
  absolute position ``M + t``) sees keys ``s <= M + t``; the position term
  uses the sinusoid of the distance ``M + t - s``.
  """
  heads: int

  @nn.compact
  def __call__(self, x, memory):
    batch, steps, dim = x.shape
    mem_len = memory.shape[1]
    keys_len = mem_len + steps
    head_dim = dim // self.heads
    full = jnp.concatenate([memory, x], axis=1)  # [B, M+T, D]
    q = _split_heads(nn.Dense(dim, use_bias=False, name="query")(x), self.heads)
    k = _split_heads(nn.Dense(dim, use_bias=False, name="key")(full),
                     self.heads)
    v = _split_heads(nn.Dense(dim, use_bias=False, name="value")(full),
                     self.heads)
    r = nn.Dense(dim, use_bias=False, name="position")(
        jnp.asarray(sinusoid(keys_len, dim)))  # [K, D], K distances
    r = r.reshape(keys_len, self.heads, head_dim)
    u = self.param("content_bias", nn.initializers.zeros,
                   (self.heads, head_dim))
    w = self.param("position_bias", nn.initializers.zeros,
                   (self.heads, head_dim))
    content = jnp.einsum("bthd,bshd->bhts", q + u, k)  # [B, H, T, M+T]
    by_distance = jnp.einsum("bthd,khd->bhtk", q + w, r)  # [B, H, T, K]
    distance = mem_len + np.arange(steps)[:, None] - np.arange(keys_len)[None]
    position = jnp.take_along_axis(
        by_distance, np.clip(distance, 0, keys_len - 1)[None, None], axis=-1)
    scores = (content + position) / np.sqrt(head_dim)
    scores = jnp.where((distance >= 0)[None, None], scores, -1e9)
    weights = jax.nn.softmax(scores, axis=-1)
    context = jnp.einsum("bhts,bshd->bthd", weights, v)
    return nn.Dense(dim, use_bias=False, name="output")(
        context.reshape(batch, steps, dim))



class TransformerXL(nn.Module):
  """``tokens [B, T]``, ``memory [L, B, M, D]`` -> ``(logits [B, T, vocab],
  new_memory [L, B, M, D])``."""
  n_layers: int
  hidden: int
  heads: int
  ffn: int
  vocab: int

  @nn.compact
  def __call__(self, tokens, memory):
    mem_len = memory.shape[2]
    x = nn.Embed(self.vocab, self.hidden, name="embedding")(tokens)
    new_memory = []
    for i in range(self.n_layers):
      layer_memory = jax.lax.stop_gradient(memory[i])
      new_memory.append(jax.lax.stop_gradient(
          jnp.concatenate([layer_memory, x], axis=1)[:, -mem_len:]))
      x = PostNormLayer(self.heads, self.ffn, RelativeAttention, "relu",
                        name=f"layer_{i}")(x, layer_memory)
    logits = nn.Dense(self.vocab, name="softmax")(x)
    return logits, jnp.stack(new_memory)


def bert_spec(size: str) -> WorkloadSpec:
  cfg = BERT_SIZES[size]
  b, t, v = cfg["batch"], cfg["seq"], cfg["vocab"]
  model = Bert(cfg["n_layers"], cfg["hidden"], cfg["heads"], cfg["ffn"], v,
               name="Bert")
  return WorkloadSpec(
      model=model,
      batch={"tokens": BatchField((b, t), jnp.int32, v),
             "segments": BatchField((b, t), jnp.int32, 2),
             "mask": BatchField((b, t), jnp.int32),
             "labels": BatchField((b, t), jnp.int32, v),
             "label_weights": BatchField((b, t), jnp.float32, 2)},
      model_inputs=lambda batch: (batch["tokens"], batch["segments"],
                                  batch["mask"]),
      loss=lambda logits, batch: cross_entropy(
          logits, batch["labels"], batch["label_weights"]),
      optimizer=optax.adam(1e-4))


def transformer_xl_spec(n_layers: int, size: str) -> WorkloadSpec:
  cfg = TXL_SIZES[size]
  b, t, m, v, d = (cfg["batch"], cfg["seq"], cfg["memory"], cfg["vocab"],
                   cfg["hidden"])
  model = TransformerXL(n_layers, d, cfg["heads"], cfg["ffn"], v,
                        name="TransformerXL")
  return WorkloadSpec(
      model=model,
      batch={"tokens": BatchField((b, t), jnp.int32, v),
             "memory": BatchField((n_layers, b, m, d), jnp.float32),
             "labels": BatchField((b, t), jnp.int32, v)},
      model_inputs=lambda batch: (batch["tokens"], batch["memory"]),
      loss=lambda outputs, batch: cross_entropy(outputs[0], batch["labels"]),
      optimizer=optax.adam(2.5e-4))
