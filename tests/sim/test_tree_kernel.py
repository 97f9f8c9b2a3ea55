"""Tests of gplace.sim.tree_kernel: the list scheduler with candidates in
rank trees (the CPU one-kernel path once a placement has more candidates
than the first buffer holds) gives exactly the buffer loop's schedules, and
the reference's."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace import workloads
from gplace.graphs.capture import capture
from gplace.graphs.graph import NODE_INPUT, NODE_OP, random_dag
from gplace.sim import kernel
from gplace.sim.dispatch import (PAD_PRIORITY, dispatch_problem,
                                 make_dispatch_problem)
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from gplace.sim.tree_kernel import ranks, tree_size
from sim_cases import SETTINGS, assert_close_to_reference, random_topology


@pytest.fixture(autouse=True)
def _jitted_scheduler(monkeypatch):
  """gplace.simulate through the jitted list scheduler (the compiled host
  one, gplace.sim.native, has its own tests against it)."""
  monkeypatch.setenv("GPLACE_NATIVE", "0")


# One padded budget and one topology size per rule: hypothesis examples
# reuse two compiled programs of each path.
N_PAD, E_PAD, N_DEVICES, K = 64, 256, 3, 3


@functools.partial(jax.jit, static_argnames=("dynamic", "width"))
def _dispatch(problem, placements, priority, *, dynamic, width):
  return dispatch_problem(problem, placements, priority, dynamic=dynamic,
                          width=width)


def _both_paths(problem, placements, priority, dynamic):
  """The one-kernel path with a 1-slot first buffer (so every placement
  with two candidates at once goes to the trees), and the plain loop with
  its buffer ladder."""
  with kernel.one_kernel_loops():
    trees = _dispatch(problem, placements, priority, dynamic=dynamic,
                      width=1)
  plain = _dispatch(problem, placements, priority, dynamic=dynamic, width=1)
  return trees, plain


@settings(SETTINGS, max_examples=12)
@given(n_nodes=st.integers(2, N_PAD), seed=st.integers(0, 10_000),
       dynamic=st.booleans(), tied=st.booleans(),
       inputs_mid_order=st.booleans())
def test_trees_match_the_buffer_loop_and_the_reference(
    n_nodes, seed, dynamic, tied, inputs_mid_order):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  if inputs_mid_order:       # inputs among the ops: they run nowhere
    kind = graph.kind.copy()
    ops = np.flatnonzero(kind == NODE_OP)
    kind[rng.choice(ops, size=len(ops) // 4, replace=False)] = NODE_INPUT
    keep = kind[graph.edge_dst] != NODE_INPUT   # an input has no producer
    graph = graph.replace(kind=kind, edge_src=graph.edge_src[keep],
                          edge_dst=graph.edge_dst[keep],
                          edge_bytes=graph.edge_bytes[keep])
  topology = random_topology(rng, N_DEVICES)
  problem = make_dispatch_problem(graph, topology, n_nodes=N_PAD,
                                  n_edges=E_PAD)
  placements = np.zeros((K, N_PAD), np.int32)
  placements[:, :n_nodes] = rng.integers(0, N_DEVICES, (K, n_nodes))
  priority = np.full((K, N_PAD), PAD_PRIORITY, np.float32)
  # Integer priorities tie often: ties go to the lower node id.
  priority[:, :n_nodes] = (rng.integers(0, 4, (K, n_nodes)) if tied
                           else rng.normal(size=(K, n_nodes)))
  trees, plain = _both_paths(problem, jnp.asarray(placements),
                             jnp.asarray(priority), dynamic)
  for a, b in zip(trees, plain):
    if a is not None:
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  schedule = "dynamic" if dynamic else "static"
  for k in range(K):
    ref = simulate_reference(graph, placements[k, :n_nodes], topology,
                             priority=priority[k, :n_nodes],
                             schedule=schedule)
    order = np.asarray(trees.order[k])
    np.testing.assert_array_equal(order[order < n_nodes], ref.order)
    result = trees._replace(start_s=trees.start_s[:, :n_nodes],
                            finish_s=trees.finish_s[:, :n_nodes])
    assert_close_to_reference(result, k, ref)


def test_ranks_order_by_priority_then_id_and_pad_with_the_sentinel():
  priority = jnp.asarray([[0.5, 2.0, 0.5, -0.0, 0.0]])
  order = ranks(priority, tree_size(5))
  # 2.0 first; the two 0.5 by id; -0.0 and 0.0 tie, by id.
  np.testing.assert_array_equal(np.asarray(order.node[0]),
                                [1, 0, 2, 3, 4, 4, 4, 4])
  np.testing.assert_array_equal(np.asarray(order.rank[0]), [1, 0, 2, 3, 4])
  assert tree_size(5) == 8 and tree_size(8) == 8 and tree_size(1) == 1


def test_a_train_step_with_hundreds_of_candidates_matches_the_plain_loop():
  # The optimizer ops of every parameter become candidates together: far
  # more than the 64-slot first buffer, so gplace.simulate's CPU path runs
  # the trees, and the plain loop the wide buffers.
  fn, args = workloads.get("transformer_xl2", size="tiny", step="train",
                           abstract=True)
  graph = capture(fn, *args)
  topology = preset("1cpu+4gpu")
  placements = np.random.default_rng(0).integers(0, 5, (2, graph.n_nodes))
  fused = simulate(graph, placements, topology, return_schedule=True)
  problem = make_dispatch_problem(graph, topology)
  from gplace.sim.priority import bottom_level
  priority = jnp.asarray(bottom_level(graph, topology), jnp.float32)
  plain = jax.jit(functools.partial(dispatch_problem, dynamic=True))(
      problem, jnp.asarray(placements), priority)
  np.testing.assert_array_equal(fused.order, np.asarray(plain.order))
  np.testing.assert_array_equal(np.asarray(fused.finish_s),
                                np.asarray(plain.finish_s))
  np.testing.assert_array_equal(np.asarray(fused.peak_bytes),
                                np.asarray(plain.peak_bytes))
