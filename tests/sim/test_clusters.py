"""Tests of gplace.sim.clusters: the cluster and copy counts are the
executor's, and gplace.simulate charges each cluster its device's launch
cost and each copy its destination's issue cost."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace

from gplace.errors import TopologyError
from gplace.execution import partition
from gplace.graphs.graph import random_dag
from gplace.sim import clusters
from gplace.sim import presets
from gplace.sim import topology_json
from gplace.sim.simulator import simulate


def _with_launch(topology, seconds):
  return topology.replace(devices=tuple(
      dataclasses.replace(dev, cluster_launch_s=s)
      for dev, s in zip(topology.devices, seconds)))


def _executor_runs(graph, placement, order, n_devices):
  """Clusters per device of the executor's own partition of ``order``."""
  sequence = partition.schedule_order(graph, placement, order)
  devices = placement[sequence]
  out = np.zeros(n_devices, np.int64)
  if len(sequence):
    starts = np.r_[True, devices[1:] != devices[:-1]]
    np.add.at(out, devices[starts], 1)
  return out


@pytest.mark.parametrize("seed", range(6))
def test_count_equals_the_executors_partition(seed):
  rng = np.random.default_rng(seed)
  graph = random_dag(int(rng.integers(20, 150)), avg_degree=2.5,
                     n_inputs=int(rng.integers(0, 4)), seed=seed)
  topology = presets.preset("1cpu+2gpu")
  placements = rng.integers(0, 3, (5, graph.n_nodes))
  placements[0] = 0                                   # one cluster
  orders = np.asarray(simulate(graph, placements, topology,
                               schedule="dynamic",
                               return_schedule=True).order)
  orders[1] = np.arange(graph.n_nodes)                # node-id order
  counts = clusters.count_clusters(graph, placements, orders, 3)
  for placement, order, count in zip(placements, orders, counts):
    np.testing.assert_array_equal(
        count, _executor_runs(graph, placement, order, 3))
  assert counts[0].tolist() == [1, 0, 0]


def test_a_bad_order_is_refused():
  graph = random_dag(30, avg_degree=2.0, seed=0)
  order = np.arange(graph.n_nodes)[::-1]
  with pytest.raises(ValueError, match="topological"):
    clusters.count_clusters(graph, np.zeros((1, 30), int), order[None], 2)


def _with_and_without(topology, charged, schedule, seed):
  """``(graph, placements, base, result)``: six random placements of a
  random graph simulated in ``schedule`` on ``topology`` and on
  ``charged`` (the same with host costs), schedules returned."""
  graph = random_dag(80, avg_degree=2.5, n_inputs=3, seed=seed)
  placements = np.random.default_rng(seed).integers(0, 3,
                                                    (6, graph.n_nodes))
  base, result = (simulate(graph, placements, t, schedule=schedule,
                           return_schedule=True)
                  for t in (topology, charged))
  return graph, placements, base, result


@pytest.mark.parametrize("schedule", ["static", "dynamic", "planned"])
def test_simulate_adds_one_launch_per_cluster(schedule):
  topology = presets.preset("1cpu+2gpu")
  launch = np.array([2e-5, 7e-5, 7e-5])
  charged = _with_launch(topology, launch)
  graph, placements, base, result = _with_and_without(topology, charged,
                                                      schedule, seed=1)
  np.testing.assert_array_equal(result.order, base.order)
  np.testing.assert_array_equal(result.finish_s, base.finish_s)
  counts = clusters.count_clusters(graph, placements, base.order, 3)
  assert np.all(counts.sum(1) > 1)
  np.testing.assert_allclose(result.runtime_s,
                             np.asarray(base.runtime_s) + counts @ launch,
                             rtol=1e-6)
  # The same through an explicit order, one placement at a time.
  for k in range(2):
    alone = simulate(graph, placements[k], charged, order=base.order[k])
    assert alone.runtime_s == pytest.approx(float(result.runtime_s[k]),
                                            rel=1e-6)


def test_the_best_schedule_counts_launches_before_it_picks():
  graph = random_dag(80, avg_degree=2.5, n_inputs=3, seed=2)
  charged = _with_launch(presets.preset("1cpu+2gpu"), [1e-4] * 3)
  placements = np.random.default_rng(1).integers(0, 3, (8, graph.n_nodes))
  best = simulate(graph, placements, charged)
  dynamic = simulate(graph, placements, charged, schedule="dynamic")
  planned = simulate(graph, placements, charged, schedule="planned")
  np.testing.assert_allclose(
      best.runtime_s, np.minimum(dynamic.runtime_s, planned.runtime_s))


