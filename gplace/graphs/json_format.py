"""The JSON graph format: graphs (and optionally their devices) measured or
built by another tool, read into a :class:`~gplace.Graph`, a
:class:`~gplace.Topology` and a cost table.

Where it sits: :func:`gplace.graphs.interchange.load` reads ``.json`` files
with :func:`read_json` and ``.npz`` files with :meth:`Graph.load`;
``experiments/run.py --config.workload=path.json`` goes through it. Every
malformed file raises a :class:`~gplace.errors.GraphError` naming the field
(``nodes[3].out_bytes``) and what to write instead. Host-side Python.

The format (``version`` 1)::

  {
    "format": "gplace.graph", "version": 1,       # both optional on read
    "name": "my_model",                            # optional, default: file stem
    "n_devices": 3,                                # optional, see below
    "topology": {                                  # optional
      "name": "my_cluster",
      "devices": [
        {"name": "cpu:0", "kind": "cpu", "peak_flops": 6.6e11,
         "mem_bandwidth": 6.8e10, "memory_bytes": 1.37e11,
         "launch_overhead_s": 5.7e-6,              # optional, 0
         "cluster_launch_s": 0.0,                  # optional, 0
         "copy_issue_s": 0.0},                     # optional, 0
        ...],
      "links": {"bandwidth": 1.2e10, "latency_s": 2.5e-5},
      "compute_group": [0, 1, 2],                  # optional, one per device
      "time_scale": 1.0,                           # optional
      "batched_inputs": false,                     # optional
      "pipelined_links": false                     # optional: or [D][D]
    },
    "nodes": [
      {"id": "conv1",                 # unique string or integer, required
       "name": "resnet/conv1",        # optional, default: the id
       "kind": "op",                  # "input" | "op" | "output", default op
       "op_type": "conv",             # optional
       "out_bytes": 401408,           # bytes of the node's output, required
       "out_shape": [1, 56, 56, 32], "out_dtype": "float32",   # optional
       "flops": 2.3e8, "bytes_accessed": 1.2e6,   # roofline inputs, default 0
       "cost_s": [1e-3, 2e-4, 2e-4],  # or {"cpu:0": 1e-3, "gpu:0": ...}
       "resident_bytes": 37632,       # optional: bytes held all step
       "allowed_devices": ["gpu:0", "gpu:1"],     # optional, names or indices
       "colocation": "conv1_state"},  # optional class: same device as others
      ...],
    "edges": [
      {"src": "conv1", "dst": "relu1", "bytes": 401408},  # bytes default:
      {"src": "relu1", "dst": "pool1", "transfer_s": 3e-5},  # src's out_bytes
      ...]
  }

Semantics:

* ``kind``: ``"input"`` nodes (parameters, batches) are resident all step
  and cost nothing; ``"output"`` nodes mark results; ``"op"`` nodes run.
* Costs: ``flops`` and ``bytes_accessed`` give the roofline cost on each
  device of the topology (:meth:`Topology.op_costs`). ``cost_s`` gives
  measured seconds per device instead: a list in device order or an object
  keyed by device name. If any node has ``cost_s``, every op node must
  (input and output nodes default to 0), and they form the ``[N, D]``
  cost table returned beside the graph.
* ``resident_bytes`` on an op: memory it holds for the whole step (weights,
  optimizer state). It becomes an input node named ``<name>/resident`` that
  feeds the op and shares its co-location class, so it lives on the op's
  device.
* ``allowed_devices``: the only devices the node may run on (an op with a
  kernel on some devices only). ``colocation``: nodes with the same class
  (a string or an integer) must share a device. ``gplace.simulate`` flags a
  placement that breaks either as infeasible (``oom`` and
  ``constraint_violated``); the baselines respect them.
* Devices: names refer to ``topology.devices``. Without a topology,
  ``allowed_devices`` and ``cost_s`` use device indices, and ``n_devices``
  (or the length of the ``cost_s`` lists) says how many devices there are.
* ``links``: ``bandwidth`` (bytes/s) and ``latency_s`` are each one number
  (every pair of devices) or a ``[D][D]`` matrix from row to column device,
  its diagonal ignored (``null`` allowed there). Required with more than
  one device.
* Edges: ``bytes`` is what a transfer of the edge's tensor sends (default:
  the source's ``out_bytes``); a node's output is sent once per device,
  the largest of its edges' bytes. ``transfer_s`` instead gives the
  measured seconds of that transfer between two devices; it needs the
  ``topology`` and becomes the bytes that take that long on its links
  (latency plus bytes over bandwidth, averaged over the device pairs:
  exact where all links are alike; it also counts as those bytes in
  memory). Give one of the two.
* Node order does not matter: edges must form a DAG, and nodes are
  renumbered into a topological order (kept where the file has one).

:func:`write_json` writes this format for any graph (node ids ``0..N-1``,
every field explicit); reading it back gives an identical graph, topology
and cost table.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import numpy as np

from gplace.errors import GraphError, TopologyError, first_line
from gplace.graphs.graph import Graph
from gplace.graphs.records import (graph_from_records, number,
                                   records_from_graph)

FORMAT = "gplace.graph"
VERSION = 1
_DEVICE_FIELDS = ("name", "kind", "peak_flops", "mem_bandwidth",
                  "memory_bytes", "launch_overhead_s", "cluster_launch_s",
                  "copy_issue_s")
_TOP_FIELDS = ("format", "version", "name", "n_devices", "topology", "nodes",
               "edges")


def _matrix(value: Any, where: str, n_devices: int, diagonal: float):
  """A link field: one number for every pair, or a ``[D][D]`` matrix."""
  if not isinstance(value, list):
    matrix = np.full((n_devices, n_devices), float(number(value, where)))
    np.fill_diagonal(matrix, diagonal)
    return matrix
  if len(value) != n_devices or not all(
      isinstance(row, list) and len(row) == n_devices for row in value):
    raise GraphError(f"{where} must be one number or a {n_devices} x "
                     f"{n_devices} matrix (a list of {n_devices} rows).")
  matrix = np.empty((n_devices, n_devices))
  for i, row in enumerate(value):
    for j, entry in enumerate(row):
      matrix[i, j] = (diagonal if i == j and entry is None else
                      number(entry, f"{where}[{i}][{j}]"))
  return matrix


def topology_from_dict(value: Any, where: str):
  """A :class:`~gplace.Topology` from the format's ``topology`` object.

  Raises:
    GraphError: a missing or malformed field (named), or values the
      topology rejects (its message quoted).
  """
  from gplace.sim.topology import Device, Topology  # pylint: disable=g-import-not-at-top
  if not isinstance(value, dict):
    raise GraphError(f"{where} must be an object with devices and links.")
  devices = value.get("devices")
  if not isinstance(devices, list) or not devices:
    raise GraphError(f"{where}.devices must be a non-empty list of device "
                     f"objects with fields {', '.join(_DEVICE_FIELDS)}.")
  out = []
  for i, dev in enumerate(devices):
    at = f"{where}.devices[{i}]"
    if not isinstance(dev, dict):
      raise GraphError(f"{at} must be an object with fields "
                       f"{', '.join(_DEVICE_FIELDS)}.")
    unknown = sorted(set(dev) - set(_DEVICE_FIELDS))
    if unknown:
      raise GraphError(f"{at} has unknown fields {unknown}; device fields "
                       f"are {', '.join(_DEVICE_FIELDS)}.")
    for text in ("name", "kind"):
      if not isinstance(dev.get(text), str):
        raise GraphError(f"{at}.{text} is {dev.get(text)!r}; give a string "
                         "(e.g. name 'gpu:0', kind 'gpu').")
    numbers = {f: number(dev.get(f), f"{at}.{f}") for f in
               ("peak_flops", "mem_bandwidth", "memory_bytes")}
    overheads = {f: number(dev.get(f), f"{at}.{f}", default=0.0) for f in
                 ("launch_overhead_s", "cluster_launch_s", "copy_issue_s")}
    out.append(Device(dev["name"], dev["kind"], **numbers, **overheads))
  names = [d.name for d in out]
  if len(set(names)) != len(names):
    raise GraphError(f"{where}.devices: device names {names} repeat; give "
                     "every device a unique name.")
  d = len(out)
  links = value.get("links")
  if links is None and d == 1:
    links = {"bandwidth": 1.0, "latency_s": 0.0}
  if not isinstance(links, dict) or set(links) != {"bandwidth", "latency_s"}:
    raise GraphError(f"{where}.links must be an object with exactly "
                     "'bandwidth' (bytes/s) and 'latency_s', each one number "
                     "or a [D][D] matrix.")
  bandwidth = _matrix(links["bandwidth"], f"{where}.links.bandwidth", d,
                      np.inf)
  latency = _matrix(links["latency_s"], f"{where}.links.latency_s", d, 0.0)
  group = value.get("compute_group", list(range(d)))
  if not isinstance(group, list) or len(group) != d:
    raise GraphError(f"{where}.compute_group must list one integer per "
                     f"device ({d}); devices with equal values share compute.")
  group = [number(g, f"{where}.compute_group[{i}]", integer=True)
           for i, g in enumerate(group)]
  name = value.get("name", "topology")
  if not isinstance(name, str):
    raise GraphError(f"{where}.name is {name!r}; give a string.")
  try:
    return Topology(devices=tuple(out), link_bandwidth=bandwidth,
                    link_latency=latency, compute_group=np.asarray(group),
                    name=name,
                    time_scale=number(value.get("time_scale"),
                                      f"{where}.time_scale", default=1.0),
                    batched_inputs=value.get("batched_inputs", False),
                    pipelined_links=value.get("pipelined_links", False))
  except TopologyError as err:
    raise GraphError(f"{where}: {err}") from err


def _json_number(value: float) -> Optional[float]:
  return float(value) if np.isfinite(value) else None


def topology_to_dict(topology) -> dict:
  """The format's ``topology`` object of ``topology`` (exact round trip)."""
  from gplace.sim.topology import pipelined_to_json  # pylint: disable=g-import-not-at-top
  matrix = lambda m: [[_json_number(v) for v in row] for row in m]
  return dict(
      name=topology.name,
      devices=[{f: (getattr(dev, f) if f in ("name", "kind")
                    else float(getattr(dev, f))) for f in _DEVICE_FIELDS}
               for dev in topology.devices],
      links=dict(bandwidth=matrix(topology.link_bandwidth),
                 latency_s=matrix(topology.link_latency)),
      compute_group=topology.compute_group.tolist(),
      time_scale=float(topology.time_scale),
      batched_inputs=topology.batched_inputs,
      pipelined_links=pipelined_to_json(topology.pipelined_links))


