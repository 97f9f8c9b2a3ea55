"""Graph files with their devices and costs (``.npz``, ``.json``), and
``networkx`` graphs with a :class:`~gplace.Topology`.

:func:`load` -> :class:`GraphFile` (``graph``, optional ``topology`` and
``costs [N, D]``), :func:`save`, :func:`from_networkx`. The format:
:mod:`gplace.graphs.json_format`, :mod:`gplace.sim.topology_json`.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from gplace.errors import GraphError
from gplace.graphs import json_format
from gplace.graphs.graph import Graph, check_graph
from gplace.graphs.interchange import (SUFFIXES, check_digraph,
                                       graph_from_networkx)
from gplace.graphs.storage import check_path
from gplace.sim.topology import check_topology, validate_costs
from gplace.sim.topology_json import topology_from_dict, topology_to_dict


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


def load(path: str | os.PathLike) -> GraphFile:
  """Reads a graph file: ``.npz`` (:meth:`Graph.save`) or ``.json``.

  Returns:
    A :class:`GraphFile`; an ``.npz`` file has no topology or costs.

  Raises:
    GraphError: another suffix, a missing, unreadable or malformed file
      (the message names the file and the field).
  """
  path = check_path(path, "gplace.sim.graph_files.load")
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
  path = check_path(path, "gplace.sim.graph_files.save")
  check_graph(graph, "gplace.sim.graph_files.save")
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
  if topology is not None:
    check_topology(topology, "gplace.sim.graph_files.save")
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
  """A gplace graph from a ``networkx.DiGraph`` (the convention of
  :mod:`gplace.graphs.interchange`).

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
  check_digraph(nx_graph)
  if topology is not None:
    check_topology(topology, "from_networkx")
    if device_names is None:
      device_names = list(topology.device_names)
  graph, costs = graph_from_networkx(
      nx_graph, name=name, device_names=device_names, n_devices=n_devices,
      topology=topology)
  return GraphFile(graph, topology, costs)


def graph_from_json(data: Any, where: str, default_name: str = "graph"):
  """``(graph, topology or None, costs [N, D] or None)`` of a parsed JSON
  document (:mod:`gplace.graphs.json_format`).

  Raises:
    GraphError: the document or any field is malformed (named in the
      message, prefixed by ``where``).
  """
  name = json_format.check_document(data, where, default_name)
  topology = None
  if data.get("topology") is not None:
    topology = topology_from_dict(data["topology"], f"{where}: topology")
  graph, costs = json_format.graph_from_document(data, where, name, topology)
  return graph, topology, costs


def read_json(path: str):
  """``(graph, topology or None, costs or None)`` of a JSON graph file.

  Raises:
    GraphError: the file is missing, not JSON, or malformed.
  """
  data = json_format.read_document(path)
  stem = os.path.splitext(os.path.basename(path))[0]
  return graph_from_json(data, path, default_name=stem)


def graph_to_json(graph: Graph, topology=None, costs=None) -> dict:
  """The format's document for ``graph`` (and ``topology``, ``costs``)."""
  if topology is None:
    return json_format.document_of(graph, costs)
  return json_format.document_of(graph, costs,
                                 device_names=topology.device_names,
                                 topology=topology_to_dict(topology))


def write_json(path: str, graph: Graph, topology=None, costs=None) -> None:
  """Writes :func:`graph_to_json` to ``path`` atomically.

  Raises:
    GraphError: the file cannot be written.
  """
  json_format.write_document(path, graph_to_json(graph, topology, costs))
