"""Tests of gplace.solvers.model: integer data rounded down, interchangeable
devices, and the CP-SAT model itself (fixed placements, transfers, symmetry
breaking, memory conditions), solved directly with OR-tools."""

import numpy as np
import pytest
from ortools.sat.python import cp_model

import gplace
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.sim.priority import priority_order
from gplace.sim.problem import send_bytes
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, uniform_links
from gplace.solvers import model as model_lib
from gplace.solvers.model import (build_model, canonical_placement,
                                  interchangeable_devices, scale_problem)

RTOL = 1e-6
MiB = 2**20


def gpus(n=2, memory=12e9, flops=3e12, bandwidth=50e9):
  """``n`` identical GPUs, each its own compute group, uniform links."""
  devices = tuple(Device(f"gpu:{i}", "gpu", peak_flops=flops,
                         mem_bandwidth=240e9, memory_bytes=memory,
                         launch_overhead_s=1e-6) for i in range(n))
  bw, latency = uniform_links(n, bandwidth, 1e-6)
  return Topology(devices=devices, link_bandwidth=bw, link_latency=latency,
                  compute_group=np.arange(n), name="gpus")


def scaled_case(graph, topology, costs=None):
  costs = topology.op_costs(graph) if costs is None else costs
  reference = gplace.lower_bound(graph, topology, costs)
  return costs, scale_problem(graph, topology, costs, reference)


def solve_model(model):
  solver = cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = 10.0
  solver.parameters.num_workers = 2
  status = solver.StatusName(solver.Solve(model))
  return status, solver


def fix_placement(model, var, placement):
  for v, dev in enumerate(np.asarray(placement).tolist()):
    model.Add(var.on[v][dev] == 1)


# -- scale_problem -------------------------------------------------------------


def test_scale_problem_rounds_durations_and_transfers_down():
  graph, topology = random_dag(12, seed=0), preset("1cpu+2gpu")
  costs, scaled = scaled_case(graph, topology)
  reference = gplace.lower_bound(graph, topology)
  tick = scaled.tick_s
  assert tick == pytest.approx(
      max(reference, costs.max()) / model_lib.TICKS_PER_REFERENCE)
  executed = graph.kind != NODE_INPUT
  np.testing.assert_array_equal(scaled.executed, executed)
  assert scaled.duration.dtype == scaled.transfer.dtype == np.int64
  # Durations: whole ticks, never above the cost, at most one tick below.
  assert np.all(scaled.duration[~executed] == 0)
  cost = costs[executed]
  ticks = scaled.duration[executed]
  assert np.all(ticks * tick <= cost)
  assert np.all((ticks + 1) * tick >= cost * (1 - 1e-9))
  # Transfers: the simulator's link time of the largest out-edge, the same.
  true = (topology.link_latency[None]
          + send_bytes(graph)[:, None, None] / topology.link_bandwidth[None])
  off = ~np.eye(3, dtype=bool)
  has_consumer = np.isin(np.arange(graph.n_nodes), graph.edge_src)
  assert np.all(scaled.transfer[:, ~off] == 0)
  assert np.all(scaled.transfer[~has_consumer] == 0)
  sent = scaled.transfer[has_consumer][:, off]
  seconds = true[has_consumer][:, off]
  assert np.all(sent * tick <= seconds)
  assert np.all((sent + 1) * tick >= seconds * (1 - 1e-9))
  # Sinks: executed nodes that feed no executed node (the output among them).
  feeds = np.zeros(graph.n_nodes, bool)
  feeds[graph.edge_src[executed[graph.edge_dst]]] = True
  np.testing.assert_array_equal(scaled.sink, executed & ~feeds)
  assert scaled.sink[graph.kind == NODE_OUTPUT].all()
  # Every placement has a schedule within the horizon: all in a row.
  assert scaled.horizon > (scaled.duration.max(1).sum()
                           + scaled.transfer.max((1, 2)).sum())


