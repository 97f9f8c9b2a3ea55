"""The policy's own placements: greedy is the simulated argmax placement,
samples are fresh draws; no search or best-ever bookkeeping involved."""

from typing import NamedTuple

import jax
import numpy as np

from gplace._testing import LinearPolicy
from gplace.graphs.graph import random_dag
from gplace.rl import data
from gplace.rl.evaluation import evaluate_policy, policy_verdict
from gplace.rl.scoring import Scorer
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset


class _Setup(NamedTuple):
  graph: object
  failing_runtime_s: float


def _batch_and_policy():
  topology = preset("1cpu+2gpu")
  graphs = [random_dag(30, seed=1), random_dag(22, seed=2)]
  batch = data.make_batch([_Setup(g, 1.0) for g in graphs], topology)
  policy = LinearPolicy(num_devices=topology.n_devices)
  params = policy.init(jax.random.PRNGKey(3),
                       jax.tree.map(lambda x: x[0], batch.graphs))
  return topology, graphs, batch, policy, params


def test_greedy_is_the_simulated_argmax_placement():
  topology, graphs, batch, policy, params = _batch_and_policy()
  own = evaluate_policy(params, batch, apply_fn=policy.apply,
                        reward_fns=[Scorer(g, topology) for g in graphs],
                        num_nodes=[g.n_nodes for g in graphs],
                        num_samples=5, seed=0)
  assert len(own) == 2
  for b, (graph, result) in enumerate(zip(graphs, own)):
    logits = policy.apply(params, jax.tree.map(lambda x: x[b], batch.graphs),
                          batch.device_mask[b])
    argmax = np.asarray(logits.argmax(-1))[:graph.n_nodes]
    np.testing.assert_array_equal(result.greedy_placement, argmax)
    expected = float(simulate(graph, argmax, topology).runtime_s)
    np.testing.assert_allclose(result.greedy_runtime_s, expected, rtol=1e-6)
    assert result.sampled_runtime_s.shape == (5,)
    assert result.sampled_best_s <= result.sampled_mean_s
    names = [name for name, _ in result.rows()]
    assert names == ["policy greedy", "policy sampled: mean of 5",
                     "policy sampled: best of 5"]
    assert set(result.record()) == {"policy_greedy", "policy_sampled_mean",
                                    "policy_sampled_best", "policy_samples"}


def test_samples_are_fresh_draws_from_the_policy():
  topology, graphs, batch, policy, params = _batch_and_policy()
  params = jax.tree.map(np.zeros_like, params)  # uniform over 3 devices
  calls = []

  def record(placements):
    calls.append(np.asarray(placements))
    return np.ones(len(placements))

  evaluate_policy(params, batch, apply_fn=policy.apply, reward_fns=[record],
                  num_nodes=[graphs[0].n_nodes], num_samples=64, seed=0)
  greedy, samples = calls[0][0], calls[0][1:]
  assert samples.shape == (64, graphs[0].n_nodes)
  # Uniform: samples differ from greedy (all device 0) and each other.
  assert np.all(greedy == 0)
  assert 0.6 < np.mean(samples != greedy[None]) < 0.73
  assert len({s.tobytes() for s in samples}) == 64


def test_verdict_says_faster_or_slower_than_the_best_classical_plan():
  baselines = {"a": 2.0, "b": 1.0}
  assert policy_verdict(0.9, baselines).endswith(
      "10.0% faster than the best classical plan, b")
  assert "20.0% slower" in policy_verdict(1.2, baselines)
  assert "out of memory" in policy_verdict(float("inf"), baselines)
