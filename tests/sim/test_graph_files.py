"""Graph files with their devices and costs (gplace.sim.graph_files) and
networkx graphs (gplace.graphs.interchange): .npz / .json files and
networkx graphs round-trip exactly, simulate identically, and every
malformed file is a GraphError that names the field."""

import copy
import json

import networkx as nx
import numpy as np
import pytest

import gplace
from gplace.errors import GraphError
from gplace.graphs import interchange, json_format
from gplace.sim import graph_files
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim.presets import preset


@pytest.fixture(scope="module")
def topology():
  return preset("1cpu+2gpu")


@pytest.fixture(scope="module")
def plain():
  return random_dag(24, seed=3, name="plain")


@pytest.fixture(scope="module")
def constrained(plain):
  mask = np.ones((plain.n_nodes, 3), bool)
  mask[4] = [True, False, False]       # a CPU-only op
  mask[7, 0] = False
  colocation = np.full(plain.n_nodes, -1)
  colocation[[2, 9]] = 0
  colocation[[5, 6, 11]] = 3
  return plain.replace(allowed_devices=mask, colocation=colocation,
                       name="constrained")


def small_document():
  """A hand-written file using every field of the format."""
  return {
      "format": "gplace.graph", "version": 1, "name": "tiny",
      "topology": {
          "name": "two", "devices": [
              {"name": "cpu:0", "kind": "cpu", "peak_flops": 1e11,
               "mem_bandwidth": 1e10, "memory_bytes": 1e9},
              {"name": "gpu:0", "kind": "gpu", "peak_flops": 1e12,
               "mem_bandwidth": 1e11, "memory_bytes": 1e9,
               "launch_overhead_s": 1e-5}],
          "links": {"bandwidth": 1e10, "latency_s": 2e-5}},
      "nodes": [
          {"id": "x", "kind": "input", "out_bytes": 4096,
           "out_shape": [32, 32]},
          {"id": "matmul", "op_type": "dot_general", "out_bytes": 4096,
           "cost_s": {"cpu:0": 1e-3, "gpu:0": 1e-4},
           "resident_bytes": 1 << 20, "allowed_devices": ["gpu:0"]},
          {"id": "log", "out_bytes": 4096, "cost_s": [2e-4, 1e-4],
           "colocation": "tail"},
          {"id": "out", "kind": "output", "out_bytes": 4096,
           "colocation": "tail"}],
      "edges": [{"src": "x", "dst": "matmul"},
                {"src": "matmul", "dst": "log", "bytes": 4096},
                {"src": "log", "dst": "out"}]}


def write(tmp_path, document, name="g.json"):
  path = tmp_path / name
  path.write_text(json.dumps(document))
  return str(path)


# -- round trips ---------------------------------------------------------------


@pytest.mark.parametrize("which", ["plain", "constrained"])
@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_file_round_trip_is_identical(tmp_path, request, topology, which,
                                      suffix):
  graph = request.getfixturevalue(which)
  path = str(tmp_path / f"g{suffix}")
  graph_files.save(path, graph)
  loaded = graph_files.load(path)
  assert loaded.graph == graph
  assert loaded.graph.allowed_devices is None or np.array_equal(
      loaded.graph.allowed_devices, graph.allowed_devices)


def test_json_round_trip_keeps_topology_and_costs(tmp_path, constrained,
                                                  topology):
  costs = topology.op_costs(constrained) * 1.5
  path = str(tmp_path / "g.json")
  graph_files.save(path, constrained, topology=topology, costs=costs)
  loaded = graph_files.load(path)
  assert loaded.graph == constrained
  assert np.array_equal(loaded.costs, costs)
  assert loaded.topology.device_names == topology.device_names
  for field in ("link_bandwidth", "link_latency", "compute_group",
                "memory_bytes", "peak_flops", "launch_overhead_s"):
    assert np.array_equal(getattr(loaded.topology, field),
                          getattr(topology, field)), field
  # Saving what was read writes the same file.
  again = str(tmp_path / "again.json")
  graph_files.save(again, loaded.graph, topology=loaded.topology,
                   costs=loaded.costs)
  assert open(again).read() == open(path).read()


def test_round_trips_simulate_identically(tmp_path, plain, topology):
  placements = np.random.default_rng(0).integers(0, 3, (4, plain.n_nodes))
  want = gplace.simulate(plain, placements, topology)
  path = str(tmp_path / "g.json")
  graph_files.save(path, plain)
  for graph in (graph_files.load(path).graph,
                graph_files.from_networkx(plain.to_networkx()).graph):
    got = gplace.simulate(graph, placements, topology)
    np.testing.assert_array_equal(got.runtime_s, want.runtime_s)
    np.testing.assert_array_equal(got.peak_bytes, want.peak_bytes)


