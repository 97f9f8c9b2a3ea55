"""The JSON graph format: graphs (and optionally their devices and measured
costs) from another tool. This module reads the graph part (header,
``n_devices``, ``nodes``, ``edges``), :mod:`gplace.sim.topology_json` the
``topology``, :func:`gplace.sim.graph_files.load` a whole file. A malformed
field raises a :class:`~gplace.errors.GraphError` naming it
(``nodes[3].out_bytes``) and the fix. The specification, ``version`` 1
(the guide's table is its summary)::

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
  memory). Give one of the two. One edge per pair of nodes: the tensor
  moves once per consumer device, so a pair given twice with the same
  bytes is one edge (not twice the bytes), and with different bytes an
  error. An edge into an ``"input"`` node is an error: an input has no
  producer.
* Node order does not matter: edges must form a DAG, and nodes are
  renumbered into a topological order (kept where the file has one).

:func:`gplace.sim.graph_files.write_json` writes this format for any graph
(node ids ``0..N-1``, every field explicit); reading it back gives an
identical graph, topology and cost table.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import numpy as np

from gplace.errors import GraphError, first_line
from gplace.graphs.export import records_from_graph
from gplace.graphs.graph import Graph
from gplace.graphs.records import graph_from_records, number

FORMAT = "gplace.graph"
VERSION = 1
_TOP_FIELDS = ("format", "version", "name", "n_devices", "topology", "nodes",
               "edges")


def check_document(data: Any, where: str, default_name: str = "graph") -> str:
  """Checks what comes before a document's topology (one JSON object of
  the format's fields, its format and version); returns the graph's name.

  Raises:
    GraphError: the document, its format, version or name is malformed
      (named in the message, prefixed by ``where``).
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
  return name


def graph_from_document(data: dict, where: str, name: str, topology=None):
  """``(graph, costs [N, D] or None)`` of a document that passed
  :func:`check_document`.

  Args:
    data: the parsed document.
    where: prefix of error messages (the file).
    name: the graph's name (:func:`check_document`).
    topology: the document's ``topology``, already read
      (:func:`gplace.sim.topology_json.topology_from_dict`), or None: its
      device names name devices, and its links turn ``transfer_s`` into
      bytes.

  Raises:
    GraphError: ``n_devices``, a node or an edge is malformed.
  """
  device_names = topology.device_names if topology is not None else None
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
  return graph_from_records(nodes, edges, name=name, where=where,
                            device_names=device_names, n_devices=n_devices,
                            topology=topology)


def _node_id(value: Any, where: str):
  if isinstance(value, bool) or not isinstance(value, (str, int)):
    raise GraphError(f"{where} is {value!r}; give a string or an integer.")
  return value


def read_document(path: str) -> Any:
  """The parsed JSON of the file at ``path``.

  Raises:
    GraphError: the file is missing or not JSON.
  """
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError as err:
    raise GraphError(f"No graph file at path {path!r}; check the path.") \
        from err
  except (OSError, UnicodeDecodeError, ValueError) as err:
    raise GraphError(f"Cannot read JSON from path {path!r} "
                     f"({first_line(err)}); fix the file (see the format "
                     "in gplace.graphs.json_format).") from err
  except RecursionError as err:
    raise GraphError(f"Cannot read JSON from path {path!r}: its lists or "
                     "objects nest deeper than Python's JSON reader goes; "
                     "a graph file nests a few levels (see the format in "
                     "gplace.graphs.json_format).") from err


def document_of(graph: Graph, costs=None, *, device_names=None,
                topology: Optional[dict] = None) -> dict:
  """The format's document for ``graph`` (and ``costs`` ``[N, D]``).

  Args:
    graph: the graph.
    costs: its ``[N, D]`` seconds, or None.
    device_names: the topology's device names, or None (devices by index).
    topology: the format's ``topology`` object
      (:func:`gplace.sim.topology_json.topology_to_dict`), or None.
  """
  nodes, edges = records_from_graph(graph, costs, device_names)
  data = dict(format=FORMAT, version=VERSION, name=graph.name)
  if topology is not None:
    data["topology"] = topology
  elif graph.allowed_devices is not None or costs is not None:
    data["n_devices"] = int(graph.allowed_devices.shape[1]
                            if graph.allowed_devices is not None
                            else np.shape(costs)[1])
  data["nodes"] = nodes
  data["edges"] = edges
  return data


def write_document(path: str, data: dict) -> None:
  """Writes the document ``data`` to ``path`` atomically.

  Raises:
    GraphError: the file cannot be written.
  """
  text = json.dumps(data, indent=1, allow_nan=False)
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
