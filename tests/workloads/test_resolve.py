"""Workloads named by a graph file or module:function."""

import sys
import textwrap

import jax.numpy as jnp
import pytest

from gplace.errors import GraphError, WorkloadError
from gplace.graphs.graph import Graph, random_dag
from gplace.sim import graph_files
from gplace.workloads import resolve


def double(x):
  return jnp.tanh(x) * 2.0


@pytest.fixture()
def user_module(tmp_path, monkeypatch):
  (tmp_path / "my_graphs.py").write_text(textwrap.dedent("""
      import jax.numpy as jnp
      from gplace.graphs.graph import random_dag

      def graph():
        return random_dag(10, seed=1, name="mine")

      def as_networkx():
        return random_dag(10, seed=1, name="mine").to_networkx()

      def function():
        return (lambda x: jnp.sin(x) + 1.0), (jnp.ones(4),)

      def broken():
        raise RuntimeError("no data")

      def nothing():
        return 42
      """))
  monkeypatch.chdir(tmp_path)
  yield "my_graphs"
  sys.modules.pop("my_graphs", None)


@pytest.mark.parametrize("name,expected", [
    ("bert", False), ("random_dag:100", False), ("random_dag:100:3", False),
    ("graph.npz", True), ("dir/graph.JSON", True), ("a.b:c", True),
    ("mod:make_graph", True), ("mod:", False), (":fn", False),
    ("random_dag:abc", False), ("random_dag:x1:2", False),
])
def test_is_reference(name, expected):
  assert resolve.is_reference(name) is expected


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_graph_files(tmp_path, suffix):
  graph = random_dag(12, seed=0, name="saved")
  path = str(tmp_path / f"g{suffix}")
  graph_files.save(path, graph)
  resolved = resolve.load_reference(path)
  assert resolved.graph == graph and resolved.fn is None


def test_functions(user_module):
  for function in ("graph", "as_networkx"):
    resolved = resolve.load_reference(f"{user_module}:{function}")
    assert resolved.graph == random_dag(10, seed=1, name="mine")
  resolved = resolve.load_reference(f"{user_module}:function")
  assert isinstance(resolved.graph, Graph) and callable(resolved.fn)
  assert len(resolved.args) == 1


@pytest.mark.parametrize("name,error,words", [
    ("no_such_module_xyz:fn", WorkloadError, ["cannot import", "no_such"]),
    ("{module}:missing", WorkloadError, ["no function 'missing'"]),
    ("{module}:broken", WorkloadError, ["failed", "no data"]),
    ("{module}:nothing", WorkloadError, ["returned int"]),
    ("missing.json", GraphError, ["No graph file"]),
    ("bert", WorkloadError, ["neither"]),
])
def test_bad_references(user_module, name, error, words):
  with pytest.raises(error) as info:
    resolve.load_reference(name.format(module=user_module))
  for word in words:
    assert word in str(info.value)


@pytest.mark.parametrize("name", [
    "random_dag:abc", "random_dag:", "random_dag", "random_dag:10:x",
    "random_dag:10:3:4", "random_dag:-5", "random_dag:1"])
def test_a_malformed_random_dag_name_shows_the_form(name):
  from gplace import workloads  # pylint: disable=g-import-not-at-top
  for load in (workloads.load, resolve.load_reference):
    with pytest.raises(WorkloadError) as info:
      load(name)
    message = str(info.value)
    assert repr(name) in message and "random_dag:N[:seed]" in message
    assert "cannot import" not in message
  assert resolve.random_dag_problem("random_dag:100:3") is None
  assert resolve.random_dag_problem("bert") is None
  with pytest.raises(WorkloadError, match="gplace.workloads.load"):
    workloads.get(name)


@pytest.mark.parametrize("seed", [-1, 0.5, float("nan"), "1", None, True])
def test_a_bad_seed_is_a_workload_error(seed):
  # numpy's ValueError / TypeError before, or a silently truncated seed.
  from gplace import workloads  # pylint: disable=g-import-not-at-top
  with pytest.raises(WorkloadError, match="seed must be an integer"):
    workloads.load("random_dag:20", seed=seed)
  with pytest.raises(WorkloadError, match="seed must be an integer"):
    workloads.get("rnnlm2", seed=seed)


def test_a_cache_dir_that_is_a_file_is_a_workload_error(tmp_path):
  from gplace import workloads  # pylint: disable=g-import-not-at-top
  blocker = tmp_path / "cache"
  blocker.write_text("x")  # FileExistsError before
  with pytest.raises(WorkloadError, match="cache folder"):
    workloads.load("rnnlm2", cache_dir=str(blocker))
