"""Tests of gplace.execution.partition: dispatch orders are topological and
follow the schedule per device, clusters are maximal same-device segments of
the order, values that cross devices are wired in and out, op signatures name
what an op computes, and schedules are validated."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import _testing
from gplace.errors import ScheduleError, TopologyError
from gplace.execution import effects
from gplace.execution import partition
from gplace.graphs.capture import trace_program
from gplace.graphs.graph import NODE_INPUT, NODE_OP, NODE_OUTPUT, random_dag
from gplace.sim.simulator import SimResult
from gplace.sim.presets import local


def _is_topological_over_ops(graph, order):
  ops = np.flatnonzero(graph.kind == NODE_OP)
  assert sorted(order) == list(ops)
  position = {node: i for i, node in enumerate(order)}
  for src, dst in zip(graph.edge_src, graph.edge_dst):
    if src in position and dst in position:
      assert position[src] < position[dst], (src, dst)
  return True


def _switches(placement, order):
  return int(np.sum(placement[order][1:] != placement[order][:-1]))


def _random_topological_order(graph, seed):
  """Kahn's algorithm picking a random ready node each time."""
  rng = np.random.default_rng(seed)
  indegree = np.zeros(graph.n_nodes, np.int64)
  np.add.at(indegree, graph.edge_dst, 1)
  ready = list(np.flatnonzero(indegree == 0))
  ptr, _ = graph.succ_csr
  order = []
  while ready:
    node = ready.pop(int(rng.integers(len(ready))))
    order.append(int(node))
    for succ in graph.edge_dst[ptr[node]:ptr[node + 1]]:
      indegree[succ] -= 1
      if indegree[succ] == 0:
        ready.append(succ)
  return np.asarray(order)


@pytest.fixture(scope="module")
def program():
  fn = _testing.control_flow_program
  return trace_program(fn, *_testing.control_flow_args())


@pytest.mark.parametrize("seed", range(4))
def test_device_greedy_order_is_topological(seed):
  graph = random_dag(80, avg_degree=2.5, seed=seed)
  placement = np.random.default_rng(seed).integers(0, 3, graph.n_nodes)
  order = partition.device_greedy_order(graph, placement)
  assert _is_topological_over_ops(graph, order)
  # Never leaves a device that still has a ready op: a switch happens only
  # when no op of the current device is ready, so the count is at most the
  # one of node id order.
  ids = [n for n in range(graph.n_nodes) if graph.kind[n] == NODE_OP]
  assert _switches(placement, order) <= _switches(placement, ids)


@pytest.mark.parametrize("seed", range(4))
def test_schedule_order_follows_the_schedule_per_device(seed):
  graph = random_dag(80, avg_degree=2.5, seed=seed)
  placement = np.random.default_rng(seed).integers(0, 3, graph.n_nodes)
  schedule = _random_topological_order(graph, seed)
  order = partition.schedule_order(graph, placement, schedule)
  assert _is_topological_over_ops(graph, order)
  ops = [int(n) for n in schedule if graph.kind[n] == NODE_OP]
  for device in range(3):
    assert ([n for n in order if placement[n] == device]
            == [n for n in ops if placement[n] == device])
  # Merging the devices' sequences never cuts more often than the schedule.
  assert _switches(placement, order) <= _switches(placement, ops)


def test_schedule_order_rejects_a_non_topological_schedule():
  graph = random_dag(20, seed=1)
  placement = np.zeros(graph.n_nodes, int)
  with pytest.raises(ScheduleError, match="topological"):
    partition.schedule_order(graph, placement, np.arange(graph.n_nodes)[::-1])


@pytest.mark.parametrize("use_schedule", [False, True])
def test_clusters_are_maximal_same_device_segments(program, use_schedule):
  graph = program.graph
  placement = np.random.default_rng(0).integers(0, 3, graph.n_nodes)
  order = (partition.schedule_order(graph, placement,
                                    _random_topological_order(graph, 5))
           if use_schedule else None)
  clusters = partition.partition(program, placement, order=order)
  dispatched = [n for c in clusters for n in c.nodes]
  if order is not None:
    assert dispatched == list(order)  # segments of the order, in order
  assert _is_topological_over_ops(graph, dispatched)
  for c in clusters:
    assert {int(placement[n]) for n in c.nodes} == {c.device_index}
  for a, b in zip(clusters, clusters[1:]):
    assert a.device_index != b.device_index  # maximal runs
  cluster_of = {n: i for i, c in enumerate(clusters) for n in c.nodes}
  for src, dst in zip(graph.edge_src, graph.edge_dst):
    if src in cluster_of and dst in cluster_of:
      assert cluster_of[src] <= cluster_of[dst]  # the cluster graph is acyclic
  op_clusters = partition.partition(program, placement, mode="op",
                                    order=order)
  assert [c.nodes for c in op_clusters] == [(n,) for n in dispatched]


