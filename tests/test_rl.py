"""Tests of gplace.rl: distributions, losses, the axis-parallel update."""

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from gplace.rl import core as rl
from graphs_tuple_helper import chain, make_graphs_tuple


class ToyProblem(NamedTuple):
  costs: jax.Array      # [N, D]
  node_bytes: jax.Array  # [N]
  capacity: jax.Array   # [D]


def toy_simulate(problem, placements):
  """Load balance: runtime = busiest device; OOM when bytes exceed capacity."""
  one_hot = jax.nn.one_hot(placements, problem.costs.shape[1])  # [K, N, D]
  load = jnp.einsum("knd,nd->kd", one_hot, problem.costs)
  used = jnp.einsum("knd,n->kd", one_hot, problem.node_bytes)
  return load.max(-1), jnp.any(used > problem.capacity, -1)


def make_batch(num_graphs=2, n_pad=12, num_devices=3):
  sizes = [6, 9, 5][:num_graphs]
  graphs, problems = [], []
  rng = np.random.default_rng(0)
  for n in sizes:
    graphs.append(make_graphs_tuple([chain(n)], n_pad=n_pad, e_pad=24,
                                    seed=n))
    costs = np.zeros((n_pad, num_devices), np.float32)
    costs[:n] = rng.uniform(0.5, 1.5, size=(n, num_devices))
    node_bytes = np.zeros(n_pad, np.float32)
    node_bytes[:n] = 1.0
    problems.append(ToyProblem(costs, node_bytes,
                               np.full(num_devices, n - 1.0, np.float32)))
  stack = lambda xs: jax.tree.map(lambda *a: np.stack(a), *xs)
  return rl.Batch(graphs=stack(graphs), problems=stack(problems),
                  failing_runtime_s=np.full(num_graphs, 20.0, np.float32),
                  device_mask=np.ones((num_graphs, num_devices), bool))


class LinearPolicy(nn.Module):
  """Logits linear in node features: compiles fast, for update tests."""
  num_devices: int = 3

  @nn.compact
  def __call__(self, graphs, device_mask=None):
    logits = nn.Dense(self.num_devices)(graphs.nodes["features"])
    if device_mask is not None:
      logits = jnp.where(device_mask, logits, -1e9)
    return logits


class TabularPolicy(nn.Module):
  """A free logit per (node position, device): learns anything, fast."""
  num_devices: int = 3
  max_nodes: int = 16

  @nn.compact
  def __call__(self, graphs, device_mask=None):
    table = self.param("table", nn.initializers.zeros,
                       (self.max_nodes, self.num_devices))
    return table[graphs.nodes["position"]]


def init_state(policy, batch, optimizer, seed=0):
  graph0 = jax.tree.map(lambda x: x[0], batch.graphs)
  params = policy.init(jax.random.PRNGKey(seed), graph0)
  return rl.init_train_state(jax.random.PRNGKey(seed + 1), params, optimizer,
                             batch)


def test_sampling_frequencies_and_log_prob():
  logits = jnp.log(jnp.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]))
  samples = rl.sample_placements(logits, jax.random.PRNGKey(0), 4000)
  assert samples.shape == (4000, 2) and samples.dtype == jnp.int32
  freq = np.stack([np.bincount(samples[:, i], minlength=3) / 4000
                   for i in range(2)])
  np.testing.assert_allclose(freq, np.exp(logits), atol=0.03)
  lp = rl.log_prob(logits, jnp.array([[0, 2], [1, 0]]),
                   jnp.array([True, True]))
  np.testing.assert_allclose(lp, [np.log(0.7 * 0.8), np.log(0.2 * 0.1)],
                             rtol=1e-5)
  # Padding nodes do not count; teacher-forced [K, N, D] logits broadcast.
  lp = rl.log_prob(jnp.broadcast_to(logits, (2, 2, 3)),
                   jnp.array([[0, 2], [1, 0]]), jnp.array([True, False]))
  np.testing.assert_allclose(lp, np.log([0.7, 0.2]), rtol=1e-5)
  np.testing.assert_allclose(
      rl.entropy(jnp.zeros((3, 4)), jnp.array([True, True, False])),
      np.log(4), rtol=1e-6)


