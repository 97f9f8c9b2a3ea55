"""Tests of gplace.solvers.cpsat: the CP-SAT solver's answers are simulated
faithfully, its bounds hold against exhaustive enumeration of tiny graphs,
hints and the hint baselines are never beaten by its answer, memory and the
coarsened path behave as documented, and bad arguments are refused."""

import itertools
import math

import numpy as np
import pytest

import gplace
from gplace import baselines, solvers
from gplace.errors import PlacementError, SearchError, TopologyError
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.solvers import cpsat, placer
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, uniform_links

# gplace.simulate computes in float32; bounds are float64 (gplace.lower_bound
# takes no margin for that), so compare them with this relative slack.
RTOL = 1e-6
MS = 1e-3
LIMIT = dict(time_limit_s=10.0, num_workers=2)


# -- graphs and topologies -----------------------------------------------------


def gpus(n=2, memory=12e9, flops=(3e12,), shared=False, name="gpus"):
  """``n`` GPUs (``flops`` cycled) on fast links, so that splitting pays;
  ``shared`` puts them all in one compute group."""
  devices = tuple(
      Device(f"gpu:{i}", "gpu", peak_flops=flops[i % len(flops)],
             mem_bandwidth=240e9, memory_bytes=memory, launch_overhead_s=1e-6)
      for i in range(n))
  bandwidth, latency = uniform_links(n, 50e9, 1e-6)
  group = np.zeros(n, np.int64) if shared else np.arange(n)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=group, name=name)


def cpu_and_shared_gpus():
  """A CPU alone and two GPUs that share one compute group."""
  devices = (Device("cpu:0", "cpu", peak_flops=0.66e12, mem_bandwidth=68e9,
                    memory_bytes=1e11, launch_overhead_s=5e-6),
             Device("gpu:0", "gpu", peak_flops=3e12, mem_bandwidth=240e9,
                    memory_bytes=1e10, launch_overhead_s=1e-6),
             Device("gpu:1", "gpu", peak_flops=3e12, mem_bandwidth=240e9,
                    memory_bytes=1e10, launch_overhead_s=1e-6))
  bandwidth, latency = uniform_links(3, 20e9, 2e-6)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.array([0, 1, 1]),
                  name="cpu+shared")


def two_chains(length):
  """Two independent ``input -> length ops -> output`` chains, ids
  interleaved, 4-byte tensors."""
  names, kinds, edges, last = [], [], [], {}
  for c in (0, 1):
    names.append(f"c{c}/in")
    kinds.append(NODE_INPUT)
    last[c] = len(names) - 1
  for step in range(length + 1):
    for c in (0, 1):
      kinds.append(NODE_OUTPUT if step == length else NODE_OP)
      names.append(f"c{c}/{step}")
      edges.append((last[c], len(names) - 1, 4))
      last[c] = len(names) - 1
  n = len(names)
  return Graph.build(names=names, op_type=["add"] * n, kind=kinds,
                     out_shapes=[(1,)] * n, out_dtype=["float32"] * n,
                     out_bytes=[4] * n, flops=[1.0] * n,
                     bytes_accessed=[8.0] * n, edges=edges, name="chains")


def late_inputs_dag(n, seed, n_inputs):
  """``random_dag`` renumbered so that each input sits just before its first
  consumer: node-id order then differs from start-time order on the links
  (inputs are ready at 0 but sent after earlier producers)."""
  g = random_dag(n, seed=seed, n_inputs=n_inputs)
  is_input = g.kind == NODE_INPUT
  order, placed = [], set()
  for v in np.flatnonzero(~is_input).tolist():
    for u in g.edge_src[g.edge_dst == v].tolist():
      if is_input[u] and u not in placed:
        order.append(u)
        placed.add(u)
    order.append(v)
  order += [u for u in np.flatnonzero(is_input).tolist() if u not in placed]
  order = np.asarray(order)
  new_id = np.empty(n, np.int64)
  new_id[order] = np.arange(n)
  shapes = [tuple(g.out_shape[v, :g.out_rank[v]].tolist()) for v in order]
  edges = np.stack([new_id[g.edge_src], new_id[g.edge_dst], g.edge_bytes], 1)
  graph = Graph.build(
      names=g.names[order], op_type=g.op_type[order], kind=g.kind[order],
      out_shapes=shapes, out_dtype=g.out_dtype[order],
      out_bytes=g.out_bytes[order], flops=g.flops[order],
      bytes_accessed=g.bytes_accessed[order], edges=edges, name="late")
  assert np.any(np.diff(graph.kind == NODE_INPUT) > 0)   # an input after ops
  return graph


