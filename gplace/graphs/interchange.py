"""``networkx`` graphs in and out of gplace, and graph file suffixes.

:func:`to_networkx` / :func:`graph_from_networkx` convert ``DiGraph`` s whose
attributes are the JSON format's fields (:mod:`gplace.graphs.json_format`;
node keys are ids, ``out_bytes`` required). With a topology and costs:
:mod:`gplace.sim.graph_files`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from gplace.errors import GraphError
from gplace.graphs.export import networkx_of
from gplace.graphs.graph import Graph, check_graph
from gplace.graphs.records import graph_from_records

SUFFIXES = (".npz", ".json")


def is_graph_path(text: str) -> bool:
  """Whether ``text`` names a graph file by its suffix (``.npz``, ``.json``)."""
  return isinstance(text, str) and text.lower().endswith(SUFFIXES)


def check_digraph(nx_graph: Any) -> None:
  """Raises GraphError unless ``nx_graph`` is a ``networkx.DiGraph``."""
  import networkx as nx  # pylint: disable=g-import-not-at-top
  if not isinstance(nx_graph, nx.DiGraph) or nx_graph.is_multigraph():
    raise GraphError(
        f"from_networkx needs a networkx.DiGraph, got "
        f"{type(nx_graph).__name__}; convert it with nx.DiGraph(g).")


def graph_from_networkx(nx_graph: Any, *, name: str | None = None,
                        device_names: Sequence[str] | None = None,
                        n_devices: int | None = None, topology=None
                        ) -> tuple[Graph, Optional[np.ndarray]]:
  """``(graph, costs [N, D] or None)`` of a ``networkx.DiGraph`` (see the
  module docstring); :func:`gplace.sim.graph_files.from_networkx` checks
  a topology and gives its device names first, and documents the
  arguments (``topology`` here: already checked, or None).

  Raises:
    GraphError: not a DiGraph, a cycle, or any malformed attribute.
  """
  check_digraph(nx_graph)
  attrs = nx_graph.graph
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
  return graph_from_records(
      list(nx_graph.nodes(data=True)), list(nx_graph.edges(data=True)),
      name=name, where="networkx graph", device_names=device_names,
      n_devices=None if n_devices is None else int(n_devices),
      topology=topology)


def to_networkx(graph: Graph, *, costs=None,
                device_names: Sequence[str] | None = None):
  """A ``networkx.DiGraph`` of ``graph``: nodes ``0..N-1`` with every field
  as attributes, edges with ``bytes``; ``costs`` (``[N, D]``) as ``cost_s``.
  :func:`gplace.sim.graph_files.from_networkx` of it gives an identical
  graph."""
  check_graph(graph, "gplace.graphs.interchange.to_networkx")
  return networkx_of(graph, costs=costs, device_names=device_names)