def test_reward_penalises_failures():
  r = rl.reward(jnp.array([4.0, 1.0, jnp.nan]), jnp.array([False, True, False]),
                100.0)
  np.testing.assert_allclose(r, [-2.0, -10.0, -10.0])


def test_loss_gradients_are_sane():
  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
  mask = jnp.array([True] * 4 + [False])
  placements = jnp.asarray(rng.integers(0, 3, size=(6, 5)), jnp.int32)
  advantages = jnp.asarray(rng.normal(size=6), jnp.float32)
  reinforce = lambda l: rl.reinforce_loss(l, placements, advantages, mask,
                                          0.0)[0]
  old = rl.node_log_probs(logits, placements, mask)
  ppo = lambda l: rl.ppo_loss(l, placements, old, advantages, mask, 0.2,
                              0.0)[0]
  g_reinforce, g_ppo = jax.grad(reinforce)(logits), jax.grad(ppo)(logits)
  # At ratio 1 the clipped surrogate has the policy gradient.
  np.testing.assert_allclose(g_ppo, g_reinforce, rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(g_reinforce[4], 0.0)  # padding node
  # A step along -grad makes the positive-advantage sample more likely.
  best = int(jnp.argmax(advantages))
  before = rl.log_prob(logits, placements, mask)[best]
  after = rl.log_prob(logits - 0.1 * g_reinforce, placements, mask)[best]
  assert after > before
  # Entropy bonus pushes towards uniform.
  ent_loss = lambda l: rl.reinforce_loss(l, placements, 0 * advantages, mask,
                                         1.0)[0]
  new = logits - 0.5 * jax.grad(ent_loss)(logits)
  assert rl.entropy(new, mask) > rl.entropy(logits, mask)
  # Supervised cross-entropy is minimised by the target.
  target = jnp.array([0, 1, 2, 0, 0])
  sup = lambda l: rl.supervised_loss(l, target, mask)[0]
  assert sup(logits - 1.0 * jax.grad(sup)(logits)) < sup(logits)
  # Label smoothing: the best logits are no longer a one-hot certainty.
  smooth = lambda l: rl.supervised_loss(l, target, mask, 0.1)[0]
  confident = 20.0 * jax.nn.one_hot(target, 3)
  assert smooth(confident / 10) < smooth(confident)


@pytest.mark.parametrize("loss", ["ppo"])
def test_pmap_shard_map_and_single_device_agree(loss):
  num_local = 4
  assert jax.local_device_count() >= num_local
  batch = make_batch()
  policy = LinearPolicy()
  # Plain SGD: Adam's first steps magnify float noise in near-zero gradients.
  optimizer = optax.sgd(0.1)
  hparams = rl.RLHyperparams(num_samples=8, loss=loss, ppo_epochs=2)
  state = init_state(policy, batch, optimizer)
  step = functools.partial(rl.rl_step, apply_fn=policy.apply,
                           optimizer=optimizer, hparams=hparams,
                           simulate_fn=toy_simulate)

  def chunk(state, batch, axis_name=None):
    return rl.scan_chunk(functools.partial(step, axis_name=axis_name), state,
                         batch, num_steps=2)

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
  batch = make_batch(num_graphs=num_graphs)
  policy = TabularPolicy()
  optimizer = optax.adam(1e-1)
  hparams = rl.RLHyperparams(num_samples=16, loss="reinforce",
                             entropy_weight=0.0)
  state = init_state(policy, batch, optimizer)
  step = functools.partial(rl.rl_step, apply_fn=policy.apply,
                           optimizer=optimizer, hparams=hparams,
                           simulate_fn=toy_simulate)
  chunk = jax.jit(functools.partial(rl.scan_chunk, step, num_steps=60))
  state, metrics = chunk(state, batch)
  runtime = np.asarray(metrics["mean_runtime_s"])
  assert runtime[-10:].mean() < 0.8 * runtime[:5].mean(), runtime
  assert metrics["entropy"][-1] < metrics["entropy"][0]
  # The best placement is tracked and really has the best runtime.
  best, failed = jax.vmap(toy_simulate)(batch.problems,
                                        state.best_placement[:, None])
  np.testing.assert_allclose(best[:, 0], state.best_runtime_s, rtol=1e-6)
  assert not np.any(failed)
  assert np.all(state.best_runtime_s <= runtime.min() + 1e-6)


def test_host_rewards_match_jitted_simulator():
  batch = make_batch()
  policy = LinearPolicy()
  optimizer = optax.adam(1e-2)
  hparams = rl.RLHyperparams(num_samples=4, loss="reinforce")
  state = init_state(policy, batch, optimizer)
  common = dict(apply_fn=policy.apply, hparams=hparams)
  expected, _ = jax.jit(functools.partial(
      rl.rl_step, optimizer=optimizer, simulate_fn=toy_simulate, **common))(
          state, batch)

  sample = jax.jit(functools.partial(rl.sample_rollout, **common))
  update = jax.jit(functools.partial(rl.update_from_rollout,
                                     optimizer=optimizer, **common))
  state, rollout = sample(state, batch)

  def reward_fn(b):
    problem = jax.tree.map(lambda x: x[b], batch.problems)
    def measure(placements_np):  # [K, n_real] numpy, like gplace.measure
      full = np.zeros((placements_np.shape[0], 12), np.int32)
      full[:, :placements_np.shape[1]] = placements_np
      runtime, failed = toy_simulate(problem, full)
      return np.where(np.asarray(failed), np.inf, np.asarray(runtime))
    return measure

  num_nodes = batch.graphs.n_node[:, 0]
  rollout = rl.host_scored_rollout(rollout, [reward_fn(0), reward_fn(1)],
                                   num_nodes)
  got, _ = update(state, batch, rollout)
  np.testing.assert_array_equal(got.best_placement, expected.best_placement)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                       atol=1e-7),
               got.params, expected.params)


