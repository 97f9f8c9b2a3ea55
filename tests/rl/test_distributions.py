"""Tests of gplace.rl.distributions: sampling, log-probs, entropy, mixture."""

import jax
import jax.numpy as jnp
import numpy as np

from gplace.rl import distributions


def test_sampling_frequencies_and_log_prob():
  logits = jnp.log(jnp.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]))
  samples = distributions.sample_placements(logits, jax.random.PRNGKey(0),
                                            4000)
  assert samples.shape == (4000, 2) and samples.dtype == jnp.int32
  freq = np.stack([np.bincount(samples[:, i], minlength=3) / 4000
                   for i in range(2)])
  np.testing.assert_allclose(freq, np.exp(logits), atol=0.03)
  lp = distributions.log_prob(logits, jnp.array([[0, 2], [1, 0]]),
                              jnp.array([True, True]))
  np.testing.assert_allclose(lp, [np.log(0.7 * 0.8), np.log(0.2 * 0.1)],
                             rtol=1e-5)
  # Padding nodes do not count; teacher-forced [K, N, D] logits broadcast.
  lp = distributions.log_prob(jnp.broadcast_to(logits, (2, 2, 3)),
                              jnp.array([[0, 2], [1, 0]]),
                              jnp.array([True, False]))
  np.testing.assert_allclose(lp, np.log([0.7, 0.2]), rtol=1e-5)
  np.testing.assert_allclose(
      distributions.entropy(jnp.zeros((3, 4)), jnp.array([True, True, False])),
      np.log(4), rtol=1e-6)


def test_a_slice_of_keys_draws_the_same_slice_of_samples():
  logits = jax.random.normal(jax.random.PRNGKey(3), (7, 4))
  rng = jax.random.PRNGKey(5)
  all_samples = distributions.sample_placements(logits, rng, 8)
  keys = jax.random.split(rng, 8)
  np.testing.assert_array_equal(
      distributions.sample_with_keys(logits, keys[4:]), all_samples[4:])


def test_explore_epsilon_is_the_uniform_mixture():
  logits = jnp.asarray([[4.0, 0.0, -2.0], [0.0, 0.0, 0.0]])
  assert distributions.exploration_logits(logits, 0.0) is logits
  mixed = distributions.exploration_logits(logits, 0.1)
  expected = 0.9 * jax.nn.softmax(logits) + 0.1 / 3
  np.testing.assert_allclose(jnp.exp(mixed), expected, rtol=1e-6)
  # A device mask keeps the uniform part on the allowed devices.
  masked = distributions.exploration_logits(logits, 0.1,
                                            jnp.array([True, True, False]))
  probs = np.asarray(jnp.exp(masked))
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(probs[1], [0.9 / 3 + 0.05, 0.9 / 3 + 0.05,
                                        0.9 / 3], rtol=1e-6)
