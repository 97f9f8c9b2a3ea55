"""A graph as plain data: node and edge records (the JSON format's) and
``networkx.DiGraph`` values; :mod:`gplace.graphs.records` reads them back
identically. Reads only a graph's fields, so ``Graph``'s methods can call it.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from gplace.errors import GraphError, first_line
from gplace.graphs.schema import KIND_NAMES


def records_from_graph(graph, costs: Optional[np.ndarray] = None,
                       device_names: Sequence[str] | None = None
                       ) -> tuple[list[dict], list[dict]]:
  """``(nodes, edges)`` records of ``graph`` (a :class:`~gplace.Graph`):
  node ``i`` has ``id`` ``i``; ``costs`` (``[N, D]``) becomes each node's
  ``cost_s``; allowed devices are written by name when ``device_names``
  are given, else by index."""
  nodes = []
  for i in range(graph.n_nodes):
    node = dict(
        id=i, name=str(graph.names[i]), kind=KIND_NAMES[graph.kind[i]],
        op_type=str(graph.op_type[i]), out_bytes=int(graph.out_bytes[i]),
        out_shape=list(graph.shape_of(i)), out_dtype=str(graph.out_dtype[i]),
        flops=float(graph.flops[i]),
        bytes_accessed=float(graph.bytes_accessed[i]))
    if costs is not None:
      node["cost_s"] = [float(c) for c in costs[i]]
    if graph.allowed_devices is not None:
      devices = np.flatnonzero(graph.allowed_devices[i])
      node["allowed_devices"] = ([device_names[d] for d in devices]
                                 if device_names else devices.tolist())
    if graph.colocation is not None and graph.colocation[i] >= 0:
      node["colocation"] = int(graph.colocation[i])
    nodes.append(node)
  edges = [dict(src=int(s), dst=int(d), bytes=int(b)) for s, d, b in
           zip(graph.edge_src, graph.edge_dst, graph.edge_bytes)]
  return nodes, edges


def _checked_devices(graph, costs, device_names):
  """``(costs [N, D] float64 or None, device names or None)``, checked
  against each other and the graph's ``allowed_devices``.

  Raises:
    GraphError: ``costs`` is not an ``[N, D]`` array of finite,
      non-negative seconds, ``device_names`` not ``D`` strings, or they
      disagree on ``D``.
  """
  sizes = {}
  if graph.allowed_devices is not None:
    sizes["allowed_devices"] = graph.allowed_devices.shape[1]
  if costs is not None:
    try:
      costs = np.asarray(costs, np.float64)
    except (TypeError, ValueError) as err:
      raise GraphError(f"costs must be an [{graph.n_nodes}, n_devices] array "
                       f"of seconds ({first_line(err)}).") from err
    if costs.ndim != 2 or costs.shape[0] != graph.n_nodes:
      raise GraphError(f"costs has shape {costs.shape}, expected "
                       f"[{graph.n_nodes}, n_devices]: one row per node of "
                       f"graph {graph.name!r}.")
    if not np.all(np.isfinite(costs) & (costs >= 0)):
      raise GraphError("costs must be finite, non-negative seconds.")
    sizes["costs"] = costs.shape[1]
  if device_names is not None:
    names = (None if isinstance(device_names, (str, bytes))
             else list(device_names) if hasattr(device_names, "__iter__")
             else None)
    if names is None or not all(isinstance(d, str) for d in names):
      raise GraphError(f"device_names must be a list of strings, got "
                       f"{device_names!r}.")
    device_names = names
    sizes["device_names"] = len(device_names)
  if len(set(sizes.values())) > 1:
    raise GraphError(f"These disagree on the number of devices: {sizes}; "
                     "give costs and device_names for the devices the graph "
                     "is constrained to.")
  return costs, device_names


def networkx_of(graph, *, costs=None,
                device_names: Sequence[str] | None = None):
  """A ``networkx.DiGraph`` of ``graph`` (a :class:`~gplace.Graph`, not
  checked: see :func:`gplace.graphs.interchange.to_networkx`): nodes
  ``0..N-1`` with every field as attributes, edges with ``bytes``;
  ``costs`` (``[N, D]``) as ``cost_s``."""
  import networkx as nx  # pylint: disable=g-import-not-at-top
  costs, device_names = _checked_devices(graph, costs, device_names)
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
