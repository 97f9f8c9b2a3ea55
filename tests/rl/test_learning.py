"""Pure RL learns: on a graph whose optimum is known, the GO policy trained
from a uniform start (no warm start, no search, no best-ever seeding) ends
with a greedy placement at the optimum, scored by the real simulator. With
group-level actions it also makes a coordinated move (one chain per GPU)
that independent per-op sampling does not find."""

import functools
from typing import NamedTuple

import jax
import numpy as np
import optax

from gplace.graphs import features as features_lib
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.policies import create_policy
from gplace.rl import data
from gplace.rl import update
from gplace.rl.evaluation import evaluate_policy
from gplace.rl.grouping import coarsen_for_policy
from gplace.rl.scoring import stacked_problems
from gplace.rl.rewards import simulator_reward
from gplace.rl.scoring import Scorer
from gplace.rl.settings import RLSettings
from gplace.rl.state import init_train_state
from gplace.rl.types import Batch
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from tests.search.test_joint import reorder_toy


def heavy_chain(n_ops: int) -> Graph:
  """``input -> n_ops heavy ops -> output`` in a chain; tensors are small,
  so transfers are cheap and the optimum runs every op on one GPU."""
  n = n_ops + 2
  kinds = [NODE_INPUT] + [NODE_OP] * n_ops + [NODE_OUTPUT]
  return Graph.build(
      names=[f"n{i}" for i in range(n)],
      op_type=["input"] + ["dot_general"] * n_ops + ["output"], kind=kinds,
      out_shapes=[(64,)] * n, out_dtype=["float32"] * n,
      out_bytes=[256] * n, flops=[0.0] + [2e9] * n_ops + [0.0],
      bytes_accessed=[0.0] + [1e6] * n_ops + [0.0],
      edges=[(i, i + 1, 256) for i in range(n - 1)], name="heavy_chain")


def test_pure_rl_from_uniform_reaches_the_known_optimum():
  graph = heavy_chain(12)
  topology = preset("1cpu+2gpu")
  # Every node on one GPU is optimal: each op is fastest on a GPU (both
  # alike), the chain is sequential, and any split only adds transfers.
  costs = topology.op_costs(graph)
  assert np.all(costs[1:-1, 1] < costs[1:-1, 0])
  best = float(simulate(graph, np.ones(graph.n_nodes, int), topology)
               .runtime_s)
  budget = features_lib.budget_for(graph)
  batch = Batch(
      graphs=features_lib.stack_graphs_tuples(
          [features_lib.to_graphs_tuple(graph, budget)]),
      problems=stacked_problems([graph], topology, budget.n_nodes),
      failing_runtime_s=np.full(1, 10 * best, np.float32),
      device_mask=np.ones((1, topology.n_devices), bool))
  policy = create_policy("go", topology.n_devices, hidden_size=32,
                         num_heads=2, num_attention_layers=1,
                         head_hidden_size=32)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0),
                                jax.tree.map(lambda x: x[0], batch.graphs))
  optimizer = optax.adam(3e-4)
  state = init_train_state(jax.random.PRNGKey(1), params, optimizer, batch)
  hparams = RLSettings(advantage="ema", entropy_floor=0.0,
        num_samples=16, loss="ppo", ppo_epochs=2,
                          entropy_weight=0.01)
  step = functools.partial(update.rl_step, apply_fn=policy.apply,
                           optimizer=optimizer, hparams=hparams,
                           simulate_fn=simulator_reward)
  chunk = jax.jit(functools.partial(update.scan_chunk, step, num_steps=25))

  def greedy_runtime(state):
    logits = policy.apply(state.params,
                          jax.tree.map(lambda x: x[0], batch.graphs),
                          batch.device_mask[0])
    placement = np.asarray(logits.argmax(-1))[:graph.n_nodes]
    return float(simulate(graph, placement, topology).runtime_s)

  sampled, entropy = [], []
  for _ in range(12):
    state, metrics = chunk(state, batch)
    sampled.append(float(np.mean(metrics["mean_runtime_s"])))
    entropy.append(np.asarray(metrics["entropy"]))
  # It started uniform (ln 3 nats per node) and far from the optimum...
  assert entropy[0][0] > 0.95 * np.log(3), entropy[0][0]
  assert sampled[0] > 1.2 * best, (sampled[0], best)
  # ...and ends there: the greedy placement is optimal and the policy's own
  # samples are close to it (no search or best-ever bookkeeping involved).
  end = greedy_runtime(state)
  assert end <= best * (1 + 1e-5), (end, best, sampled)
  assert sampled[-1] <= 1.05 * best, sampled


def two_heavy_chains(n_ops: int, edge_bytes: int = 1 << 20) -> Graph:
  """Two independent ``input -> n_ops heavy ops -> output`` chains (ids:
  the first chain, then the second). On two GPUs the optimum runs one chain
  per GPU: every other placement serialises work or pays transfers, and
  getting there from a uniform policy is a coordinated move (all of a chain
  together, away from the other chain)."""
  n = n_ops + 2
  edges = [(c * n + i, c * n + i + 1, edge_bytes)
           for c in range(2) for i in range(n - 1)]
  return Graph.build(
      names=[f"c{c}n{i}" for c in range(2) for i in range(n)],
      op_type=(["input"] + ["dot_general"] * n_ops + ["output"]) * 2,
      kind=([NODE_INPUT] + [NODE_OP] * n_ops + [NODE_OUTPUT]) * 2,
      out_shapes=[(64,)] * 2 * n, out_dtype=["float32"] * 2 * n,
      out_bytes=[edge_bytes] * 2 * n,
      flops=([0.0] + [2e9] * n_ops + [0.0]) * 2,
      bytes_accessed=([0.0] + [1e6] * n_ops + [0.0]) * 2,
      edges=edges, name="two_heavy_chains")


