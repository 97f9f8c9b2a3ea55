"""Sequential policies in the RL loop (gplace.rl.policy_fns): sampling,
teacher-forced scores, the update, the warm start and evaluation."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gplace._testing import (LinearPolicy, SequentialTabularPolicy, toy_batch,
                             toy_simulate, toy_train_state)
from gplace.errors import ConfigError
from gplace.rl import evaluation, update
from gplace.rl.policy_fns import policy_fns
from gplace.rl.settings import RLSettings
from gplace.rl import checks
from gplace.rl import settings as settings_lib
from experiments.configs import quickstart
from rl_cases import fit_toy_target, toy_train


def _graph(batch, b=0):
  return jax.tree.map(lambda x: x[b], batch.graphs)


def test_policy_fns_of_a_sequential_policy_score_what_they_sample():
  batch = toy_batch(num_graphs=1)
  policy = SequentialTabularPolicy()
  params = policy.init(jax.random.PRNGKey(0), _graph(batch))
  fns = policy_fns(policy.apply)
  assert fns.sequential and fns.placement_actions
  assert policy_fns(policy.apply) is fns  # cached: jitted functions reused
  graph, mask = _graph(batch), batch.device_mask[0]
  keys = jax.random.split(jax.random.PRNGKey(1), 32)
  placements, actions = jax.jit(fns.sample)(params, graph, mask, keys)
  assert placements.shape == actions.shape == (32, 12)
  scores = fns.score(params, graph, mask, actions)
  # Recompute each step's probability by hand from the tables.
  table, previous = params["params"]["table"], params["params"]["previous"]
  prev = np.concatenate([np.full((32, 1), 3), np.asarray(actions)[:, :-1]], 1)
  logits = np.asarray(table)[np.arange(12)][None] + np.asarray(previous)[prev]
  log_p = np.asarray(jax.nn.log_softmax(logits))
  expect = np.take_along_axis(log_p, np.asarray(actions)[..., None], -1)[..., 0]
  real = np.asarray(graph.nodes["mask"])
  np.testing.assert_allclose(scores.log_probs[:, real], expect[:, real],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(scores.log_probs[:, ~real], 0.0)
  # Greedy: every step's argmax, the same for any key.
  greedy = fns.greedy(params, graph, mask)
  greedy_scores = fns.score(params, graph, mask, greedy[None])
  for i in np.flatnonzero(real):
    prev_i = 3 if i == 0 else int(greedy[i - 1])
    row = np.asarray(table)[i] + np.asarray(previous)[prev_i]
    assert int(greedy[i]) == int(np.argmax(row))
  assert np.all(np.asarray(greedy_scores.log_probs) <= 0)


def test_device_mask_is_respected_by_sampling():
  batch = toy_batch(num_graphs=1)
  policy = SequentialTabularPolicy()
  params = policy.init(jax.random.PRNGKey(0), _graph(batch))
  fns = policy_fns(policy)
  keys = jax.random.split(jax.random.PRNGKey(2), 64)
  placements, _ = fns.sample(params, _graph(batch),
                             jnp.asarray([True, False, True]), keys)
  assert not np.any(np.asarray(placements) == 1)


@pytest.mark.parametrize("loss", ["reinforce", "ppo"])
def test_rl_step_with_a_sequential_policy_learns_the_toy_problem(loss):
  batch = toy_batch(num_graphs=2)
  policy = SequentialTabularPolicy()
  optimizer = optax.adam(1e-1)
  hparams = RLSettings(entropy_floor=0.0,
        num_samples=16, loss=loss, entropy_weight=0.0,
                          ppo_epochs=2, advantage="batch")
  state = toy_train_state(policy, batch, optimizer)
  state, metrics = toy_train(policy, optimizer, hparams, state, batch,
                             num_steps=40)
  runtime = np.asarray(metrics["mean_runtime_s"])
  assert runtime[-5:].mean() < 0.8 * runtime[:5].mean(), runtime
  # The policy's own greedy placement is better than the initial one's.
  initial = toy_train_state(policy, batch, optimizer)
  greedy = lambda params: evaluation.policy_placements(
      params, batch, jax.random.PRNGKey(0), apply_fn=policy.apply,
      num_samples=2)[0]
  before, _ = jax.vmap(toy_simulate)(batch.problems,
                                     greedy(initial.params)[:, None])
  after, _ = jax.vmap(toy_simulate)(batch.problems,
                                    greedy(state.params)[:, None])
  assert np.all(np.asarray(after) < np.asarray(before))


def test_rollout_of_a_sequential_policy_keeps_its_actions_and_log_probs():
  batch = toy_batch(num_graphs=2)
  policy = SequentialTabularPolicy()
  state = toy_train_state(policy, batch, optax.sgd(0.1))
  _, rollout = update.sample_rollout(
      state, batch, apply_fn=policy.apply,
      hparams=RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=4))
  assert rollout.actions.shape == rollout.placements.shape == (2, 4, 12)
  for b in range(2):
    scores = policy.apply(state.params, _graph(batch, b), batch.device_mask[b],
                          rollout.actions[b])
    np.testing.assert_allclose(rollout.node_log_probs[b], scores.log_probs,
                               rtol=1e-6)
  # One-shot policies keep no separate actions.
  linear = LinearPolicy()
  state = toy_train_state(linear, batch, optax.sgd(0.1))
  _, rollout = update.sample_rollout(state, batch, apply_fn=linear.apply,
                                     hparams=RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=4))
  assert rollout.actions is None


def test_warm_start_teacher_forces_a_sequential_policy():
  policy = SequentialTabularPolicy()
  batch, state, target = fit_toy_target(policy)
  greedy = policy_fns(policy).greedy(state.params, _graph(batch),
                                     batch.device_mask[0])
  real = np.asarray(batch.graphs.nodes["mask"][0])
  np.testing.assert_array_equal(np.asarray(greedy)[real],
                                np.asarray(target[0])[real])


def validate_config(config, workdir):
  """The checks of a run that depend on its policy's actions."""
  del workdir
  experiment = settings_lib.from_config(config)
  module = experiment.policy.create(5)
  checks.check_actions(experiment.settings, experiment.policy.name, module)


def test_config_refuses_what_a_sequential_policy_cannot_do(tmp_path,
                                                           monkeypatch):
  from gplace.policies import base
  monkeypatch.setitem(base._FACTORIES, "toy_sequential",
                      lambda num_devices, **kw: SequentialTabularPolicy(
                          num_devices=num_devices))
  config = quickstart.get_config()
  config.policy = type(config.policy)(dict(name="toy_sequential"))
  validate_config(config, str(tmp_path))  # the defaults are fine
  config.rl.explore_epsilon = 0.1
  with pytest.raises(ConfigError, match="explore_epsilon"):
    validate_config(config, str(tmp_path))
  config.rl.explore_epsilon = 0.0

  class GroupingPolicy(SequentialTabularPolicy):
    placement_actions = False  # e.g. HDP: it also chooses groups

  monkeypatch.setitem(base._FACTORIES, "toy_sequential",
                      lambda num_devices, **kw: GroupingPolicy(
                          num_devices=num_devices))
  validate_config(config, str(tmp_path))
  config.rl.mutate_best = 0.1
  with pytest.raises(ConfigError, match="mutate_best"):
    validate_config(config, str(tmp_path))
  config.rl.mutate_best = 0.0
  config.warm_start.baseline = "best"
  with pytest.raises(ConfigError, match="warm_start.baseline"):
    validate_config(config, str(tmp_path))
