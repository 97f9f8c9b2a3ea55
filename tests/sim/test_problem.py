"""Tests of gplace.sim.problem: padded problems stack and vmap, padding
nodes do not matter, budgets and priority orders are validated."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace.errors import PlacementError, ScheduleError, TopologyError
from gplace.graphs.graph import random_dag
from gplace.sim.priority import priority_order
from gplace.sim.problem import check_order, check_orders, make_problem
from gplace.sim.scan import simulate_problem
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, uniform_links


def test_padding_and_stacking_vmap():
  topology = preset("1cpu+4gpu")
  graphs = [random_dag(30, seed=1), random_dag(45, seed=2)]
  budget = dict(n_nodes=64, n_steps=96, n_slots=64)
  problems = [make_problem(g, topology, **budget) for g in graphs]
  shapes = [jax.tree_util.tree_map(np.shape, p) for p in problems]
  assert shapes[0] == shapes[1]
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *problems)
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 5, (2, 3, 64))
  batched = jax.jit(jax.vmap(simulate_problem))(stacked,
                                                jnp.asarray(placements))
  for i, graph in enumerate(graphs):
    alone = simulate(graph, placements[i, :, :graph.n_nodes], topology,
                     schedule="static")
    np.testing.assert_allclose(np.asarray(batched.runtime_s[i]),
                               np.asarray(alone.runtime_s), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(batched.peak_bytes[i]),
                               np.asarray(alone.peak_bytes), rtol=1e-6)


def test_padding_placement_does_not_matter():
  topology = preset("1cpu+4gpu")
  graph = random_dag(20, seed=5)
  problem = make_problem(graph, topology, n_nodes=32)
  rng = np.random.default_rng(1)
  placements = rng.integers(0, 5, (2, 32))
  other = placements.copy()
  other[:, 20:] = rng.integers(0, 5, (2, 12))
  a = simulate_problem(problem, jnp.asarray(placements))
  b = simulate_problem(problem, jnp.asarray(other))
  np.testing.assert_array_equal(np.asarray(a.runtime_s),
                                np.asarray(b.runtime_s))
  np.testing.assert_array_equal(np.asarray(a.peak_bytes),
                                np.asarray(b.peak_bytes))


def test_budgets_too_small_say_what_to_pass():
  topology = preset("1cpu+2gpu")
  with pytest.raises(PlacementError, match="n_steps"):
    make_problem(random_dag(40, seed=1), topology, n_nodes=40, width=1)
  with pytest.raises(PlacementError, match="larger node budget"):
    make_problem(random_dag(10, seed=0), topology, n_nodes=8)
  with pytest.raises(PlacementError, match="width"):
    make_problem(random_dag(10, seed=0), topology, width=0)


def test_more_than_32_devices_is_a_topology_error():
  devices = tuple(Device(f"gpu:{i}", "gpu", 1e12, 1e11, 1e9)
                  for i in range(33))
  bandwidth, latency = uniform_links(33, 1e10, 1e-5)
  topology = Topology(devices=devices, link_bandwidth=bandwidth,
                      link_latency=latency, compute_group=np.arange(33))
  with pytest.raises(TopologyError, match="at most 32"):
    make_problem(random_dag(5, seed=0), topology)


def test_check_order_accepts_topological_orders():
  graph = random_dag(12, seed=4)
  np.testing.assert_array_equal(check_order(np.arange(12), 12, graph),
                                np.arange(12))
  assert check_order(np.arange(12, dtype=np.int32), 12, graph).dtype == np.int64


@pytest.mark.parametrize("order,match", [
    (np.arange(12)[::-1], "topological"),
    (np.zeros(12, int), "permutation"),
    (np.arange(11), "permutation of the 12"),
    (np.arange(12) + 0.0, "integer"),
    (np.arange(1, 13), "outside"),
])
def test_bad_orders_are_schedule_errors(order, match):
  graph = random_dag(12, seed=4)
  assert graph.n_edges > 0
  with pytest.raises(ScheduleError, match=match):
    check_order(order, 12, graph)
  with pytest.raises(ScheduleError, match=match):
    make_problem(graph, preset("1cpu+2gpu"), order=order)


@pytest.mark.parametrize("bad,match", [
    (np.arange(12)[::-1], "topological"),
    (np.zeros(12, int), "permutation"),
    (np.r_[np.arange(11), 11 + 12], "outside"),
    (np.r_[-1, np.arange(1, 12)], "outside"),
])
def test_check_orders_is_check_order_on_every_row(bad, match):
  graph = random_dag(12, seed=4)
  rng = np.random.default_rng(0)
  good = np.stack([np.arange(12)] + [
      priority_order(rng.standard_normal(12), graph) for _ in range(4)])
  np.testing.assert_array_equal(check_orders(good.astype(np.int32), 12, graph),
                                [check_order(row, 12, graph) for row in good])
  rows = np.concatenate([good[:2], bad[None], good[2:]])
  with pytest.raises(ScheduleError, match=f"order row 2: .*{match}"):
    check_orders(rows, 12, graph)
  with pytest.raises(ScheduleError, match="integer"):
    check_orders(good + 0.0, 12, graph)
