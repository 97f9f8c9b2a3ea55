"""Tests of gplace.rl.update: the axis-parallel RL and warm-start steps."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from gplace._testing import (LinearPolicy, TabularPolicy, toy_batch,
                             toy_simulate, toy_train_state)
from gplace.rl import distributions
from gplace.rl import update
from gplace.rl.settings import RLSettings
from rl_cases import fit_toy_target, toy_train


@pytest.mark.parametrize("loss", ["ppo"])
def test_pmap_shard_map_and_single_device_agree(loss):
  num_local = 4
  assert jax.local_device_count() >= num_local
  batch = toy_batch()
  policy = LinearPolicy()
  # Plain SGD: Adam's first steps magnify float noise in near-zero gradients.
  optimizer = optax.sgd(0.1)
  hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=8, loss=loss, ppo_epochs=2)
  state = toy_train_state(policy, batch, optimizer)
  step = functools.partial(update.rl_step, apply_fn=policy.apply,
                           optimizer=optimizer, hparams=hparams,
                           simulate_fn=toy_simulate)

  def chunk(state, batch, axis_name=None):
    return update.scan_chunk(functools.partial(step, axis_name=axis_name),
                             state, batch, num_steps=2)

  single, single_metrics = jax.jit(chunk)(state, batch)

  replicated = jax.tree.map(lambda x: jnp.stack([x] * num_local), state)
  pmapped, pmap_metrics = jax.pmap(
      functools.partial(chunk, axis_name="devices"), axis_name="devices",
      in_axes=(0, None), devices=jax.local_devices()[:num_local])(
          replicated, batch)

  mesh = Mesh(np.array(jax.local_devices()[:num_local]), ("devices",))
  sharded, _ = jax.jit(jax.shard_map(
      functools.partial(chunk, axis_name="devices"), mesh=mesh,
      in_specs=(P(), P()), out_specs=(P(), P()), check_vma=False))(
          state, batch)

  for other in (jax.tree.map(lambda x: x[0], pmapped), sharded):
    np.testing.assert_array_equal(other.best_placement, single.best_placement)
    np.testing.assert_allclose(other.best_runtime_s, single.best_runtime_s,
                               rtol=1e-6)
    np.testing.assert_array_equal(other.rng, single.rng)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4,
                                                         atol=2e-6),
                 other.params, single.params)
    np.testing.assert_allclose(other.baseline, single.baseline, rtol=1e-5)
  np.testing.assert_allclose(pmap_metrics["mean_runtime_s"][0],
                             single_metrics["mean_runtime_s"], rtol=1e-5)
  assert int(single.step) == 2


@pytest.mark.parametrize("num_graphs", [1, 2])
def test_reinforce_improves_tiny_problem(num_graphs):
  batch = toy_batch(num_graphs=num_graphs)
  policy = TabularPolicy()
  optimizer = optax.adam(1e-1)
  hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=16, loss="reinforce",
                             entropy_weight=0.0)
  state = toy_train_state(policy, batch, optimizer)
  state, metrics = toy_train(policy, optimizer, hparams, state, batch,
                             num_steps=60)
  runtime = np.asarray(metrics["mean_runtime_s"])
  assert runtime[-10:].mean() < 0.8 * runtime[:5].mean(), runtime
  assert metrics["entropy"][-1] < metrics["entropy"][0]
  # The best placement is tracked and really has the best runtime.
  best, failed = jax.vmap(toy_simulate)(batch.problems,
                                        state.best_placement[:, None])
  np.testing.assert_allclose(best[:, 0], state.best_runtime_s, rtol=1e-6)
  assert not np.any(failed)
  assert np.all(state.best_runtime_s <= runtime.min() + 1e-6)


@pytest.mark.parametrize("epochs", [1, 4])
def test_ppo_reports_the_clipped_fraction_after_its_updates(epochs):
  # The first epoch's ratio is exactly 1 (nothing clipped); with several
  # epochs and a large step the last epoch's ratios leave the clip range,
  # and that fraction is what the step reports.
  batch = toy_batch()
  policy = TabularPolicy()
  optimizer = optax.sgd(50.0)
  hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=16, loss="ppo", ppo_epochs=epochs,
                          ppo_clip=0.05, entropy_weight=0.0)
  state = toy_train_state(policy, batch, optimizer)
  _, metrics = toy_train(policy, optimizer, hparams, state, batch, num_steps=3)
  clipped = np.asarray(metrics["clipped_fraction"])
  if epochs == 1:
    np.testing.assert_array_equal(clipped, 0.0)
  else:
    assert clipped.max() > 0.0, clipped
    assert np.all(clipped <= 1.0)


def test_an_entropy_floor_keeps_every_decision_open_while_learning():
  batch = toy_batch()
  policy = TabularPolicy()
  optimizer = optax.adam(1e-1)
  state = toy_train_state(policy, batch, optimizer)
  final = {}
  for floor in (0.0, 0.3):
    hparams = RLSettings(advantage="ema",
        num_samples=16, loss="reinforce",
                            entropy_weight=0.0, entropy_floor=floor)
    end, metrics = toy_train(policy, optimizer, hparams, state, batch,
                          num_steps=60)
    runtime = np.asarray(metrics["mean_runtime_s"])
    assert runtime[-10:].mean() < 0.9 * runtime[:5].mean(), (floor, runtime)
    graph = jax.tree.map(lambda x: x[0], batch.graphs)
    entropies = distributions.node_entropy(
        policy.apply(end.params, graph, batch.device_mask[0]))
    final[floor] = np.asarray(entropies)[np.asarray(graph.nodes["mask"])]
    assert ("under_floor" in metrics) == (floor > 0)
  # Without the floor some decisions become certain; with it none falls
  # far under the floor.
  assert final[0.0].min() < 0.1, final[0.0]
  assert final[0.3].min() > 0.2, final[0.3]


def test_supervised_warm_start_fits_target():
  fit_toy_target(TabularPolicy())


def test_mutate_best_samples_around_the_best_placement():
  batch = toy_batch()
  policy = LinearPolicy()
  optimizer = optax.adam(1e-2)
  state = toy_train_state(policy, batch, optimizer)
  best = jnp.ones_like(state.best_placement)
  state = state.replace(best_placement=best)
  for m, expect_all_best in ((1e-9, True), (1.0, False)):
    hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=8, loss="reinforce", mutate_best=m)
    _, rollout = jax.jit(functools.partial(
        update.sample_rollout, apply_fn=policy.apply, hparams=hparams))(
            state, batch)
    same = np.asarray(rollout.placements == best[:, None])
    assert same.all() == expect_all_best


def test_rollout_log_probs_are_the_policy_s_and_zero_on_padding():
  batch = toy_batch()
  policy = LinearPolicy()
  state = toy_train_state(policy, batch, optax.sgd(0.1))
  hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=4, explore_epsilon=0.1)
  new_state, rollout = update.sample_rollout(state, batch,
                                             apply_fn=policy.apply,
                                             hparams=hparams)
  assert rollout.placements.shape == (2, 4, 12)
  assert not np.array_equal(new_state.rng, state.rng)
  mask = batch.graphs.nodes["mask"]
  for b in range(2):
    graph = jax.tree.map(lambda x: x[b], batch.graphs)
    logits = distributions.exploration_logits(
        policy.apply(state.params, graph, batch.device_mask[b]), 0.1,
        batch.device_mask[b][None])
    np.testing.assert_allclose(
        rollout.node_log_probs[b],
        distributions.node_log_probs(logits, rollout.placements[b], mask[b]),
        rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(rollout.node_log_probs[b][:, ~mask[b]], 0.0)