def graph_from_json(data: Any, where: str, default_name: str = "graph"):
  """``(graph, topology or None, costs [N, D] or None)`` of parsed JSON.

  Raises:
    GraphError: the document or any field is malformed (named in the
      message, prefixed by ``where``).
  """
  if not isinstance(data, dict):
    raise GraphError(f"{where}: the file must hold one JSON object with "
                     f"'nodes' and 'edges', got {type(data).__name__}.")
  unknown = sorted(set(data) - set(_TOP_FIELDS))
  if unknown:
    raise GraphError(f"{where}: unknown top-level fields {unknown}; the "
                     f"format has {', '.join(_TOP_FIELDS)}.")
  if data.get("format", FORMAT) != FORMAT:
    raise GraphError(f"{where}: format is {data['format']!r}, not "
                     f"{FORMAT!r}; this is not a gplace graph file.")
  version = data.get("version", VERSION)
  if not isinstance(version, int) or isinstance(version, bool) or not (
      1 <= version <= VERSION):
    raise GraphError(f"{where}: version {version!r}; this gplace reads "
                     f"version {VERSION}. Upgrade gplace or write version "
                     f"{VERSION}.")
  name = data.get("name", default_name)
  if not isinstance(name, str):
    raise GraphError(f"{where}: name is {name!r}; give a string.")
  topology = None
  device_names = None
  if data.get("topology") is not None:
    topology = topology_from_dict(data["topology"], f"{where}: topology")
    device_names = topology.device_names
  n_devices = data.get("n_devices")
  if n_devices is not None:
    n_devices = number(n_devices, f"{where}: n_devices", integer=True)
    if n_devices < 1 or (topology and n_devices != topology.n_devices):
      raise GraphError(
          f"{where}: n_devices is {n_devices} but "
          + (f"the topology has {topology.n_devices} devices; drop n_devices "
             "or make them agree." if topology else
             "a placement needs at least 1 device."))
  for field in ("nodes", "edges"):
    if not isinstance(data.get(field), list):
      raise GraphError(f"{where}: '{field}' must be a list of objects "
                       f"(got {type(data.get(field)).__name__}).")
  nodes = []
  for i, node in enumerate(data["nodes"]):
    if not isinstance(node, dict) or "id" not in node:
      raise GraphError(f"{where}: nodes[{i}] must be an object with an 'id' "
                       "(a unique string or integer).")
    nodes.append((_node_id(node["id"], f"{where}: nodes[{i}].id"), node))
  edges = []
  for j, edge in enumerate(data["edges"]):
    if not isinstance(edge, dict) or not {"src", "dst"} <= set(edge):
      raise GraphError(f"{where}: edges[{j}] must be an object with 'src' "
                       "and 'dst' node ids (and optional 'bytes').")
    unknown = sorted(set(edge) - {"src", "dst", "bytes", "transfer_s"})
    if unknown:
      raise GraphError(f"{where}: edges[{j}] has unknown fields {unknown}; "
                       "edge fields are src, dst, bytes, transfer_s.")
    edges.append((edge["src"], edge["dst"],
                   {k: v for k, v in edge.items()
                    if k in ("bytes", "transfer_s")}))
  graph, costs = graph_from_records(nodes, edges, name=name, where=where,
                                    device_names=device_names,
                                    n_devices=n_devices, topology=topology)
  return graph, topology, costs


