"""The placement distribution a policy's logits ``[N, D]`` define:
sampling, log-probabilities, entropy, exploration (pure). Sample ``k``
draws from ``split(rng, K)[k]``, so samples split over devices are the
placements one device would draw.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp


def sample_placements(logits: jax.Array, rng: jax.Array,
                      num_samples: int) -> jax.Array:
  """Draws ``num_samples`` one-shot placements.

  Args:
    logits: ``[N, D]``.
    rng: a PRNG key; sample ``k`` uses ``split(rng, num_samples)[k]``.
    num_samples: ``K``.

  Returns:
    ``int32 [K, N]``.
  """
  keys = jax.random.split(rng, num_samples)
  return sample_with_keys(logits, keys)


def sample_with_keys(logits: jax.Array, keys: jax.Array) -> jax.Array:
  """One placement per key: ``logits [N, D]``, ``keys [K, 2]`` ->
  ``int32 [K, N]`` (a slice of the keys of :func:`sample_placements` draws
  the same slice of its samples)."""
  draw = lambda key: jax.random.categorical(key, logits, axis=-1)
  return jax.vmap(draw)(keys).astype(jnp.int32)


def node_log_probs(logits: jax.Array, placements: jax.Array,
                   node_mask: Optional[jax.Array] = None) -> jax.Array:
  """Per-node log-probabilities of placements.

  Args:
    logits: ``[N, D]`` (one-shot) or ``[K, N, D]`` (teacher-forced).
    placements: ``int [K, N]``.
    node_mask: ``bool [N]``; padding nodes get 0.

  Returns:
    ``f32 [K, N]``.
  """
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  log_p = jnp.broadcast_to(log_p, placements.shape + log_p.shape[-1:])
  taken = jnp.take_along_axis(log_p, placements[..., None], axis=-1)[..., 0]
  if node_mask is not None:
    taken = jnp.where(node_mask, taken, 0.0)
  return taken


def log_prob(logits: jax.Array, placements: jax.Array,
             node_mask: Optional[jax.Array] = None) -> jax.Array:
  """``f32 [K]``: log-probability of each placement (sum over real nodes)."""
  return node_log_probs(logits, placements, node_mask).sum(-1)


def node_entropy(logits: jax.Array) -> jax.Array:
  """``f32 [..., N]``: entropy (nats) of each node's categorical."""
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


def entropy(logits: jax.Array,
            node_mask: Optional[jax.Array] = None) -> jax.Array:
  """``f32 []``: mean over real nodes (and any leading ``K``) of the
  per-node entropy (nats)."""
  per_node = node_entropy(logits)
  if node_mask is None:
    return per_node.mean()
  weight = jnp.broadcast_to(node_mask, per_node.shape).astype(jnp.float32)
  return jnp.sum(per_node * weight) / jnp.maximum(weight.sum(), 1.0)


def exploration_logits(logits: jax.Array, explore_epsilon: float,
                       device_mask: Optional[jax.Array] = None) -> jax.Array:
  """Logits of the ``eps``-uniform mixture ``(1 - eps) softmax + eps / D``.

  Returned as normalised log-probabilities (valid logits for sampling,
  :func:`node_log_probs` and :func:`entropy`); ``logits`` unchanged for
  ``eps == 0``. ``device_mask`` (``[..., D]`` broadcastable) restricts the
  uniform part to allowed devices.
  """
  if not explore_epsilon:
    return logits
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  if device_mask is None:
    allowed = jnp.ones(logits.shape[-1:], jnp.float32)
  else:
    allowed = jnp.broadcast_to(device_mask, logits.shape).astype(jnp.float32)
  uniform = allowed / jnp.maximum(allowed.sum(-1, keepdims=True), 1.0)
  log_uniform = jnp.where(allowed > 0, jnp.log(jnp.maximum(uniform, 1e-30)),
                          -jnp.inf)
  return jnp.logaddexp(jnp.log1p(-explore_epsilon) + log_p,
                       jnp.log(explore_epsilon) + log_uniform)