# -- checks --------------------------------------------------------------------


def simulate_one(graph, placement, topology, costs=None, **kwargs):
  """``gplace.simulate`` of one placement, with its schedule (the variant
  the solver compiles, so the tests add no compilations)."""
  return gplace.simulate(graph, placement, topology, costs,
                         return_schedule=True, **kwargs)


def is_topological(graph, order):
  order = np.asarray(order)
  if sorted(order.tolist()) != list(range(graph.n_nodes)):
    return False
  position = np.empty(graph.n_nodes, np.int64)
  position[order] = np.arange(graph.n_nodes)
  return bool(np.all(position[graph.edge_src] < position[graph.edge_dst]))


def random_topological_order(graph, rng):
  """A uniformly picked ready node at each step."""
  missing = np.bincount(graph.edge_dst, minlength=graph.n_nodes)
  ready = np.flatnonzero(missing == 0).tolist()
  order = []
  while ready:
    v = ready.pop(int(rng.integers(len(ready))))
    order.append(v)
    for w in graph.edge_dst[graph.edge_src == v].tolist():
      missing[w] -= 1
      if missing[w] == 0:
        ready.append(w)
  return np.asarray(order, np.int32)


def orders_to_check(graph, n_random=3, seed=0):
  """Node-id order and a few random topological orders."""
  rng = np.random.default_rng(seed)
  return [np.arange(graph.n_nodes, dtype=np.int32)] + [
      random_topological_order(graph, rng) for _ in range(n_random)]


def exhaustive(graph, topology, orders, costs=None):
  """``(runtime [len(orders), D**N], oom [...])`` of every placement."""
  placements = np.array(list(itertools.product(
      range(topology.n_devices), repeat=graph.n_nodes)), np.int32)
  runtime, oom = [], []
  for order in orders:
    result = gplace.simulate(graph, placements, topology, costs, order=order)
    runtime.append(np.asarray(result.runtime_s, np.float64))
    oom.append(np.asarray(result.oom, bool))
  return np.stack(runtime), np.stack(oom)


def check_result(graph, topology, result, costs=None):
  """What every SolverResult promises, whatever the status."""
  n = graph.n_nodes
  assert result.placement.shape == (n,) and result.order.shape == (n,)
  assert result.placement.dtype == np.int32
  assert np.all((result.placement >= 0)
                & (result.placement < topology.n_devices))
  assert is_topological(graph, result.order)
  sim = simulate_one(graph, result.placement, topology, costs,
                     order=result.order)
  assert result.runtime_s == pytest.approx(float(sim.runtime_s), rel=1e-7)
  assert result.oom == bool(sim.oom)
  assert result.bound_s >= gplace.lower_bound(graph, topology, costs)
  assert result.bound_s <= result.runtime_s * (1 + RTOL)
  assert result.gap == pytest.approx(result.runtime_s / result.bound_s - 1,
                                     rel=1e-9, abs=1e-12)
  assert result.status in ("OPTIMAL", "FEASIBLE", "UNKNOWN")
  assert result.wall_s > 0


# -- optimality and bounds on tiny graphs --------------------------------------


