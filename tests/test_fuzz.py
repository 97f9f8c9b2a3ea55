"""Fuzz of the public entry points: no bad input escapes (issue 13).

Every malformed argument to ``gplace.simulate``, ``gplace.lower_bound``,
``Graph.load`` / ``build`` / ``save``, every baseline of the registry and
the topology constructors raises a :class:`~gplace.errors.GplaceError`
subclass whose message names the offending argument; none escapes as a raw
numpy / zipfile / JAX exception, and none is silently accepted. Explicit
cases for the known failures, hypothesis for the rest (few examples each,
and no valid simulation, so that nothing here compiles the simulator).
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gplace
from gplace import baselines, placers
from gplace.errors import (BaselineError, GplaceError, GraphError,
                           PlacementError, ScheduleError, TopologyError)
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, random_dag
from gplace.sim.presets import preset
from gplace.sim.topology import Device, Topology, uniform_links

N_NODES = 12
FUZZ = settings(max_examples=15, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def raises(fn, error=GplaceError, *words):
  """Runs ``fn``; asserts it raises ``error`` with a message naming
  ``words`` (case-insensitive); returns the message."""
  with pytest.raises(error) as info:
    fn()
  message = str(info.value)
  assert message.strip(), "an empty message"
  for word in words:
    assert word.lower() in message.lower(), (word, message)
  return message


@pytest.fixture(scope="module")
def graph():
  return random_dag(N_NODES, seed=0, name="fuzz")


@pytest.fixture(scope="module")
def topology():
  return preset("1cpu+2gpu")


def empty_graph():
  return Graph.build(names=[], op_type=[], kind=[], out_shapes=[],
                     out_dtype=[], out_bytes=[], flops=[], bytes_accessed=[],
                     edges=[], name="empty")


def build_arguments(n=3):
  """Valid ``Graph.build`` keyword arguments of a chain of ``n`` nodes."""
  return dict(names=[f"n{i}" for i in range(n)], op_type=["add"] * n,
              kind=[NODE_INPUT] + [NODE_OP] * (n - 1), out_shapes=[(2,)] * n,
              out_dtype=["float32"] * n, out_bytes=[8] * n,
              flops=[0.0] + [2.0] * (n - 1), bytes_accessed=[16.0] * n,
              edges=[(i, i + 1, 8) for i in range(n - 1)])


# -- Graph.load / save ---------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory, graph):
  path = tmp_path_factory.mktemp("fuzz") / "graph.npz"
  graph.save(path)
  return path, path.read_bytes()


def _write_npz(path, meta, graph):
  arrays = {field: getattr(graph, field) for field in (
      "names", "op_type", "kind", "out_shape", "out_rank", "out_dtype",
      "out_bytes", "flops", "bytes_accessed", "edge_src", "edge_dst",
      "edge_bytes")}
  np.savez(path, meta=np.asarray(json.dumps(meta)), **arrays)


@pytest.mark.parametrize("case", [
    "empty", "truncated", "missing", "directory", "npy", "not_json",
    "no_name", "meta_list", "name_not_str", "newer_version", "other_format",
    "no_meta", "short_field"])
def test_load_of_a_bad_file_raises_graph_error(tmp_path, saved, graph, case):
  path = tmp_path / "bad.npz"
  good = dict(format="gplace.Graph", version=1, name="g")
  if case == "empty":
    path.write_bytes(b"")
  elif case == "truncated":
    path.write_bytes(saved[1][:len(saved[1]) // 2])
  elif case == "missing":
    path = tmp_path / "nope.npz"
  elif case == "directory":
    path = tmp_path
  elif case == "npy":
    path = tmp_path / "bad.npy"
    np.save(path, np.zeros(3))
  elif case == "not_json":
    np.savez(path, meta=np.asarray("{not json"))
  elif case == "no_name":
    _write_npz(path, dict(format="gplace.Graph", version=1), graph)
  elif case == "meta_list":
    _write_npz(path, [1, 2], graph)
  elif case == "name_not_str":
    _write_npz(path, dict(good, name=3), graph)
  elif case == "newer_version":
    _write_npz(path, dict(good, version=99), graph)
  elif case == "other_format":
    _write_npz(path, dict(good, format="something"), graph)
  elif case == "no_meta":
    np.savez(path, flops=np.zeros(3))
  elif case == "short_field":
    _write_npz(path, good, graph.replace())  # then overwrite one field
    data = dict(np.load(path))
    data["flops"] = data["flops"][:-1]
    np.savez(path, **data)
  message = raises(lambda: Graph.load(path), GraphError, "path")
  assert str(path) in message


@FUZZ
@given(data=st.data())
def test_load_of_corrupted_bytes_raises_or_reads_the_same_graph(
    tmp_path, saved, graph, data):
  content = bytearray(saved[1])
  for _ in range(data.draw(st.integers(1, 4), label="n_flips")):
    position = data.draw(st.integers(0, len(content) - 1), label="position")
    content[position] ^= data.draw(st.integers(1, 255), label="mask")
  cut = data.draw(st.integers(0, len(content)), label="cut")
  path = tmp_path / "corrupt.npz"
  path.write_bytes(bytes(content[:cut]))
  try:
    loaded = Graph.load(path)
  except GraphError as err:
    assert "path" in str(err)
  else:  # the flips hit bytes nobody reads (timestamps, padding)
    assert loaded == graph


@pytest.mark.parametrize("path", [None, 3, b"/tmp/g.npz", ["a"]])
def test_load_and_save_need_a_path(graph, path):
  raises(lambda: Graph.load(path), GraphError, "path")
  raises(lambda: graph.save(path), GraphError, "path")


def test_save_into_a_missing_directory(tmp_path, graph):
  target = tmp_path / "no" / "such" / "dir" / "g.npz"
  raises(lambda: graph.save(target), GraphError, "path", "directory")
  assert not os.path.exists(str(target) + ".tmp.npz")


# -- Graph.build ---------------------------------------------------------------


@pytest.mark.parametrize("change,words", [
    (dict(edges=[(0, 5, 8)]), ("edge", "does not exist")),
    (dict(edges=[(-1, 1, 8)]), ("edge", "does not exist")),
    (dict(edges=[(0, 1)]), ("edges",)),
    (dict(edges=[(0, 1, 8, 9)]), ("edges",)),
    (dict(edges=[(0.5, 1, 8)]), ("edges",)),
    (dict(edges=[("a", "b", "c")]), ("edges",)),
    (dict(edges=[(0, 1, -8)]), ("edge", "negative")),
    (dict(edges=None), ("edges",)),
    (dict(edges=[(0, 1, 8), (1, 2, 8), (2, 1, 8)]), ("edges", "cycle")),
    (dict(flops=[0.0, 1.0]), ("flops",)),
    (dict(out_shapes=[(2,)]), ("out_shapes",)),
    (dict(kind=[0, 1]), ("kind",)),
    (dict(names=None), ("names",)),
    (dict(names="abc"), ("names",)),
    (dict(out_bytes=[8, -1, 8]), ("out_bytes",)),
    (dict(out_bytes=[8, 0.5, 8]), ("out_bytes",)),
    (dict(out_bytes=["a", "b", "c"]), ("out_bytes",)),
    (dict(flops=[0.0, float("nan"), 1.0]), ("flops",)),
    (dict(flops=[0.0, -1.0, 1.0]), ("flops",)),
    (dict(bytes_accessed=[1.0, float("inf"), 1.0]), ("bytes_accessed",)),
    (dict(kind=[0, 1, 7]), ("kind",)),
    (dict(kind=[0, None, 1]), ("kind",)),
    (dict(out_shapes=[(2,), 3, (2,)]), ("out_shapes",)),
    (dict(out_shapes=[(2,), (-1,), (2,)]), ("out_shapes",)),
    (dict(name=3), ("name",)),
])
def test_build_rejects_malformed_graphs(change, words):
  arguments = dict(build_arguments(), **change)
  raises(lambda: Graph.build(**arguments), GraphError, *words)


@FUZZ
@given(n=st.integers(1, 6), src=st.integers(-3, 9), dst=st.integers(-3, 9),
       nbytes=st.integers(-5, 5))
def test_build_accepts_only_edges_between_existing_nodes(n, src, dst, nbytes):
  arguments = build_arguments(n)
  arguments["edges"] = arguments["edges"] + [(src, dst, nbytes)]
  valid = 0 <= src < n and 0 <= dst < n and nbytes >= 0 and not src > dst
  if valid:
    assert Graph.build(**arguments).n_nodes == n
  else:
    raises(lambda: Graph.build(**arguments), GraphError, "edge")


# -- gplace.simulate -----------------------------------------------------------


def _bad_placements(n):
  return [
      ("short", np.zeros(n - 1, np.int32)),
      ("long", np.zeros(n + 1, np.int32)),
      ("rank3", np.zeros((2, 2, n), np.int32)),
      ("scalar", 0),
      ("none", None),
      ("strings", ["gpu:0"] * n),
      ("string", "0" * n),
      ("dict", {"a": 1}),
      ("ragged", [[0] * n, [0] * (n - 1)]),
      ("nan", np.full(n, np.nan)),
      ("fraction", np.full(n, 0.5)),
      ("inf", np.full(n, np.inf)),
      ("huge", np.full(n, 1e30)),
      ("negative", np.full(n, -1)),
      ("too_high", np.full(n, 3)),
      ("complex", np.zeros(n, complex)),
      ("objects", np.array([object()] * n)),
  ]


@pytest.mark.parametrize("label", [label for label, _ in _bad_placements(4)])
def test_simulate_rejects_bad_placements(graph, topology, label):
  placements = dict(_bad_placements(graph.n_nodes))[label]
  raises(lambda: gplace.simulate(graph, placements, topology),
         PlacementError, "placement")


@FUZZ
@given(data=st.data())
def test_simulate_rejects_fuzzed_placements(graph, topology, data):
  n = graph.n_nodes
  rows = data.draw(st.integers(1, 3), label="rows")
  placements = np.zeros((rows, n), np.int64)
  row = data.draw(st.integers(0, rows - 1), label="row")
  node = data.draw(st.integers(0, n - 1), label="node")
  kind = data.draw(st.sampled_from(["range", "fraction", "nan", "length"]),
                   label="kind")
  if kind == "range":
    placements[row, node] = data.draw(
        st.one_of(st.integers(-10**12, -1),
                  st.integers(topology.n_devices, 10**12)), label="device")
  elif kind == "fraction":
    placements = placements.astype(np.float64)
    placements[row, node] = data.draw(
        st.floats(-5, 5).filter(lambda x: x != round(x)), label="value")
  elif kind == "nan":
    placements = placements.astype(np.float64)
    placements[row, node] = np.nan
  else:
    length = data.draw(st.integers(0, 2 * n).filter(lambda m: m != n),
                       label="length")
    placements = np.zeros((rows, length), np.int64)
  raises(lambda: gplace.simulate(graph, placements, topology),
         PlacementError, "placement")


@pytest.mark.parametrize("costs", [
    np.full((N_NODES, 3), np.nan), -np.ones((N_NODES, 3)),
    np.full((N_NODES, 3), np.inf), np.ones((N_NODES, 2)), np.ones(N_NODES),
    "fast", [[None, "a", 1]] * N_NODES, {"a": 1}])
def test_simulate_and_lower_bound_reject_bad_costs(graph, topology, costs):
  placement = np.zeros(graph.n_nodes, np.int32)
  raises(lambda: gplace.simulate(graph, placement, topology, costs),
         TopologyError, "costs")
  raises(lambda: gplace.lower_bound(graph, topology, costs), TopologyError,
         "costs")


@FUZZ
@given(data=st.data())
def test_fuzzed_cost_tables_are_rejected(graph, topology, data):
  costs = np.ones((graph.n_nodes, topology.n_devices))
  node = data.draw(st.integers(0, graph.n_nodes - 1), label="node")
  device = data.draw(st.integers(0, topology.n_devices - 1), label="device")
  costs[node, device] = data.draw(
      st.one_of(st.just(np.nan), st.just(np.inf), st.just(-np.inf),
                st.floats(-1e9, -1e-12)), label="value")
  raises(lambda: gplace.lower_bound(graph, topology, costs), TopologyError,
         "costs")
  raises(lambda: baselines.m_etf(graph, topology, costs=costs),
         TopologyError, "costs")


@pytest.mark.parametrize("bad_graph", [{}, "graph", None, np.zeros(3), 3])
def test_simulate_and_lower_bound_need_a_graph(topology, bad_graph):
  raises(lambda: gplace.simulate(bad_graph, np.zeros(3, np.int32), topology),
         GraphError, "graph", type(bad_graph).__name__)
  raises(lambda: gplace.lower_bound(bad_graph, topology), GraphError,
         "graph")


@pytest.mark.parametrize("bad_topology", [{}, "1cpu+2gpu", None, 3])
def test_simulate_and_lower_bound_need_a_topology(graph, bad_topology):
  placement = np.zeros(graph.n_nodes, np.int32)
  raises(lambda: gplace.simulate(graph, placement, bad_topology),
         TopologyError, "topology", "preset")
  raises(lambda: gplace.lower_bound(graph, bad_topology), TopologyError,
         "topology")


def test_simulate_of_an_empty_graph(topology):
  raises(lambda: gplace.simulate(empty_graph(), np.zeros(0, np.int32),
                                 topology), PlacementError, "graph",
         "no nodes")


@pytest.mark.parametrize("transform", ["jit", "vmap", "grad_costs"])
def test_simulate_under_jax_transforms_points_to_the_jittable_simulator(
    graph, topology, transform):
  placement = jnp.zeros(graph.n_nodes, jnp.int32)
  if transform == "jit":
    run = lambda: jax.jit(
        lambda p: gplace.simulate(graph, p, topology).runtime_s)(placement)
    argument = "placements"
  elif transform == "vmap":
    run = lambda: jax.vmap(
        lambda p: gplace.simulate(graph, p, topology).runtime_s)(
            placement[None])
    argument = "placements"
  else:
    costs = jnp.ones((graph.n_nodes, topology.n_devices))
    run = lambda: jax.grad(lambda c: gplace.simulate(
        graph, np.zeros(graph.n_nodes, np.int32), topology,
        c).runtime_s)(costs)
    argument = "costs"
  raises(run, GplaceError, argument, "gplace.sim.simulate_problem",
         "simulate_dispatch")


@pytest.mark.parametrize("keywords,error,word", [
    (dict(order="abc"), ScheduleError, "order"),
    (dict(order=np.full(N_NODES, 0.5)), ScheduleError, "order"),
    (dict(order=np.zeros(N_NODES, np.int64)), ScheduleError, "order"),
    (dict(order=np.arange(N_NODES)[::-1]), ScheduleError, "order"),
    (dict(priority=np.full(N_NODES, np.nan)), ScheduleError, "priority"),
    (dict(priority="high"), ScheduleError, "priority"),
    (dict(priority=np.ones(N_NODES + 1)), ScheduleError, "priority"),
    (dict(schedule="fifo"), ScheduleError, "schedule"),
    (dict(schedule=["static"]), ScheduleError, "schedule"),
    (dict(return_schedule=[1]), ScheduleError, "return_schedule"),
])
def test_simulate_rejects_bad_schedules(graph, topology, keywords, error,
                                        word):
  placement = np.zeros(graph.n_nodes, np.int32)
  raises(lambda: gplace.simulate(graph, placement, topology, **keywords),
         error, word)


# -- baselines -----------------------------------------------------------------


ALL_PLACERS = (placers.names(placers.BASELINE)
               + placers.names(placers.SEARCH))


@pytest.mark.parametrize("name", ALL_PLACERS)
def test_every_baseline_rejects_bad_arguments(graph, topology, name):
  placer = placers.get(name)
  raises(lambda: placer(empty_graph(), topology), PlacementError, "graph",
         "no nodes")
  raises(lambda: placer({}, topology), GraphError, "graph")
  raises(lambda: placer(graph, "1cpu+2gpu"), TopologyError, "topology")
  raises(lambda: placer(graph, topology, costs=np.ones((2, 2))),
         TopologyError, "costs")
  raises(lambda: placer(graph, topology,
                        costs=np.full((graph.n_nodes, 3), np.nan)),
         TopologyError, "costs")
  for seed in BAD_SEEDS:  # random / metis / searches raised numpy's errors
    raises(lambda: placer(graph, topology, seed=seed), GplaceError, "seed")


BAD_SEEDS = (-1, 0.5, float("nan"), "1", None, 2**40, np.zeros(3), True)


def test_plan_and_run_all_reject_bad_seeds(graph, topology):
  for seed in BAD_SEEDS:
    raises(lambda: baselines.plan("m_etf", graph, topology, seed=seed),
           BaselineError, "seed")
    raises(lambda: baselines.run_all(graph, topology, seed=seed),
           BaselineError, "seed")


@pytest.mark.parametrize("bad_graph", [None, {}, "graph"])
def test_baseline_helpers_need_a_graph(bad_graph):
  raises(lambda: baselines.single_device_peak_bytes(bad_graph), GraphError,
         "graph")


@pytest.mark.parametrize("name", ["nope", "M_ETF", "", 3, None, ["m_etf"]])
def test_unknown_baseline_names_list_the_known_ones(graph, topology, name):
  message = raises(lambda: baselines.get(name), BaselineError, "m_etf",
                   "single_device")
  assert repr(name) in message
  raises(lambda: baselines.plan(name, graph, topology), BaselineError,
         "m_etf")


# -- topologies ----------------------------------------------------------------


def _device(**changes):
  fields = dict(name="gpu:0", kind="gpu", peak_flops=1e12, mem_bandwidth=1e11,
                memory_bytes=1e9, launch_overhead_s=1e-5)
  return Device(**dict(fields, **changes))


def _topology(n=2, **changes):
  bandwidth, latency = uniform_links(n, 1e10, 1e-5)
  fields = dict(devices=tuple(_device(name=f"gpu:{i}") for i in range(n)),
                link_bandwidth=bandwidth, link_latency=latency,
                compute_group=np.arange(n))
  return Topology(**dict(fields, **changes))


@pytest.mark.parametrize("name", ["1cpu+3gpu", "", 3, None, ["8xh100"]])
def test_unknown_presets_list_the_known_ones(name):
  raises(lambda: preset(name), TopologyError, "preset", "1cpu+4gpu")


def _nan_matrix():
  value = np.full((2, 2), 1e10)
  value[0, 1] = np.nan
  return value


@pytest.mark.parametrize("changes,word", [
    (dict(link_bandwidth=_nan_matrix()), "link_bandwidth"),
    (dict(link_bandwidth=-np.ones((2, 2))), "link_bandwidth"),
    (dict(link_bandwidth=np.zeros((2, 2))), "link_bandwidth"),
    (dict(link_bandwidth=np.ones((3, 3))), "link_bandwidth"),
    (dict(link_bandwidth=np.ones(2)), "link_bandwidth"),
    (dict(link_bandwidth="fast"), "link_bandwidth"),
    (dict(link_bandwidth=None), "link_bandwidth"),
    (dict(link_latency=-np.ones((2, 2))), "link_latency"),
    (dict(link_latency=np.full((2, 2), np.inf)), "link_latency"),
    (dict(link_latency=[[0, "a"], [0, 0]]), "link_latency"),
    (dict(compute_group=[0]), "compute_group"),
    (dict(compute_group=[0, np.nan]), "compute_group"),
    (dict(compute_group=[0, 0.5]), "compute_group"),
    (dict(compute_group=["a", "b"]), "compute_group"),
    (dict(devices=()), "device"),
    (dict(devices=None), "devices"),
    (dict(devices="gpu:0"), "devices"),
    (dict(devices=("gpu:0", "gpu:1")), "devices"),
    (dict(devices=(_device(), _device(memory_bytes=-1.0))), "memory_bytes"),
    (dict(devices=(_device(), _device(memory_bytes=float("nan")))),
     "memory_bytes"),
    (dict(devices=(_device(), _device(memory_bytes="12GB"))), "memory_bytes"),
    (dict(devices=(_device(), _device(peak_flops=0.0))), "peak_flops"),
    (dict(devices=(_device(), _device(mem_bandwidth=None))), "mem_bandwidth"),
    (dict(devices=(_device(), _device(launch_overhead_s=-1.0))),
     "launch_overhead_s"),
    (dict(devices=(_device(), _device(launch_overhead_s=float("inf")))),
     "launch_overhead_s"),
    (dict(devices=(_device(), _device(kind=None))), "kind"),
    (dict(time_scale=0.0), "time_scale"),
    (dict(time_scale=float("nan")), "time_scale"),
    (dict(time_scale="1"), "time_scale"),
    (dict(name=None), "name"),
])
def test_topology_rejects_bad_arrays_and_devices(changes, word):
  raises(lambda: _topology(**changes), TopologyError, word)


@FUZZ
@given(data=st.data())
def test_fuzzed_link_matrices_are_rejected(data):
  n = data.draw(st.integers(2, 4), label="n_devices")
  field = data.draw(st.sampled_from(["link_bandwidth", "link_latency"]),
                    label="field")
  bandwidth, latency = uniform_links(n, 1e10, 1e-5)
  value = bandwidth if field == "link_bandwidth" else latency
  src = data.draw(st.integers(0, n - 1), label="src")
  dst = data.draw(st.integers(0, n - 1).filter(lambda d: d != src),
                  label="dst")
  bad = [np.nan, -1.0, -np.inf] + ([0.0] if field == "link_bandwidth"
                                   else [np.inf])
  value[src, dst] = data.draw(st.sampled_from(bad), label="value")
  changes = {field: value}
  raises(lambda: _topology(n, **changes), TopologyError, field)


@FUZZ
@given(attr=st.sampled_from(["peak_flops", "mem_bandwidth", "memory_bytes"]),
       value=st.one_of(st.floats(max_value=0.0), st.just(float("nan")),
                       st.none(), st.text(max_size=3), st.booleans()))
def test_fuzzed_device_figures_are_rejected(attr, value):
  devices = (_device(), _device(**{attr: value}))
  raises(lambda: _topology(devices=devices), TopologyError, attr)


def test_an_empty_cost_table_is_a_topology_error(graph, topology):
  # The problem cache's memoryview could not hash it: a raw TypeError.
  raises(lambda: gplace.simulate(graph, np.zeros(graph.n_nodes, np.int32),
                                 topology, np.zeros((0, 3))),
         TopologyError, "costs", "shape")
