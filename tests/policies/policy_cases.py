"""Shared pieces of the policy tests (tests/policies): tiny graphs and
batches, device masks and keys, jitted scoring, config checks, and an
end-to-end run of a shrunk config."""

import jax
import jax.numpy as jnp
import numpy as np

from experiments.run import run
from gplace.graphs import features
from gplace.graphs.graph import NODE_INPUT, NODE_OP, NODE_OUTPUT, Graph
from gplace.rl import checks
from gplace.rl import settings as settings_lib
from gplace.rl import training

NUM_DEVICES = 3
K = 24  # one row count everywhere: every jitted function compiles once
# Test-only: unoptimised XLA code compiles in half the time on a loaded CPU.
FAST_COMPILE = {"xla_backend_optimization_level": 0}
SAMPLE, GREEDY = jnp.bool_(False), jnp.bool_(True)


def validate_policy(config):
  """The policy a config names, built and checked for what it trains."""
  experiment = settings_lib.from_config(config)
  module = experiment.policy.create(3)
  checks.check_actions(experiment.settings, experiment.policy.name, module)


def small_graph(n_ops: int = 6, seed: int = 0) -> Graph:
  """``input -> n_ops ops -> output``: a chain with skip edges, mixed op
  types and shapes."""
  rng = np.random.default_rng(seed)
  n = n_ops + 2
  kinds = [NODE_INPUT] + [NODE_OP] * n_ops + [NODE_OUTPUT]
  ops = ["input"] + list(rng.choice(["dot_general", "add", "tanh"],
                                    n_ops)) + ["output"]
  shapes = [tuple(int(d) for d in rng.integers(1, 64, rng.integers(1, 3)))
            for _ in range(n)]
  edges = [(i, i + 1, 256) for i in range(n - 1)]
  edges += [(i, i + 3, 1024) for i in range(0, n - 3, 2)]
  return Graph.build(
      names=[f"n{i}" for i in range(n)], op_type=ops, kind=kinds,
      out_shapes=shapes, out_dtype=["float32"] * n,
      out_bytes=[4 * int(np.prod(s)) for s in shapes],
      flops=rng.uniform(0, 1e9, n), bytes_accessed=rng.uniform(0, 1e6, n),
      edges=edges, name=f"small_{seed}")


def budget(n_nodes: int) -> features.Budget:
  return features.Budget(n_nodes=n_nodes, n_edges=64, n_graphs=2)


def make_batch(*graphs: Graph, n_pad: int = 16):
  return features.stack_graphs_tuples(
      [features.to_graphs_tuple(g, budget(n_pad)) for g in graphs])


def all_devices(n_pad: int = 16, batch: int = 2) -> np.ndarray:
  return np.ones((batch, n_pad, NUM_DEVICES), bool)


def keys(k: int = K, seed: int = 1) -> jax.Array:
  return jax.random.split(jax.random.PRNGKey(seed), k)


def initial_setup(policy):
  """``(graphs, batch, params)``: two small graphs, their batch padded to 16
  nodes, and ``policy``'s initial parameters (a module fixture's value)."""
  graphs = (small_graph(), small_graph(5, seed=4))
  batch = make_batch(*graphs)
  params = jax.jit(policy.init, compiler_options=FAST_COMPILE)(
      jax.random.PRNGKey(0), jax.tree.map(lambda x: x[0], batch))
  return graphs, batch, params


def entry_point_shapes(policy, setup, num_samples: int = 5):
  """``(placements, actions, scores)``, each a ``jax.ShapeDtypeStruct`` (or
  a tuple of them; traced, not run): ``policy.sample`` with ``num_samples``
  keys, and the call ``init`` makes, on the first graph of the setup."""
  _, batch, params = setup
  graphs = jax.tree.map(lambda x: x[0], batch)
  placements, actions = jax.eval_shape(
      lambda p: policy.apply(p, graphs, None, keys(num_samples),
                             method="sample"), params)
  scores = jax.eval_shape(policy.apply, params, graphs)  # init's call
  return placements, actions, scores


def other_batches():
  """``(seed, batch)``: three batches of two graphs of other sizes than the
  setup's, padded to the same budget (no new compile)."""
  for seed, n_ops in ((1, 4), (2, 9), (3, 7)):
    yield seed, make_batch(small_graph(n_ops, seed), small_graph(3, seed))


def jitted_score(policy, traces):
  """``score(params, batch, device_masks, actions [B, K, A])``: ``policy``'s
  teacher-forced scores of a batch of graphs (vmapped), jitted; each trace
  counts in ``traces["score", N_pad]``."""

  def score(params, batch, device_masks, actions):
    traces["score", batch.nodes["mask"].shape[-1]] += 1
    return jax.vmap(lambda g, d, a: policy.apply(params, g, d, a))(
        batch, device_masks, actions)

  return jax.jit(score, compiler_options=FAST_COMPILE)


def shrink_for_a_test(config, tmp_path):
  """A config of experiments/configs, shrunk to train in seconds on tiny
  rnnlm2 over 1 CPU + 2 GPUs (on which the CPU is the best single device)."""
  config.update(topology="1cpu+2gpu", graph_cache=str(tmp_path / "graphs"),
                baselines="single_device,round_robin,random",
                progress_bar=False, print_table=False)
  config.policy.update(hidden_size=16, attention_size=16,
                       device_embedding_size=8, op_embedding_size=8)
  config.optimizer.learning_rate = 1e-2
  # Few compiles: every simulator call scores 3 or 4 placements (3
  # baselines, 3 single devices, greedy + 3 samples, 4 samples per step).
  config.rl.num_samples = 4
  config.train.update(chunk_steps=50, checkpoint_every=1000, eval_samples=3)
  return config


def greedy_before_and_after(config, tmp_path, monkeypatch,
                            log=lambda _: None):
  """Trains ``config``; returns the run's own evaluations of its initial
  and its final parameters, and its results (the run's lines go to
  ``log``)."""
  initial = {}
  run_loop, evaluate_policy = training.run_loop, training.evaluate_policy

  def recording_run_loop(fns, state, *args, **kwargs):
    initial["params"] = state.params
    return run_loop(fns, state, *args, **kwargs)

  def evaluate_initial_too(params, *args, **kwargs):
    initial["own"] = evaluate_policy(initial["params"], *args, **kwargs)
    return evaluate_policy(params, *args, **kwargs)

  monkeypatch.setattr(training, "run_loop", recording_run_loop)
  monkeypatch.setattr(training, "evaluate_policy", evaluate_initial_too)
  result = run(config, str(tmp_path / "run"), log=log)
  return initial["own"][0], result.policy[0], result


def check_training_improves(config, tmp_path, monkeypatch):
  """Trains ``config``: its greedy placement beats that of its initial
  parameters, both scored by the run's own evaluation, and its best sample
  is at least as fast as the best single device."""
  before, after, result = greedy_before_and_after(config, tmp_path,
                                                  monkeypatch)
  assert np.isfinite(before.greedy_runtime_s)
  assert after.greedy_runtime_s < before.greedy_runtime_s, (
      before.greedy_runtime_s, after.greedy_runtime_s)
  single_device = result.table[0]["single_device"]
  assert result.best_runtime_s[0] <= single_device, (
      result.best_runtime_s[0], single_device)
