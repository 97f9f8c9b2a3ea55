"""Policy losses for one graph (vmap over graphs; pure): REINFORCE, PPO and
imitation, normalised per node, each returning ``(loss [], metrics)``
(``docs/design.md#the-rl-loop``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplace.rl.distributions import node_entropy, node_log_probs


def masked_node_mean(values: jax.Array, node_mask: jax.Array) -> jax.Array:
  """Mean over real nodes of ``values [..., N]`` -> ``[...]``."""
  weight = node_mask.astype(jnp.float32)
  return jnp.sum(values * weight, -1) / jnp.maximum(weight.sum(), 1.0)


def entropy_terms(entropies: jax.Array, mask: jax.Array, entropy_weight: float,
                  entropy_floor: float = 0.0, floor_weight: float = 1.0):
  """The entropy part of a loss: ``-w * H + floor_weight * F``, one graph.

  ``H`` is the mean per-action entropy; ``F`` the mean over actions of
  ``max(0, entropy_floor - H_a)``, a penalty only on the actions whose
  entropy fell under the floor. The bonus ``w * H`` is spread over all
  actions, so a policy can keep a healthy mean entropy while the few
  decisions that set the runtime (the groups of the bottleneck device) are
  certain: every sample then agrees on them, the samples' runtimes tie and
  the advantages carry no signal about them
  (``docs/design.md#the-entropy-floor``). The floor keeps every decision
  sampled off its argmax now and then, so the samples keep comparing
  alternatives for each of them. ``entropy_floor = 0`` (default): no penalty.

  Args:
    entropies: ``f32 [K, A]`` or ``[A]``.
    mask: ``bool [A]``.
    entropy_weight: ``w``.
    entropy_floor: nats per action.
    floor_weight: weight of the penalty.

  Returns:
    ``(loss term [], metrics)`` with ``entropy`` and, with a floor,
    ``under_floor`` (the fraction of actions under it).
  """
  ent = jnp.mean(masked_node_mean(entropies, mask))
  term = -entropy_weight * ent
  metrics = {"entropy": ent}
  if entropy_floor > 0:
    short = jnp.maximum(entropy_floor - entropies, 0.0)
    term = term + floor_weight * jnp.mean(masked_node_mean(short, mask))
    metrics["under_floor"] = jnp.mean(masked_node_mean(
        (entropies < entropy_floor).astype(jnp.float32), mask))
  return term, metrics


def reinforce_objective(log_probs: jax.Array, entropies: jax.Array,
                        advantages: jax.Array, mask: jax.Array,
                        entropy_weight: float, entropy_floor: float = 0.0,
                        floor_weight: float = 1.0):
  """REINFORCE with a baseline from per-action terms, for one graph.

  ``-mean_k A_k * mean_a log p(a_ka) - entropy_weight * H`` (plus the floor
  penalty of :func:`entropy_terms`).

  Args:
    log_probs: ``f32 [K, A]`` of the current parameters.
    entropies: ``f32 [K, A]`` or ``[A]``, per-action entropies.
    advantages: ``f32 [K]`` (treated as constants).
    mask: ``bool [A]``, real actions.
    entropy_weight: weight of the entropy bonus.
    entropy_floor, floor_weight: see :func:`entropy_terms`.

  Returns:
    ``(loss [], metrics dict)``.
  """
  advantages = jax.lax.stop_gradient(advantages)
  policy_loss = -jnp.mean(advantages * masked_node_mean(log_probs, mask))
  term, metrics = entropy_terms(entropies, mask, entropy_weight,
                                entropy_floor, floor_weight)
  return policy_loss + term, dict(metrics, policy_loss=policy_loss)


def ppo_objective(log_probs: jax.Array, old_log_probs: jax.Array,
                  entropies: jax.Array, advantages: jax.Array,
                  mask: jax.Array, clip: float, entropy_weight: float,
                  entropy_floor: float = 0.0, floor_weight: float = 1.0):
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
    entropy_floor, floor_weight: see :func:`entropy_terms`.

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
  term, metrics = entropy_terms(entropies, mask, entropy_weight,
                                entropy_floor, floor_weight)
  return policy_loss + term, dict(metrics, policy_loss=policy_loss,
                                  clipped_fraction=clipped)


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
