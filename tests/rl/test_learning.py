"""Pure RL learns: on a graph whose optimum is known, the GO policy trained
from a uniform start (no warm start, no search, no best-ever seeding) ends
with a greedy placement at the optimum, scored by the real simulator."""

import functools

import jax
import numpy as np
import optax

from gplace.graphs import features as features_lib
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.policies import create_policy
from gplace.rl import update
from gplace.rl.data import stacked_problems
from gplace.rl.rewards import simulator_reward
from gplace.rl.state import RLHyperparams, init_train_state
from gplace.rl.types import Batch
from gplace.sim.simulator import simulate
from gplace.sim.topology import preset


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
  hparams = RLHyperparams(num_samples=16, loss="ppo", ppo_epochs=2,
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