# Graphs of equal size per kind of topology share compiled simulators.
BRUTE_CASES = [
    ("2gpu", 7, 2, lambda: gpus(2)),
    ("2gpu-hetero", 7, 4, lambda: gpus(2, flops=(3e12, 1e12))),
    ("1cpu+2gpu", 6, 4, lambda: preset("1cpu+2gpu")),
    ("cpu+shared", 6, 2, cpu_and_shared_gpus),
]


@pytest.mark.parametrize("name,n,seed,make", BRUTE_CASES,
                         ids=[f"{c[0]}-n{c[1]}-s{c[2]}" for c in BRUTE_CASES])
def test_tiny_graphs_optimal_against_exhaustive_search(name, n, seed, make):
  del name
  graph, topology = random_dag(n, seed=seed), make()
  orders = orders_to_check(graph, seed=seed)
  runtime, _ = exhaustive(graph, topology, orders)
  result = solvers.solve(graph, topology, **LIMIT)
  check_result(graph, topology, result)
  assert result.status == "OPTIMAL"
  assert not result.oom and not result.coarsened
  # The bound holds for every placement in every order tried ...
  assert result.bound_s <= runtime.min() * (1 + RTOL)
  # ... and the answer, with its own order, is as good as the best placement
  # in any of them (rounding to ticks costs ~1e-6 of the runtime; in general
  # the model's optimum need not be attainable, since it lets a link serve
  # transfers in any order and the simulator serves them in producer order,
  # but on these graphs it is).
  assert result.runtime_s <= runtime.min() * (1 + 1e-4)
  assert result.gap <= 1e-3
  assert result.solver_makespan_s <= result.runtime_s * (1 + RTOL)
  assert result.solver_makespan_s >= result.bound_s * (1 - RTOL)


def test_independent_chains_split_over_two_gpus():
  # 2 x 5 ops of 1 ms each: one chain per GPU takes 5 ms, one GPU 10 ms.
  graph = two_chains(4)
  costs = np.where((graph.kind == NODE_INPUT)[:, None], 0.0,
                   np.full((graph.n_nodes, 2), MS))
  result = solvers.solve(graph, gpus(2), costs, **LIMIT)
  check_result(graph, gpus(2), result, costs)
  assert result.status == "OPTIMAL"
  assert result.runtime_s == pytest.approx(5 * MS, rel=1e-4)
  assert result.bound_s == pytest.approx(5 * MS, rel=1e-4)
  chain = np.array([int(name[1]) for name in graph.names])
  ops = graph.kind != NODE_INPUT
  for c in (0, 1):
    assert len(set(result.placement[ops & (chain == c)])) == 1
  assert len(set(result.placement[ops])) == 2


@pytest.mark.parametrize("constraint", ["allowed", "colocation"])
def test_device_constraints_bind_the_answer_and_the_bound(constraint):
  # Free, the chains split (5 ms); constrained, every op runs on one GPU.
  graph = two_chains(4)
  costs = np.where((graph.kind == NODE_INPUT)[:, None], 0.0,
                   np.full((graph.n_nodes, 2), MS))
  if constraint == "allowed":
    allowed = np.ones((graph.n_nodes, 2), bool)
    allowed[graph.kind != NODE_INPUT, 0] = False     # ops on gpu:1 only
    graph = graph.replace(allowed_devices=allowed)
  else:
    graph = graph.replace(colocation=np.where(
        graph.kind != NODE_INPUT, 0, -1).astype(np.int32))
  result = solvers.solve(graph, gpus(2), costs, **LIMIT)
  assert result.status == "OPTIMAL"
  ops = graph.kind != NODE_INPUT
  assert len(set(result.placement[ops])) == 1
  if constraint == "allowed":
    assert set(result.placement[ops]) == {1}
  assert result.runtime_s == pytest.approx(10 * MS, rel=1e-4)
  assert result.bound_s == pytest.approx(10 * MS, rel=1e-4)
  assert not gplace.simulate(graph, result.placement[None], gpus(2),
                             costs).constraint_violated[0]


