"""Tests of gplace.sim.scan: ``simulate_problem`` is pure, so a user's own
``jax.jit``, ``jax.vmap`` and surrounding computation give what ``simulate``
gives."""

import jax
import jax.numpy as jnp
import numpy as np

from gplace.graphs.graph import random_dag
from gplace.sim.problem import SimResult, make_problem
from gplace.sim.scan import simulate_problem
from gplace.sim.simulator import COMPILER_OPTIONS, simulate
from gplace.sim.presets import preset

N_NODES, K = 24, 5


def _case(seed=0):
  graph = random_dag(N_NODES, seed=seed)
  topology = preset("1cpu+2gpu")
  placements = np.random.default_rng(seed).integers(
      0, topology.n_devices, (K, N_NODES)).astype(np.int32)
  return graph, topology, placements


def test_under_a_users_jit_matches_simulate():
  graph, topology, placements = _case()
  problem = make_problem(graph, topology)
  fn = jax.jit(simulate_problem, static_argnames="return_schedule",
               compiler_options=COMPILER_OPTIONS or None)
  mine = fn(problem, jnp.asarray(placements), return_schedule=True)
  theirs = simulate(graph, placements, topology, schedule="static",
                    return_schedule=True)
  assert isinstance(mine, SimResult) and mine.order is None
  assert mine.start_s.shape == mine.finish_s.shape == (K, N_NODES)
  assert mine.peak_bytes.shape == (K, topology.n_devices)
  assert mine.oom.shape == mine.runtime_s.shape == (K,)
  for field in ("runtime_s", "peak_bytes", "oom", "start_s", "finish_s"):
    np.testing.assert_allclose(np.asarray(getattr(mine, field)),
                               np.asarray(getattr(theirs, field)),
                               rtol=1e-6, err_msg=field)
  without = fn(problem, jnp.asarray(placements))
  assert without.start_s is None and without.finish_s is None
  np.testing.assert_array_equal(without.runtime_s, mine.runtime_s)


def test_under_a_users_vmap_over_placement_batches():
  graph, topology, placements = _case(seed=1)
  problem = make_problem(graph, topology)
  batches = np.stack([placements, placements[::-1], placements % 2])
  out = jax.jit(jax.vmap(simulate_problem, in_axes=(None, 0)))(
      problem, jnp.asarray(batches))
  assert out.runtime_s.shape == (3, K)
  for i, batch in enumerate(batches):
    alone = simulate(graph, batch, topology, schedule="static")
    np.testing.assert_allclose(np.asarray(out.runtime_s[i]),
                               np.asarray(alone.runtime_s), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out.oom[i]),
                                  np.asarray(alone.oom))


def test_inside_a_larger_jitted_step():
  # As in a training step: placements come from traced logits, and the
  # result feeds further computation.
  graph, topology, _ = _case(seed=2)
  problem = make_problem(graph, topology)
  logits = jax.random.normal(jax.random.key(0),
                             (K, N_NODES, topology.n_devices))

  @jax.jit
  def step(problem, logits):
    placements = jnp.argmax(logits, -1).astype(jnp.int32)
    result = simulate_problem(problem, placements)
    return placements, -jnp.sqrt(result.runtime_s), jnp.argmin(
        result.runtime_s)

  placements, reward, best = step(problem, logits)
  expected = simulate(graph, np.asarray(placements), topology,
                      schedule="static")
  np.testing.assert_allclose(np.asarray(reward),
                             -np.sqrt(np.asarray(expected.runtime_s)),
                             rtol=1e-6)
  assert int(best) == int(np.argmin(np.asarray(expected.runtime_s)))