def test_scale_problem_spans_the_reference_in_ticks():
  graph, topology = random_dag(8, seed=1), gpus(2)
  costs = np.full((graph.n_nodes, 2), 1e-6)
  # A reference above every cost sets the tick; exact multiples of the tick
  # may lose one tick to the downward nudge, never gain one.
  scaled = scale_problem(graph, topology, costs, 2.0**20 * 1e-7)
  assert scaled.tick_s == pytest.approx(1e-7)
  executed = graph.kind != NODE_INPUT
  assert set(scaled.duration[executed].ravel().tolist()) <= {9, 10}
  # A cost above the reference sets it instead.
  costs[0, 0] = 1.0
  assert scale_problem(graph, topology, costs, 1e-6).tick_s == pytest.approx(
      1.0 / 2**20)
  # Zero costs and reference: still a positive tick.
  zero = scale_problem(graph, topology, np.zeros_like(costs), 0.0)
  assert zero.tick_s > 0 and np.all(zero.duration == 0)


# -- interchangeable devices ---------------------------------------------------


def test_interchangeable_devices_of_the_presets():
  for name, classes in [("1cpu+2gpu", [[1, 2]]), ("1cpu+4gpu", [[1, 2, 3, 4]]),
                        ("8xh100", [list(range(8))])]:
    topology = preset(name)
    graph = random_dag(10, seed=0)
    assert interchangeable_devices(topology,
                                   topology.op_costs(graph)) == classes, name


def test_devices_that_differ_are_not_interchangeable():
  graph = random_dag(10, seed=0)
  base = preset("1cpu+4gpu")

  def classes(topology, costs=None):
    return interchangeable_devices(
        topology, topology.op_costs(graph) if costs is None else costs)

  # GPU 4 has less memory: 1..3 stay a class.
  devices = list(base.devices)
  devices[4] = Device("gpu:3", "gpu", peak_flops=devices[4].peak_flops,
                      mem_bandwidth=devices[4].mem_bandwidth,
                      memory_bytes=1e9,
                      launch_overhead_s=devices[4].launch_overhead_s)
  assert classes(base.replace(devices=tuple(devices))) == [[1, 2, 3]]
  # GPUs 1 and 2 share a compute group: neither is alone, 3 and 4 are.
  group = np.array([0, 1, 1, 2, 3])
  assert classes(base.replace(compute_group=group)) == [[3, 4]]
  # A slower link from GPU 1 to GPU 2 breaks every swap that moves it ...
  bandwidth = np.array(base.link_bandwidth)
  bandwidth[1, 2] = 1e9
  assert classes(base.replace(link_bandwidth=bandwidth)) == [[3, 4]]
  # ... and a measured cost table that tells GPU 2 apart splits it off.
  costs = base.op_costs(graph)
  costs[:, 2] *= 2
  assert classes(base, costs) == [[1, 3, 4]]
  # Latency counts like bandwidth.
  latency = np.array(base.link_latency)
  latency[0, 3] = 1e-3
  assert classes(base.replace(link_latency=latency)) == [[1, 2, 4]]


def test_canonical_placement_relabels_by_first_use():
  topology = preset("1cpu+4gpu")
  graph = random_dag(12, seed=4)
  classes = interchangeable_devices(topology, topology.op_costs(graph))
  placement = np.array([4, 0, 4, 2, 0, 2, 3, 3, 4, 0, 2, 4])
  canonical = canonical_placement(placement, classes)
  np.testing.assert_array_equal(
      canonical, [1, 0, 1, 2, 0, 2, 3, 3, 1, 0, 2, 1])
  # The same placement up to names: the same simulated runtime and memory.
  both = gplace.simulate(graph, np.stack([placement, canonical]), topology,
                         schedule="static")
  assert float(both.runtime_s[0]) == float(both.runtime_s[1])
  np.testing.assert_array_equal(np.sort(both.peak_bytes[0]),
                                np.sort(both.peak_bytes[1]))
  # Already canonical: unchanged; devices outside classes never move.
  np.testing.assert_array_equal(canonical_placement(canonical, classes),
                                canonical)
  np.testing.assert_array_equal(canonical_placement(placement, []), placement)