def test_measured_costs_replace_the_roofline():
  graph = random_dag(12, seed=5)
  topology = preset("1cpu+2gpu")
  costs = np.full((graph.n_nodes, 3), 5 * MS)
  costs[:, 0] = 0.1 * MS                    # the CPU is now by far the fastest
  result = solvers.solve(graph, topology, costs, **LIMIT)
  check_result(graph, topology, result, costs)
  assert result.status == "OPTIMAL"
  ops = graph.kind != NODE_INPUT
  assert np.all(result.placement[ops] == 0)
  assert result.runtime_s == pytest.approx(0.1 * MS * ops.sum(), rel=1e-4)


def test_solver_lower_bound_holds_against_exhaustive_search():
  graph, topology = random_dag(7, seed=2), gpus(2, flops=(3e12, 1e12))
  runtime, _ = exhaustive(graph, topology, orders_to_check(graph, seed=1))
  bound = solvers.solver_lower_bound(graph, topology, **LIMIT)
  assert gplace.lower_bound(graph, topology) <= bound
  assert bound <= runtime.min() * (1 + RTOL)
  # Tighter than gplace.lower_bound here, and tight: the model's optimum.
  assert bound > gplace.lower_bound(graph, topology) * (1 + 1e-3)
  assert bound >= runtime.min() * (1 - 1e-3)
  # Above max_nodes it is gplace.lower_bound alone.
  assert solvers.solver_lower_bound(
      graph, topology, max_nodes=3, **LIMIT) == gplace.lower_bound(
          graph, topology)


def test_link_contention_only_tightens_the_bound():
  graph, topology = random_dag(8, seed=3), gpus(2)
  with_links = solvers.solve(graph, topology, **LIMIT)
  without = solvers.solve(graph, topology, links=False, **LIMIT)
  assert with_links.status == without.status == "OPTIMAL"
  check_result(graph, topology, without)
  assert without.bound_s <= with_links.bound_s * (1 + 1e-9)
  assert without.solver_makespan_s <= with_links.solver_makespan_s * (1 + 1e-9)


# -- hints and the baseline interface ------------------------------------------


@pytest.mark.parametrize("time_limit_s", [1e-3, 1.0])
def test_hint_is_a_candidate(time_limit_s):
  # Inputs after ops: a hint's default schedule and its dispatch order differ
  # in the simulator. With 1 ms CP-SAT finds nothing and the hint is the
  # answer; either way the answer is never worse than the hint and its
  # runtime is that of its order.
  graph, topology = late_inputs_dag(40, seed=3, n_inputs=8), preset(
      "1cpu+2gpu")
  hint = np.random.default_rng(0).integers(0, 3, graph.n_nodes)
  result = solvers.solve(graph, topology, time_limit_s=time_limit_s,
                         num_workers=2, hint=hint)
  check_result(graph, topology, result)
  for schedule in ("static", "dynamic"):
    hinted = simulate_one(graph, hint, topology, schedule=schedule)
    assert result.runtime_s <= float(hinted.runtime_s) * (1 + 1e-7), schedule
  if result.status == "UNKNOWN":
    np.testing.assert_array_equal(result.placement, hint)
    assert math.isnan(result.solver_makespan_s)


def test_no_solution_in_time_without_hint_falls_back_to_one_device():
  graph, topology = late_inputs_dag(40, seed=3, n_inputs=8), preset(
      "1cpu+2gpu")
  result = solvers.solve(graph, topology, time_limit_s=1e-3, num_workers=2)
  check_result(graph, topology, result)
  if result.status == "UNKNOWN":            # (CP-SAT rarely finds one in 1 ms)
    assert len(set(result.placement.tolist())) == 1


