"""Tests of gplace.policies.hsdag: shapes, padding and device masks, the
graph-parsing groups against a networkx reference, gradients into the edge
scorer, one compile per budget, hyperparameter errors, and an end-to-end
run whose greedy placement beats the initial policy's."""

from typing import Callable, NamedTuple
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from experiments.configs import hsdag as hsdag_config
from gplace import policies
from gplace._testing import chain, make_graphs_tuple
from gplace.errors import ConfigError, PolicyError
from gplace.policies import hsdag
from experiments.run import run
from policy_cases import validate_policy


DIAMOND = (4, [(0, 1), (0, 2), (1, 3), (2, 3)])
TINY = dict(hidden_size=16, head_hidden_size=8, op_embedding_size=4,
            vocabulary_size=8)


def _graphs(n_pad, e_pad):
  return make_graphs_tuple([DIAMOND, chain(5)], n_pad=n_pad, e_pad=e_pad)


class Tiny(NamedTuple):
  policy: hsdag.HSDAGPolicy
  params: dict
  logits: jax.Array  # [12, 3], of _graphs(12, 24)
  group: jax.Array   # [12]
  forward: Callable  # (params, graphs, mask [N_pad, D]) -> (logits, group)
  traces: list


@pytest.fixture(scope="module")
def tiny():
  """A tiny policy, its parameters and outputs at one budget, and a jitted
  forward pass that counts its traces (jitted throughout: eagerly, every
  primitive compiles on its own)."""
  policy = policies.create_policy("hsdag", 3, **TINY)
  init = jax.jit(lambda key, graphs: policy.init_with_output(
      key, graphs, method="logits_and_groups"))
  (logits, group), params = init(jax.random.PRNGKey(0), _graphs(12, 24))
  traces = []

  @jax.jit
  def forward(params, graphs, device_mask):
    traces.append(1)
    return policy.apply(params, graphs, device_mask,
                        method="logits_and_groups")

  return Tiny(policy, params, logits, group, forward, traces)


def _all(n_pad):
  return jnp.ones((n_pad, 3), bool)


def test_shapes_padding_invariance_and_one_compile_per_budget(tiny):
  logits, group = tiny.logits, np.asarray(tiny.group)
  assert logits.shape == (12, 3) and logits.dtype == jnp.float32
  before = len(tiny.traces)
  logits_large, group_large = tiny.forward(tiny.params, _graphs(20, 40),
                                           _all(20))
  np.testing.assert_allclose(logits_large[:9], logits[:9], rtol=1e-4,
                             atol=1e-6)
  np.testing.assert_array_equal(group[:9], group_large[:9])
  # Another graph with the same budget: no new trace.
  tiny.forward(tiny.params, make_graphs_tuple([chain(7), DIAMOND], n_pad=20,
                                              e_pad=40), _all(20))
  assert len(tiny.traces) == before + 1
  # Nodes of a group share their logits; groups never cross graphs.
  np.testing.assert_allclose(logits, logits[group], atol=1e-6)
  assert set(group[:4]) <= set(range(4)) and set(group[4:9]) <= set(
      range(4, 9))


def test_masked_devices_get_no_probability(tiny):
  mask = np.ones((20, 3), bool)
  mask[:, 1] = False      # a device nobody may use
  mask[::2, 0] = False    # and one some nodes may not
  logits, _ = tiny.forward(tiny.params, _graphs(20, 40), jnp.asarray(mask))
  probs = np.asarray(jax.nn.softmax(logits))
  np.testing.assert_array_equal(probs[~mask], 0.0)
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)


def _reference_groups(senders, receivers, valid, scores, n):
  """Each node keeps its best valid edge (ties: lowest index); groups are
  the components of the kept edges, labelled by their lowest node."""
  graph = nx.Graph()
  graph.add_nodes_from(range(n))
  for v in range(n):
    edges = [e for e in np.flatnonzero(valid) if senders[e] == v]
    if edges:
      best = max(edges, key=lambda e: (scores[e], -e))
      graph.add_edge(senders[best], receivers[best])
  labels = np.arange(n)
  for component in nx.connected_components(graph):
    labels[list(component)] = min(component)
  return labels


