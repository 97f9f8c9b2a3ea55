"""Tests of gplace.policies.go: the GO encoder and policy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace import policies
from gplace._testing import chain, make_graphs_tuple
from gplace.errors import PolicyError
from gplace.policies import go

DIAMOND = (4, [(0, 1), (0, 2), (1, 3), (2, 3)])


@pytest.mark.parametrize("modulation", ["film"])  # gate: layer test
def test_go_policy_shapes_and_padding_invariance(modulation):
  encoder = go.GOEncoder(hidden_size=16, num_heads=2, segment_length=4,
                         modulation=modulation, vocabulary_size=8)
  policy = go.GOPolicy(num_devices=3, encoder=encoder, head_hidden_size=8)
  small = make_graphs_tuple([DIAMOND, chain(3)], n_pad=9, e_pad=16)
  large = make_graphs_tuple([DIAMOND, chain(3)], n_pad=16, e_pad=24)
  # Jitted: eager flax compiles every primitive on its own (tens of s).
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), small)
  assert set(params["params"]) == {"encoder", "head"}
  apply = jax.jit(policy.apply)
  logits = apply(params, small)
  assert logits.shape == (9, 3) and logits.dtype == jnp.float32
  np.testing.assert_allclose(apply(params, large)[:7], logits[:7],
                             rtol=1e-4, atol=1e-5)
  # The encoder alone, as another model would use it.
  enc_params = jax.jit(encoder.init)(jax.random.PRNGKey(1), small)
  assert jax.jit(encoder.apply)(enc_params, small).shape == (9, 16)


def test_device_mask_reaches_the_head():
  policy = policies.create_policy("go", 3, hidden_size=8, num_heads=2,
                                  segment_length=4, num_sage_layers=1,
                                  num_attention_layers=1, head_hidden_size=8)
  graphs = make_graphs_tuple([chain(5)], n_pad=8, e_pad=8)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), graphs)
  logits = jax.jit(policy.apply)(params, graphs,
                                 jnp.array([True, False, True]))
  assert np.all(logits[:, 1] <= -1e8)


def test_a_hinted_policy_starts_at_the_plan_and_reads_it():
  policy = policies.create_policy("go", 3, hidden_size=8, num_heads=2,
                                  segment_length=4, num_sage_layers=1,
                                  num_attention_layers=1, head_hidden_size=8,
                                  hint=True, hint_init=50.0)
  assert policy.encoder.hint_devices == 3
  graphs = make_graphs_tuple([chain(5)], n_pad=8, e_pad=8)
  plan = np.array([2, 0, 1, 1, 2, -1, -1, -1], np.int32)
  hinted = graphs._replace(nodes=dict(graphs.nodes, hint=plan))
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), hinted)
  assert float(params["params"]["hint_logit"]) == 50.0
  apply = jax.jit(policy.apply)
  logits = apply(params, hinted)
  np.testing.assert_array_equal(np.argmax(logits[:5], -1), plan[:5])
  # The plan is an input too, not only the offset: without it (all -1) the
  # logits move by more than the dropped offset.
  plain = apply(params, graphs)
  offset = 50.0 * jax.nn.one_hot(plan, 3)
  assert not np.allclose(plain[:5], (logits - offset)[:5], atol=1e-4)
  without = graphs._replace(nodes={k: v for k, v in graphs.nodes.items()
                                   if k != "hint"})
  with pytest.raises(PolicyError, match="nodes\\['hint'\\]"):
    apply(params, without)


def test_create_policy_go_splits_encoder_and_head_hyperparameters():
  policy = policies.create_policy("go", 5, hidden_size=16, num_heads=2,
                                  segment_length=8, head_hidden_size=12)
  assert isinstance(policy, go.GOPolicy)
  assert policy.num_devices == 5 and policy.head_hidden_size == 12
  assert policy.encoder == go.GOEncoder(hidden_size=16, num_heads=2,
                                        segment_length=8)
  # Defaults: the README's GOPolicy(num_devices=5).
  assert policies.create_policy("go", 5) == policies.GOPolicy(num_devices=5)
  assert go.GOEncoder().vocabulary_size == go.DEFAULT_VOCABULARY_SIZE


@pytest.mark.parametrize("hparams,message", [
    (dict(hidden_size=10, num_heads=4), "divisible by num_heads"),
    (dict(modulation="scale"), "modulation"),
    (dict(aggregator="sum"), "aggregator"),
    (dict(segment_length=0), "segment_length"),
    (dict(num_layers=3), "Unknown GO policy hyperparameters"),
])
def test_bad_hyperparameters_are_policy_errors(hparams, message):
  with pytest.raises(PolicyError, match=message):
    policies.create_policy("go", 3, **hparams)


def test_relative_position_encoding_is_the_fraction_of_the_graph():
  graphs = make_graphs_tuple([chain(4)], n_pad=6, e_pad=8)
  encoding = go.relative_position_encoding(graphs, num_frequencies=2)
  assert encoding.shape == (6, 5)
  np.testing.assert_allclose(encoding[:4, 0], [0.0, 0.25, 0.5, 0.75])
  np.testing.assert_allclose(encoding[:4, 1], np.sin(np.pi * encoding[:4, 0]),
                             atol=1e-6)


def test_encoder_sizes_must_be_positive():
  with pytest.raises(PolicyError, match="num_heads=0"):
    policies.create_policy("go", 3, num_heads=0)
  with pytest.raises(PolicyError, match="hidden_size=0"):
    policies.create_policy("go", 3, hidden_size=0)


def test_priority_levels_give_joint_logits_of_independent_heads():
  policy = policies.create_policy("go", 3, hidden_size=8, num_heads=2,
                                  segment_length=4, num_sage_layers=1,
                                  num_attention_layers=1, head_hidden_size=8,
                                  priority_levels=2, priority_init=3.0)
  graphs = make_graphs_tuple([chain(5)], n_pad=8, e_pad=8)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), graphs)
  assert set(params["params"]) == {"encoder", "head", "priority_head"}
  mask = jnp.array([True, False, True])
  joint = jax.jit(policy.apply)(params, graphs, mask)
  assert joint.shape == (8, 6)
  log_p = jax.nn.log_softmax(joint).reshape(8, 3, 2)
  # A product of a device and a level distribution: log p(d, l) = log
  # p(d) + log p(l).
  device = jax.scipy.special.logsumexp(log_p, -1)
  level = jax.scipy.special.logsumexp(log_p, -2)
  np.testing.assert_allclose(log_p, device[:, :, None] + level[:, None, :],
                             atol=1e-5)
  assert np.all(np.exp(device[:, 1]) < 1e-6)        # the masked device
  # Level 0 starts at e^3 / (e^3 + 1) before training.
  np.testing.assert_allclose(np.exp(level[:, 0]), np.exp(3) / (np.exp(3) + 1),
                             atol=0.02)
  with pytest.raises(PolicyError, match="priority_levels=1"):
    policies.create_policy("go", 3, priority_levels=1)


def test_one_compile_per_budget():
  policy = policies.create_policy("go", 3, hidden_size=8, num_heads=2,
                                  segment_length=4, num_sage_layers=1,
                                  num_attention_layers=1, head_hidden_size=8)
  traces = []

  @jax.jit
  def apply(params, graphs):
    traces.append(1)
    return policy.apply(params, graphs)

  graphs = make_graphs_tuple([DIAMOND, chain(3)], n_pad=9, e_pad=16)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), graphs)
  logits = apply(params, graphs)
  # Other graphs of the same budget (nodes, edges, graphs): no new trace.
  for other in ([chain(2), chain(5)], [chain(4), chain(3)], [DIAMOND, DIAMOND]):
    other_logits = apply(params, make_graphs_tuple(other, n_pad=9, e_pad=16))
    assert other_logits.shape == logits.shape
  assert len(traces) == 1
  # A larger budget compiles once more.
  apply(params, make_graphs_tuple([DIAMOND], n_pad=12, e_pad=16))
  assert len(traces) == 2