@pytest.mark.parametrize("which", ["plain", "constrained"])
def test_networkx_round_trip_is_identical(request, topology, which):
  graph = request.getfixturevalue(which)
  costs = topology.op_costs(graph)
  loaded = graph_files.from_networkx(
      interchange.to_networkx(graph, costs=costs))
  assert loaded.graph == graph
  assert np.array_equal(loaded.costs, costs)


def test_networkx_graph_of_any_ids_in_any_order():
  g = nx.DiGraph(name="hand", device_names=["cpu", "gpu"])
  g.add_node("loss", kind="output", out_bytes=4)
  g.add_node("w", kind="input", out_bytes=64, allowed_devices=["gpu"])
  g.add_node(("layer", 1), op_type="dot", flops=1e6, out_bytes=4,
             colocation=7)
  g.add_edge("w", ("layer", 1))
  g.add_edge(("layer", 1), "loss", bytes=4)
  graph = graph_files.from_networkx(g).graph
  assert graph.name == "hand"
  assert list(graph.names) == ["w", "('layer', 1)", "loss"]
  assert graph.kind[0] == NODE_INPUT
  assert graph.edge_bytes.tolist() == [64, 4]      # default: src out_bytes
  assert graph.allowed_devices.tolist() == [[False, True], [True, True],
                                            [True, True]]
  assert graph.colocation.tolist() == [-1, 7, -1]


def test_hand_written_json(tmp_path):
  loaded = graph_files.load(write(tmp_path, small_document()))
  graph = loaded.graph
  # The resident bytes became an input node feeding, and co-located with,
  # the op.
  assert list(graph.names) == ["x", "matmul/resident", "matmul", "log", "out"]
  assert graph.kind[1] == NODE_INPUT and graph.out_bytes[1] == 1 << 20
  assert graph.colocation[1] == graph.colocation[2] >= 0
  assert graph.colocation[3] == graph.colocation[4] >= 0
  assert graph.colocation[1] != graph.colocation[3]
  assert graph.allowed_devices[2].tolist() == [False, True]
  assert loaded.costs[:, 0].tolist() == [0, 0, 1e-3, 2e-4, 0]
  assert loaded.topology.n_devices == 2
  result = gplace.simulate(graph, [1, 1, 1, 0, 0], loaded.topology,
                           costs=loaded.costs)
  assert not result.oom and not result.constraint_violated
  bad = gplace.simulate(graph, [1, 1, 0, 0, 0], loaded.topology,
                        costs=loaded.costs)
  assert bad.oom and bad.constraint_violated


def test_graph_load_and_to_networkx_stay_compatible(tmp_path, plain):
  path = str(tmp_path / "g.npz")
  plain.save(path)
  assert gplace.Graph.load(path) == plain
  g = plain.to_networkx()
  assert g.nodes[0]["name"] == plain.names[0]
  assert g.edges[int(plain.edge_src[0]), int(plain.edge_dst[0])]["bytes"] \
      == plain.edge_bytes[0]


def test_edges_may_give_their_transfer_time(tmp_path):
  # 2e-5 s latency + 4096 bytes at 1e10 B/s: the edge's transfer of 4096
  # bytes, given as seconds instead.
  document = small_document()
  seconds = 2e-5 + 4096 / 1e10
  document["edges"][1] = {"src": "matmul", "dst": "log",
                          "transfer_s": seconds}
  timed = graph_files.load(write(tmp_path, document))
  plain = graph_files.load(write(tmp_path, small_document(), "plain.json"))
  np.testing.assert_array_equal(timed.graph.edge_bytes,
                                plain.graph.edge_bytes)
  placement = [1, 1, 1, 0, 0]           # log on the CPU: matmul's output sent
  ran = [gplace.simulate(f.graph, placement, f.topology, costs=f.costs,
                         return_schedule=True) for f in (timed, plain)]
  assert float(ran[0].runtime_s) == float(ran[1].runtime_s)
  # log starts when the transfer ends: matmul's finish plus those seconds.
  matmul, log = 2, 3
  np.testing.assert_allclose(float(ran[0].start_s[log]),
                             float(ran[0].finish_s[matmul]) + seconds,
                             rtol=1e-6)
  # The same through networkx, given the topology.
  g = interchange.to_networkx(plain.graph, costs=plain.costs,
                              device_names=plain.topology.device_names)
  edge = (matmul, log)
  del g.edges[edge]["bytes"]
  g.edges[edge]["transfer_s"] = seconds
  converted = graph_files.from_networkx(g, topology=plain.topology)
  np.testing.assert_array_equal(converted.graph.edge_bytes,
                                plain.graph.edge_bytes)
  with pytest.raises(GraphError, match="transfer_s needs the devices"):
    graph_files.from_networkx(g)


