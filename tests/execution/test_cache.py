"""Tests of gplace.execution.cache: executables are shared by what they
compute, survive across placements until clear_cache, traced programs are
reused, and compile failures become BuildErrors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import _testing
from gplace.errors import BuildError
from gplace.execution import cache
from gplace.execution import partition
from gplace.graphs.capture import trace_program
from gplace.graphs.graph import NODE_OP


def _chain(x):
  for _ in range(6):
    x = jnp.tanh(x)
  return x


@pytest.fixture(scope="module")
def control_flow():
  fn = _testing.control_flow_program
  args = _testing.control_flow_args()
  return fn, args, gplace.capture(fn, *args), jax.jit(fn)(*args)


def test_executables_are_cached_across_placements(control_flow):
  fn, args, graph, want = control_flow
  placement = np.random.default_rng(7).integers(0, 2, graph.n_nodes)
  first = gplace.place(fn, graph, placement, jax.devices()[:2],
                       example_args=args)
  again = gplace.place(fn, graph, placement.copy(), jax.devices()[:2],
                       example_args=args)
  assert first.n_compiled > 0 and again.n_compiled == 0
  for got, ref in zip(jax.tree.leaves(again(*args)), jax.tree.leaves(want)):
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_op_mode_shares_one_executable_between_identical_ops():
  x = jnp.ones(5)
  graph = gplace.capture(_chain, x)
  cache.clear_cache()
  assert cache.cache_size() == 0
  placed = gplace.place(_chain, graph, np.zeros(graph.n_nodes, int),
                        jax.devices()[:1], mode="op", example_args=(x,))
  assert placed.n_clusters == 6 and placed.n_compiled == 1
  assert cache.cache_size() == 1
  # Another device is another executable.
  other = gplace.place(_chain, graph, np.ones(graph.n_nodes, int),
                       jax.devices()[:2], mode="op", example_args=(x,))
  assert other.n_compiled == 1 and cache.cache_size() == 2
  cache.clear_cache()
  assert cache.cache_size() == 0


def _one_op_clusters(fn, x):
  """``(program, signatures, clusters)``: ``fn(x)`` traced, one cluster per
  op, all on device 0."""
  program = trace_program(fn, x)
  signatures = {n: partition.op_signature(program.nodes[n])
                for n, r in enumerate(program.nodes) if r.kind == NODE_OP}
  clusters = partition.partition(program, np.zeros(program.graph.n_nodes,
                                                   int), mode="op")
  return program, signatures, clusters


def test_cluster_key_and_get_or_compile():
  x = jnp.ones(5)
  program, signatures, clusters = _one_op_clusters(_chain, x)
  device = jax.devices()[0]
  # The same op at two positions of the chain computes the same function.
  keys = {cache.cluster_key(program, signatures, c, device) for c in clusters}
  assert len(keys) == 1
  assert cache.cluster_key(program, signatures, clusters[0],
                           jax.devices()[1]) not in keys
  cache.clear_cache()
  first = cache.get_or_compile(program, signatures, clusters[0], device)
  second = cache.get_or_compile(program, signatures, clusters[1], device)
  assert first.compiled and first.compile_s > 0
  assert not second.compiled and second.compile_s == 0.0
  assert second.executable is first.executable
  value = jax.device_put(x, device)
  np.testing.assert_allclose(first.executable(value)[0], jnp.tanh(x))
  cache.clear_cache()


def test_traced_programs_are_reused():
  x = jnp.ones(5)
  cache.clear_cache()
  program = cache.traced_program(_chain, (x,), {})
  assert cache.traced_program(_chain, (jnp.zeros(5),), {}) is program
  assert cache.traced_program(_chain, (jnp.ones(6),), {}) is not program
  cache.clear_cache()
  assert cache.traced_program(_chain, (x,), {}) is not program


def test_compile_failures_are_build_errors(monkeypatch):
  x = jnp.ones(5)
  program = trace_program(_chain, x)
  cluster = partition.partition(program,
                                np.zeros(program.graph.n_nodes, int))[0]

  def broken(*_):
    def run(*inputs):
      raise ValueError("no kernel for this op\nmore detail")
    return run

  monkeypatch.setattr(cache, "cluster_function", broken)
  with pytest.raises(BuildError, match="ValueError: no kernel for this op"):
    cache.compile_cluster(program, cluster, jax.devices()[0])


@pytest.mark.parametrize("content, expected", [
    ("65530\n", 65530 // 8),   # Linux's default: each executable maps 3-4
    ("1000000", 20000),        # a raised limit: the ceiling
    ("4000", 1000),            # a tiny limit: the floor
    ("not a number", 20000),
])
def test_executable_budget_follows_the_memory_map_limit(tmp_path, content,
                                                        expected):
  path = tmp_path / "max_map_count"
  path.write_text(content)
  assert cache._executable_budget(str(path)) == expected  # pylint: disable=protected-access


def test_executable_budget_without_a_readable_limit(tmp_path):
  assert cache._executable_budget(str(tmp_path / "missing")) == 20000  # pylint: disable=protected-access
  assert 1000 <= cache.MAX_EXECUTABLES <= 20000


def _mixed(x):
  return jnp.sin(x) + jnp.cos(x) * jnp.exp(x)


@pytest.mark.parametrize("threads", [1, 2])
def test_get_or_compile_many(monkeypatch, threads):
  x = jnp.linspace(0.0, 1.0, 5)
  program, signatures, clusters = _one_op_clusters(_mixed, x)
  device = jax.devices()[0]
  monkeypatch.setattr(cache, "COMPILE_THREADS", threads)
  cache.clear_cache()
  items = [(c, device) for c in clusters] + [(clusters[0], device)]
  lookups, seconds = cache.get_or_compile_many(program, signatures, items)
  assert seconds > 0 and len(lookups) == len(items)
  # Each distinct cluster compiled once; the repeat is the same executable.
  assert [lookup.compiled for lookup in lookups] == [True] * len(
      clusters) + [False]
  assert lookups[-1].executable is lookups[0].executable
  assert cache.cache_size() == len(clusters)
  # Each executable computes its op (as get_or_compile's would).
  for cluster, lookup in zip(clusters, lookups):
    alone = cache.compile_cluster(program, cluster, device)
    inputs = [jax.device_put(x, device)] * len(cluster.in_vars)
    np.testing.assert_allclose(lookup.executable(*inputs)[0],
                               alone(*inputs)[0])
  again, seconds = cache.get_or_compile_many(program, signatures, items)
  assert seconds == 0.0 and not any(lookup.compiled for lookup in again)
  # A cache that overflows starts over, and the cached entries it hands
  # out in the same call stay valid.
  monkeypatch.setattr(cache, "MAX_EXECUTABLES", len(clusters) - 1)
  cache.clear_cache()
  cache.get_or_compile_many(program, signatures,
                            [(c, device) for c in clusters[:-1]])
  assert cache.cache_size() == len(clusters) - 1
  both, _ = cache.get_or_compile_many(
      program, signatures, [(clusters[0], device), (clusters[-1], device)])
  assert [lookup.compiled for lookup in both] == [False, True]
  assert cache.cache_size() == 1
  inputs = [jax.device_put(x, device)] * len(clusters[0].in_vars)
  np.testing.assert_allclose(
      both[0].executable(*inputs)[0],
      lookups[0].executable(*inputs)[0])
  cache.clear_cache()


def _fails_in_two_threads(monkeypatch, program, signatures, clusters,
                          match):
  """get_or_compile_many of ``clusters`` in 2 threads raises a BuildError
  matching ``match`` and caches nothing."""
  monkeypatch.setattr(cache, "COMPILE_THREADS", 2)
  cache.clear_cache()
  with pytest.raises(BuildError, match=match):
    cache.get_or_compile_many(program, signatures,
                              [(c, jax.devices()[0]) for c in clusters])
  assert cache.cache_size() == 0


def test_get_or_compile_many_raises_build_errors(monkeypatch):
  program, signatures, clusters = _one_op_clusters(_mixed, jnp.ones(5))

  def broken(*_):
    def run(*inputs):
      raise ValueError("no kernel for this op")
    return run

  monkeypatch.setattr(cache, "cluster_function", broken)
  _fails_in_two_threads(monkeypatch, program, signatures, clusters,
                        "no kernel for this op")


def test_get_or_compile_many_compile_failures_in_threads(monkeypatch):
  program, signatures, clusters = _one_op_clusters(_mixed, jnp.ones(5))
  lower = cache.lower_cluster

  class OutOfMemory:      # lowers, then fails to compile (in a thread)
    def __init__(self, lowered):
      self.lowered = lowered

    def compile(self):
      raise RuntimeError("RESOURCE_EXHAUSTED: out of memory")

  def lower_one_bad(program, cluster, device):
    lowered = lower(program, cluster, device)
    return OutOfMemory(lowered) if cluster is clusters[-1] else lowered

  monkeypatch.setattr(cache, "lower_cluster", lower_one_bad)
  _fails_in_two_threads(monkeypatch, program, signatures, clusters,
                        "RESOURCE_EXHAUSTED")
