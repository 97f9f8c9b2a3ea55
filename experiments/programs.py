"""Small real JAX programs for checks on this machine: an MLP forward
pass, a flax Transformer LM train step with adamw, a small conv net forward
pass. Each builder returns ``(fn, args)``; :data:`PROGRAMS` maps their names
to them (``experiments/local_check.py``, ``experiments/multitask.py
--programs``)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


def mlp():
  """A 4-layer MLP forward pass, batch 512."""
  rng = np.random.default_rng(0)
  params = [jnp.asarray(rng.normal(size=(1024, 1024)) / 32, jnp.float32)
            for _ in range(4)]
  x = jnp.asarray(rng.normal(size=(512, 1024)), jnp.float32)

  def forward(params, x):
    for w in params:
      x = jax.nn.relu(x @ w)
    return x.mean()
  return forward, (params, x)


class _Block(nn.Module):
  width: int
  heads: int

  @nn.compact
  def __call__(self, x):
    y = nn.LayerNorm(name="ln1")(x)
    y = nn.SelfAttention(num_heads=self.heads, name="attn")(
        y, mask=nn.make_causal_mask(x[..., 0]))
    x = x + y
    y = nn.LayerNorm(name="ln2")(x)
    y = nn.Dense(4 * self.width, name="up")(y)
    return x + nn.Dense(self.width, name="down")(nn.gelu(y))


class _TinyLM(nn.Module):
  vocab: int = 512
  width: int = 128
  layers: int = 4
  heads: int = 4

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(self.vocab, self.width, name="embed")(tokens)
    for i in range(self.layers):
      x = _Block(self.width, self.heads, name=f"block_{i}")(x)
    return nn.Dense(self.vocab, name="head")(nn.LayerNorm(name="ln")(x))


def lm_step(model: nn.Module, tokens, learning_rate: float = 1e-3):
  """``(step, (params, opt_state, tokens))``: a next-token train step of
  ``model`` (int ``tokens [B, T]`` in, logits ``[B, T, V]`` out) with
  adamw; ``step`` returns the new params, optimizer state and the loss."""
  params = model.init(jax.random.PRNGKey(0), tokens)
  optimizer = optax.adamw(learning_rate)

  def step(params, opt_state, tokens):
    def loss_fn(params):
      logits = model.apply(params, tokens[:, :-1])
      return optax.softmax_cross_entropy_with_integer_labels(
          logits, tokens[:, 1:]).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
  return step, (params, optimizer.init(params), tokens)


def lm():
  """A Transformer LM train step (4 blocks, width 128, adamw)."""
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, 512, (8, 64)))
  return lm_step(_TinyLM(), tokens)


class _ConvNet(nn.Module):
  @nn.compact
  def __call__(self, x):
    for i, features in enumerate((32, 64, 64, 128)):
      x = nn.relu(nn.Conv(features, (3, 3), name=f"conv_{i}")(x))
      if i % 2:
        x = nn.avg_pool(x, (2, 2), (2, 2))
    return nn.Dense(10, name="head")(x.mean(axis=(1, 2)))


def convnet():
  """A 4-layer conv net forward pass on 32 images of 64x64x3."""
  model = _ConvNet()
  images = jnp.asarray(np.random.default_rng(0).normal(size=(32, 64, 64, 3)),
                       jnp.float32)
  params = model.init(jax.random.PRNGKey(0), images)
  return (lambda params, images: model.apply(params, images).mean(),
          (params, images))


PROGRAMS = {"mlp": mlp, "lm": lm, "convnet": convnet}
