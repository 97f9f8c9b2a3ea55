"""Tests of gplace.sim.kernel: the one-kernel CPU loops give exactly the
plain scan's results, also under vmap, and only inside their context."""

import jax
import jax.numpy as jnp
import numpy as np

from gplace.graphs.graph import random_dag
from gplace.sim import kernel, simulator
from gplace.sim.problem import make_problem
from gplace.sim.presets import preset


def test_one_kernel_loops_match_the_plain_scan(monkeypatch):
  graph = random_dag(300, seed=11)
  topology = preset("1cpu+4gpu")
  problem = make_problem(graph, topology)
  placements = jnp.asarray(np.random.default_rng(0).integers(
      0, topology.n_devices, (8, problem.commit_step.shape[0])), jnp.int32)
  # A fresh function per variant: jit caches traces per function.
  fresh = lambda: jax.jit(lambda p, x: simulator.simulate_problem(p, x))
  with simulator.one_kernel_loops():
    fused_fn = fresh()
    fused = fused_fn(problem, placements)
    fused_text = fused_fn.lower(problem, placements).as_text()
  plain_fn = fresh()
  plain = plain_fn(problem, placements)
  if kernel._HAS_OP_METADATA and kernel.ONE_KERNEL_LOOPS:  # pylint: disable=protected-access
    assert "xla_cpu_small_call" in fused_text
  assert "xla_cpu_small_call" not in plain_fn.lower(
      problem, placements).as_text()
  monkeypatch.setattr(kernel, "ONE_KERNEL_LOOPS", False)
  with simulator.one_kernel_loops():
    switched_off = fresh()(problem, placements)
  np.testing.assert_array_equal(switched_off.runtime_s, plain.runtime_s)
  np.testing.assert_array_equal(fused.runtime_s, plain.runtime_s)
  np.testing.assert_array_equal(fused.peak_bytes, plain.peak_bytes)


def test_one_kernel_loops_under_vmap_match_the_plain_vmap():
  # Under vmap the one-kernel path maps over the batch (lax.map); batched
  # problems and placements, or placements alone, give the plain results.
  topology = preset("1cpu+2gpu")
  budget = dict(n_nodes=32, n_steps=64, n_slots=32)
  problems = [make_problem(random_dag(n, seed=n), topology, **budget)
              for n in (20, 28)]
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *problems)
  placements = jnp.asarray(np.random.default_rng(0).integers(
      0, topology.n_devices, (2, 4, 32)), jnp.int32)
  both = lambda: jax.jit(jax.vmap(
      lambda p, x: simulator.simulate_problem(p, x)))
  only_placements = lambda: jax.jit(jax.vmap(
      lambda p, x: simulator.simulate_problem(p, x), in_axes=(None, 0)))
  with simulator.one_kernel_loops():
    fused = both()(stacked, placements)
    fused_one = only_placements()(problems[0], placements)
  plain = both()(stacked, placements)
  plain_one = only_placements()(problems[0], placements)
  np.testing.assert_array_equal(fused.runtime_s, plain.runtime_s)
  np.testing.assert_array_equal(fused.peak_bytes, plain.peak_bytes)
  np.testing.assert_array_equal(fused_one.runtime_s, plain_one.runtime_s)
  np.testing.assert_array_equal(fused_one.oom, plain_one.oom)


def test_one_kernel_loops_is_a_scoped_switch():
  scope = kernel._ONE_KERNEL_SCOPE  # pylint: disable=protected-access
  assert not scope.get()
  with kernel.one_kernel_loops():
    assert scope.get()
    with kernel.one_kernel_loops(False):
      assert not scope.get()
    assert scope.get()
  assert not scope.get()
  assert simulator.one_kernel_loops is kernel.one_kernel_loops


def test_compiler_options_are_string_xla_options():
  assert isinstance(kernel.COMPILER_OPTIONS, dict)
  assert all(isinstance(k, str) and isinstance(v, str)
             for k, v in kernel.COMPILER_OPTIONS.items())
  assert simulator.COMPILER_OPTIONS is kernel.COMPILER_OPTIONS
