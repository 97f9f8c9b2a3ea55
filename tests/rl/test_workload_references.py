"""Training configs name workloads beyond the zoo: a saved graph file or a
``module:function`` (gplace.workloads.resolve), checked at validation and
loaded by gplace.rl.data."""

import pytest

from gplace.errors import ConfigError, GraphError, WorkloadError
from gplace.graphs import interchange
from gplace.graphs.graph import random_dag
from gplace.rl import data, validation
from test_validation import tiny_config


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_a_saved_graph_is_a_workload(tmp_path, suffix):
  graph = random_dag(25, seed=3)
  path = str(tmp_path / f"mine{suffix}")
  interchange.save(path, graph)
  config = tiny_config()
  config.workload = path
  validation.validate_workloads(config)
  loaded, fn, args = data.load_graph(path, config)
  assert loaded.n_nodes == graph.n_nodes and loaded.n_edges == graph.n_edges
  assert fn is None and args is None


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
  validation.validate_workloads(config)
  graph, fn, args = data.load_graph(config.workload, config)
  assert graph.n_nodes > 2 and callable(fn) and len(args) == 1
  with pytest.raises(WorkloadError, match="needs_an_argument"):
    data.load_graph("my_models:needs_an_argument", config)


def test_a_missing_graph_file_is_a_clear_error(tmp_path):
  config = tiny_config()
  path = str(tmp_path / "absent.json")
  with pytest.raises(GraphError, match="absent.json"):
    data.load_graph(path, config)


def test_a_saved_graph_cannot_be_measured(tmp_path):
  path = str(tmp_path / "mine.npz")
  interchange.save(path, random_dag(10, seed=1))
  config = tiny_config()
  config.workload = path
  config.rl.reward = "executor"
  with pytest.raises(ConfigError, match="cannot be run"):
    validation.validate_workloads(config)
