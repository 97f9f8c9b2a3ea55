"""Tests of gplace.rl.losses: REINFORCE, PPO and supervised gradients."""

import jax
import jax.numpy as jnp
import numpy as np

from gplace.rl import distributions
from gplace.rl import losses


def test_loss_gradients_are_sane():
  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
  mask = jnp.array([True] * 4 + [False])
  placements = jnp.asarray(rng.integers(0, 3, size=(6, 5)), jnp.int32)
  advantages = jnp.asarray(rng.normal(size=6), jnp.float32)
  reinforce = lambda l: losses.reinforce_loss(l, placements, advantages, mask,
                                              0.0)[0]
  old = distributions.node_log_probs(logits, placements, mask)
  ppo = lambda l: losses.ppo_loss(l, placements, old, advantages, mask, 0.2,
                                  0.0)[0]
  g_reinforce, g_ppo = jax.grad(reinforce)(logits), jax.grad(ppo)(logits)
  # At ratio 1 the clipped surrogate has the policy gradient.
  np.testing.assert_allclose(g_ppo, g_reinforce, rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(g_reinforce[4], 0.0)  # padding node
  # A step along -grad makes the positive-advantage sample more likely.
  best = int(jnp.argmax(advantages))
  before = distributions.log_prob(logits, placements, mask)[best]
  after = distributions.log_prob(logits - 0.1 * g_reinforce, placements,
                                 mask)[best]
  assert after > before
  # Entropy bonus pushes towards uniform.
  ent_loss = lambda l: losses.reinforce_loss(l, placements, 0 * advantages,
                                             mask, 1.0)[0]
  new = logits - 0.5 * jax.grad(ent_loss)(logits)
  assert distributions.entropy(new, mask) > distributions.entropy(logits,
                                                                  mask)
  # Supervised cross-entropy is minimised by the target.
  target = jnp.array([0, 1, 2, 0, 0])
  sup = lambda l: losses.supervised_loss(l, target, mask)[0]
  assert sup(logits - 1.0 * jax.grad(sup)(logits)) < sup(logits)
  # Label smoothing: the best logits are no longer a one-hot certainty.
  smooth = lambda l: losses.supervised_loss(l, target, mask, 0.1)[0]
  confident = 20.0 * jax.nn.one_hot(target, 3)
  assert smooth(confident / 10) < smooth(confident)


def test_ppo_clips_far_ratios_and_reports_them():
  logits = jnp.zeros((4, 2))
  mask = jnp.array([True, True, True, False])
  placements = jnp.zeros((2, 4), jnp.int32)
  # The old policy gave device 0 probability 0.9 on every node; now 0.5.
  old = jnp.full((2, 4), jnp.log(0.9))
  _, metrics = losses.ppo_loss(logits, placements, old, jnp.ones(2), mask,
                               clip=0.2, entropy_weight=0.0)
  np.testing.assert_allclose(metrics["clipped_fraction"], 1.0)
  _, metrics = losses.ppo_loss(logits, placements, jnp.full((2, 4),
                                                            jnp.log(0.5)),
                               jnp.ones(2), mask, clip=0.2, entropy_weight=0.0)
  np.testing.assert_allclose(metrics["clipped_fraction"], 0.0)
  np.testing.assert_allclose(metrics["entropy"], np.log(2), rtol=1e-6)


def test_masked_node_mean_ignores_padding():
  values = jnp.array([[1.0, 3.0, 100.0]])
  np.testing.assert_allclose(
      losses.masked_node_mean(values, jnp.array([True, True, False])), [2.0])


def test_entropy_floor_lifts_only_the_certain_nodes():
  # Node 0 is certain, node 1 near uniform, node 2 is padding.
  logits = jnp.array([[8.0, 0.0, 0.0], [0.1, 0.0, 0.0], [9.0, 0.0, 0.0]])
  mask = jnp.array([True, True, False])
  entropies = distributions.node_entropy(logits)

  def floor_loss(l, floor):
    return losses.entropy_terms(distributions.node_entropy(l), mask, 0.0,
                                entropy_floor=floor)

  grads = jax.grad(lambda l: floor_loss(l, 0.5)[0])(logits)
  # Only the certain node is under the floor: only its logits move, and a
  # step against the gradient raises its entropy.
  np.testing.assert_array_equal(grads[1:], 0.0)
  assert jnp.abs(grads[0]).sum() > 0
  lifted = distributions.node_entropy(logits - 1.0 * grads)
  assert lifted[0] > entropies[0]
  _, metrics = floor_loss(logits, 0.5)
  np.testing.assert_allclose(metrics["under_floor"], 0.5)  # 1 of 2 real
  # The penalty is the mean shortfall over real nodes; no floor, no term.
  np.testing.assert_allclose(
      floor_loss(logits, 0.5)[0], (0.5 - entropies[0]) / 2, rtol=1e-6)
  term, metrics = floor_loss(logits, 0.0)
  assert float(term) == 0.0 and "under_floor" not in metrics
  # Through both objectives, the floor adds exactly its term.
  placements = jnp.zeros((2, 3), jnp.int32)
  old = distributions.node_log_probs(logits, placements, mask)
  for objective in (
      lambda f: losses.ppo_objective(old, old, entropies[None], jnp.ones(2),
                                     mask, 0.2, 0.0, entropy_floor=f),
      lambda f: losses.reinforce_objective(old, entropies, jnp.ones(2), mask,
                                           0.0, entropy_floor=f)):
    np.testing.assert_allclose(objective(0.5)[0] - objective(0.0)[0],
                               floor_loss(logits, 0.5)[0], rtol=1e-5)
