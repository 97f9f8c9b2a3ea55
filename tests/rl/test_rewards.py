"""Tests of gplace.rl.rewards: penalties, host scoring, scorers."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gplace import _testing
from gplace.errors import RewardError
from gplace.graphs.graph import random_dag
from gplace.rl import rewards
from gplace.rl import scoring
from gplace.rl import update
from gplace.rl.settings import RLSettings
from gplace.sim import simulator
from gplace.sim import presets


def test_reward_penalises_failures():
  r = rewards.reward(jnp.array([4.0, 1.0, jnp.nan]),
                     jnp.array([False, True, False]), 100.0)
  np.testing.assert_allclose(r, [-2.0, -10.0, -10.0])
  np.testing.assert_allclose(
      rewards.effective_runtime(jnp.array([4.0, jnp.inf]),
                                jnp.array([False, False]), 7.0), [4.0, 7.0])


def test_host_rewards_match_jitted_simulator():
  batch = _testing.toy_batch()
  policy = _testing.LinearPolicy()
  optimizer = optax.adam(1e-2)
  hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=4, loss="reinforce")
  state = _testing.toy_train_state(policy, batch, optimizer)
  common = dict(apply_fn=policy.apply, hparams=hparams)
  expected, _ = jax.jit(functools.partial(
      update.rl_step, optimizer=optimizer, simulate_fn=_testing.toy_simulate,
      **common))(state, batch)

  sample = jax.jit(functools.partial(update.sample_rollout, **common))
  update_fn = jax.jit(functools.partial(update.update_from_rollout,
                                        optimizer=optimizer, **common))
  state, rollout = sample(state, batch)

  def reward_fn(b):
    problem = jax.tree.map(lambda x: x[b], batch.problems)
    def measure(placements_np):  # [K, n_real] numpy, like gplace.measure
      full = np.zeros((placements_np.shape[0], 12), np.int32)
      full[:, :placements_np.shape[1]] = placements_np
      runtime, failed = _testing.toy_simulate(problem, full)
      return np.where(np.asarray(failed), np.inf, np.asarray(runtime))
    return measure

  num_nodes = batch.graphs.n_node[:, 0]
  rollout = scoring.host_scored_rollout(rollout, [reward_fn(0), reward_fn(1)],
                                        num_nodes)
  got, _ = update_fn(state, batch, rollout)
  np.testing.assert_array_equal(got.best_placement, expected.best_placement)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                       atol=1e-7),
               got.params, expected.params)


def test_reward_fn_of_the_wrong_shape_is_a_reward_error():
  batch = _testing.toy_batch(num_graphs=1)
  policy = _testing.LinearPolicy()
  state = _testing.toy_train_state(policy, batch, optax.sgd(0.1))
  _, rollout = update.sample_rollout(
      state, batch, apply_fn=policy.apply,
      hparams=RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=4))
  with pytest.raises(RewardError, match="returned 3 runtimes for 4"):
    scoring.host_scored_rollout(rollout, [lambda p: np.ones(3)], [6])


def test_scorer_simulates_and_marks_out_of_memory():
  graph = random_dag(30, seed=0)
  topology = presets.preset("1cpu+2gpu")
  scorer = scoring.Scorer(graph, topology)
  placements = np.stack([np.zeros(30, np.int32),
                         np.arange(30, dtype=np.int32) % 3])
  got = scorer(placements)
  want = simulator.simulate(graph, placements, topology)
  np.testing.assert_allclose(
      got, np.where(want.oom, np.inf, want.runtime_s), rtol=1e-12)
  runtime, oom = scoring.simulate_host(graph, placements, topology)
  assert runtime.shape == oom.shape == (2,) and runtime.dtype == np.float64
  # The cheaper half of the default schedule, for RL on large graphs: its
  # own runtimes, never faster than the default's.
  dynamic = scoring.Scorer(graph, topology, schedule="dynamic")(placements)
  want = simulator.simulate(graph, placements, topology, schedule="dynamic")
  np.testing.assert_allclose(
      dynamic, np.where(want.oom, np.inf, want.runtime_s), rtol=1e-12)
  assert np.all(dynamic >= got)


def test_scorers_rank_arrived_ops_by_a_policy_priority():
  graph = random_dag(30, seed=1)
  topology = presets.preset("1cpu+2gpu")
  placements = (np.arange(60, dtype=np.int32) % 3).reshape(2, 30)
  priority = np.random.default_rng(0).normal(size=(2, 30)).astype(np.float32)
  want = simulator.simulate(graph, placements, topology, priority=priority)
  got = scoring.Scorer(graph, topology)(placements, priority=priority)
  np.testing.assert_allclose(got, np.where(want.oom, np.inf, want.runtime_s),
                             rtol=1e-12)
  # Measured rewards and the node-id-order reward cannot run it.
  with pytest.raises(RewardError, match="own schedule"):
    scoring.Scorer(graph, topology, executor=True)(placements,
                                                   priority=priority)
  with pytest.raises(RewardError, match="simulator_dynamic"):
    rewards.simulator_reward(None, placements, priority)


def test_simulator_reward_is_jittable_and_matches_the_host():
  graph = random_dag(20, seed=1)
  topology = presets.preset("1cpu+2gpu")
  problem = simulator.make_problem(graph, topology)
  placements = jnp.asarray(np.random.default_rng(0).integers(0, 3, (3, 20)),
                           jnp.int32)
  # The in-step reward scores node-id order (the shared-order scan); the
  # host reward scores gplace.simulate's default, the dynamic schedule.
  runtime, oom = jax.jit(rewards.simulator_reward)(problem, placements)
  static = simulator.simulate(graph, np.asarray(placements), topology,
                              schedule="static")
  np.testing.assert_allclose(runtime, static.runtime_s, rtol=1e-5)
  np.testing.assert_array_equal(oom, static.oom)
  host_runtime, host_oom = scoring.simulate_host(graph, placements, topology)
  dynamic = simulator.simulate(graph, np.asarray(placements), topology)
  np.testing.assert_allclose(host_runtime, dynamic.runtime_s, rtol=1e-6)
  np.testing.assert_array_equal(host_oom, dynamic.oom)


def test_dispatch_reward_is_the_default_schedule_of_padded_graphs():
  graphs = [random_dag(20, seed=1), random_dag(13, seed=2)]
  topology = presets.preset("1cpu+2gpu")
  stacked = scoring.stacked_dispatch_problems(graphs, topology,
                                                   n_nodes=24)
  rng = np.random.default_rng(0)
  for b, graph in enumerate(graphs):
    problem = jax.tree.map(lambda x: x[b], stacked)
    placements = rng.integers(0, 3, (3, 24))
    runtime, oom = jax.jit(rewards.dispatch_reward)(
        problem, jnp.asarray(placements, jnp.int32))
    want = simulator.simulate(graph, placements[:, :graph.n_nodes], topology)
    np.testing.assert_allclose(runtime, want.runtime_s, rtol=1e-6)
    np.testing.assert_array_equal(oom, want.oom)