# -- malformed files -----------------------------------------------------------


def _set(path, value):
  def mutate(doc):
    target = doc
    for key in path[:-1]:
      target = target[key]
    if value is KeyError:
      del target[path[-1]]
    else:
      target[path[-1]] = value
  return mutate


MALFORMED = [
    # (mutation, words the message must contain)
    (_set(("nodes", 1, "out_bytes"), -3), ["nodes[1].out_bytes", "negative"]),
    (_set(("nodes", 1, "out_bytes"), KeyError),
     ["nodes[1].out_bytes", "missing"]),
    (_set(("nodes", 1, "out_bytes"), 1.5), ["nodes[1].out_bytes", "whole"]),
    (_set(("nodes", 1, "flops"), "many"), ["nodes[1].flops", "number"]),
    (_set(("nodes", 1, "kind"), "layer"), ["nodes[1].kind", "'op'"]),
    (_set(("nodes", 0, "out_shape"), [3, -1]), ["out_shape[1]"]),
    (_set(("nodes", 0, "out_shape"), "3x3"), ["out_shape", "list"]),
    (_set(("nodes", 1, "cost_s"), [1e-3]), ["cost_s", "one cost per device"]),
    (_set(("nodes", 1, "cost_s"), {"cpu:0": 1e-3}), ["cost_s", "missing"]),
    (_set(("nodes", 2, "cost_s"), KeyError), ["'log'", "no cost_s"]),
    (_set(("nodes", 1, "allowed_devices"), ["tpu:0"]),
     ["allowed_devices[0]", "tpu:0"]),
    (_set(("nodes", 1, "allowed_devices"), [5]),
     ["allowed_devices[0]", "only 2 devices"]),
    (_set(("nodes", 1, "allowed_devices"), []), ["allowed_devices", "non-empty"]),
    (_set(("nodes", 1, "colocation"), 1.5), ["colocation"]),
    (_set(("nodes", 1, "colour"), "red"), ["nodes[1]", "unknown fields"]),
    (_set(("nodes", 1, "id"), "x"), ["appears twice"]),
    (_set(("nodes", 1, "id"), None), ["nodes[1].id"]),
    (_set(("nodes", 1, "name"), 3), ["nodes[1].name", "string"]),
    (_set(("edges", 0, "dst"), "nowhere"), ["edges[0].dst", "no node id"]),
    (_set(("edges", 0, "bytes"), -1), ["edges[0].bytes"]),
    (_set(("edges", 0, "weight"), 1), ["edges[0]", "unknown fields"]),
    (_set(("edges", 1, "transfer_s"), 1e-4),
     ["edges[1]", "both bytes and transfer_s"]),
    (_set(("edges", 0, "transfer_s"), -1.0),
     ["edges[0].transfer_s", "non-negative"]),
    (_set(("edges", 0, "transfer_s"), "fast"), ["edges[0].transfer_s"]),
    (_set(("edges", 2), {"src": "log", "dst": "matmul"}), ["cycle"]),
    (_set(("edges", 2), {"src": "log", "dst": "log"}), ["itself"]),
    (_set(("edges",), {}), ["'edges' must be a list"]),
    (_set(("nodes",), KeyError), ["'nodes' must be a list"]),
    (_set(("version",), 9), ["version 9"]),
    (_set(("format",), "onnx"), ["format", "not a gplace graph"]),
    (_set(("nodez",), []), ["unknown top-level fields", "nodez"]),
    (_set(("n_devices",), 3), ["n_devices", "topology has 2"]),
    (_set(("topology", "devices", 0, "memory_bytes"), 0),
     ["memory_bytes", "positive"]),
    (_set(("topology", "devices", 0, "memory_bytes"), KeyError),
     ["devices[0].memory_bytes", "missing"]),
    (_set(("topology", "devices", 1, "name"), "cpu:0"), ["repeat"]),
    (_set(("topology", "devices", 0, "ram"), 1), ["unknown fields", "ram"]),
    (_set(("topology", "links"), KeyError), ["links"]),
    (_set(("topology", "links", "bandwidth"), [[1, 2]]),
     ["links.bandwidth", "2 x 2"]),
    (_set(("topology", "compute_group"), [0]), ["compute_group"]),
    (_set(("topology",), []), ["topology", "object"]),
    # Counts past int64 and unknown device kinds: an OverflowError, or
    # accepted, before (issue 47).
    (_set(("nodes", 1, "out_bytes"), 2**63), ["nodes[1].out_bytes", "2**63"]),
    (_set(("nodes", 1, "out_bytes"), 10**40),
     ["nodes[1].out_bytes", "too large"]),
    (_set(("nodes", 1, "out_bytes"), 1e40), ["nodes[1].out_bytes", "2**63"]),
    (_set(("nodes", 1, "resident_bytes"), 2**64),
     ["nodes[1].resident_bytes", "2**63"]),
    (_set(("edges", 0, "bytes"), 10**40), ["edges[0].bytes", "2**63"]),
    (_set(("edges", 0, "transfer_s"), 1e300),
     ["edges[0].transfer_s", "longer than any count of bytes"]),
    (lambda doc: [node.update(colocation=2**40) for node in doc["nodes"][2:]],
     ["nodes[2].colocation", "below 2**31"]),         # OverflowError before
    (_set(("nodes", 0, "out_shape"), [2**40] * 20),
     ["out_shapes[0]", "2**63"]),                       # folded to 0 before
    (_set(("topology", "compute_group"), [0, 2**32]),
     ["compute_group", "outside int32"]),               # group 0 before
    (_set(("topology", "devices", 1, "kind"), "quantum"),
     ["'gpu:0'", "kind 'quantum'", "'cpu', 'gpu', 'tpu'"]),
]