def test_exact_is_never_worse_than_its_hint_baselines():
  # Here the solver's own placement, in the default schedule rather than in
  # its own order, is slower than single_device: exact must not return it.
  n = 12
  graph, topology = random_dag(n, seed=5), preset("1cpu+2gpu")
  placement = solvers.exact(graph, topology, time_limit_s=5.0)
  assert placement.dtype == np.int32 and placement.shape == (n,)
  # Evaluated as a baseline is: the simulator's default schedule.
  ours = simulate_one(graph, placement, topology)
  assert not bool(ours.oom)
  for name in solvers.HINT_BASELINES:
    theirs = simulate_one(graph, baselines.get(name)(graph, topology),
                          topology)
    assert float(ours.runtime_s) <= float(theirs.runtime_s) * (1 + 1e-7), name


# -- memory --------------------------------------------------------------------


def test_memory_conditions_exclude_placements_that_cannot_fit():
  # Neither GPU holds the whole graph; some splits fit. The memory-aware
  # answer fits and is the fastest placement that does; its bound is above
  # the unconstrained optimum and below every placement that fits.
  graph = random_dag(8, seed=3)
  topology = gpus(2, memory=0.8 * baselines.single_device_peak_bytes(graph))
  orders = orders_to_check(graph, n_random=2)
  runtime, oom = exhaustive(graph, topology, orders)
  assert oom[:, 0].all() and oom[:, -1].all()        # all on one GPU: OOM
  fits = np.where(oom, np.inf, runtime)
  result = solvers.solve(graph, topology, **LIMIT)
  check_result(graph, topology, result)
  assert result.status == "OPTIMAL" and not result.oom
  assert result.bound_s <= fits.min() * (1 + RTOL)
  assert result.runtime_s <= fits[0].min() * (1 + 1e-4)
  free = solvers.solve(graph, topology, memory=False, **LIMIT)
  assert free.bound_s <= runtime.min() * (1 + RTOL)
  assert result.bound_s > free.bound_s * (1 + 1e-3)


def test_memory_conditions_bound_only_what_fits():
  # The memory conditions are only necessary: the model's optimum may not
  # fit in the simulator in its order (then the answer is slower than the
  # bound, or flagged OOM); the bound still holds for every placement that
  # fits.
  graph = random_dag(8, seed=8)
  topology = gpus(2, memory=0.9 * baselines.single_device_peak_bytes(graph))
  runtime, oom = exhaustive(graph, topology, orders_to_check(graph, 2))
  assert oom[:, 0].all() and not oom.all()
  result = solvers.solve(graph, topology, **LIMIT)
  check_result(graph, topology, result)
  assert result.bound_s <= np.where(oom, np.inf, runtime).min() * (1 + RTOL)


def test_nothing_fits_gives_an_oom_answer():
  graph = random_dag(8, seed=3)
  topology = gpus(2, memory=1024.0)        # below any output of random_dag
  result = solvers.solve(graph, topology, **LIMIT)
  check_result(graph, topology, result)
  assert result.oom and result.status == "OPTIMAL"
  # The memory model was infeasible, so the answer is the unconstrained one.
  free = solvers.solve(graph, topology, memory=False, **LIMIT)
  assert result.bound_s == pytest.approx(free.bound_s, rel=1e-9)


# -- coarsened path, empty graphs ----------------------------------------------


def test_graphs_above_max_nodes_are_coarsened():
  graph, topology = random_dag(16, seed=4), preset("1cpu+2gpu")
  result = solvers.solve(graph, topology, max_nodes=8, **LIMIT)
  check_result(graph, topology, result)
  assert result.coarsened
  assert result.bound_s == gplace.lower_bound(graph, topology)
  assert result.status in ("OPTIMAL", "FEASIBLE")
  hint = baselines.get("heft")(graph, topology)
  hinted = solvers.solve(graph, topology, max_nodes=8, hint=hint, **LIMIT)
  check_result(graph, topology, hinted)
  assert hinted.coarsened
  assert hinted.runtime_s <= float(
      simulate_one(graph, hint, topology).runtime_s) * (1 + 1e-7)


def empty_graph():
  return Graph.build(names=[], op_type=[], kind=[], out_shapes=[],
                     out_dtype=[], out_bytes=[], flops=[], bytes_accessed=[],
                     edges=[], name="empty")