class _Setup(NamedTuple):
  graph: Graph
  failing_runtime_s: float
  coarsening: object


def test_group_actions_reach_one_chain_per_gpu_from_uniform():
  graph = two_heavy_chains(12)
  topology = preset("1cpu+2gpu")
  half = graph.n_nodes // 2
  best = float(simulate(graph, np.array([1] * half + [2] * half),
                        topology).runtime_s)
  one_gpu = float(simulate(graph, np.ones(graph.n_nodes, int),
                           topology).runtime_s)
  assert one_gpu > 1.9 * best  # both chains on one GPU: serialised
  # 8 groups of a few ops each: chain 1 in 2 groups, chain 2 in 6.
  groups = coarsen_for_policy(graph, max_groups=8, rule="size", min_nodes=0)
  assert groups.n_groups == 8
  assert len(set(groups.group_of[:half]) & set(groups.group_of[half:])) == 0
  batch = data.make_batch([_Setup(graph, 10 * best, groups)], topology)
  policy = create_policy("go", topology.n_devices, hidden_size=32,
                         num_heads=2, num_attention_layers=1,
                         head_hidden_size=32, free_logits=64)
  params = jax.jit(policy.init)(jax.random.PRNGKey(0),
                                jax.tree.map(lambda x: x[0], batch.graphs))
  optimizer = optax.adam(3e-3)
  state = init_train_state(jax.random.PRNGKey(1), params, optimizer, batch)
  assert state.best_placement.shape == (1, batch.group_of.shape[1])
  hparams = RLSettings(entropy_floor=0.0,
        num_samples=64, loss="ppo", ppo_epochs=2,
                          entropy_weight=0.01, advantage="batch")
  step = functools.partial(update.rl_step, apply_fn=policy.apply,
                           optimizer=optimizer, hparams=hparams,
                           simulate_fn=simulator_reward)
  chunk = jax.jit(functools.partial(update.scan_chunk, step, num_steps=25))
  scorer = Scorer(graph, topology)

  sampled, entropy = [], []
  for _ in range(4):
    state, metrics = chunk(state, batch)
    sampled.append(float(np.mean(metrics["mean_runtime_s"])))
    entropy.append(np.asarray(metrics["entropy"]))
  assert entropy[0][0] > 0.95 * np.log(3), entropy[0][0]
  assert sampled[0] > 1.5 * best, (sampled[0], best)
  # The policy itself (no search, no best-ever): greedy at the optimum,
  # samples there too.
  own = evaluate_policy(state.params, batch, apply_fn=policy.apply,
                        reward_fns=[scorer], num_nodes=[graph.n_nodes],
                        num_samples=32)[0]
  assert own.greedy_runtime_s <= best * (1 + 1e-5), (own, best, sampled)
  assert own.sampled_mean_s <= 1.02 * best, (own, sampled)
  chain_devices = [set(own.greedy_placement[:half]),
                   set(own.greedy_placement[half:])]
  assert len(chain_devices[0]) == len(chain_devices[1]) == 1
  assert chain_devices[0] != chain_devices[1] and 0 not in (
      chain_devices[0] | chain_devices[1])


def test_priority_levels_learn_a_schedule_the_critical_path_misses(tmp_path):
  from gplace import rl  # pylint: disable=g-import-not-at-top
  from gplace import workloads  # pylint: disable=g-import-not-at-top
  from gplace.sim import graph_files  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "toy.json")
  optimum = reorder_toy(path)
  loaded = graph_files.load(path)
  placement = np.array([0, 0, 0, 0, 1, 1])
  default = float(simulate(loaded.graph, placement, loaded.topology,
                           costs=loaded.costs).runtime_s)
  assert abs(default - 15e-3) < 1e-9       # the critical path's schedule
  # The typed API: the graph file's graph, devices and costs, trained on.
  policy = rl.PolicySettings("go", dict(
      rl.settings.DEFAULT_POLICY.hparams, hidden_size=16, num_heads=2,
      num_attention_layers=1, head_hidden_size=16, free_logits=0,
      priority_levels=2))
  settings = rl.TrainSettings(
      baselines=("heft",), progress_bar=False, print_table=False).replace(
          rl=dict(num_samples=16), optimizer=dict(learning_rate=1e-2),
          train=dict(num_steps=60, chunk_steps=20, checkpoint_every=60,
                     eval_samples=8))
  result = rl.train([workloads.load(path)], loaded.topology, policy,
                    settings, workdir=str(tmp_path / "run"),
                    log=lambda line: None)
  own = result.policy[0]
  # The policy's own greedy placement and levels (no search), scored in
  # its own schedule with the file's costs: the optimum, which the default
  # schedule of the same placement misses.
  np.testing.assert_array_equal(own.greedy_placement, placement)
  assert own.greedy_runtime_s <= optimum * (1 + 1e-6), own.greedy_runtime_s
  with open(tmp_path / "run" / "best_placement.json") as f:
    import json  # pylint: disable=g-import-not-at-top
    record = json.load(f)["graphs"][0]
  priority = np.empty(len(record["order"]), np.float32)
  priority[record["order"]] = -np.arange(len(record["order"]))
  again = simulate(loaded.graph, placement, loaded.topology,
                   costs=loaded.costs, priority=priority)
  assert abs(float(again.runtime_s) - record["runtime_s"]) < 1e-9