@pytest.mark.parametrize("case", range(len(MALFORMED)))
def test_malformed_json_names_the_field(tmp_path, case):
  mutate, words = MALFORMED[case]
  document = copy.deepcopy(small_document())
  mutate(document)
  path = write(tmp_path, document)
  with pytest.raises(GraphError) as info:
    graph_files.load(path)
  message = str(info.value)
  for word in words:
    assert word.lower() in message.lower(), (word, message)
  assert path in message


@pytest.mark.parametrize("text,words", [
    ("", ["Cannot read JSON"]), ("{\"nodes\": [", ["Cannot read JSON"]),
    ("[1, 2]", ["one JSON object"]), ("\xff\xfe", ["Cannot read JSON"]),
    ("[" * 100_000 + "]" * 100_000, ["nest deeper"]),   # RecursionError before
])
def test_unreadable_json(tmp_path, text, words):
  path = tmp_path / "g.json"
  path.write_bytes(text.encode("latin-1"))
  with pytest.raises(GraphError) as info:
    graph_files.load(str(path))
  for word in words:
    assert word in str(info.value)


def test_bad_paths_and_suffixes(tmp_path, plain, topology):
  with pytest.raises(GraphError, match="No graph file"):
    graph_files.load(str(tmp_path / "missing.json"))
  with pytest.raises(GraphError, match="suffix"):
    graph_files.load(str(tmp_path / "g.onnx"))
  with pytest.raises(GraphError, match="suffix"):
    graph_files.save(str(tmp_path / "g.txt"), plain)
  with pytest.raises(GraphError, match="holds the graph alone"):
    graph_files.save(str(tmp_path / "g.npz"), plain, topology=topology)
  with pytest.raises(GraphError, match="writable"):
    graph_files.save(str(tmp_path / "no" / "g.json"), plain)
  with pytest.raises(GraphError, match="str or os.PathLike"):
    graph_files.load(3)


def _producer_into_input(kind_of_x):
  """y (1 s on cpu:0) -> x -> m (0.1 s) -> o, x an input or an op."""
  return {
      "topology": {"devices": [
          {"name": "cpu:0", "kind": "cpu", "peak_flops": 1e11,
           "mem_bandwidth": 1e10, "memory_bytes": 1e12},
          {"name": "gpu:0", "kind": "gpu", "peak_flops": 1e11,
           "mem_bandwidth": 1e10, "memory_bytes": 1e12}],
          "links": {"bandwidth": 1e20, "latency_s": 0.0}},
      "nodes": [{"id": "y", "flops": 1e11, "out_bytes": 4},
                {"id": "x", "kind": kind_of_x, "out_bytes": 4},
                {"id": "m", "flops": 1e10, "out_bytes": 4},
                {"id": "o", "kind": "output", "out_bytes": 4}],
      "edges": [{"src": "y", "dst": "x"}, {"src": "x", "dst": "m"},
                {"src": "m", "dst": "o"}]}