# -- the model -----------------------------------------------------------------


def test_one_device_runs_everything_in_a_row():
  graph, topology = random_dag(10, seed=2), gpus(2)
  _, scaled = scaled_case(graph, topology)
  model, var = build_model(graph, topology, scaled, memory=False)
  fix_placement(model, var, np.zeros(graph.n_nodes, np.int64))
  status, solver = solve_model(model)
  assert status == "OPTIMAL"
  assert solver.ObjectiveValue() == scaled.duration[:, 0].sum()
  # Starts respect the edges and the single processor.
  start = np.array([solver.Value(s) for s in var.start])
  end = np.array([solver.Value(e) for e in var.end])
  assert np.all(start[graph.edge_dst] >= end[graph.edge_src])
  ran = np.flatnonzero(scaled.executed)
  by_start = ran[np.argsort(start[ran], kind="stable")]
  assert np.all(start[by_start[1:]] >= end[by_start[:-1]])


def two_op_graph(nbytes=MiB):
  """``x -> a -> b (output)`` with ``nbytes`` tensors."""
  return Graph.build(
      names=["x", "a", "b"], op_type=["input", "dot_general", "output"],
      kind=[NODE_INPUT, NODE_OP, NODE_OUTPUT], out_shapes=[(1,)] * 3,
      out_dtype=["float32"] * 3, out_bytes=[nbytes] * 3,
      flops=[0.0, 1e9, 0.0], bytes_accessed=[8.0] * 3,
      edges=[(0, 1, nbytes), (1, 2, nbytes)], name="two_ops")


@pytest.mark.parametrize("links", [False, True])
def test_remote_consumer_waits_for_the_transfer(links):
  graph, topology = two_op_graph(), gpus(2, bandwidth=1e9)
  _, scaled = scaled_case(graph, topology)
  model, var = build_model(graph, topology, scaled, memory=False, links=links)
  fix_placement(model, var, [0, 0, 1])
  status, solver = solve_model(model)
  assert status == "OPTIMAL"
  want = (scaled.duration[1, 0] + scaled.transfer[1, 0, 1]
          + scaled.duration[2, 1])
  assert solver.ObjectiveValue() == want
  assert scaled.transfer[1, 0, 1] > scaled.duration[1, 0]   # it matters
  # Free placement: no transfer at all is faster.
  model, _ = build_model(graph, topology, scaled, memory=False, links=links)
  status, solver = solve_model(model)
  assert solver.ObjectiveValue() == scaled.duration[1:, 0].sum()


def dag(kinds, edges, nbytes=4 * MiB):
  """A graph of ``kinds`` (``"i"``nput, ``"o"``p) and ``(src, dst)`` edges
  of ``nbytes`` each; 4-byte outputs otherwise."""
  n = len(kinds)
  kind = [NODE_INPUT if k == "i" else NODE_OP for k in kinds]
  return Graph.build(
      names=[f"n{i}" for i in range(n)], op_type=["dot_general"] * n,
      kind=kind, out_shapes=[(1,)] * n, out_dtype=["float32"] * n,
      out_bytes=[nbytes] * n, flops=[1e9] * n, bytes_accessed=[8.0] * n,
      edges=[(u, v, nbytes) for u, v in edges], name="dag")


def fixed_optimum(graph, topology, costs, placement, links=True):
  """``(ticks, scaled)``: the model's optimum with ``placement`` fixed."""
  scaled = scale_problem(graph, topology, costs, float(costs.max()))
  model, var = build_model(graph, topology, scaled, memory=False,
                           links=links)
  fix_placement(model, var, placement)
  status, solver = solve_model(model)
  assert status == "OPTIMAL"
  return solver.ObjectiveValue(), scaled


