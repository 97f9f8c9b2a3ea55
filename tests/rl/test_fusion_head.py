"""Tests of GO's fusion head (issue 49): the policy's joint logits, legal
labels from sampled choices, host scoring with the fusion, a short run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

import gplace
from gplace import policies, rl, workloads
from gplace._testing import chain, make_graphs_tuple
from gplace.errors import (ConfigError, FusionError, GplaceError, PolicyError,
                           RewardError)
from gplace.graphs import fusion_decisions
from gplace.rl import best_placement_file, checks, policy_file, scoring
from gplace.rl.distributions import log_prob
from gplace.rl.policy_fns import policy_fns
from gplace.rl.settings import RLSettings
from gplace.rl.types import Rollout

SMALL = dict(hidden_size=8, num_heads=2, segment_length=4, num_sage_layers=1,
             num_attention_layers=1, head_hidden_size=8)


@pytest.fixture(scope="module")
def dag():
  return workloads.load("random_dag:30:1").graph


@pytest.mark.parametrize("levels", [0, 2])
def test_fusion_head_logits_and_log_probs(levels):
  policy = policies.create_policy("go", 3, **SMALL, priority_levels=levels,
                                  fusion_head=True)
  graphs = make_graphs_tuple([chain(5)], n_pad=8, e_pad=8)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), graphs)
  assert {"fusion_attention", "fusion_head"} <= set(params["params"])
  mask = jnp.array([True, False, True])
  joint = jax.jit(policy.apply)(params, graphs, mask)
  per_device = max(levels, 1) * 2
  assert joint.shape == (8, 3 * per_device)
  # Independent heads: log p(d, l, f) = log p(d) + log p(l) + log p(f).
  log_p = jax.nn.log_softmax(joint).reshape(8, 3, max(levels, 1), 2)
  lse = jax.scipy.special.logsumexp
  device, level, fuse = (lse(log_p, (2, 3)), lse(log_p, (1, 3)),
                         lse(log_p, (1, 2)))
  np.testing.assert_allclose(
      log_p, device[:, :, None, None] + level[:, None, :, None]
      + fuse[:, None, None, :], atol=1e-5)
  # fusion_init=0: a fair coin before training.
  np.testing.assert_allclose(np.exp(fuse), 0.5, atol=0.02)

  fns = policy_fns(policy)
  keys = jax.random.split(jax.random.PRNGKey(1), 16)
  placements, actions = fns.sample(params, graphs, mask, keys)
  assert placements.shape == actions.shape == (16, 8)
  np.testing.assert_array_equal(placements, actions // per_device)
  assert np.all(np.asarray(placements[:, :5]) != 1)   # the masked device
  bits = fns.fusion(actions)
  np.testing.assert_array_equal(bits, actions % 2)
  assert set(np.unique(bits[:, :5]).tolist()) == {0, 1}
  assert (fns.schedule is None) == (levels == 0)
  scores = fns.score(params, graphs, mask, actions)
  node_mask = graphs.nodes["mask"]
  # A sampled decision's log-probability is the sum of its nodes'.
  np.testing.assert_allclose(scores.log_probs.sum(-1),
                             log_prob(joint, actions, node_mask), rtol=1e-5)
  # ... and the sum of the heads' own log-probabilities.
  d, f = np.asarray(placements), np.asarray(bits)
  lv = (np.asarray(actions) // 2) % max(levels, 1)
  rows = np.arange(8)
  expected = (np.asarray(device)[rows, d] + np.asarray(level)[rows, lv]
              + np.asarray(fuse)[rows, f])
  expected = np.where(np.asarray(node_mask), expected, 0.0)
  np.testing.assert_allclose(scores.log_probs, expected, atol=1e-5)


def test_policy_without_the_head_is_unchanged():
  policy = policies.create_policy("go", 3, **SMALL)
  assert policy.fusion_head is False
  assert policy_fns(policy).fusion is None
  graphs = make_graphs_tuple([chain(5)], n_pad=8, e_pad=8)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0), graphs)
  assert set(params["params"]) == {"encoder", "head"}


@hypothesis_settings(max_examples=8, deadline=None)
@given(nodes=st.integers(6, 40), seed=st.integers(0, 50),
       devices=st.integers(1, 3), share=st.floats(0.0, 1.0))
def test_decision_labels_are_always_legal(nodes, seed, devices, share):
  graph = workloads.load(f"random_dag:{nodes}:{seed}").graph
  rng = np.random.default_rng(seed)
  placement = rng.integers(0, devices, graph.n_nodes)
  decisions = rng.random(graph.n_nodes) < share
  labels = fusion_decisions.decision_labels(graph, placement, decisions)
  assert fusion_decisions.is_legal(graph, labels, placement)
  np.testing.assert_array_equal(
      labels, fusion_decisions.decision_labels(graph, placement, decisions))
  # Only chosen nodes join a consumer's group.
  target = fusion_decisions.consumer_targets(graph, placement)
  joined = (labels >= 0) & (labels != np.arange(graph.n_nodes))
  assert np.all(decisions[joined] & (target[joined] >= 0))
  if not decisions.any():
    assert np.all(labels == -1)


def test_decision_labels_reject_wrong_shapes(dag):
  with pytest.raises(FusionError, match="decisions must be"):
    fusion_decisions.decision_labels(dag, np.zeros(dag.n_nodes, int),
                                      np.zeros(3, int))
  with pytest.raises(FusionError, match="placement must be"):
    fusion_decisions.decision_labels(dag, np.zeros(3, int),
                                     np.zeros(dag.n_nodes, int))


def test_scorer_runs_the_fusion_decision(dag):
  topology = gplace.topology.preset("1cpu+2gpu")
  scorer = scoring.Scorer(dag, topology)
  placements = np.ones((2, dag.n_nodes), np.int32)
  fusion = np.stack([np.zeros(dag.n_nodes, np.int32),
                     np.ones(dag.n_nodes, np.int32)])
  none, every = scorer(placements, fusion=fusion)
  assert every < none                      # fusing strictly pays here
  assert none == pytest.approx(float(scorer(placements[:1])[0]), rel=1e-6)
  # Through the rollout path the training loop scores with.
  rollout = Rollout(placements[None], jnp.zeros((1, 2, dag.n_nodes)),
                    jnp.zeros((1, 2)), jnp.zeros((1, 2), bool),
                    fusion=jnp.asarray(fusion)[None])
  scored = scoring.host_scored_rollout(rollout, [scorer], [dag.n_nodes])
  np.testing.assert_allclose(scored.runtime_s[0], [none, every], rtol=1e-6)
  measured = scoring.Scorer(dag, topology, executor=True)
  with pytest.raises(RewardError, match="fusion"):
    measured(placements, fusion=fusion)


def test_short_run_with_the_fusion_head(dag):
  topology = gplace.topology.preset("1cpu+2gpu")
  settings = rl.TrainSettings(progress_bar=False, print_table=False).replace(
      rl=dict(num_samples=4, reward="simulator_host"),
      train=dict(num_steps=2, chunk_steps=2))
  policy = rl.PolicySettings("go", dict(SMALL, fusion_head=True))
  calls = []
  original = scoring.Scorer.fused_runtimes

  def spy(self, placements, fusion, priority=None):
    calls.append(np.asarray(fusion).shape)
    return original(self, placements, fusion, priority)

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(scoring.Scorer, "fused_runtimes", spy)
    result = rl.train([dag], topology, policy, settings, log=lambda line: None)
  assert np.isfinite(result.best_runtime_s[0])
  assert (4, dag.n_nodes) in calls          # the training samples, fused
  with pytest.raises(ConfigError, match="simulator_host"):
    rl.train([dag], topology, policy,
             settings.replace(rl=dict(num_samples=4, reward="simulator")),
             log=lambda line: None)


def test_bad_fusion_head_settings():
  with pytest.raises(PolicyError, match="fusion_head"):
    policies.create_policy("go", 3, fusion_head="yes")
  with pytest.raises(PolicyError, match="Unknown GO policy"):
    policies.create_policy("go", 3, fusion_heads=True)
  assert issubclass(ConfigError, GplaceError)


@pytest.mark.parametrize("reward", ["simulator", "simulator_dynamic",
                                    "executor"])
def test_the_fusion_head_needs_the_host_simulator(reward):
  module = rl.PolicySettings("go", dict(fusion_head=True)).create(3)
  with pytest.raises(ConfigError, match="fusion_head=False"):
    checks.check_actions(rl.TrainSettings(rl=RLSettings(reward=reward)),
                         "go", module)
  checks.check_actions(rl.TrainSettings(rl=RLSettings(
      reward="simulator_host")), "go", module)  # and this one passes
  with pytest.raises(ConfigError, match="mutate_best"):
    checks.check_actions(rl.TrainSettings(rl=RLSettings(
        reward="simulator_host", mutate_best=0.01)), "go", module)


def test_a_policy_file_without_the_head_compares_as_off():
  loaded = policy_file.load_policy(policy_file.shipped_policy_path(
      "1cpu+4gpu"))
  assert "fusion_head" not in loaded.policy
  policy = rl.PolicySettings.from_record
  same = policy(dict(loaded.policy, fusion_head=False))
  assert policy_file.policy_differences(loaded, same, 5) == []
  fused = policy(dict(loaded.policy, fusion_head=True))
  assert policy_file.policy_differences(loaded, fused, 5) == [
      "policy.fusion_head: False (file) vs True"]


def _mlp(params, x):
  h = jnp.tanh(x @ params["w1"] + params["b1"])
  h = h * jax.nn.sigmoid(h) + 0.5
  return jnp.mean(jnp.square(h @ params["w2"] - 1.0))


def test_best_placement_json_records_the_learned_fusion(tmp_path):
  rng = np.random.default_rng(0)
  args = ({"w1": rng.normal(size=(16, 32)).astype(np.float32),
           "b1": np.zeros(32, np.float32),
           "w2": rng.normal(size=(32, 8)).astype(np.float32)},
          rng.normal(size=(4, 16)).astype(np.float32))
  graph = gplace.capture(_mlp, *args)
  topology = gplace.topology.preset("1cpu+2gpu")
  settings = rl.TrainSettings(progress_bar=False, print_table=False).replace(
      rl=dict(num_samples=4, reward="simulator_host"),
      train=dict(num_steps=4, chunk_steps=2))
  policy = rl.PolicySettings("go", dict(SMALL, fusion_head=True))
  workdir = str(tmp_path / "run")
  path = str(tmp_path / "run" / best_placement_file.BEST_PLACEMENT_FILE)

  def reproduces(saved):   # the recorded runtime is the fused simulation's
    result = gplace.simulate(graph, saved.placement[None], topology,
                             fusion=saved.fusion)
    return float(result.runtime_s[0]) == pytest.approx(saved.runtime_s,
                                                       rel=1e-5)

  rl.train([graph], topology, policy, settings, workdir=workdir,
           stop_after_step=2, log=lambda line: None)
  saved = best_placement_file.read_best_placement(path, graph.name,
                                                  topology.device_names)
  assert saved.source == best_placement_file.TRAINING_SOURCE
  assert saved.fusion is not None and saved.fusion.shape == (graph.n_nodes,)
  assert reproduces(saved)
  # gplace.place runs what was read back, with jax.jit's result.
  placed = gplace.place(_mlp, graph, saved.placement, fusion=saved.fusion)
  np.testing.assert_allclose(placed(*args), jax.jit(_mlp)(*args), rtol=1e-5)
  # The finished run's fastest placement keeps the fusion it was scored
  # with (none for a baseline, which runs unfused).
  result = rl.train([graph], topology, policy, settings, workdir=workdir,
                    log=lambda line: None)
  winner = best_placement_file.read_best_placement(path)
  assert winner.source == result.best_of_run[0].source
  assert (winner.fusion is None) == winner.source.startswith("baseline")
  if winner.fusion is not None:
    assert reproduces(winner)
