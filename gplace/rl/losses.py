"""Policy losses for one graph each (vmap over the batch's graphs).

Where this sits: :mod:`gplace.rl.update` computes advantages from scored
rollouts and differentiates these losses; they only see logits, placements
and advantages (:mod:`gplace.rl.distributions` turns logits into
log-probabilities).

Losses are normalised per node: the policy-gradient term uses the mean log
probability of a placement's nodes, PPO clips per-node ratios (a ratio of
80k-node joint probabilities would always be clipped), and the entropy is the
mean per-node entropy. Every loss returns ``(loss [], metrics dict)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplace.rl.distributions import entropy, node_log_probs


def masked_node_mean(values: jax.Array, node_mask: jax.Array) -> jax.Array:
  """Mean over real nodes of ``values [..., N]`` -> ``[...]``."""
  weight = node_mask.astype(jnp.float32)
  return jnp.sum(values * weight, -1) / jnp.maximum(weight.sum(), 1.0)


def reinforce_loss(logits: jax.Array, placements: jax.Array,
                   advantages: jax.Array, node_mask: jax.Array,
                   entropy_weight: float):
  """REINFORCE with a baseline, for one graph.

  ``-mean_k A_k * mean_n log p(a_kn) - entropy_weight * H``.

  Args:
    logits: ``[N, D]`` of the current parameters.
    placements: ``int [K, N]``.
    advantages: ``f32 [K]`` (treated as constants).
    node_mask: ``bool [N]``.
    entropy_weight: weight of the entropy bonus.

  Returns:
    ``(loss [], metrics dict)``.
  """
  taken = node_log_probs(logits, placements, node_mask)
  advantages = jax.lax.stop_gradient(advantages)
  policy_loss = -jnp.mean(advantages * masked_node_mean(taken, node_mask))
  ent = entropy(logits, node_mask)
  loss = policy_loss - entropy_weight * ent
  return loss, {"policy_loss": policy_loss, "entropy": ent}


def ppo_loss(logits: jax.Array, placements: jax.Array,
             old_node_log_probs: jax.Array, advantages: jax.Array,
             node_mask: jax.Array, clip: float, entropy_weight: float):
  """PPO's clipped surrogate with per-node ratios, for one graph.

  ``-mean_k mean_n min(r_kn A_k, clip(r_kn, 1 -+ eps) A_k) - w H`` with
  ``r_kn = p(a_kn) / p_old(a_kn)``.

  Args:
    logits: ``[N, D]`` of the current parameters.
    placements: ``int [K, N]``.
    old_node_log_probs: ``f32 [K, N]`` of the sampling parameters.
    advantages: ``f32 [K]``.
    node_mask: ``bool [N]``.
    clip: ``eps``.
    entropy_weight: weight of the entropy bonus.

  Returns:
    ``(loss [], metrics dict)`` with the clipped fraction.
  """
  taken = node_log_probs(logits, placements, node_mask)
  ratio = jnp.exp(taken - jax.lax.stop_gradient(old_node_log_probs))
  adv = jax.lax.stop_gradient(advantages)[:, None]
  surrogate = jnp.minimum(ratio * adv,
                          jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * adv)
  policy_loss = -jnp.mean(masked_node_mean(surrogate, node_mask))
  clipped = masked_node_mean(
      (jnp.abs(ratio - 1.0) > clip).astype(jnp.float32), node_mask).mean()
  ent = entropy(logits, node_mask)
  loss = policy_loss - entropy_weight * ent
  return loss, {"policy_loss": policy_loss, "entropy": ent,
                "clipped_fraction": clipped}


def supervised_loss(logits: jax.Array, target: jax.Array,
                    node_mask: jax.Array, label_smoothing: float = 0.0):
  """Cross-entropy to a target placement ``int [N]`` (warm start), one graph.

  ``label_smoothing`` moves that much target mass to the uniform
  distribution, so the warm-started policy keeps some entropy for RL to
  explore with (a fully fitted one-shot policy samples only its target).

  Args:
    logits: ``[N, D]``.
    target: ``int [N]``.
    node_mask: ``bool [N]``.
    label_smoothing: in ``[0, 1)``.

  Returns:
    ``(loss [], metrics)`` with the accuracy over real nodes.
  """
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  num_devices = logits.shape[-1]
  soft = (1.0 - label_smoothing) * jax.nn.one_hot(target, num_devices) + (
      label_smoothing / num_devices)
  loss = -masked_node_mean(jnp.sum(soft * log_p, -1), node_mask)
  accuracy = masked_node_mean(
      (jnp.argmax(logits, -1) == target).astype(jnp.float32), node_mask)
  return loss, {"supervised_loss": loss, "accuracy": accuracy}
