"""Policy losses for one graph each (vmap over the batch's graphs).

Where this sits: :mod:`gplace.rl.update` computes advantages from scored
rollouts and differentiates these losses; they only see logits, placements
and advantages (:mod:`gplace.rl.distributions` turns logits into
log-probabilities).

Losses are normalised per node: the policy-gradient term uses the mean log
probability of a placement's nodes, PPO clips per-node ratios (a ratio of
80k-node joint probabilities would always be clipped), and the entropy is the
mean per-node entropy. The objectives take per-action log-probabilities
(``[K, A]``, any policy: :mod:`gplace.rl.policy_fns`); the ``*_loss``
functions are the same for a one-shot policy's logits. Every loss returns
``(loss [], metrics dict)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplace.rl.distributions import node_entropy, node_log_probs


def masked_node_mean(values: jax.Array, node_mask: jax.Array) -> jax.Array:
  """Mean over real nodes of ``values [..., N]`` -> ``[...]``."""
  weight = node_mask.astype(jnp.float32)
  return jnp.sum(values * weight, -1) / jnp.maximum(weight.sum(), 1.0)


def reinforce_objective(log_probs: jax.Array, entropies: jax.Array,
                        advantages: jax.Array, mask: jax.Array,
                        entropy_weight: float):
  """REINFORCE with a baseline from per-action terms, for one graph.

  ``-mean_k A_k * mean_a log p(a_ka) - entropy_weight * H``.

  Args:
    log_probs: ``f32 [K, A]`` of the current parameters.
    entropies: ``f32 [K, A]`` or ``[A]``, per-action entropies.
    advantages: ``f32 [K]`` (treated as constants).
    mask: ``bool [A]``, real actions.
    entropy_weight: weight of the entropy bonus.

  Returns:
    ``(loss [], metrics dict)``.
  """
  advantages = jax.lax.stop_gradient(advantages)
  policy_loss = -jnp.mean(advantages * masked_node_mean(log_probs, mask))
  ent = jnp.mean(masked_node_mean(entropies, mask))
  loss = policy_loss - entropy_weight * ent
  return loss, {"policy_loss": policy_loss, "entropy": ent}


def ppo_objective(log_probs: jax.Array, old_log_probs: jax.Array,
                  entropies: jax.Array, advantages: jax.Array,
                  mask: jax.Array, clip: float, entropy_weight: float):
  """PPO's clipped surrogate with per-action ratios, for one graph.

  ``-mean_k mean_a min(r_ka A_k, clip(r_ka, 1 -+ eps) A_k) - w H`` with
  ``r_ka = p(a_ka) / p_old(a_ka)``.

  Args:
    log_probs: ``f32 [K, A]`` of the current parameters.
    old_log_probs: ``f32 [K, A]`` of the sampling parameters.
    entropies: ``f32 [K, A]`` or ``[A]``.
    advantages: ``f32 [K]``.
    mask: ``bool [A]``.
    clip: ``eps``.
    entropy_weight: weight of the entropy bonus.

  Returns:
    ``(loss [], metrics dict)`` with the clipped fraction.
  """
  ratio = jnp.exp(log_probs - jax.lax.stop_gradient(old_log_probs))
  adv = jax.lax.stop_gradient(advantages)[:, None]
  surrogate = jnp.minimum(ratio * adv,
                          jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * adv)
  policy_loss = -jnp.mean(masked_node_mean(surrogate, mask))
  clipped = masked_node_mean(
      (jnp.abs(ratio - 1.0) > clip).astype(jnp.float32), mask).mean()
  ent = jnp.mean(masked_node_mean(entropies, mask))
  loss = policy_loss - entropy_weight * ent
  return loss, {"policy_loss": policy_loss, "entropy": ent,
                "clipped_fraction": clipped}


def reinforce_loss(logits: jax.Array, placements: jax.Array,
                   advantages: jax.Array, node_mask: jax.Array,
                   entropy_weight: float):
  """:func:`reinforce_objective` of a one-shot policy's logits ``[N, D]``
  (or teacher-forced ``[K, N, D]``) and placements ``int [K, N]``."""
  return reinforce_objective(node_log_probs(logits, placements, node_mask),
                             node_entropy(logits), advantages, node_mask,
                             entropy_weight)


def ppo_loss(logits: jax.Array, placements: jax.Array,
             old_node_log_probs: jax.Array, advantages: jax.Array,
             node_mask: jax.Array, clip: float, entropy_weight: float):
  """:func:`ppo_objective` of a one-shot policy's logits ``[N, D]`` and
  placements ``int [K, N]`` (``old_node_log_probs [K, N]``)."""
  return ppo_objective(node_log_probs(logits, placements, node_mask),
                       old_node_log_probs, node_entropy(logits), advantages,
                       node_mask, clip, entropy_weight)


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


def sequential_supervised_loss(log_probs: jax.Array, mask: jax.Array):
  """Warm start of a sequential policy: the negative mean log-probability of
  the target's actions under teacher forcing, one graph.

  Args:
    log_probs: ``f32 [A]``, teacher-forced log-probabilities of the target.
    mask: ``bool [A]``.

  Returns:
    ``(loss [], metrics)``; ``accuracy`` is the fraction of target actions
    given probability above 1/2 (those are certainly the step's argmax).
  """
  loss = -masked_node_mean(log_probs, mask)
  accuracy = masked_node_mean((log_probs > jnp.log(0.5)).astype(jnp.float32),
                              mask)
  return loss, {"supervised_loss": loss, "accuracy": accuracy}