def test_parsing_groups_are_the_components_of_the_kept_edges():
  rng = np.random.default_rng(0)
  n, forward = 24, [(i, j) for i in range(24) for j in range(i + 1, 24)
                    if rng.random() < 0.08]
  forward += forward[:3]  # duplicate edges count once
  senders = np.array([s for s, _ in forward] + [t for _, t in forward])
  receivers = np.array([t for _, t in forward] + [s for s, _ in forward])
  valid = rng.random(len(senders)) < 0.95
  node_mask = np.arange(n) < 22  # two padding slots without edges
  valid &= node_mask[senders] & node_mask[receivers]
  pool = hsdag.ParsingPool()
  h = jnp.asarray(rng.normal(size=(n, 8)), jnp.float32) * node_mask[:, None]

  @jax.jit
  def parse(senders, receivers, valid, node_mask, h):
    level = hsdag.LevelGraph(senders, receivers, hsdag.unique_edge_mask(
        senders, receivers, valid), node_mask)
    return level, pool.init_with_output(jax.random.PRNGKey(1), h, level)[0]

  level, (states, coarse, labels, scores) = parse(
      jnp.asarray(senders, jnp.int32), jnp.asarray(receivers, jnp.int32),
      jnp.asarray(valid), jnp.asarray(node_mask), h)
  assert int(level.edge_mask.sum()) == len({
      (s, t) for s, t, v in zip(senders, receivers, valid) if v})
  scores, edge_mask = np.asarray(scores), np.asarray(level.edge_mask)
  expected = _reference_groups(senders, receivers, edge_mask, scores, n)
  np.testing.assert_array_equal(labels, expected)
  assert len(set(expected[:22])) < 22  # some nodes did merge
  # The coarse level: one node per group, one edge per adjacent pair.
  np.testing.assert_array_equal(coarse.node_mask,
                                node_mask & (expected == np.arange(n)))
  pairs = {(expected[s], expected[t])
           for s, t, v in zip(senders, receivers, edge_mask)
           if v and expected[s] != expected[t]}
  kept = np.asarray(coarse.edge_mask)
  assert sorted(pairs) == sorted(zip(np.asarray(coarse.senders)[kept],
                                     np.asarray(coarse.receivers)[kept]))
  assert np.all(np.asarray(states)[~np.asarray(coarse.node_mask)] == 0)


def test_gradients_reach_the_edge_scorer(tiny):
  graphs = _graphs(12, 24)
  actions = jnp.asarray(np.random.default_rng(0).integers(0, 3, 12))

  @jax.jit
  @jax.grad
  def grad(params):
    log_p = jax.nn.log_softmax(tiny.policy.apply(params, graphs))
    return -jnp.take_along_axis(log_p, actions[:, None], -1).sum()

  scorer = grad(tiny.params)["params"]["pools_0"]["edge_scorer"]
  for leaf in jax.tree.leaves(scorer):
    assert np.all(np.isfinite(leaf)) and np.any(leaf != 0)


@pytest.mark.parametrize("hparams,message", [
    (dict(hidden_size=0), "hidden_size=0"),
    (dict(num_pooling_levels=-1), "num_pooling_levels=-1"),
    (dict(num_scorer_layers=0), "num_scorer_layers=0"),
    (dict(num_heads=4), "Unknown HSDAG policy hyperparameters"),
])
def test_bad_hyperparameters_are_policy_errors(hparams, message):
  with pytest.raises(PolicyError, match=message):
    policies.create_policy("hsdag", 3, **hparams)


def test_config_is_valid_and_bad_values_name_the_field():
  config = hsdag_config.get_config()
  validate_policy(config)
  assert isinstance(policies.create_policy(
      "hsdag", 5, **{k: v for k, v in config.policy.items() if k != "name"}),
      hsdag.HSDAGPolicy)
  config.policy.num_transform_layers = 0
  with pytest.raises(ConfigError, match="num_transform_layers"):
    validate_policy(config)


def test_training_improves_the_policy_s_own_greedy_placement(tmp_path):
  config = hsdag_config.get_config()
  config.update(topology="1cpu+2gpu", graph_cache=str(tmp_path / "graphs"),
                baselines="single_device,round_robin,random",
                progress_bar=False, print_table=False)
  # Few, cheap compiles: every simulator call scores 4 placements or 1
  # (3 baselines, 3 single devices, greedy + 3 samples, 4 samples per step).
  # The code's 20 samples per update would be padded to 32 by the simulator.
  config.policy.update(hidden_size=32)
  config.rl.num_samples = 16
  config.train.update(num_steps=0, chunk_steps=50, checkpoint_every=1000,
                      eval_samples=3)
  initial = run(config, str(tmp_path / "initial"),
                                     log=lambda _: None).policy[0]
  # At seed 0 the initial argmax puts every group on the CPU, the best
  # single device (3.70 ms): to pass, the policy must beat every single
  # device (3.03 ms after 200 steps; after 120 it is still all-CPU).
  config.train.num_steps = 200
  trained = run(config, str(tmp_path / "trained"),
                                     log=lambda _: None).policy[0]
  assert trained.greedy_runtime_s < initial.greedy_runtime_s, (
      trained.greedy_runtime_s, initial.greedy_runtime_s)
