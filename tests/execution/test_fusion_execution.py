"""A fusion decision in the placed program (issue 49, item 2): each group is
one jitted cluster, an edge between groups an executable boundary, outputs
equal ``jax.jit``'s within the documented tolerance, and bad decisions raise
``FusionError``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.errors import FusionError
from gplace.graphs.fusion import fuse
from gplace.graphs.graph import NODE_OP
from gplace.sim.topology import Device, Topology, uniform_links
from gplace._testing import random_fusion


def mlp(params, x):
  h = jnp.tanh(x @ params["w1"] + params["b1"])
  h = h * jax.nn.sigmoid(h) + 0.5
  out = h @ params["w2"] + params["b2"]
  return jnp.mean(jnp.square(out - 1.0)), out


def mlp_args():
  rng = np.random.default_rng(0)
  params = {"w1": rng.normal(size=(16, 32)).astype(np.float32),
            "b1": np.zeros(32, np.float32),
            "w2": rng.normal(size=(32, 8)).astype(np.float32),
            "b2": np.ones(8, np.float32)}
  return params, rng.normal(size=(4, 16)).astype(np.float32)


@pytest.mark.parametrize("n_devices, seed", [(1, 0), (2, 1), (3, 2)])
def test_placed_program_with_fusion_matches_jit(n_devices, seed):
  args = mlp_args()
  graph = gplace.capture(mlp, *args)
  placement = np.random.default_rng(seed).integers(
      0, n_devices, graph.n_nodes).astype(np.int32)
  labels = random_fusion(graph, placement, np.random.default_rng(seed),
                         shuffle=False, skip=0.0)
  fusion = fuse(graph, labels)
  assert fusion.n_members.max() > 1        # some ops really fuse
  placed = gplace.place(mlp, graph, placement, fusion=labels)
  got = placed(*args)
  want = jax.jit(mlp)(*args)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5,
                               atol=1e-6)
  # One cluster per group that runs, holding exactly its members, back to
  # back in the schedule; every value between groups crosses clusters.
  for cluster in placed.clusters:
    groups = set(fusion.group_of[list(cluster.nodes)].tolist())
    assert len(groups) == 1
    assert sorted(cluster.nodes) == fusion.members(groups.pop()).tolist()
  ran = {fusion.group_of[c.nodes[0]] for c in placed.clusters}
  assert len(ran) == len(placed.clusters)


def test_barriers_are_real_executable_boundaries():
  # tanh(sin(x) * 2 + 1): fused whole it is one executable; with a barrier
  # after the mul, two, and the value between them is a result of the
  # first (materialized) and an argument of the second.
  def f(x):
    return jnp.tanh(jnp.sin(x) * 2.0 + 1.0)

  x = jnp.linspace(-1.0, 1.0, 64)
  graph = gplace.capture(f, x)
  assert list(graph.op_type) == ["input", "sin", "mul", "add", "tanh",
                                 "output"]
  zeros = np.zeros(graph.n_nodes, np.int32)
  whole = gplace.place(f, graph, zeros, fusion=[-1, 0, 0, 0, 0, -1])
  split = gplace.place(f, graph, zeros, fusion=[-1, 0, 0, 1, 1, -1])
  alone = gplace.place(f, graph, zeros, fusion=[-1] * 6)
  want = np.asarray(jax.jit(f)(x))
  for placed, n_clusters in ((whole, 1), (split, 2), (alone, 4)):
    np.testing.assert_allclose(np.asarray(placed(x)), want, rtol=1e-6,
                               atol=1e-7)
    assert placed.n_clusters == n_clusters
  first, second = split.clusters
  assert first.nodes == (1, 2) and second.nodes == (3, 4)
  assert first.out_vars == second.in_vars
  # Without a decision the whole chain is one same-device cluster.
  assert gplace.place(f, graph, zeros).build(x).n_clusters == 1


def test_op_mode_also_runs_one_cluster_per_group():
  def f(x):
    return jnp.tanh(jnp.sin(x) * 2.0 + 1.0)

  x = jnp.ones(8)
  graph = gplace.capture(f, x)
  placed = gplace.place(f, graph, np.zeros(graph.n_nodes, np.int32),
                        mode="op", fusion=[-1, 0, 0, 1, 1, -1])
  placed(x)
  assert [c.nodes for c in placed.clusters] == [(1, 2), (3, 4)]


def test_default_schedule_is_the_fused_simulation():
  args = mlp_args()
  graph = gplace.capture(mlp, *args)
  placement = np.zeros(graph.n_nodes, np.int32)
  labels = random_fusion(graph, placement, np.random.default_rng(0),
                         shuffle=False, skip=0.0)
  placed = gplace.place(mlp, graph, placement, fusion=labels,
                        example_args=args)
  topology = gplace.sim.presets.local(placed.devices)
  simulated = gplace.simulate(graph, placement, topology, fusion=labels,
                              return_schedule=True)
  np.testing.assert_array_equal(placed.schedule, simulated.order)


def test_fusion_with_a_calibrated_launch_cost_charges_one_per_group():
  # A topology whose executor pays 1 ms of host time per cluster: the fused
  # simulation charges one launch per group, as the executor runs them.
  graph = gplace.capture(lambda x: jnp.tanh(jnp.sin(x) * 2.0 + 1.0),
                         jnp.ones(8))
  links, latency = uniform_links(1, 1e10, 0.0)

  def one_device(cluster_launch_s):
    device = Device("cpu:0", "cpu", peak_flops=1e12, mem_bandwidth=1e11,
                    memory_bytes=1e9, cluster_launch_s=cluster_launch_s)
    return Topology(devices=(device,), link_bandwidth=links,
                    link_latency=latency, compute_group=np.zeros(1, int))

  placement = np.zeros(graph.n_nodes, np.int32)
  for labels, n_groups in (([-1, 0, 0, 1, 1, -1], 2), ([-1] * 6, 4),
                           ([-1, 0, 0, 0, 0, -1], 1)):
    launched, free = (float(gplace.simulate(
        graph, placement, one_device(launch), fusion=labels).runtime_s)
                      for launch in (1e-3, 0.0))
    assert launched == pytest.approx(free + n_groups * 1e-3, rel=1e-5)


def test_bad_fusion_for_place_raises():
  args = mlp_args()
  graph = gplace.capture(mlp, *args)
  placement = np.zeros(graph.n_nodes, np.int32)
  with pytest.raises(FusionError, match="shape"):
    gplace.place(mlp, graph, placement, fusion=[0, 1])
  ops = np.flatnonzero(graph.kind == NODE_OP)
  labels = np.full(graph.n_nodes, -1)
  labels[ops[:2]] = 0
  split = placement.copy()
  split[ops[1]] = 1
  if set(graph.successors(ops[0]).tolist()) & {int(ops[1])}:
    with pytest.raises(FusionError, match="one device"):
      gplace.place(mlp, graph, split, fusion=labels)
  labels = np.full(graph.n_nodes, -1)
  labels[0] = 0
  labels[ops[0]] = 0
  with pytest.raises(FusionError, match="input or output"):
    gplace.place(mlp, graph, placement, fusion=labels)
