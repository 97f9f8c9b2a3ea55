"""Tests of gplace.rl.state: the train state and the optimizer, built from
settings."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.configs import quickstart
from gplace import _testing
from gplace import policies
from gplace.rl import settings as settings_lib
from gplace.rl import state as state_lib


def _settings(config):
  return settings_lib.from_config(config).settings


def _optimizer(config):
  return state_lib.create_optimizer(_settings(config))


def small_config():
  config = quickstart.get_config()
  config.policy.update(hidden_size=8, num_sage_layers=1,
                       num_attention_layers=1, num_heads=2, segment_length=4,
                       op_embedding_size=4, head_hidden_size=8)
  return config


def test_init_train_state_shapes():
  batch = _testing.toy_batch(num_graphs=2, n_pad=12)
  state = _testing.toy_train_state(_testing.LinearPolicy(), batch,
                                   optax.sgd(0.1))
  assert state.step.dtype == jnp.int32 and int(state.step) == 0
  assert state.best_placement.shape == (2, 12)
  assert state.best_placement.dtype == jnp.int32
  np.testing.assert_array_equal(state.best_runtime_s, np.inf)
  np.testing.assert_array_equal(state.baseline, 0.0)
  np.testing.assert_array_equal(state.reward_var, 1.0)
  assert not bool(state.baseline_ready)


def test_the_policy_settings_map_every_config_field_once():
  config = small_config()
  policy = settings_lib.from_config(config).policy.create(5)
  assert isinstance(policy, policies.GOPolicy)
  assert policy.num_devices == 5 and policy.head_hidden_size == 8
  assert policy.encoder.hidden_size == 8 and policy.encoder.num_heads == 2
  assert policy.encoder.segment_length == 4
  assert policy == settings_lib.from_config(config).policy.create(5)


def test_the_same_settings_give_the_same_optimizer():
  config = quickstart.get_config()
  # The same settings give the same optimizer object (jitted steps reused).
  assert _optimizer(config) is _optimizer(quickstart.get_config())
  config.optimizer.learning_rate = 1e-3
  assert _optimizer(config) is not _optimizer(quickstart.get_config())


def test_fresh_adam_moments_keep_the_learning_rate_schedule():
  config = quickstart.get_config()
  config.warm_start.update(baseline="best", steps=2, learning_rate=1.0)
  config.optimizer.update(learning_rate=1e-3, grad_clip=100.0)
  optimizer = _optimizer(config)
  params = jnp.zeros(())
  opt_state = optimizer.init(params)
  for _ in range(2):  # the warm start: large gradients
    _, opt_state = optimizer.update(jnp.full((), 50.0), opt_state, params)
  fresh = state_lib.fresh_adam_moments(opt_state)
  adam = [s for s in jax.tree.leaves(
      fresh, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
          if isinstance(s, optax.ScaleByAdamState)]
  assert len(adam) == 1
  assert int(adam[0].count) == 0 and float(adam[0].mu) == 0.0
  # The first RL update is a full Adam step at the RL rate; the moments of
  # the large warm-start gradients shrink it.
  updates, _ = optimizer.update(jnp.ones(()), fresh, params)
  np.testing.assert_allclose(abs(float(updates)), 1e-3, rtol=1e-3)
  stale, _ = optimizer.update(jnp.ones(()), opt_state, params)
  assert abs(float(stale)) < 0.9e-3


def test_optimizer_switches_from_warm_start_to_rl_rate():
  config = quickstart.get_config()
  config.warm_start.update(baseline="best", steps=2, learning_rate=1.0)
  config.optimizer.update(learning_rate=1e-3, grad_clip=100.0)
  # Adam's first steps move by about the learning rate.
  np.testing.assert_allclose(_step_sizes(config, 4), [1.0, 1.0, 1e-3, 1e-3],
                             rtol=1e-3)


def _step_sizes(config, num_updates: int) -> list[float]:
  """How far the config's optimizer moves a scalar on ``num_updates``
  gradients of 1 (Adam: about the learning rate of each update)."""
  optimizer = _optimizer(config)
  params = jnp.zeros(())
  opt_state = optimizer.init(params)
  sizes = []
  for _ in range(num_updates):
    updates, opt_state = optimizer.update(jnp.ones(()), opt_state, params)
    sizes.append(abs(float(updates)))
  return sizes


def test_cosine_decay_falls_over_the_rl_updates_after_the_warm_start():
  config = quickstart.get_config()
  config.warm_start.update(baseline="best", steps=2, learning_rate=1.0)
  config.optimizer.update(learning_rate=1e-3, grad_clip=100.0,
                          decay="cosine", final_fraction=0.1)
  config.train.num_steps, config.rl.ppo_epochs = 3, 2  # 6 RL updates
  cosine = [1e-3 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * t / 6)))
            for t in range(6)]
  np.testing.assert_allclose(_step_sizes(config, 10),
                             [1.0, 1.0] + cosine + [1e-4, 1e-4], rtol=1e-3)
  # REINFORCE makes one update per step: the decay spans num_steps.
  config.rl.loss = "reinforce"
  config.warm_start.baseline = "none"
  np.testing.assert_allclose(
      _step_sizes(config, 4),
      [1e-3 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * t / 3)))
       for t in range(3)] + [1e-4], rtol=1e-3)
  # Without decay the rate stays.
  config.optimizer.decay = "none"
  np.testing.assert_allclose(_step_sizes(config, 5), [1e-3] * 5, rtol=1e-3)


def test_create_train_state_is_seeded():
  batch = _testing.toy_batch(num_graphs=1, n_pad=12)
  config = small_config()
  policy = _testing.LinearPolicy()
  optimizer = _optimizer(config)
  first = state_lib.create_train_state(0, batch, policy, optimizer)
  again = state_lib.create_train_state(0, batch, policy, optimizer)
  jax.tree.map(np.testing.assert_array_equal, first, again)
  other = state_lib.create_train_state(1, batch, policy, optimizer)
  assert not np.array_equal(other.rng, first.rng)
  assert first.best_placement.shape == (1, 12)
