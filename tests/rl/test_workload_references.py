"""Training configs name workloads beyond the zoo: a saved graph file or a
``module:function`` (gplace.workloads.resolve), checked by
gplace.rl.settings and loaded by gplace.workloads.load and gplace.rl.data."""

import dataclasses

import jax
import numpy as np
import pytest

import gplace
from gplace.errors import ConfigError, GraphError, WorkloadError
from gplace.graphs.graph import random_dag
from experiments.run import run
from gplace.sim import graph_files
from gplace import workloads
from gplace.rl import checks, data, rewards
from gplace.rl import settings as settings_lib
from test_settings import tiny_config


def _experiment(config):
  """The checked experiment a config describes."""
  experiment = settings_lib.from_config(config)
  data.check_experiment(experiment)
  return experiment


def _topology(config):
  """The topology a config names, its graph files loaded."""
  experiment = _experiment(config)
  return data.experiment_topology(experiment.topology, [
      workloads.load(name) for name in experiment.workloads])


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_a_saved_graph_is_a_workload(tmp_path, suffix):
  graph = random_dag(25, seed=3)
  path = str(tmp_path / f"mine{suffix}")
  graph_files.save(path, graph)
  config = tiny_config()
  config.workload = path
  _experiment(config)
  loaded = workloads.load(path)
  assert (loaded.graph.n_nodes == graph.n_nodes
          and loaded.graph.n_edges == graph.n_edges)
  assert loaded.fn is None and loaded.args is None


def test_a_module_function_is_a_workload(tmp_path, monkeypatch):
  (tmp_path / "my_models.py").write_text(
      "import jax.numpy as jnp\n"
      "def program():\n"
      "  return (lambda x: jnp.tanh(x @ x).sum()), (jnp.ones((4, 4)),)\n"
      "def needs_an_argument(n):\n"
      "  return n\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  config = tiny_config()
  config.workload = "my_models:program"
  _experiment(config)
  graph, fn, args, _, _ = workloads.load(config.workload)[1:]
  assert graph.n_nodes > 2 and callable(fn) and len(args) == 1
  with pytest.raises(WorkloadError, match="needs_an_argument"):
    workloads.load("my_models:needs_an_argument")


def test_a_missing_graph_file_is_a_clear_error(tmp_path):
  path = str(tmp_path / "absent.json")
  with pytest.raises(GraphError, match="absent.json"):
    workloads.load(path)


def test_a_saved_graph_cannot_be_measured(tmp_path):
  path = str(tmp_path / "mine.npz")
  graph_files.save(path, random_dag(10, seed=1))
  config = tiny_config()
  config.workload = path
  config.rl.reward = "executor"
  with pytest.raises(ConfigError, match="cannot be run"):
    _experiment(config)


def test_a_graph_file_s_topology_and_costs_are_trained_on(tmp_path):
  # config.topology="file": the file's devices; its measured costs score
  # the baselines, the bound, the host rewards and the in-step problems.
  graph = random_dag(25, seed=3)
  topology = gplace.topology.preset("1cpu+2gpu").replace(name="cluster")
  costs = np.random.default_rng(0).uniform(1e-4, 2e-3, (graph.n_nodes, 3))
  path = str(tmp_path / "measured.json")
  graph_files.save(path, graph, topology=topology, costs=costs)
  config = tiny_config()
  config.workload, config.topology = path, "file"
  config.baselines = "single_device,heft"
  made = _topology(config)
  assert made.name == "cluster" and made.n_devices == 3
  setup, = data.setup_graphs([workloads.load(path)], made,
                             _experiment(config).settings,
                             log=lambda line: None)
  np.testing.assert_allclose(setup.costs, costs)
  heft = setup.baselines["heft"]
  expected = gplace.simulate(graph, heft, topology, costs=costs)
  assert setup.baseline_runtime_s["heft"] == float(expected.runtime_s)
  assert setup.lower_bound_s == gplace.lower_bound(graph, topology, costs)
  roofline = gplace.simulate(graph, heft, topology)
  assert float(roofline.runtime_s) != float(expected.runtime_s)
  batch = data.make_batch([setup], made, schedule="dynamic")
  problem = jax.tree.map(lambda x: x[0], batch.problems)
  placements = np.zeros((2, problem.priority.shape[-1]), np.int32)
  placements[:, :graph.n_nodes] = heft
  runtime, _ = jax.jit(rewards.dispatch_reward)(problem, placements)
  dynamic = gplace.simulate(graph, heft, topology, costs=costs,
                            schedule="dynamic")   # the in-step rule
  np.testing.assert_allclose(np.asarray(runtime), float(dynamic.runtime_s),
                             rtol=1e-6)


@pytest.mark.parametrize("reward", ["simulator", "simulator_dynamic"])
def test_in_step_rewards_refuse_a_topology_with_launch_costs(tmp_path,
                                                             reward):
  # The jitted rewards do not charge the executor's per-cluster launches;
  # gplace.simulate (and so the results table) does.
  graph = random_dag(25, seed=3)
  base = gplace.topology.preset("1cpu+2gpu")
  launched = base.replace(devices=tuple(
      dataclasses.replace(dev, cluster_launch_s=2e-4)
      for dev in base.devices))
  path = str(tmp_path / "calibrated.json")
  graph_files.save(path, graph, topology=launched)
  config = tiny_config()
  config.workload, config.topology = path, "file"
  config.rl.reward = reward
  made = _topology(config)
  settings = _experiment(config).settings
  with pytest.raises(ConfigError, match="simulator_host"):
    checks.check_reward_topology(settings, made)
  with pytest.raises(ConfigError, match="cluster_launch_s"):
    run(config, str(tmp_path / "work"))
  host = settings.replace(rl=dict(reward="simulator_host"))
  checks.check_reward_topology(host, made)     # charges them: accepted
  checks.check_reward_topology(settings, base)  # no launch cost: accepted


def test_file_topology_needs_a_graph_file_with_one(tmp_path):
  config = tiny_config()
  config.topology = "file"
  with pytest.raises(WorkloadError, match="not a graph file with a"):
    _topology(config)
  path = str(tmp_path / "bare.json")
  graph_files.save(path, random_dag(10, seed=1))
  config.workload = path
  with pytest.raises(WorkloadError, match="not a graph file with a"):
    _topology(config)


def test_file_costs_for_other_devices_are_refused(tmp_path):
  graph = random_dag(10, seed=1)
  path = str(tmp_path / "two.json")
  graph_files.save(path, graph, costs=np.full((graph.n_nodes, 2), 1e-3))
  config = tiny_config()
  config.workload = path
  config.topology = "1cpu+4gpu"
  with pytest.raises(WorkloadError, match="costs are for 2 devices"):
    data.setup_graphs([workloads.load(path)], _topology(config),
                      _experiment(config).settings, log=lambda line: None)