def test_empty_graph():
  topology = preset("1cpu+2gpu")
  result = solvers.solve(empty_graph(), topology, **LIMIT)
  assert result.placement.shape == result.order.shape == (0,)
  assert result.runtime_s == result.bound_s == result.gap == 0.0
  assert result.status == "OPTIMAL" and not result.oom
  assert solvers.solver_lower_bound(empty_graph(), topology, **LIMIT) == 0.0
  with pytest.raises(PlacementError, match="no nodes"):
    solvers.exact(empty_graph(), topology)


# -- bad arguments -------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,text", [
    (dict(time_limit_s=0), SearchError, "time_limit_s"),
    (dict(time_limit_s=-1.0), SearchError, "time_limit_s"),
    (dict(time_limit_s=float("nan")), SearchError, "time_limit_s"),
    (dict(time_limit_s=float("inf")), SearchError, "time_limit_s"),
    (dict(time_limit_s="soon"), SearchError, "time_limit_s"),
    (dict(time_limit_s="5"), SearchError, "time_limit_s"),  # ran 5 s before
    (dict(time_limit_s=True), SearchError, "time_limit_s"),  # ran 1 s before
    (dict(num_workers=0), SearchError, "num_workers"),
    (dict(num_workers=1.5), SearchError, "num_workers"),
    (dict(num_workers=True), SearchError, "num_workers"),
    (dict(num_workers=2**40), SearchError, "num_workers"),  # pybind before
    (dict(seed=None), SearchError, "seed"),                 # TypeError before
    (dict(seed="abc"), SearchError, "seed"),
    (dict(seed=2**40), SearchError, "seed"),
    (dict(max_nodes=None), SearchError, "max_nodes"),
    (dict(max_nodes="big"), SearchError, "max_nodes"),
    (dict(memory=np.zeros(3)), SearchError, "memory"),
    (dict(links="yes"), SearchError, "links"),
    (dict(hint=np.zeros(5, np.int32)), PlacementError, "length 5"),
    (dict(hint=np.zeros((2, 8), np.int32)), PlacementError, "shape"),
    (dict(hint=np.full(8, 3)), PlacementError, "device"),
    (dict(costs=np.ones((8, 2))), TopologyError, "costs"),
    (dict(costs=np.full((8, 3), -1.0)), TopologyError, "negative"),
])
def test_bad_arguments_raise(kwargs, error, text):
  graph, topology = random_dag(8, seed=0), preset("1cpu+2gpu")
  kwargs = dict(dict(time_limit_s=5.0), **kwargs)
  with pytest.raises(error, match=text):
    solvers.solve(graph, topology, **kwargs)


def test_bad_graph_or_topology_raise_in_every_entry_point():
  graph, topology = random_dag(8, seed=0), preset("1cpu+2gpu")
  for fn in (solvers.solve, solvers.solver_lower_bound, solvers.exact):
    with pytest.raises(SearchError, match="gplace.Graph"):
      fn("graph", topology, time_limit_s=5.0)
    with pytest.raises(TopologyError, match="gplace.Topology"):
      fn(graph, "1cpu+2gpu", time_limit_s=5.0)
    with pytest.raises(SearchError, match="time_limit_s"):
      fn(graph, topology, time_limit_s=0)
    with pytest.raises(SearchError, match="num_workers"):
      fn(graph, topology, time_limit_s=5.0, num_workers=0)
    with pytest.raises(SearchError, match="seed"):
      fn(graph, topology, time_limit_s=5.0, seed=float("nan"))


def test_exports():
  assert solvers.solve is cpsat.solve and solvers.exact is placer.exact
  assert set(solvers.HINT_BASELINES) <= set(baselines.names())
  assert solvers.MAX_EXACT_NODES >= solvers.COARSE_GROUPS
  assert 0 < solvers.BOUND_SLACK < 1e-3
