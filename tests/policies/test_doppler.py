"""Tests of gplace.policies.doppler: the DOPPLER-style dual policy (op
selection + device choice) as a sequential, ordering policy (shapes,
orders that are topological, teacher forcing = sampling, masks, critical
path levels, plan actions, scoring in the policy's own schedule, errors, and
a short imitation + RL run)."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.configs import doppler as doppler_config
from gplace import policies
from gplace.errors import ConfigError, PolicyError
from gplace.graphs import features
from gplace.policies import doppler, doppler_context
from gplace.rl import data, grouping, rewards, scoring
from gplace.rl.policy_fns import policy_fns
from gplace.rl.scoring import stacked_dispatch_problems
from experiments.run import check
from gplace import workloads
from gplace.rl import settings as settings_lib
from gplace.rl.warm_start import ordered_warm_start_targets
from gplace.sim import simulator
from gplace.sim import presets
from policy_cases import greedy_before_and_after
from test_placeto import DIAMOND, diamond_and_chain, op_graph


def validate_config(config, workdir):
  """What experiments/run.py checks before training."""
  del workdir
  check(config, log=lambda _: None)


ALL = np.ones((9, 3), bool)
K = 4


class Tiny:
  """A tiny policy, its parameters and jitted entry points."""

  def __init__(self):
    self.policy = policies.create_policy("doppler", 3, hidden_size=8,
                                         message_passing_steps=1)
    self.graphs = diamond_and_chain()
    self.params = jax.jit(self.policy.init)(jax.random.PRNGKey(0),
                                            self.graphs)
    self._sample = jax.jit(lambda p, g, m, k, greedy: self.policy.apply(
        p, g, m, k, greedy, method="sample_with_scores"))
    self._score = jax.jit(self.policy.apply)

  def sample(self, device_mask=ALL, seed=1, greedy=False):
    keys = jax.random.split(jax.random.PRNGKey(seed), K)
    return self._sample(self.params, self.graphs, jnp.asarray(device_mask),
                        keys, greedy)

  def score(self, actions, device_mask=ALL):
    return self._score(self.params, self.graphs, jnp.asarray(device_mask),
                       actions)


@pytest.fixture(scope="module")
def tiny():
  return Tiny()


def _producers(graphs):
  forward = np.asarray(graphs.edges["mask"]) & (
      np.asarray(graphs.edges["direction"]) == 0)
  return list(zip(np.asarray(graphs.senders)[forward],
                  np.asarray(graphs.receivers)[forward]))


def test_orders_are_topological_and_placements_follow_the_actions(tiny):
  policy = tiny.policy
  assert policies.is_sequential(policy) and policy.orders
  assert not policy.placement_actions and "doppler" in policies.policy_names()
  placements, actions, scores = tiny.sample()
  assert placements.shape == (K, 9) and actions.shape == (K, 18)
  assert scores.log_probs.shape == scores.entropy.shape == (K, 18)
  np.testing.assert_array_equal(scores.mask, [True] * 7 + [False] * 2
                                + [True] * 7 + [False] * 2)
  order, devices = np.asarray(actions[:, :9]), np.asarray(actions[:, 9:])
  for k in range(K):
    assert sorted(order[k]) == list(range(9))
    assert set(order[k, :7]) == set(range(7))  # real nodes first
    position = np.argsort(order[k])
    for u, v in _producers(tiny.graphs):
      assert position[u] < position[v]
    np.testing.assert_array_equal(placements[k, order[k, :7]],
                                  devices[k, :7])
  # Different keys, different schedules (an untrained policy is near
  # uniform over the ready ops and the devices).
  assert len({tuple(row) for row in order}) > 1
  assert np.all(np.asarray(scores.log_probs)[:, 7:9] == 0.0)


def test_teacher_forcing_reproduces_the_sampler(tiny):
  mask = np.tile([True, False, True], (9, 1))
  placements, actions, sampled = tiny.sample(mask)
  assert not np.any(np.asarray(placements)[:, :7] == 1)
  forced = tiny.score(actions, mask)
  np.testing.assert_allclose(forced.log_probs, sampled.log_probs, atol=1e-5)
  np.testing.assert_allclose(forced.entropy, sampled.entropy, atol=1e-5)
  # Device steps of an untrained policy: near uniform over 2 allowed.
  np.testing.assert_allclose(sampled.entropy[:, 9:16], np.log(2), atol=1e-3)


def test_greedy_is_deterministic(tiny):
  first, actions, _ = tiny.sample(seed=1, greedy=True)
  again, actions_again, _ = tiny.sample(seed=5, greedy=True)
  np.testing.assert_array_equal(actions, actions_again)
  assert np.all(actions == actions[0])
  np.testing.assert_array_equal(first, again)


def test_critical_path_levels_of_a_chain_and_a_fork():
  # 0 -> 1 -> 3, 0 -> 2 -> 3 with costs 1, 2, 5, 1 and transfers 0.5.
  cost = jnp.asarray([1.0, 2.0, 5.0, 1.0])
  senders, receivers = jnp.asarray([0, 0, 1, 2]), jnp.asarray([1, 2, 3, 3])
  bottom, top = doppler_context.critical_path_levels(
      cost, jnp.full(4, 0.5), senders, receivers, jnp.ones(4, bool))
  np.testing.assert_allclose(bottom, [8.0, 3.5, 6.5, 1.0])
  np.testing.assert_allclose(top, [0.0, 1.5, 1.5, 7.0])


def test_plan_actions_make_a_topological_teacher():
  graph = op_graph(4, DIAMOND)
  # Order (0, 2, 1, 3) with devices; then an order that is not
  # topological (3 first) is repaired to the nearest one.
  actions = doppler.DopplerPolicy.plan_actions(
      np.asarray([0, 1, 2, 0]), np.asarray([0, 2, 1, 3]), graph.edge_src,
      graph.edge_dst, 6)
  np.testing.assert_array_equal(actions, [0, 2, 1, 3, 4, 5, 0, 2, 1, 0, 0,
                                          0])
  repaired = doppler.DopplerPolicy.plan_actions(
      np.zeros(4, int), np.asarray([3, 0, 1, 2]), graph.edge_src,
      graph.edge_dst, 4)
  np.testing.assert_array_equal(repaired[:4], [0, 1, 2, 3])


def test_plan_actions_score_finite_and_fit_by_teacher_forcing(tiny):
  graphs = features.to_graphs_tuple([op_graph(4, DIAMOND)],
                                    features.Budget(6, 10, 2))
  policy = tiny.policy
  params = policy.init(jax.random.PRNGKey(0), graphs)
  graph = op_graph(4, DIAMOND)
  target = jnp.asarray(doppler.DopplerPolicy.plan_actions(
      np.asarray([2, 1, 2, 0]), np.asarray([0, 1, 2, 3]), graph.edge_src,
      graph.edge_dst, 6))[None]
  score = jax.jit(lambda p: policy.apply(p, graphs, None, target))
  before = score(params)
  assert np.all(np.asarray(before.log_probs) > -10)

  def loss(p):
    s = policy.apply(p, graphs, None, target)
    return -jnp.sum(jnp.where(s.mask, s.log_probs, 0.0))

  grad = jax.jit(jax.grad(loss))
  for _ in range(60):
    params = jax.tree.map(lambda w, g: w - 0.5 * g, params, grad(params))
  keys = jax.random.split(jax.random.PRNGKey(0), 1)
  placements, actions = jax.jit(lambda p: policy.apply(
      p, graphs, None, keys, True, method="sample"))(params)
  np.testing.assert_array_equal(actions[0], target[0])
  np.testing.assert_array_equal(placements[0, :4], [2, 1, 2, 0])


def test_order_priority_ranks_the_order_in_the_simulator():
  graph = op_graph(6, [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5)], 3)
  topology = presets.preset("1cpu+2gpu")
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 3, (4, 6)).astype(np.int32)
  orders = np.asarray([[0, 1, 2, 3, 4, 5], [0, 2, 1, 4, 3, 5],
                       [0, 2, 4, 1, 3, 5], [0, 1, 3, 2, 4, 5]])
  priority = np.asarray(grouping.order_priority(jnp.asarray(orders)[None],
                                                None))[0]
  # As a static schedule the priority is exactly the order.
  np.testing.assert_allclose(
      simulator.simulate(graph, placements, topology, priority=priority,
                         schedule="static").runtime_s,
      simulator.simulate(graph, placements, topology, order=orders,
                         schedule="static").runtime_s, rtol=1e-6)
  # The loop's reward: the dynamic schedule with that priority, on the host
  # and in the jitted step (the padded problem).
  expected = simulator.simulate(graph, placements, topology,
                                priority=priority).runtime_s
  host, _ = scoring.simulate_host(graph, placements, topology, priority)
  np.testing.assert_allclose(host, expected, rtol=1e-6)
  problem = jax.tree.map(lambda x: x[0],
                         stacked_dispatch_problems([graph], topology, 8))
  padded = np.zeros((4, 8), np.int32)
  padded[:, :6] = placements
  pad_priority = np.full((4, 8), -1e3, np.float32)
  pad_priority[:, :6] = priority
  runtime, oom = jax.jit(rewards.dispatch_reward)(problem, padded,
                                                  pad_priority)
  np.testing.assert_allclose(runtime, expected, rtol=1e-5)
  assert not np.any(oom)
  # Groups: every node takes its group's place, by id within it.
  group_priority = grouping.order_priority(
      jnp.asarray([[2, 0, 1]]), jnp.asarray([[0, 0, 1, 1, 2, 2]]))
  np.testing.assert_array_equal(np.argsort(-np.asarray(group_priority)[0]),
                                [4, 5, 0, 1, 2, 3])


def test_bad_hyperparameters_and_too_many_nodes_name_the_fix(tiny):
  with pytest.raises(PolicyError, match="hidden_size"):
    policies.create_policy("doppler", 3, hidden_size=0)
  with pytest.raises(PolicyError, match="Unknown DOPPLER"):
    policies.create_policy("doppler", 3, heads=2)
  small = policies.create_policy("doppler", 3, max_nodes=8)
  with pytest.raises(PolicyError, match="max_groups"):
    small.init(jax.random.PRNGKey(0), tiny.graphs)
  with pytest.raises(PolicyError, match="device_mask"):
    tiny.policy.apply(tiny.params, tiny.graphs, np.ones((2, 3), bool))


def test_config_refuses_rewards_that_cannot_run_its_order(tmp_path):
  config = doppler_config.get_config()
  validate_config(config, str(tmp_path))  # the shipped config is valid
  for reward in ("simulator", "executor"):
    config = doppler_config.get_config()
    config.rl.reward = reward
    with pytest.raises(ConfigError, match="own order"):
      validate_config(config, str(tmp_path))


def test_policy_fns_carry_the_order():
  fns = policy_fns(policies.create_policy("doppler", 2, hidden_size=8))
  assert fns.sequential and not fns.placement_actions
  np.testing.assert_array_equal(fns.order(jnp.arange(8)[None]), [[0, 1, 2,
                                                                  3]])
  assert fns.plan_actions is doppler.DopplerPolicy.plan_actions


def test_imitation_then_rl_improves_its_own_greedy_placement(tmp_path,
                                                             monkeypatch):
  """DOPPLER's stages one and two on a 60-op random DAG (1 CPU + 2 GPUs,
  ops placed one by one): imitation of HEFT in its best order (300 steps),
  then RL in the simulator, each placement scored with its own order. The
  policy's own greedy decoding (its order and its devices, no search) goes
  from about 1.16 ms to within 15% of its teacher (0.45 ms) and below the
  single device; best_placement.json records the order of the best."""
  config = doppler_config.get_config()
  config.workload, config.topology = "random_dag:60:3", "1cpu+2gpu"
  config.progress_bar = config.print_table = False
  config.baselines = "single_device,round_robin,m_etf,heft"
  config.policy.update(hidden_size=16, message_passing_steps=2, max_nodes=64)
  config.warm_start.update(steps=300, learning_rate=1e-2)
  config.rl.num_samples = 8
  config.train.update(num_steps=10, chunk_steps=10, checkpoint_every=1000,
                      eval_samples=4)
  lines = []
  before, after, result = greedy_before_and_after(config, tmp_path,
                                                  monkeypatch,
                                                  log=lines.append)
  teacher = [line for line in lines if "in its best order" in line]
  assert len(teacher) == 1, lines
  heft_s, target_s = (float(ms) * 1e-3
                      for ms in re.findall(r"([0-9.]+) ms", teacher[0]))
  before, after = before.greedy_runtime_s, after.greedy_runtime_s
  assert heft_s == target_s  # no groups: the actions are the plan itself
  assert after < 0.6 * before, (before, after, target_s)
  assert after < 1.15 * target_s, (after, target_s)
  assert after < result.table[0]["single_device"], result.table[0]
  with open(tmp_path / "run" / "best_placement.json") as f:
    record = json.load(f)["graphs"][0]
  # The fastest placement of the run: the policy's in its own order, or a
  # baseline's (in gplace.simulate's default schedule or its own plan).
  if record["source"].startswith("baseline: "):
    assert record["schedule"] in ("best", "static"), record
  else:
    assert record["schedule"].endswith(": order as priority"), record
  if "order" in record:
    assert sorted(record["order"]) == list(range(len(record["placement"])))
  # Seeded with the plan; the log prints it to 1e-4 ms (5e-8 s rounding).
  assert record["runtime_s"] <= heft_s + 5e-8 + 1e-6 * heft_s


def heft_warm_start(config):
  """``(setups, batch, topology, warm)``: the config's graphs set up and
  batched as the loop does, and the warm-start targets of HEFT's plan in its
  best order."""
  experiment = settings_lib.from_config(config)
  topology = data.experiment_topology(experiment.topology, [])
  setups = data.setup_graphs(
      [workloads.load(n, seed=experiment.settings.seed)
       for n in experiment.workloads], topology, experiment.settings,
      log=lambda _: None)
  batch = data.make_batch(setups, topology, with_problems=False)
  warm = ordered_warm_start_targets(
      setups, "heft", batch, topology, doppler.DopplerPolicy.plan_actions)
  return setups, batch, topology, warm


def test_warm_start_targets_are_the_plan_in_its_best_order():
  config = doppler_config.get_config()
  config.workload, config.topology = "random_dag:30:1", "1cpu+2gpu"
  config.baselines = "single_device,heft"
  setups, batch, topology, warm = heft_warm_start(config)
  graph, n = setups[0].graph, setups[0].graph.n_nodes
  num_padded = batch.graphs.nodes["mask"].shape[1]
  assert warm.targets.shape == (1, 2 * num_padded)
  order = warm.targets[0, :n]
  position = np.argsort(order)
  assert all(position[u] < position[v]
             for u, v in zip(graph.edge_src, graph.edge_dst))
  np.testing.assert_array_equal(warm.targets[0, num_padded:num_padded + n],
                                setups[0].baselines["heft"][order])
  # No groups: the actions are the plan itself, and the priority reproduces
  # its runtime in the loop's schedule.
  np.testing.assert_allclose(warm.target_runtime_s, warm.runtime_s)
  again = simulator.simulate(graph, warm.placements[0, :n], topology,
                             priority=warm.priority[0, :n])
  np.testing.assert_allclose(float(np.asarray(again.runtime_s)),
                             warm.runtime_s[0], rtol=1e-6)
  assert np.isfinite(warm.runtime_s[0])
  # With groups: the teacher is each group's majority device, the groups in
  # a topological order of the coarse graph, scored as the loop would.
  config.groups.update(max_groups=8, min_nodes=8)
  setups, batch, _, warm = heft_warm_start(config)
  coarse = setups[0].coarsening.graph
  num_padded = batch.graphs.nodes["mask"].shape[1]
  position = np.argsort(warm.targets[0, :num_padded])
  assert all(position[u] < position[v]
             for u, v in zip(coarse.edge_src, coarse.edge_dst))
  assert np.isfinite(warm.target_runtime_s[0])


def test_padding_changes_no_greedy_decision_and_one_compile_per_budget():
  policy = policies.create_policy("doppler", 3, hidden_size=8,
                                  message_passing_steps=1)
  traces = []

  @jax.jit
  def greedy(params, graphs, device_mask):
    traces.append(1)
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    return policy.apply(params, graphs, device_mask, keys, True,
                        method="sample_with_scores")

  small = diamond_and_chain()
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), small)
  placements, actions, scores = greedy(params, small, jnp.asarray(ALL))
  large = diamond_and_chain(features.Budget(16, 24, 3))
  placements_large, actions_large, scores_large = greedy(
      params, large, jnp.ones((16, 3), bool))
  # The same placement of the 7 real nodes, chosen in the same order
  # (orders list real nodes first), with the same log-probabilities.
  np.testing.assert_array_equal(placements[:, :7], placements_large[:, :7])
  np.testing.assert_array_equal(actions[:, :7], actions_large[:, :7])
  np.testing.assert_array_equal(actions[:, 9:16], actions_large[:, 16:23])
  np.testing.assert_allclose(scores.log_probs[:, :7],
                             scores_large.log_probs[:, :7], atol=1e-5)
  assert not np.any(np.asarray(scores_large.mask)[7:16])
  assert np.all(np.asarray(scores_large.log_probs)[:, 7:16] == 0)
  # Other graphs (other costs) with the same budget: no new compile.
  before = len(traces)
  for seed in (3, 4):
    greedy(params, diamond_and_chain(seed=seed), jnp.asarray(ALL))
  assert len(traces) == before
