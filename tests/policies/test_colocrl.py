"""Tests of gplace.policies.colocrl (and the seq2seq blocks it is built of):
shapes, padding and device masks, teacher forcing equal to sampling, greedy
decoding, one compile per budget, hyperparameter and length errors, the
config, and an end-to-end run of experiments/configs/colocrl.py (shrunk)
whose greedy placement improves on its initial one."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.configs import colocrl as colocrl_config
from gplace import policies
from gplace.errors import ConfigError, PolicyError
from gplace.graphs import features
from gplace.policies import colocrl, sequence_encoder
from policy_cases import (FAST_COMPILE, GREEDY, K, NUM_DEVICES, SAMPLE,
                          all_devices, budget, check_training_improves,
                          entry_point_shapes, initial_setup, jitted_score,
                          keys, make_batch, other_batches, shrink_for_a_test,
                          small_graph, validate_policy)

TINY = dict(hidden_size=8, attention_size=8, device_embedding_size=4,
            op_embedding_size=4, adjacency_buckets=3)
POLICY = policies.create_policy("colocrl", NUM_DEVICES, **TINY)
TRACES = collections.Counter()


def _decode(params, batch, device_masks, sample_keys, greedy):
  """The sampler's actions and its own per-step log-probabilities, for a
  batch of graphs (vmapped, as the RL loop calls a policy)."""
  TRACES["decode", batch.nodes["mask"].shape[-1], device_masks.ndim] += 1

  def one(graphs, device_mask):
    decoded = POLICY.apply(
        params, graphs, device_mask, sample_keys, greedy,
        method=lambda m, g, d, k, gr: m._decode(g, d, keys=k, greedy=gr))
    return decoded.actions, decoded.log_probs

  return jax.vmap(one)(batch, device_masks)


decode = jax.jit(_decode, compiler_options=FAST_COMPILE)
score = jitted_score(POLICY, TRACES)


@pytest.fixture(scope="module")
def setup():
  return initial_setup(POLICY)


def test_factory_and_interface_attributes():
  policy = policies.create_policy("colocrl", 5)
  assert isinstance(policy, colocrl.ColocRLPolicy)
  assert policy == colocrl.ColocRLPolicy(num_devices=5)
  assert policy.max_length == 1024 and policy.hidden_size == 64
  assert policies.is_sequential(policy)
  assert colocrl.ColocRLPolicy.placement_actions is True
  assert "colocrl" in policies.policy_names()


def test_public_entry_points_shapes(setup):
  placements, actions, scores = entry_point_shapes(POLICY, setup)
  assert placements.shape == actions.shape == (5, 16)
  assert placements.dtype == actions.dtype == jnp.int32
  assert scores.log_probs.shape == scores.entropy.shape == (1, 16)
  assert scores.mask.shape == (16,) and scores.mask.dtype == jnp.bool_


def test_shapes_masks_and_teacher_forcing_equal_to_sampling(setup):
  graphs, batch, params = setup
  masks = all_devices()
  masks[0, 3] = [True, True, False]
  actions, sampled = decode(params, batch, masks, keys(), SAMPLE)
  actions = np.asarray(actions)
  assert actions.shape == (2, K, 16) and actions.dtype == np.int32
  assert np.all((actions >= 0) & (actions < NUM_DEVICES))
  assert len({tuple(row) for row in actions[0]}) > 1
  scores = score(params, batch, masks, actions)
  assert scores.log_probs.shape == scores.entropy.shape == (2, K, 16)
  assert scores.log_probs.dtype == jnp.float32
  np.testing.assert_array_equal(scores.mask, batch.nodes["mask"])
  # Scoring the sampled actions reproduces the sampler's log-probabilities.
  np.testing.assert_allclose(scores.log_probs, sampled, rtol=1e-5,
                             atol=1e-6)
  log_probs, entropy = map(np.asarray, (scores.log_probs, scores.entropy))
  for b, graph in enumerate(graphs):
    n = graph.n_nodes
    assert np.all(actions[b, :, n:] == 0)
    assert np.all(log_probs[b, :, n:] == 0) and np.all(entropy[b, :, n:] == 0)
    assert np.all(log_probs[b, :, :n] < 0) and np.all(entropy[b, :, :n] > 0)


def test_greedy_is_deterministic_and_most_likely_at_every_step(setup):
  graphs, batch, params = setup
  a, _ = decode(params, batch, all_devices(), keys(seed=1), GREEDY)
  b, _ = decode(params, batch, all_devices(), keys(seed=2), GREEDY)
  a = np.asarray(a)
  np.testing.assert_array_equal(a, b)
  assert np.all(a == a[:, :1])
  # Swap one step's device at a time, keeping the greedy prefix: no swap
  # scores higher at that step.
  n = graphs[0].n_nodes
  assert n * NUM_DEVICES == K
  rows = a.copy()
  step = np.repeat(np.arange(n), NUM_DEVICES)
  rows[0, np.arange(K), step] = np.tile(np.arange(NUM_DEVICES), n)
  scores = score(params, batch, all_devices(), rows)
  at_step = np.asarray(scores.log_probs)[0, np.arange(K), step].reshape(
      n, NUM_DEVICES)
  np.testing.assert_array_equal(at_step.argmax(-1), a[0, 0, :n])


def test_padding_does_not_change_real_nodes(setup):
  graphs, batch, params = setup
  larger = make_batch(*graphs, n_pad=40)
  every = np.ones((2, NUM_DEVICES), bool)  # the [D] form of the mask
  for greedy in (SAMPLE, GREEDY):
    small_actions, small = decode(params, batch, all_devices(), keys(),
                                  greedy)
    large_actions, large = decode(params, larger, every, keys(), greedy)
    for b, graph in enumerate(graphs):
      n = graph.n_nodes
      np.testing.assert_array_equal(small_actions[b, :, :n],
                                    large_actions[b, :, :n])
      np.testing.assert_allclose(small[b, :, :n], large[b, :, :n],
                                 rtol=1e-5, atol=1e-6)


def test_disallowed_devices_are_never_sampled(setup):
  _, batch, params = setup
  masks = all_devices()
  masks[:, :, 1] = False
  masks[:, 2] = [False, False, True]
  masks[:, 4] = [True, False, False]
  placements = np.asarray(decode(params, batch, masks, keys(), SAMPLE)[0])
  assert not np.any(placements == 1)
  assert np.all(placements[:, :, 2] == 2)
  assert np.all(placements[:, :, 4] == 0)
  assert len(np.unique(placements[:, :, 3])) > 1


def test_jitted_functions_compile_once_per_budget(setup):
  _, _, params = setup
  for seed, batch in other_batches():
    actions, _ = decode(params, batch, all_devices(), keys(seed=seed),
                        SAMPLE)
    score(params, batch, all_devices(), actions)
  assert TRACES["decode", 16, 3] == TRACES["score", 16] == 1


def test_a_graph_past_max_length_is_refused(setup):
  _, batch, _ = setup
  graphs = jax.tree.map(lambda x: x[0], batch)
  policy = policies.create_policy("colocrl", NUM_DEVICES, max_length=8,
                                  **TINY)
  with pytest.raises(PolicyError, match="max_groups.*max_length"):
    policy.init(jax.random.PRNGKey(0), graphs)


@pytest.mark.parametrize("hparams,message", [
    (dict(hidden_size=0), "hidden_size=0"),
    (dict(attention_size=-1), "attention_size"),
    (dict(max_length=0), "max_length"),
    (dict(adjacency_buckets=-1), "adjacency_buckets"),
    (dict(num_position_frequencies=-1), "num_position_frequencies"),
    (dict(node_features="none"), "node_features"),
    (dict(bidirectional=True, hidden_size=7), "even"),
    (dict(logit_tanh_constant=-1.0), "logit_tanh_constant"),
    (dict(num_layers=2), "Unknown ColocRL policy hyperparameters"),
])
def test_bad_hyperparameters_are_policy_errors(hparams, message):
  with pytest.raises(PolicyError, match=message):
    policies.create_policy("colocrl", NUM_DEVICES, **hparams)


def test_adjacency_encoding_buckets_distances():
  graph = small_graph(6)
  graphs = features.to_graphs_tuple(graph, budget(16))
  encoding = np.asarray(jax.jit(sequence_encoder.adjacency_encoding,
                                static_argnums=1)(graphs, 3))
  assert encoding.shape == (16, 6)
  # Node 3 is fed by node 2 (distance 1, bucket 0) and node 0 (distance 3,
  # bucket 1); it feeds node 4 (bucket 0).
  np.testing.assert_allclose(np.expm1(encoding[3]), [1, 1, 0, 1, 0, 0],
                             atol=1e-6)
  assert np.all(encoding[graph.n_nodes:] == 0)


def test_config_is_valid_and_bad_values_name_the_field():
  config = colocrl_config.get_config()
  validate_policy(config)
  assert config.groups.rule == "colocation"
  config.policy.hidden_size = 0
  with pytest.raises(ConfigError, match="hidden_size"):
    validate_policy(config)


def test_training_improves_the_policys_own_greedy_placement(tmp_path,
                                                           monkeypatch):
  """experiments/configs/colocrl.py, shrunk (co-location then 32 groups,
  hidden 16, 200 REINFORCE steps of 4 samples): the policy's greedy
  decoding beats that of its initial parameters, both scored by the run's
  own evaluation, and its best sample is at least as fast as the best
  single device (ColocRL's lesson)."""
  config = shrink_for_a_test(colocrl_config.get_config(), tmp_path)
  config.groups.max_groups = 32
  config.train.num_steps = 200
  check_training_improves(config, tmp_path, monkeypatch)
