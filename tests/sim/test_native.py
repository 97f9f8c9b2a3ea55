"""Tests of gplace.sim.native: the compiled host list scheduler gives the
jitted list scheduler's schedules bit for bit, and gplace.simulate uses it
(or, with GPLACE_NATIVE=0, the jitted one) with identical results."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace.graphs.graph import random_dag
from gplace.sim import native
from gplace.sim.dispatch import make_dispatch_problem, simulate_dispatch
from gplace.sim.priority import bottom_level, priority_order
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from gplace import workloads
from gplace.graphs.capture import capture
from sim_cases import SETTINGS, assert_close_to_reference, random_topology

pytestmark = pytest.mark.skipif(not native.available(),
                                reason="numba is not installed")

# One padded budget, so that hypothesis examples reuse one compiled jitted
# scheduler (padding never changes a schedule: tests/sim/test_dispatch.py).
N_PAD = 64


def _jitted(graph, topology, placements, priority, dynamic):
  """The jitted list scheduler on a padded problem, cut to the graph."""
  k, n = placements.shape
  problem = make_dispatch_problem(graph, topology, n_nodes=N_PAD,
                                  n_edges=4 * N_PAD)
  padded = np.zeros((k, N_PAD), np.int32)
  padded[:, :n] = placements
  prio = np.full((k, N_PAD), -3e38, np.float32)
  prio[:, :n] = priority
  result = simulate_dispatch(problem, jnp.asarray(padded), jnp.asarray(prio),
                             dynamic=dynamic)
  order = np.asarray(result.order)
  return result, order[order < n].reshape(k, n)


def _native(graph, topology, placements, priority, dynamic):
  problem = native.make_native_problem(graph, topology)
  k = placements.shape[0]
  out = native.empty_schedules(k, problem)
  native.schedule_batch(problem, placements, native.priority_ranks(priority),
                        dynamic, out, slice(0, k))
  return out


@settings(SETTINGS, max_examples=25)
@given(n_nodes=st.integers(2, 60), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10_000), dynamic=st.booleans(),
       tied=st.booleans())
def test_native_equals_the_jitted_scheduler_bit_for_bit(
    n_nodes, n_devices, seed, dynamic, tied):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed, n_inputs=int(rng.integers(1, 4)))
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (4, n_nodes))
  priority = rng.normal(size=(4, n_nodes)).astype(np.float32)
  if tied:                      # many equal priorities: ties go by node id
    priority = np.round(priority).astype(np.float32)
  jitted, jitted_order = _jitted(graph, topology, placements, priority,
                                 dynamic)
  out = _native(graph, topology, placements, priority, dynamic)
  n = n_nodes
  np.testing.assert_array_equal(out.order, jitted_order)
  np.testing.assert_array_equal(out.start,
                                np.asarray(jitted.start_s)[:, :n])
  np.testing.assert_array_equal(out.finish,
                                np.asarray(jitted.finish_s)[:, :n])
  np.testing.assert_array_equal(out.finish.max(1),
                                np.asarray(jitted.runtime_s))
  np.testing.assert_allclose(out.peak, np.asarray(jitted.peak_bytes),
                             rtol=1e-6)


@settings(SETTINGS, max_examples=8)
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10_000), dynamic=st.booleans())
def test_simulate_through_native_matches_the_reference(n_nodes, n_devices,
                                                       seed, dynamic):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placements = rng.integers(0, n_devices, (3, n_nodes))
  schedule = "dynamic" if dynamic else "static"
  priority = rng.normal(size=(3, n_nodes)).astype(np.float32)
  result = simulate(graph, placements, topology, priority=priority,
                    schedule=schedule, return_schedule=True)
  for k in range(3):
    ref = simulate_reference(graph, placements[k], topology,
                             priority=priority[k], schedule=schedule)
    np.testing.assert_array_equal(result.order[k], ref.order)
    assert_close_to_reference(result, k, ref)


def test_simulate_gives_the_same_results_with_and_without_native(
    monkeypatch):
  # A real train step (optimizer-update ops make wide frontiers: the jitted
  # path switches to its rank trees there), default schedule, many
  # placements split over threads.
  fn, args = workloads.get("transformer_xl2", size="tiny", step="train",
                           abstract=True)
  graph = capture(fn, *args)
  topology = preset("1cpu+4gpu")
  rng = np.random.default_rng(0)
  placements = rng.integers(0, topology.n_devices, (5, graph.n_nodes))
  placements[0] = 0
  fast = simulate(graph, placements, topology, return_schedule=True)
  monkeypatch.setenv("GPLACE_NATIVE", "0")
  assert not native.available()
  slow = simulate(graph, placements, topology, return_schedule=True)
  np.testing.assert_array_equal(fast.order, slow.order)
  _assert_same_schedule(fast, slow)


def _assert_same_schedule(a, b):
  """Equal times and OOM flags, peak memory to float32 rounding."""
  for field in ("runtime_s", "start_s", "finish_s", "oom"):
    np.testing.assert_array_equal(np.asarray(getattr(a, field)),
                                  np.asarray(getattr(b, field)))
  np.testing.assert_allclose(np.asarray(a.peak_bytes),
                             np.asarray(b.peak_bytes), rtol=1e-6)


@settings(SETTINGS, max_examples=10)
@given(n_nodes=st.integers(2, 60), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10_000))
def test_one_placement_in_its_order_runs_as_the_scan_runs_it(
    n_nodes, n_devices, seed):
  # One placement in a given order goes to the host scheduler, a batch
  # to the scan over a problem built for the order: the same schedule.
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed, n_inputs=int(rng.integers(1, 4)))
  topology = random_topology(rng, n_devices)
  placement = rng.integers(0, n_devices, n_nodes)
  order = priority_order(rng.normal(size=n_nodes).astype(np.float32),
                         graph)
  one = simulate(graph, placement, topology, order=order,
                 return_schedule=True)
  scan = simulate(graph, np.stack([placement, placement]), topology,
                  order=order, return_schedule=True)
  np.testing.assert_array_equal(one.order, order)
  _assert_same_schedule(one, jax.tree_util.tree_map(lambda x: x[0], scan))


def test_many_placements_split_over_threads_equal_one_by_one():
  graph = random_dag(200, seed=3)
  topology = preset("1cpu+2gpu")
  placements = np.random.default_rng(3).integers(0, 3, (7, 200))
  batch = simulate(graph, placements, topology, return_schedule=True)
  for k in range(7):
    one = simulate(graph, placements[k], topology, return_schedule=True)
    np.testing.assert_array_equal(batch.order[k], one.order)
    assert float(batch.runtime_s[k]) == float(one.runtime_s)


def test_the_default_priority_is_the_critical_path():
  graph = random_dag(50, seed=8)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(8).integers(0, 5, (2, 50))
  default = simulate(graph, placements, topology, return_schedule=True)
  explicit = simulate(graph, placements, topology, schedule="dynamic",
                      priority=bottom_level(graph, topology).astype(
                          np.float32), return_schedule=True)
  np.testing.assert_array_equal(default.order, explicit.order)


@pytest.mark.parametrize("n_ranks", [1000, 64 ** 3 + 5000])
def test_the_rank_sets_give_ranks_back_in_order(n_ranks):
  # Three levels of bit words up to 64**3 ranks, four above.
  from gplace.sim import native_kernels  # pylint: disable=g-import-not-at-top
  w0, w1, w2, words = native_kernels.set_words(n_ranks)
  o1, o2 = w0, w0 + w1
  o3 = o2 + w2 if w2 > 1 else -1
  assert (o3 >= 0) == (n_ranks > 64 ** 3)
  bits = np.zeros((2, words), np.uint64)
  add = lambda r: native_kernels._add(bits, 1, np.int64(r), o1, o2, o3)
  take = lambda: int(native_kernels._take_least(bits, 1, o1, o2, o3))
  rng = np.random.default_rng(0)
  ranks = np.concatenate([[0, n_ranks - 1], rng.choice(
      np.arange(1, n_ranks - 1), size=598, replace=False)])
  rng.shuffle(ranks)
  for r in ranks:
    add(r)
  first = [take() for _ in range(300)]
  assert first == sorted(ranks)[:300]
  for r in first[::3]:                  # some come back while others wait
    add(r)
  rest = [take() for _ in range(300 + len(first[::3]))]
  assert rest == sorted(sorted(ranks)[300:] + first[::3])
  assert not bits[1].any() and not bits[0].any()    # all empty again