def test_supervised_warm_start_fits_target():
  batch = make_batch()
  policy = TabularPolicy()
  optimizer = optax.adam(3e-2)
  state = init_state(policy, batch, optimizer)
  # One target per position (the tabular policy is shared by position).
  target = jnp.asarray(np.random.default_rng(3).integers(0, 3, (1, 12)),
                       jnp.int32).repeat(2, 0)
  step = functools.partial(rl.supervised_step, apply_fn=policy.apply,
                           optimizer=optimizer)
  chunk = jax.jit(functools.partial(rl.scan_chunk, step, num_steps=80))
  state, metrics = chunk(state, batch, target)
  assert metrics["accuracy"][-1] > 0.95, metrics["accuracy"]


def test_explore_epsilon_is_the_uniform_mixture():
  logits = jnp.asarray([[4.0, 0.0, -2.0], [0.0, 0.0, 0.0]])
  assert rl.exploration_logits(logits, 0.0) is logits
  mixed = rl.exploration_logits(logits, 0.1)
  expected = 0.9 * jax.nn.softmax(logits) + 0.1 / 3
  np.testing.assert_allclose(jnp.exp(mixed), expected, rtol=1e-6)


def test_mutate_best_samples_around_the_best_placement():
  batch = make_batch()
  policy = LinearPolicy()
  optimizer = optax.adam(1e-2)
  state = init_state(policy, batch, optimizer)
  best = jnp.ones_like(state.best_placement)
  state = state.replace(best_placement=best)
  for m, expect_all_best in ((1e-9, True), (1.0, False)):
    hparams = rl.RLHyperparams(num_samples=8, loss="reinforce",
                               mutate_best=m)
    _, rollout = jax.jit(functools.partial(
        rl.sample_rollout, apply_fn=policy.apply, hparams=hparams))(
            state, batch)
    same = np.asarray(rollout.placements == best[:, None])
    assert same.all() == expect_all_best