def test_an_edge_into_an_input_is_refused_never_dropped(tmp_path):
  # Accepted before, and ignored: m started at 0 s although y ends at 1 s,
  # and the output finished at 0.1 s in every schedule (issue 47).
  words = r"edges\[0\] goes from 'y' into input node 'x'.*\"kind\": \"op\""
  with pytest.raises(GraphError, match=words):
    graph_files.load(write(tmp_path, _producer_into_input("input")))
  g = nx.DiGraph()
  for node in _producer_into_input("input")["nodes"]:
    g.add_node(node["id"], **{k: v for k, v in node.items() if k != "id"})
  g.add_edges_from([("y", "x"), ("x", "m"), ("m", "o")])
  with pytest.raises(GraphError, match=words):
    graph_files.from_networkx(g)
  # As an op, x waits for y, and so does everything after it.
  loaded = graph_files.load(write(tmp_path, _producer_into_input("op"),
                                  "op.json"))
  for schedule in ("static", "dynamic", "best"):
    result = gplace.simulate(loaded.graph, [0, 1, 1, 1], loaded.topology,
                             schedule=schedule, return_schedule=True)
    np.testing.assert_allclose(float(result.finish_s[3]), 1.1, rtol=1e-5)


def test_a_repeated_edge_moves_its_tensor_once(tmp_path):
  # matmul(x, x) written as two edges: their bytes were summed before, to
  # twice what capture counts (issue 47).
  document = small_document()
  document["edges"].append({"src": "x", "dst": "matmul"})
  twice = graph_files.load(write(tmp_path, document))
  once = graph_files.load(write(tmp_path, small_document(), "once.json"))
  assert twice.graph == once.graph
  assert twice.graph.edge_bytes.max() == 1 << 20      # resident, not 8192
  assert twice.graph.edge_bytes.tolist().count(4096) == 3
  document["edges"][-1]["bytes"] = 8
  with pytest.raises(GraphError, match=r"edges\[3\] repeats edges\[0\] "
                     r"\('x' -> 'matmul'\) with 8 bytes instead of 4096"):
    graph_files.load(write(tmp_path, document, "differ.json"))
  # networkx holds one edge per pair (a MultiDiGraph is refused), with its
  # bytes as given.
  g = interchange.to_networkx(once.graph, costs=once.costs,
                              device_names=once.topology.device_names)
  multi = nx.MultiDiGraph(g)
  multi.add_edge(0, 2, bytes=4096)
  with pytest.raises(GraphError, match="DiGraph"):
    graph_files.from_networkx(multi)
  assert graph_files.from_networkx(
      nx.DiGraph(multi), topology=once.topology).graph == once.graph


def test_to_networkx_checks_costs_and_device_names(plain):
  # An IndexError, or a graph of wrong costs, before (issue 47).
  with pytest.raises(GraphError, match=r"shape \(3, 2\).*one row per node"):
    plain.to_networkx(costs=np.zeros((3, 2)))
  with pytest.raises(GraphError, match="finite, non-negative"):
    plain.to_networkx(costs=np.full((plain.n_nodes, 2), np.nan))
  with pytest.raises(GraphError, match="disagree on the number of devices"):
    interchange.to_networkx(plain, costs=np.zeros((plain.n_nodes, 2)),
                            device_names=["cpu:0", "gpu:0", "gpu:1"])
  with pytest.raises(GraphError, match="device_names must be a list"):
    interchange.to_networkx(plain, device_names="cpu:0")
  g = plain.to_networkx(costs=np.ones((plain.n_nodes, 2)))
  assert g.nodes[0]["cost_s"] == [1.0, 1.0]


def test_bad_networkx_graphs():
  with pytest.raises(GraphError, match="DiGraph"):
    graph_files.from_networkx(nx.Graph())
  with pytest.raises(GraphError, match="DiGraph"):
    graph_files.from_networkx({"nodes": []})
  g = nx.DiGraph()
  g.add_node("a", out_bytes=4, allowed_devices=[0])
  with pytest.raises(GraphError, match="number of devices"):
    graph_files.from_networkx(g)
  g = nx.DiGraph(n_devices=0)
  with pytest.raises(GraphError, match="n_devices"):
    graph_files.from_networkx(g)
  g = nx.DiGraph(n_devices=10**15)                   # MemoryError before
  g.add_node("a", out_bytes=4, allowed_devices=[0])
  with pytest.raises(GraphError, match="at most 65536"):
    graph_files.from_networkx(g)
  g = nx.DiGraph()
  g.add_edge("a", "b")
  with pytest.raises(GraphError, match=r"nodes\[0\].out_bytes"):
    graph_files.from_networkx(g)


def test_format_documented_fields_match_the_reader():
  """Every node field the reader accepts is documented in the format."""
  from gplace.graphs.records import NODE_FIELDS
  for field in NODE_FIELDS:
    assert f'"{field}"' in json_format.__doc__, field