def test_values_crossing_devices_are_wired_in_and_out(program):
  graph = program.graph
  placement = np.random.default_rng(2).integers(0, 2, graph.n_nodes)
  clusters = partition.partition(program, placement)
  owner = partition.value_owner(program)
  cluster_of = {n: i for i, c in enumerate(clusters) for n in c.nodes}
  for c in clusters:
    inside = set(c.nodes)
    for var in c.in_vars:
      assert owner[var] not in inside  # read from elsewhere
    reads = {ref.var for n in c.nodes for ref in program.nodes[n].inputs
             if ref.var >= 0 and owner[ref.var] not in inside}
    assert set(c.in_vars) == reads
    for var in c.out_vars:
      assert owner[var] in inside
  # Every value read by another cluster or an output node is exported.
  exported = {var for c in clusters for var in c.out_vars}
  for node, record in enumerate(program.nodes):
    for ref in record.inputs:
      if ref.var < 0 or program.nodes[owner[ref.var]].kind == NODE_INPUT:
        continue
      if (record.kind == NODE_OUTPUT
          or cluster_of[owner[ref.var]] != cluster_of[node]):
        assert ref.var in exported
  crossing = [var for c in clusters for var in c.in_vars
              if placement[owner[var]] != c.device_index]
  assert crossing  # some value does cross devices in this placement


def test_op_signature_names_what_an_op_computes():
  def fn(x, y):
    a = jnp.tanh(x)
    b = jnp.tanh(a)
    c = jnp.tanh(y)              # another shape
    d = jnp.sum(b, axis=0)
    e = jnp.sum(b, axis=1)       # another parameter
    return d, e, c

  program = trace_program(fn, jnp.ones((3, 4)), jnp.ones(5))
  ops = [r for r in program.nodes if r.kind == NODE_OP]
  signature = [partition.op_signature(r) for r in ops]
  names = [r.eqn.primitive.name for r in ops]
  tanh = [s for s, n in zip(signature, names) if n == "tanh"]
  assert tanh[0] == tanh[1] != tanh[2]
  sums = [s for s, n in zip(signature, names) if n == "reduce_sum"]
  assert len(sums) == 2 and sums[0] != sums[1]


def test_check_schedule_accepts_orders_and_sim_results():
  graph = random_dag(12, seed=3)
  n = graph.n_nodes
  assert partition.check_schedule(None, graph) is None
  assert partition.check_schedule("device_greedy", graph) == "device_greedy"
  np.testing.assert_array_equal(partition.check_schedule(range(n), graph),
                                np.arange(n))
  # Without an order field, nodes by start time, ties by node id.
  start = np.zeros(n, np.float32)
  start[graph.kind == NODE_OP] = 1.0
  start[-1] = 2.0
  zeros = np.zeros(1, np.float32)
  result = SimResult(zeros[0], zeros, zeros[0] > 1, start_s=start,
                     finish_s=start)
  np.testing.assert_array_equal(partition.check_schedule(result, graph),
                                np.lexsort((np.arange(n), start)))
  with_order = result._replace(order=np.arange(n)[None])
  np.testing.assert_array_equal(partition.check_schedule(with_order, graph),
                                np.arange(n))
  with pytest.raises(ScheduleError, match="return_schedule=True"):
    partition.check_schedule(result._replace(start_s=None), graph)
  with pytest.raises(ScheduleError, match="float64"):
    partition.check_schedule(np.arange(n, dtype=float), graph)


def test_default_schedules_come_from_the_simulator():
  graph = random_dag(30, seed=4)
  devices = jax.devices()[:2]
  placements = np.random.default_rng(0).integers(0, 2, (3, graph.n_nodes))
  orders = partition.default_schedules(graph, placements, devices)
  assert orders.shape == (3, graph.n_nodes)
  for order, placement in zip(orders, placements):
    partition.check_schedule(order, graph)
    result = gplace.simulate(graph, placement, local(devices),
                             return_schedule=True)
    np.testing.assert_array_equal(order, partition.schedule_orders(result)[0])
  with pytest.raises(TopologyError, match="topology device i"):
    partition.default_schedules(graph, placements, devices,
                                local(jax.devices()[:3]))


@pytest.mark.parametrize("seed", range(3))
def test_orders_respect_extra_ordering_edges(seed):
  # Extra (before, after) edges, as effect_edges chains effectful ops: a
  # schedule that respects them comes back unchanged; one that does not is
  # repaired into a topological order of both, and the dispatch orders
  # respect them.
  graph = random_dag(40, seed=seed)
  rng = np.random.default_rng(seed)
  placement = rng.integers(0, 3, graph.n_nodes).astype(np.int32)
  ops = np.flatnonzero(graph.kind == NODE_OP)
  chain = np.sort(rng.choice(ops, 5, replace=False))
  after = np.stack([chain[:-1], chain[1:]], 1)
  schedule = _random_topological_order(graph, seed)
  fixed = effects.respect_order(schedule, graph, after)
  assert sorted(fixed) == list(range(graph.n_nodes))
  position = np.empty(graph.n_nodes, np.int64)
  position[fixed] = np.arange(graph.n_nodes)
  assert np.all(position[graph.edge_src] < position[graph.edge_dst])
  assert np.all(position[after[:, 0]] < position[after[:, 1]])
  np.testing.assert_array_equal(effects.respect_order(fixed, graph, after),
                                fixed)
  for order in (partition.schedule_order(graph, placement, fixed, after),
                partition.device_greedy_order(graph, placement, after)):
    assert _is_topological_over_ops(graph, order)
    where = {node: i for i, node in enumerate(order)}
    assert all(where[a] < where[b] for a, b in after)