def test_no_launch_cost_changes_nothing():
  graph = random_dag(60, avg_degree=2.5, seed=3)
  topology = presets.preset("1cpu+4gpu")
  placements = np.random.default_rng(2).integers(0, 5, (4, graph.n_nodes))
  zero = _with_launch(topology, [0.0] * 5)
  np.testing.assert_array_equal(simulate(graph, placements, zero).runtime_s,
                                simulate(graph, placements,
                                         topology).runtime_s)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf"), "1"])
def test_bad_launch_costs_are_refused(bad):
  with pytest.raises(TopologyError, match="cluster_launch_s"):
    _with_launch(presets.preset("1cpu+2gpu"), [0.0, bad, 0.0])


def test_launch_costs_survive_the_json_format():
  topology = _with_launch(presets.preset("1cpu+2gpu"),
                          [1e-5, 3e-4, 3e-4])
  back = topology_json.topology_from_dict(
      topology_json.topology_to_dict(topology), "topology")
  assert back.devices == topology.devices
  np.testing.assert_array_equal(clusters.launch_costs(back),
                                [1e-5, 3e-4, 3e-4])



def _with_copy(topology, seconds):
  return topology.replace(devices=tuple(
      dataclasses.replace(dev, copy_issue_s=s)
      for dev, s in zip(topology.devices, seconds)))


@pytest.mark.parametrize("seed", range(4))
def test_copies_are_the_simulators_transfers(seed):
  rng = np.random.default_rng(seed)
  graph = random_dag(int(rng.integers(20, 150)), avg_degree=2.5,
                     n_inputs=int(rng.integers(0, 4)), seed=seed)
  placements = rng.integers(0, 3, (5, graph.n_nodes))
  placements[0] = 1
  counts = clusters.count_copies(graph, placements, 3)
  for placement, count in zip(placements, counts):
    expected = np.zeros(3, np.int64)
    for node in range(graph.n_nodes):
      readers = {int(placement[v]) for v in graph.successors(node)}
      for device in readers - {int(placement[node])}:
        expected[device] += 1
    np.testing.assert_array_equal(count, expected)
  assert counts[0].tolist() == [0, 0, 0]


def _chain(params, x):
  for w in params:
    x = jnp.tanh(x @ w)
  return x


def test_copies_are_what_the_executor_copies():
  params = [jnp.full((8, 8), 0.1) for _ in range(4)]
  x = jnp.ones((2, 8))
  graph = gplace.capture(_chain, params, x)
  devices = jax.devices()[:2]
  rng = np.random.default_rng(0)
  for _ in range(4):
    placement = rng.integers(0, 2, graph.n_nodes)
    placed = gplace.place(_chain, graph, placement, devices)
    placed(params, x)
    assert clusters.count_copies(graph, placement, 2).sum() == \
        placed.n_transfers


@pytest.mark.parametrize("schedule", ["static", "best"])
def test_simulate_adds_one_issue_per_copy(schedule):
  topology = _with_launch(presets.preset("1cpu+2gpu"), [1e-5] * 3)
  issue = np.array([3e-5, 1e-5, 1e-5])
  charged = _with_copy(topology, issue)
  graph, placements, base, result = _with_and_without(topology, charged,
                                                      schedule, seed=4)
  copies = clusters.count_copies(graph, placements, 3)
  assert np.all(copies.sum(1) > 0)
  if schedule == "static":        # the copies add to the same schedule
    np.testing.assert_array_equal(result.order, base.order)
  np.testing.assert_allclose(
      result.runtime_s, np.asarray(simulate(
          graph, placements, topology, order=result.order).runtime_s)
      + copies @ issue, rtol=1e-6)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf")])
def test_bad_copy_costs_are_refused(bad):
  with pytest.raises(TopologyError, match="copy_issue_s"):
    _with_copy(presets.preset("1cpu+2gpu"), [0.0, bad, 0.0])


def test_copy_costs_survive_the_json_format():
  topology = _with_copy(presets.preset("1cpu+2gpu"), [2e-5, 0.0, 1e-5])
  back = topology_json.topology_from_dict(
      topology_json.topology_to_dict(topology), "topology")
  assert back.devices == topology.devices
  np.testing.assert_array_equal(clusters.copy_costs(back), [2e-5, 0.0, 1e-5])
