"""Tests of gplace.policies.hdp: shapes, padding and device masks, every
node placed on its group's device, teacher forcing equal to sampling, greedy
decoding, one compile per budget, hyperparameter errors, the config, and an
end-to-end run of experiments/configs/hdp.py (shrunk) whose greedy
placement improves on its initial one."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.configs import hdp as hdp_config
from gplace import policies
from gplace.errors import ConfigError, PolicyError
from gplace.policies import hdp
from policy_cases import (FAST_COMPILE, GREEDY, K, NUM_DEVICES, SAMPLE,
                          all_devices, check_training_improves,
                          entry_point_shapes, initial_setup, jitted_score,
                          keys, make_batch, other_batches, shrink_for_a_test,
                          validate_policy)

GROUPS = 6
TINY = dict(num_groups=GROUPS, grouping_hidden_size=8, hidden_size=8,
            attention_size=8, device_embedding_size=4, op_embedding_size=4,
            adjacency_buckets=3)
POLICY = policies.create_policy("hdp", NUM_DEVICES, **TINY)
TRACES = collections.Counter()


def _sample(params, batch, device_masks, sample_keys, greedy):
  """``(placements, actions, the sampler's log-probs)`` for a batch of
  graphs (vmapped, as the RL loop calls a policy)."""
  TRACES["sample", batch.nodes["mask"].shape[-1], device_masks.ndim] += 1
  return jax.vmap(lambda g, d: POLICY.apply(
      params, g, d, sample_keys, greedy,
      method=lambda m, *args: m._sample(*args)))(batch, device_masks)


sample = jax.jit(_sample, compiler_options=FAST_COMPILE)
score = jitted_score(POLICY, TRACES)


@pytest.fixture(scope="module")
def setup():
  return initial_setup(POLICY)


def test_factory_defaults_and_interface_attributes():
  policy = policies.create_policy("hdp", 5)
  assert isinstance(policy, hdp.HDPPolicy)
  assert policy == hdp.HDPPolicy(num_devices=5)
  assert policy.groups == 100 and hdp.HDPPolicy(20).groups == 256
  assert policy.grouping_hidden_size == 64
  assert policies.is_sequential(policy)
  assert hdp.HDPPolicy.placement_actions is False
  assert "hdp" in policies.policy_names()


def test_public_entry_points_shapes(setup):
  placements, actions, scores = entry_point_shapes(POLICY, setup)
  assert placements.shape == (5, 16) and actions.shape == (5, 16 + GROUPS)
  assert placements.dtype == actions.dtype == jnp.int32
  assert scores.log_probs.shape == scores.entropy.shape == (1, 16 + GROUPS)
  assert scores.mask.shape == (16 + GROUPS,)


def test_nodes_follow_their_group_and_scores_equal_sampling(setup):
  graphs, batch, params = setup
  masks = all_devices()
  masks[0, 3] = [True, True, False]
  placements, actions, sampled = map(
      np.asarray, sample(params, batch, masks, keys(), SAMPLE))
  assert placements.shape == (2, K, 16)
  assert actions.shape == sampled.shape == (2, K, 16 + GROUPS)
  assert placements.dtype == actions.dtype == np.int32
  group_of, devices = actions[..., :16], actions[..., 16:]
  assert np.all((group_of >= 0) & (group_of < GROUPS))
  assert np.all((devices >= 0) & (devices < NUM_DEVICES))
  # Every node runs on its group's device.
  np.testing.assert_array_equal(
      placements, np.take_along_axis(devices, group_of, -1))
  scores = score(params, batch, masks, actions)
  # Scoring the sampled actions reproduces the sampler's log-probabilities
  # (the grouper's and the placer's).
  np.testing.assert_allclose(scores.log_probs, sampled, rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_array_equal(
      scores.mask, np.concatenate([batch.nodes["mask"],
                                   np.ones((2, GROUPS), bool)], -1))
  log_probs, entropy = map(np.asarray, (scores.log_probs, scores.entropy))
  for b, graph in enumerate(graphs):
    n = graph.n_nodes
    assert np.all(group_of[b, :, n:] == 0)
    assert np.all(log_probs[b, :, n:16] == 0)
    assert np.all(entropy[b, :, n:16] == 0)
    assert np.all(log_probs[b, :, :n] < 0) and np.all(entropy[b, :, :n] > 0)
    # Groups without members decide nothing and count nothing.
    for k in range(K):
      empty = ~np.isin(np.arange(GROUPS), group_of[b, k, :n])
      assert np.all(devices[b, k, empty] == 0)
      assert np.all(log_probs[b, k, 16:][empty] == 0)
      assert np.all(entropy[b, k, 16:][empty] == 0)
      assert np.all(log_probs[b, k, 16:][~empty] < 0)
  assert len({tuple(row) for row in group_of[0]}) > 1


def test_greedy_is_deterministic_and_most_likely_at_every_step(setup):
  graphs, batch, params = setup
  a = np.asarray(sample(params, batch, all_devices(), keys(seed=1),
                        GREEDY)[1])
  b = np.asarray(sample(params, batch, all_devices(), keys(seed=2),
                        GREEDY)[1])
  np.testing.assert_array_equal(a, b)
  assert np.all(a == a[:, :1])
  # The grouper: every node in its most likely group.
  graph0 = jax.tree.map(lambda x: x[0], batch)
  group_log_p = jax.jit(
      lambda p, g: POLICY.apply(
          p, g, method=lambda m, g: m._group_distribution(g)[1]),
      compiler_options=FAST_COMPILE)(params, graph0)
  n = graphs[0].n_nodes
  np.testing.assert_array_equal(a[0, 0, :n], np.argmax(group_log_p, -1)[:n])
  # The placer: swap one group's device at a time, keeping the greedy
  # prefix; no swap scores higher at that step.
  rows = a[0].copy()
  step = np.repeat(np.arange(GROUPS), NUM_DEVICES)
  swaps = len(step)
  rows[np.arange(swaps), 16 + step] = np.tile(np.arange(NUM_DEVICES), GROUPS)
  scores = score(params, batch, all_devices(), np.stack([rows, a[1]]))
  at_step = np.asarray(scores.log_probs)[0, np.arange(swaps),
                                         16 + step].reshape(GROUPS,
                                                            NUM_DEVICES)
  nonempty = np.isin(np.arange(GROUPS), a[0, 0, :n])
  np.testing.assert_array_equal(at_step.argmax(-1)[nonempty],
                                a[0, 0, 16:][nonempty])


def test_padding_does_not_change_real_nodes_or_groups(setup):
  graphs, batch, params = setup
  larger = make_batch(*graphs, n_pad=40)
  every = np.ones((2, NUM_DEVICES), bool)  # the [D] form of the mask
  for greedy in (SAMPLE, GREEDY):
    small = sample(params, batch, all_devices(), keys(), greedy)
    large = sample(params, larger, every, keys(), greedy)
    for b, graph in enumerate(graphs):
      n = graph.n_nodes
      np.testing.assert_array_equal(small[0][b, :, :n], large[0][b, :, :n])
      for at_small, at_large in ((slice(0, n), slice(0, n)),
                                 (slice(16, None), slice(40, None))):
        np.testing.assert_array_equal(small[1][b, :, at_small],
                                      large[1][b, :, at_large])
        np.testing.assert_allclose(small[2][b, :, at_small],
                                   large[2][b, :, at_large], rtol=1e-5,
                                   atol=1e-6)


def test_disallowed_devices_are_never_used(setup):
  _, batch, params = setup
  masks = all_devices()
  masks[:, :, 1] = False
  masks[:, 2] = [False, False, True]
  placements, actions, _ = sample(params, batch, masks, keys(), SAMPLE)
  placements = np.asarray(placements)
  assert not np.any(placements == 1) and not np.any(actions[..., 16:] == 1)
  # Node 2 allows only device 2, so its group does.
  assert np.all(placements[:, :, 2] == 2)
  assert len(np.unique(placements[:, :, 3])) > 1


def test_jitted_functions_compile_once_per_budget(setup):
  _, _, params = setup
  for seed, batch in other_batches():
    _, actions, _ = sample(params, batch, all_devices(), keys(seed=seed),
                           SAMPLE)
    score(params, batch, all_devices(), actions)
  assert TRACES["sample", 16, 3] == TRACES["score", 16] == 1


@pytest.mark.parametrize("hparams,message", [
    (dict(num_groups=2), "num_groups=2 is below the 3 devices"),
    (dict(num_groups=-1), "num_groups=-1 must be a non-negative integer"),
    (dict(hidden_size=7), "even"),
    (dict(hidden_size=0), "hidden_size=0"),
    (dict(grouping_hidden_size=0), "grouping_hidden_size"),
    (dict(node_features="none"), "node_features"),
    (dict(bi_lstm=False), "Unknown HDP policy hyperparameters"),
])
def test_bad_hyperparameters_are_policy_errors(hparams, message):
  with pytest.raises(PolicyError, match=message):
    policies.create_policy("hdp", NUM_DEVICES, **hparams)


def test_config_is_valid_and_bad_values_name_the_field():
  config = hdp_config.get_config()
  validate_policy(config)
  assert config.groups.max_groups == 0  # HDP groups the op graph itself
  config.policy.num_groups = 2  # below quickstart's 5 devices
  with pytest.raises(ConfigError, match="num_groups"):
    validate_policy(config)


def test_training_improves_the_policys_own_greedy_placement(tmp_path,
                                                           monkeypatch):
  """experiments/configs/hdp.py, shrunk (the 705-op graph, 60 groups,
  hidden 16, 120 REINFORCE steps of 4 samples): the policy's greedy
  grouping and placement beat those of its initial parameters, both scored
  by the run's own evaluation, and its best sample is at least as fast as
  the best single device."""
  config = shrink_for_a_test(hdp_config.get_config(), tmp_path)
  config.train.num_steps = 120
  check_training_improves(config, tmp_path, monkeypatch)