@pytest.mark.parametrize("shared", [False, True])
def test_a_compute_group_runs_one_node_at_a_time(shared):
  # z on GPU 1 feeds a and b; a and b both wait for z's output on GPU 0
  # (or on GPU 0 and GPU 2, one compute group), then run one after the
  # other.
  graph = dag("ioooo", [(0, 1), (1, 2), (1, 3)], nbytes=4096)
  topology = gpus(3, bandwidth=1e9)
  if shared:
    topology = topology.replace(compute_group=np.array([0, 1, 0]))
  costs = np.full((5, 3), 1e-3)
  ticks, scaled = fixed_optimum(graph, topology, costs,
                                [1, 1, 0, 2 if shared else 0, 1])
  d, t = scaled.duration, scaled.transfer
  assert ticks == d[1, 1] + t[1, 1, 0] + d[2, 0] + d[3, 2 if shared else 0]
  # Separate groups overlap them.
  ticks, _ = fixed_optimum(graph, gpus(3, bandwidth=1e9), costs,
                           [1, 1, 0, 2, 1])
  assert ticks == d[1, 1] + max(t[1, 1, 0] + d[2, 0], t[1, 1, 2] + d[3, 2])


def test_a_link_carries_one_transfer_at_a_time():
  # u1, u2 on GPU 0 each send 4 MiB (~4 ms) to v1, v2 on GPU 1: the second
  # transfer waits for the first; without links they overlap.
  graph = dag("ioooo", [(0, 1), (0, 2), (1, 3), (2, 4)])
  topology = gpus(2, bandwidth=1e9)
  costs = np.full((5, 2), 1e-3)
  costs[3:] = 0.5e-3
  placement = [0, 0, 0, 1, 1]
  with_links, scaled = fixed_optimum(graph, topology, costs, placement)
  without, _ = fixed_optimum(graph, topology, costs, placement, links=False)
  d, t = scaled.duration, scaled.transfer
  assert t[1, 0, 1] > 2 * d[1, 0]
  assert with_links == d[1, 0] + t[1, 0, 1] + t[2, 0, 1] + d[4, 1]
  assert without == d[1, 0] + d[2, 0] + t[2, 0, 1] + d[4, 1]


@pytest.mark.parametrize("links", [False, True])
def test_each_link_has_its_own_transfer_time(links):
  # Into GPU 2, the link from GPU 0 is 10x slower than the one from GPU 1.
  graph = dag("ioo", [(0, 1), (1, 2)])
  topology = gpus(3, bandwidth=1e10)
  bandwidth = np.array(topology.link_bandwidth)
  bandwidth[0, 2] = 1e9
  topology = topology.replace(link_bandwidth=bandwidth)
  costs = np.full((3, 3), 1e-3)
  for source in (0, 1):
    ticks, scaled = fixed_optimum(graph, topology, costs, [source, source, 2],
                                  links=links)
    d, t = scaled.duration, scaled.transfer
    assert ticks == d[1, source] + t[1, source, 2] + d[2, 2]
  assert t[1, 0, 2] > 5 * t[1, 1, 2]


def test_fixed_placements_bound_the_simulator_in_any_order():
  # The model of one placement relaxes the simulator of that placement in
  # every order: its optimum (in seconds) is below each simulated runtime.
  graph, topology = random_dag(10, seed=6), preset("1cpu+2gpu")
  _, scaled = scaled_case(graph, topology)
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 3, (4, graph.n_nodes))
  orders = [np.arange(graph.n_nodes)]
  for _ in range(3):      # random topological orders
    orders.append(priority_order(rng.normal(size=graph.n_nodes), graph))
  simulated = np.stack([np.asarray(gplace.simulate(
      graph, placements, topology, order=o).runtime_s) for o in orders])
  for k, placement in enumerate(placements):
    model, var = build_model(graph, topology, scaled, memory=False)
    fix_placement(model, var, placement)
    status, solver = solve_model(model)
    assert status == "OPTIMAL"
    seconds = solver.ObjectiveValue() * scaled.tick_s
    assert seconds <= simulated[:, k].min() * (1 + RTOL)
    assert seconds >= simulated[:, k].min() * 0.5    # and not vacuous