def _node_id(value: Any, where: str):
  if isinstance(value, bool) or not isinstance(value, (str, int)):
    raise GraphError(f"{where} is {value!r}; give a string or an integer.")
  return value


def read_json(path: str):
  """``(graph, topology or None, costs or None)`` of a JSON graph file.

  Raises:
    GraphError: the file is missing, not JSON, or malformed.
  """
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except FileNotFoundError as err:
    raise GraphError(f"No graph file at path {path!r}; check the path.") \
        from err
  except (OSError, UnicodeDecodeError, ValueError) as err:
    raise GraphError(f"Cannot read JSON from path {path!r} "
                     f"({first_line(err)}); fix the file (see the format "
                     "in gplace.graphs.json_format).") from err
  stem = os.path.splitext(os.path.basename(path))[0]
  return graph_from_json(data, path, default_name=stem)


def graph_to_json(graph: Graph, topology=None, costs=None) -> dict:
  """The format's document for ``graph`` (and ``topology``, ``costs``)."""
  device_names = topology.device_names if topology is not None else None
  nodes, edges = records_from_graph(graph, costs, device_names)
  data = dict(format=FORMAT, version=VERSION, name=graph.name)
  if topology is not None:
    data["topology"] = topology_to_dict(topology)
  elif graph.allowed_devices is not None or costs is not None:
    data["n_devices"] = int(graph.allowed_devices.shape[1]
                            if graph.allowed_devices is not None
                            else np.shape(costs)[1])
  data["nodes"] = nodes
  data["edges"] = edges
  return data


def write_json(path: str, graph: Graph, topology=None, costs=None) -> None:
  """Writes :func:`graph_to_json` to ``path`` atomically.

  Raises:
    GraphError: the file cannot be written.
  """
  text = json.dumps(graph_to_json(graph, topology, costs), indent=1,
                    allow_nan=False)
  tmp = path + ".tmp"
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text + "\n")
    os.replace(tmp, path)
  except OSError as err:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise GraphError(f"Cannot write the graph to path {path!r} "
                     f"({first_line(err)}); check that its directory exists "
                     "and is writable.") from err
