"""Tests of gplace.rl.data: graphs -> padded batches, baselines, targets."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import baselines
from gplace import workloads
from gplace.errors import BudgetError, PlacementError, WorkloadError
from gplace.graphs.graph import random_dag
from gplace import policies
from gplace.rl import data, grouping, reports, scoring, warm_start
from gplace.rl.evaluation import policy_placements
from gplace.rl.settings import RLSettings, TrainSettings
from gplace.rl.types import GraphSetup
from gplace.sim import bounds
from gplace.sim import presets


SMALL = TrainSettings(baselines=("single_device", "round_robin"))
TOPOLOGY = presets.preset("1cpu+2gpu")


def _setup(graph, failing_runtime_s=1.0):
  return GraphSetup(name=graph.name, graph=graph, fn=None, args=None,
                         baselines={}, baseline_runtime_s={},
                         lower_bound_s=0.0,
                         failing_runtime_s=failing_runtime_s)


def test_random_dags_by_name():
  assert workloads.is_random_dag("random_dag:30")
  assert workloads.is_random_dag("random_dag:30:4")
  assert not workloads.is_random_dag("random_dag:x")
  assert not workloads.is_random_dag("rnnlm2")


def test_load_random_dag_names_and_seeds():
  graph, fn, args, topology, costs = workloads.load("random_dag:30:1",
                                                    seed=3)[1:]
  assert graph.n_nodes == 30 and graph.name == "random_dag:30:1"
  assert fn is None and args is None
  assert topology is None and costs is None
  assert str(graph.names[3]) == "random_dag:30:1/n3"
  # Without a seed in the name the given seed is used.
  seeded = workloads.load("random_dag:30", seed=3).graph
  same = random_dag(30, seed=3, name="random_dag:30")
  np.testing.assert_array_equal(seeded.edge_src, same.edge_src)
  np.testing.assert_array_equal(seeded.flops, same.flops)


def test_load_unknown_workload_is_a_workload_error():
  with pytest.raises(WorkloadError):
    workloads.load("no_such_model")


def test_experiment_topology_from_a_preset():
  topology = data.experiment_topology("1cpu+2gpu", [])
  assert topology.n_devices == 3 and topology.name == "1cpu+2gpu"


def test_make_batch_pads_and_stacks():
  topology = presets.preset("1cpu+2gpu")
  graphs = [random_dag(30, seed=1, name="a"), random_dag(70, seed=2,
                                                         name="b")]
  setups = [_setup(graphs[0], 2.0), _setup(graphs[1], 3.0)]
  batch = data.make_batch(setups, topology)
  mask = batch.graphs.nodes["mask"]
  n_pad = mask.shape[1]
  assert mask.shape == (2, n_pad) and n_pad % 64 == 0 and n_pad > 70
  np.testing.assert_array_equal(mask.sum(1), [30, 70])
  assert batch.graphs.senders.shape[0] == 2
  np.testing.assert_array_equal(batch.failing_runtime_s, [2.0, 3.0])
  assert batch.failing_runtime_s.dtype == np.float32
  assert batch.device_mask.shape == (2, 3) and batch.device_mask.all()
  # The simulator problems share the budget and stack along the batch.
  leaves = [np.asarray(x) for x in jax.tree.leaves(batch.problems)]
  assert all(leaf.shape[0] == 2 for leaf in leaves)
  assert data.make_batch(setups, topology, with_problems=False).problems is None


def test_the_hint_is_each_graphs_fastest_baseline_per_node_or_group():
  topology = presets.preset("1cpu+2gpu")
  graph = random_dag(40, seed=4, name="c")
  slow, fast = np.zeros(40, np.int32), np.arange(40, dtype=np.int32) % 3
  known = _setup(graph)._replace(baselines={"slow": slow, "fast": fast},
                                 baseline_runtime_s={"slow": 2.0,
                                                     "fast": 1.0})
  unknown = _setup(random_dag(30, seed=1, name="a"))
  batch = data.make_batch([known, unknown], topology)
  hint = batch.graphs.nodes["hint"]
  np.testing.assert_array_equal(hint[0, :40], fast)
  assert (hint[0, 40:] == -1).all() and (hint[1] == -1).all()
  # Groups get their ops' majority device.
  coarse = grouping.coarsen_for_policy(graph, max_groups=12, rule="size",
                                       min_nodes=0)
  grouped = data.make_batch([known._replace(coarsening=coarse)], topology)
  votes = np.zeros((coarse.n_groups, 3))
  np.add.at(votes, (np.asarray(coarse.group_of), fast), 1)
  np.testing.assert_array_equal(
      grouped.graphs.nodes["hint"][0, :coarse.n_groups], votes.argmax(1))
  assert (grouped.graphs.nodes["hint"][0, coarse.n_groups:] == -1).all()


def test_device_constraints_become_the_policys_per_node_mask():
  topology = presets.preset("1cpu+2gpu")
  graph = random_dag(40, seed=4, name="c")
  allowed = np.ones((40, 3), bool)
  allowed[::3, 0] = False       # every third op cannot run on the CPU
  allowed[1::3, 2] = False      # the next ones not on the second GPU
  constrained = graph.replace(allowed_devices=allowed)
  free = _setup(random_dag(30, seed=1, name="a"))
  batch = data.make_batch([_setup(constrained), free], topology)
  n_pad = batch.graphs.nodes["mask"].shape[1]
  assert batch.device_mask.shape == (2, n_pad, 3)
  np.testing.assert_array_equal(batch.device_mask[0, :40], allowed)
  assert batch.device_mask[1].all() and batch.device_mask[0, 40:].all()
  # The policy never samples a device an op does not allow.
  policy = policies.create_policy("go", 3, hidden_size=8, num_heads=2,
                                  num_sage_layers=1, num_attention_layers=1,
                                  op_embedding_size=4, head_hidden_size=8,
                                  segment_length=16)
  batch = jax.tree.map(jnp.asarray, batch)
  params = policy.init(jax.random.PRNGKey(0),
                       jax.tree.map(lambda x: x[0], batch.graphs))
  own = policy_placements(params, batch, jax.random.PRNGKey(1),
                          apply_fn=policy.apply, num_samples=64)
  samples = np.asarray(own.samples)[0, :, :40]          # [K, 40]
  assert allowed[np.arange(40), samples].all()
  assert allowed[np.arange(40), np.asarray(own.greedy)[0, :40]].all()
  assert len(np.unique(samples[:, 2::3])) > 1           # still a choice
  # Groups allow what all their ops allow.
  coarse = grouping.coarsen_for_policy(constrained, max_groups=12,
                                       rule="size", min_nodes=0)
  grouped = data.make_batch([_setup(constrained)._replace(coarsening=coarse)],
                            topology)
  group_allowed = np.ones((coarse.n_groups, 3), bool)
  np.logical_and.at(group_allowed, np.asarray(coarse.group_of), allowed)
  np.testing.assert_array_equal(grouped.device_mask[0, :coarse.n_groups],
                                group_allowed)


def test_stacked_problems_grow_the_step_budget_then_give_up(monkeypatch):
  calls = []

  def make_problem(graph, topology, n_nodes, n_steps, costs=None):
    calls.append(n_steps)
    raise PlacementError("needs more steps")

  monkeypatch.setattr(scoring.simulator, "make_problem", make_problem)
  with pytest.raises(BudgetError, match="simulator steps"):
    scoring.stacked_problems([random_dag(10, seed=0)],
                                  presets.preset("1cpu+2gpu"), 64)
  assert calls == [64, 128, 256, 512]


def test_setup_graphs_scores_baselines_and_picks_the_penalty():
  topology = TOPOLOGY
  lines = []
  setups = data.setup_graphs([workloads.load("random_dag:30:1")], topology,
                             SMALL, log=lines.append)
  (setup,) = setups
  assert set(setup.baselines) == {"single_device", "round_robin"}
  assert all(np.isfinite(r) for r in setup.baseline_runtime_s.values())
  assert setup.lower_bound_s == bounds.lower_bound(setup.graph, topology)
  assert setup.lower_bound_s <= min(setup.baseline_runtime_s.values())
  # 10x the best single-device runtime.
  single = scoring.make_scorer(
      setup.graph, None, None, topology, SMALL)(
          np.tile(np.arange(3)[:, None], (1, 30)))
  np.testing.assert_allclose(setup.failing_runtime_s,
                             SMALL.rl.oom_penalty_factor * single.min())
  assert "random_dag:30:1: 30 nodes" in lines[0]
  # Neither baseline plans an order: no own-plan rows.
  assert setup.planned_runtime_s == {}


def test_setup_graphs_scores_list_schedulers_in_their_own_planned_order():
  settings = TrainSettings(baselines=("heft", "m_etf", "metis"))
  topology = TOPOLOGY
  (setup,) = data.setup_graphs([workloads.load("random_dag:40:2")],
                               topology, settings, log=lambda _: None)
  assert set(setup.planned_runtime_s) == {"heft", "m_etf"}
  for name in ("heft", "m_etf", "metis"):
    np.testing.assert_array_equal(
        setup.baselines[name],
        baselines.get(name)(setup.graph, topology, seed=settings.seed))
  for name, runtime in setup.planned_runtime_s.items():
    plan = baselines.plan(name, setup.graph, topology)
    own = gplace.simulate(setup.graph, plan.placement, topology,
                          order=plan.order)
    np.testing.assert_allclose(runtime, float(own.runtime_s), rtol=1e-6)
    # The default schedule's row is kept apart from the own plan's.
    default = gplace.simulate(setup.graph, plan.placement, topology)
    np.testing.assert_allclose(setup.baseline_runtime_s[name],
                               float(default.runtime_s), rtol=1e-6)
  rows = reports.classical_runtimes(setup)
  assert rows["heft (own plan)"] == setup.planned_runtime_s["heft"]
  label, best = reports.best_classical(setup)
  assert best == min(rows.values()) and rows[label] == best


def test_warm_start_targets_pick_the_best_baseline_and_pad():
  graph = random_dag(5, seed=0, name="g")
  setup = _setup(graph)._replace(
      baselines={"a": np.full(5, 1, np.int32), "b": np.full(5, 2, np.int32)},
      baseline_runtime_s={"a": 2.0, "b": 1.0})
  warm = warm_start.warm_start_targets([setup, setup], "best", 8)
  assert warm.baseline_names == ["b", "b"]
  np.testing.assert_array_equal(warm.placements[0], [2] * 5 + [0] * 3)
  np.testing.assert_array_equal(warm.runtime_s, [1.0, 1.0])
  warm = warm_start.warm_start_targets([setup], "a", 8)
  assert warm.baseline_names == ["a"] and warm.runtime_s[0] == 2.0


def test_auto_reward_schedule_is_dynamic_only_on_large_graphs():
  rl = RLSettings()
  assert rl.reward_schedule == "auto"
  big = scoring.AUTO_DYNAMIC_NODES + 1
  assert scoring.reward_schedule(rl, big) == "dynamic"
  assert scoring.reward_schedule(rl, big - 1) == "best"
  rl = RLSettings(reward_schedule="best")
  assert scoring.reward_schedule(rl, big) == "best"
  # Rewards scored elsewhere (in the jitted step, measured) keep theirs.
  rl = RLSettings(reward_schedule="auto", reward="simulator")
  assert scoring.reward_schedule(rl, 10) == "best"