def test_symmetry_breaking_keeps_the_optimum_and_cuts_relabellings():
  graph, topology = random_dag(9, seed=3), preset("1cpu+2gpu")
  costs, scaled = scaled_case(graph, topology)
  classes = interchangeable_devices(topology, costs)
  assert classes == [[1, 2]]
  values = []
  for cls in ((), classes):
    model, _ = build_model(graph, topology, scaled, cls, memory=False)
    status, solver = solve_model(model)
    assert status == "OPTIMAL"
    values.append(solver.ObjectiveValue())
  assert values[0] == values[1]
  # GPU 2 before any node used GPU 1 is excluded; its relabelling is not.
  model, var = build_model(graph, topology, scaled, classes, memory=False)
  model.Add(var.on[0][2] == 1)
  assert solve_model(model)[0] == "INFEASIBLE"
  model, var = build_model(graph, topology, scaled, classes, memory=False)
  fix_placement(model, var, [0, 0, 0, 2])          # GPU 2 first, at node 3
  assert solve_model(model)[0] == "INFEASIBLE"
  model, var = build_model(graph, topology, scaled, classes, memory=False)
  fix_placement(model, var, [0, 0, 0, 1, 2])
  assert solve_model(model)[0] == "OPTIMAL"


def test_floor_ticks_raise_the_makespan():
  graph, topology = random_dag(8, seed=0), gpus(2)
  _, scaled = scaled_case(graph, topology)
  model, _ = build_model(graph, topology, scaled, memory=False)
  optimum = solve_model(model)[1].ObjectiveValue()
  model, _ = build_model(graph, topology, scaled, memory=False,
                         floor_ticks=int(optimum) + 100)
  status, solver = solve_model(model)
  assert status == "OPTIMAL" and solver.ObjectiveValue() == optimum + 100
  model, _ = build_model(graph, topology, scaled, memory=False,
                         floor_ticks=int(optimum) - 100)
  assert solve_model(model)[1].ObjectiveValue() == optimum


def two_parameter_graph():
  """Two 4 MiB parameters read (4 KiB slices) by one op: both fit on one
  6 MiB GPU only apart."""
  return Graph.build(
      names=["p", "q", "op", "out"],
      op_type=["input", "input", "dot_general", "output"],
      kind=[NODE_INPUT, NODE_INPUT, NODE_OP, NODE_OUTPUT],
      out_shapes=[(1,)] * 4, out_dtype=["float32"] * 4,
      out_bytes=[4 * MiB, 4 * MiB, 4096, 4096], flops=[0.0, 0.0, 1e9, 0.0],
      bytes_accessed=[8.0] * 4,
      edges=[(0, 2, 4096), (1, 2, 4096), (2, 3, 4096)], name="two_params")


def test_memory_conditions_keep_resident_parameters_apart():
  graph, topology = two_parameter_graph(), gpus(2, memory=6 * MiB)
  _, scaled = scaled_case(graph, topology)
  together = gplace.simulate(graph, np.zeros(4, np.int32), topology)
  assert bool(together.oom)
  # Without memory conditions, everything on one GPU is optimal ...
  model, var = build_model(graph, topology, scaled, memory=False)
  status, solver = solve_model(model)
  free = [next(d for d in range(2) if solver.BooleanValue(var.on[v][d]))
          for v in range(4)]
  assert len(set(free)) == 1
  # ... with them the parameters go apart, which fits in the simulator.
  model, var = build_model(graph, topology, scaled, memory=True)
  status, solver = solve_model(model)
  assert status == "OPTIMAL"
  placement = [next(d for d in range(2) if solver.BooleanValue(var.on[v][d]))
               for v in range(4)]
  assert placement[0] != placement[1]
  assert not bool(gplace.simulate(graph, placement, topology).oom)
  assert solver.ObjectiveValue() > scaled.duration[2:, 0].sum()
  # Less than one parameter per GPU: nothing fits.
  small = gpus(2, memory=3 * MiB)
  model, _ = build_model(graph, small, scaled, memory=True)
  assert solve_model(model)[0] == "INFEASIBLE"
