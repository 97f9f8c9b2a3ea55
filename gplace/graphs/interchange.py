"""Graphs from elsewhere: files (``.npz``, ``.json``) and ``networkx``
graphs in and out of gplace.

Where it sits: beside :func:`gplace.capture`, the other way to get a
:class:`~gplace.Graph`. :func:`load` reads a graph file of either format
into a :class:`GraphFile` (the graph, and the topology and measured cost
table a JSON file may carry); :func:`save` writes one;
:func:`from_networkx` / :func:`to_networkx` convert ``networkx.DiGraph``
values whose node and edge attributes are the JSON format's fields
(:mod:`gplace.graphs.json_format` documents them). Every malformed input
raises a :class:`~gplace.errors.GraphError` that names the field and the
fix. Host-side Python; nothing here is traced.

networkx convention: node keys are the ids (any hashable); node attributes
``name``, ``kind``, ``op_type``, ``out_bytes`` (required), ``out_shape``,
``out_dtype``, ``flops``, ``bytes_accessed``, ``cost_s``,
``resident_bytes``, ``allowed_devices``, ``colocation``; edge attribute
``bytes`` (default: the source's ``out_bytes``), or ``transfer_s`` given
a ``topology``; graph attributes ``name``,
and ``n_devices`` or ``device_names`` where constraints or costs need
devices.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from gplace.errors import GraphError
from gplace.graphs.graph import Graph, check_graph
from gplace.graphs.json_format import read_json, write_json
from gplace.graphs.records import graph_from_records, records_from_graph
from gplace.graphs.storage import check_path

SUFFIXES = (".npz", ".json")


class GraphFile(NamedTuple):
  """A graph with what its source said about devices and costs.

  Attributes:
    graph: the op graph (``N`` nodes).
    topology: the devices the file describes, or None.
    costs: ``[N, D]`` float64 measured seconds per node and device, or
      None (then the topology's roofline prices the nodes).
  """

  graph: Graph
  topology: Any = None
  costs: Optional[np.ndarray] = None


def is_graph_path(text: str) -> bool:
  """Whether ``text`` names a graph file by its suffix (``.npz``, ``.json``)."""
  return isinstance(text, str) and text.lower().endswith(SUFFIXES)


def load(path: str | os.PathLike) -> GraphFile:
  """Reads a graph file: ``.npz`` (:meth:`Graph.save`) or ``.json``.

  Returns:
    A :class:`GraphFile`; an ``.npz`` file has no topology or costs.

  Raises:
    GraphError: another suffix, a missing, unreadable or malformed file
      (the message names the file and the field).
  """
  path = check_path(path, "gplace.graphs.interchange.load")
  suffix = os.path.splitext(path)[1].lower()
  if suffix == ".npz":
    return GraphFile(Graph.load(path))
  if suffix == ".json":
    return GraphFile(*read_json(path))
  raise GraphError(f"Cannot tell the format of path {path!r} from its "
                   f"suffix; use {' or '.join(SUFFIXES)}.")


def save(path: str | os.PathLike, graph: Graph, *, topology=None,
         costs=None) -> None:
  """Writes ``graph`` to ``path``: ``.json`` (with ``topology`` and
  ``costs`` ``[N, D]`` when given) or ``.npz`` (the graph alone).

  Raises:
    GraphError: not a graph, another suffix, topology or costs for an
      ``.npz`` file, or the file cannot be written.
    TopologyError: a bad topology or cost table.
  """
  path = check_path(path, "gplace.graphs.interchange.save")
  check_graph(graph, "gplace.graphs.interchange.save")
  suffix = os.path.splitext(path)[1].lower()
  if suffix == ".npz":
    if topology is not None or costs is not None:
      raise GraphError(f"path {path!r}: an .npz file holds the graph alone; "
                       "save to .json to keep the topology and costs.")
    graph.save(path)
    return
  if suffix != ".json":
    raise GraphError(f"Cannot tell which format to write to path {path!r} "
                     f"from its suffix; use {' or '.join(SUFFIXES)}.")
  costs = _checked_costs(graph, topology, costs)
  write_json(path, graph, topology, costs)


def _checked_costs(graph: Graph, topology, costs) -> Optional[np.ndarray]:
  from gplace.sim.topology import check_topology, validate_costs  # pylint: disable=g-import-not-at-top
  if topology is not None:
    check_topology(topology, "gplace.graphs.interchange.save")
    if (graph.allowed_devices is not None
        and graph.allowed_devices.shape[1] != topology.n_devices):
      raise GraphError(
          f"graph {graph.name!r} has allowed_devices for "
          f"{graph.allowed_devices.shape[1]} devices but the topology has "
          f"{topology.n_devices}; save it with the topology it was made for.")
  if costs is None:
    return None
  if topology is None:
    costs = np.asarray(costs, np.float64)
    if costs.ndim != 2 or costs.shape[0] != graph.n_nodes or not np.all(
        np.isfinite(costs) & (costs >= 0)):
      raise GraphError(f"costs must be an [{graph.n_nodes}, n_devices] "
                       "array of finite, non-negative seconds.")
    return costs
  return validate_costs(costs, graph, topology)


def from_networkx(nx_graph: Any, *, name: str | None = None,
                  device_names: Sequence[str] | None = None,
                  n_devices: int | None = None,
                  topology=None) -> GraphFile:
  """A gplace graph from a ``networkx.DiGraph`` (see the module docstring).

  Args:
    nx_graph: a directed acyclic ``networkx.DiGraph``.
    name: the graph's label (default: ``nx_graph.graph["name"]``, else
      ``"graph"``).
    device_names: names that ``allowed_devices`` / ``cost_s`` may use
      (default: the graph attribute ``device_names``).
    n_devices: ``D`` for index-based constraints (default: the graph
      attribute ``n_devices``, else the ``cost_s`` lists' length).
    topology: the devices (a :class:`~gplace.Topology`), if known: their
      names serve as ``device_names``, and edges may give ``transfer_s``
      instead of ``bytes`` (see :mod:`gplace.graphs.json_format`).

  Returns:
    A :class:`GraphFile` (with ``topology``); ``costs`` ``[N, D]`` when the
    nodes carry ``cost_s``.

  Raises:
    GraphError: not a DiGraph, a cycle, or any malformed attribute.
  """
  import networkx as nx  # pylint: disable=g-import-not-at-top
  if not isinstance(nx_graph, nx.DiGraph) or nx_graph.is_multigraph():
    raise GraphError(
        f"from_networkx needs a networkx.DiGraph, got "
        f"{type(nx_graph).__name__}; convert it with nx.DiGraph(g).")
  attrs = nx_graph.graph
  if topology is not None:
    from gplace.sim.topology import check_topology  # pylint: disable=g-import-not-at-top
    check_topology(topology, "from_networkx")
    if device_names is None:
      device_names = list(topology.device_names)
  name = name if name is not None else attrs.get("name", "graph") or "graph"
  if not isinstance(name, str):
    raise GraphError(f"networkx graph: name is {name!r}; give a string.")
  device_names = (device_names if device_names is not None
                  else attrs.get("device_names"))
  if device_names is not None:
    device_names = list(device_names)
    if not device_names or not all(isinstance(d, str) for d in device_names):
      raise GraphError("networkx graph: device_names must be a non-empty "
                       "list of strings.")
  n_devices = n_devices if n_devices is not None else attrs.get("n_devices")
  if n_devices is not None:
    if isinstance(n_devices, bool) or not isinstance(
        n_devices, (int, np.integer)) or n_devices < 1:
      raise GraphError(f"networkx graph: n_devices is {n_devices!r}; give a "
                       "positive integer.")
    if device_names is not None and len(device_names) != n_devices:
      raise GraphError("networkx graph: n_devices and device_names disagree.")
  graph, costs = graph_from_records(
      list(nx_graph.nodes(data=True)), list(nx_graph.edges(data=True)),
      name=name, where="networkx graph", device_names=device_names,
      n_devices=None if n_devices is None else int(n_devices),
      topology=topology)
  return GraphFile(graph, topology, costs)


def to_networkx(graph: Graph, *, costs=None,
                device_names: Sequence[str] | None = None):
  """A ``networkx.DiGraph`` of ``graph``: nodes ``0..N-1`` with every field
  as attributes, edges with ``bytes``; ``costs`` (``[N, D]``) as ``cost_s``.
  :func:`from_networkx` of it gives an identical graph."""
  import networkx as nx  # pylint: disable=g-import-not-at-top
  check_graph(graph, "gplace.graphs.interchange.to_networkx")
  if costs is not None:
    costs = np.asarray(costs, np.float64)
  nodes, edges = records_from_graph(graph, costs, device_names)
  out = nx.DiGraph(name=graph.name)
  if device_names is not None:
    out.graph["device_names"] = list(device_names)
  elif graph.allowed_devices is not None:
    out.graph["n_devices"] = int(graph.allowed_devices.shape[1])
  for node in nodes:
    out.add_node(node.pop("id"), **node)
  for edge in edges:
    out.add_edge(edge["src"], edge["dst"], bytes=edge["bytes"])
  return out
