"""Group-level actions: coarse graphs for the policy, node placements for the
simulator, and the maps between them."""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest

from gplace.errors import CoarseningError
from gplace.graphs.graph import random_dag
from gplace.rl import data, grouping
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset


class _Setup(NamedTuple):
  graph: object
  failing_runtime_s: float
  coarsening: object = None


def test_small_graphs_are_placed_op_by_op():
  graph = random_dag(50, seed=0)
  assert grouping.coarsen_for_policy(graph, max_groups=16, rule="size",
                                     min_nodes=50) is None
  assert grouping.coarsen_for_policy(graph, max_groups=0, rule="size",
                                     min_nodes=0) is None
  groups = grouping.coarsen_for_policy(graph, max_groups=16, rule="size",
                                       min_nodes=10)
  assert groups.n_groups <= 16
  with pytest.raises(CoarseningError, match="Unknown grouping rule"):
    grouping.coarsen_for_policy(graph, max_groups=16, rule="metis",
                                min_nodes=0)


def test_batch_of_groups_expands_to_the_simulated_nodes():
  topology = preset("1cpu+2gpu")
  big, small = random_dag(60, seed=1), random_dag(20, seed=2)
  groups = grouping.coarsen_for_policy(big, max_groups=12, rule="size",
                                       min_nodes=0)
  batch = data.make_batch([_Setup(big, 1.0, groups), _Setup(small, 1.0)],
                          topology)
  n_sim = grouping.num_simulated_nodes(batch)
  g_pad = batch.graphs.nodes["mask"].shape[1]
  assert batch.group_of.shape == (2, n_sim) and n_sim >= 60
  assert np.all(batch.group_of[:, 60:] == g_pad)  # padding: past the end
  # The policy sees the groups of the big graph and every op of the small.
  g = groups.n_groups
  assert g <= 12
  assert batch.graphs.nodes["mask"].sum(1).tolist() == [g, 20]
  np.testing.assert_array_equal(batch.group_of[0, :60], groups.group_of)
  np.testing.assert_array_equal(batch.group_of[1, :20], np.arange(20))
  rng = np.random.default_rng(0)
  group_placements = rng.integers(0, 3, size=(2, 5, g_pad))
  nodes = np.asarray(grouping.expand_to_nodes(group_placements,
                                              batch.group_of))
  assert nodes.shape == (2, 5, n_sim)
  np.testing.assert_array_equal(nodes[0, :, :60],
                                groups.expand(group_placements[0, :, :g]))
  np.testing.assert_array_equal(nodes[1, :, :20],
                                group_placements[1, :, :20])
  # The simulator scores the expanded placement of the original graph.
  runtime = simulate(big, nodes[0, 0, :60], topology).runtime_s
  assert np.isfinite(runtime)
  # Back to groups: every group takes its nodes' (majority) device.
  again = np.asarray(grouping.group_placement(nodes[:, 0], batch.group_of,
                                              g_pad, 3))
  np.testing.assert_array_equal(again[0, :g], group_placements[0, 0, :g])
  np.testing.assert_array_equal(again[1, :20], group_placements[1, 0, :20])


def test_warm_start_targets_take_each_group_s_majority_device():
  group_of = np.array([[0, 0, 0, 1, 1, 2, 4]])  # last node: padding
  placements = np.array([[2, 2, 1, 0, 1, 1, 1]])
  majority = grouping.group_placement(placements, group_of, 4, 3)
  np.testing.assert_array_equal(majority, [[2, 0, 1, 0]])  # tie: lowest


def test_without_groups_nothing_changes():
  placements = np.arange(6).reshape(1, 2, 3)
  assert grouping.expand_to_nodes(placements, None) is placements
  assert grouping.group_placement(placements, None, 3, 3) is placements


def test_level_priority_ranks_by_level_then_critical_path():
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  path = jnp.array([[5.0, 3.0, 9.0, 1.0]])
  # All level 0: the critical path itself (the default schedule).
  np.testing.assert_array_equal(
      grouping.level_priority(jnp.zeros((1, 4), jnp.int32), None, path),
      path)
  # Node 3 raised: above every other node whatever their paths; the rest
  # keep their order.
  ranked = np.asarray(grouping.level_priority(jnp.array([[0, 0, 0, 1]]),
                                              None, path))[0]
  assert list(np.argsort(-ranked)) == [3, 2, 0, 1]
  # Per group, with a sample axis: group 1 (nodes 1 and 2) raised.
  group_of = jnp.array([[0, 1, 1, 0]])
  ranked = np.asarray(grouping.level_priority(jnp.array([[[0, 1]]]),
                                              group_of, path))[0, 0]
  assert list(np.argsort(-ranked)) == [2, 1, 0, 3]


def test_host_expansion_equals_the_jitted_one():
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 4, (2, 3, 8)).astype(np.int32)  # [B, K, G]
  group_of = rng.integers(0, 9, (2, 20)).astype(np.int32)  # 8: padding
  np.testing.assert_array_equal(
      grouping.expand_on_host(placements, group_of),
      np.asarray(grouping.expand_to_nodes(jnp.asarray(placements),
                                          jnp.asarray(group_of))))
  np.testing.assert_array_equal(grouping.expand_on_host(placements, None),
                                placements)
