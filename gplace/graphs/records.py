"""Graphs from plain node and edge records, shared by the JSON format and
networkx: :func:`graph_from_records` checks every field and raises a
:class:`~gplace.errors.GraphError` naming the record, the field and the fix.
"""

from __future__ import annotations

import math
from typing import Any, Hashable, Optional, Sequence

import numpy as np

from gplace.errors import GraphError
from gplace.graphs.build_checks import stable_topological_order
from gplace.graphs.graph import Graph, KIND_NAMES, NODE_INPUT, NODE_OP

NODE_FIELDS = ("name", "kind", "op_type", "out_bytes", "out_shape",
               "out_dtype", "flops", "bytes_accessed", "cost_s",
               "resident_bytes", "allowed_devices", "colocation")
RESIDENT_SUFFIX = "/resident"
_INT64_LIMIT = 2**63
#: Devices a graph's constraints and costs may name (the simulator runs 32).
MAX_DEVICES = 2**16


def number(value: Any, where: str, *, integer: bool = False,
           default: Any = None) -> float | int:
  """``value`` as a finite non-negative number (an int if ``integer``);
  ``default`` when it is None and a default is given.

  Raises:
    GraphError: missing without a default, not a number, negative, NaN or
      infinite; the message names ``where`` (e.g. ``"nodes[3].flops"``).
  """
  if value is None:
    if default is not None:
      return default
    raise GraphError(f"{where} is missing; give a non-negative "
                     f"{'integer' if integer else 'number'}.")
  kind = "integer" if integer else "number"
  if isinstance(value, (bool, str, bytes)) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise GraphError(f"{where} is {value!r}, not a number; give a "
                     f"non-negative {kind}.")
  if not math.isfinite(float(value)) or value < 0:
    raise GraphError(f"{where} is {value!r}; give a finite, non-negative "
                     f"{kind}.")
  if integer:
    if float(value) != round(float(value)):
      raise GraphError(f"{where} is {value!r}; give a whole number (bytes "
                       "are counted in integers).")
    if int(value) >= _INT64_LIMIT:
      raise GraphError(f"{where} is {value!r}, too large: gplace counts in "
                       "64-bit integers, below 2**63 (about 9.2e18); give "
                       "the real count.")
    return int(value)
  return float(value)


def _kind(value: Any, where: str) -> int:
  if value is None:
    return NODE_OP
  if isinstance(value, str) and value in KIND_NAMES:
    return KIND_NAMES.index(value)
  if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
      and 0 <= value <= 2:
    return int(value)
  raise GraphError(f"{where} is {value!r}; give one of "
                   f"{', '.join(map(repr, KIND_NAMES))} (default 'op').")


def _shape(value: Any, where: str) -> tuple[int, ...]:
  if value is None:
    return ()
  if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
    raise GraphError(f"{where} is {value!r}; give a list of non-negative "
                     "integers, e.g. [32, 128] ([] for a scalar).")
  return tuple(number(d, f"{where}[{i}]", integer=True)
               for i, d in enumerate(value))


def _text(value: Any, where: str, default: str) -> str:
  if value is None:
    return default
  if not isinstance(value, str):
    raise GraphError(f"{where} is {value!r}; give a string.")
  return value


def _device_index(value: Any, where: str, device_names: Sequence[str] | None,
                  n_devices: int) -> int:
  if isinstance(value, str):
    if device_names is None or value not in device_names:
      known = (f"the devices are {list(device_names)}" if device_names
               else "the file names no devices (add a topology, or give "
               "device indices)")
      raise GraphError(f"{where} names device {value!r}, but {known}.")
    return list(device_names).index(value)
  index = number(value, where, integer=True)
  if index >= n_devices:
    raise GraphError(f"{where} is device {index}, but there are only "
                     f"{n_devices} devices (0..{n_devices - 1}).")
  return index


def _costs(value: Any, where: str, device_names: Sequence[str] | None,
           n_devices: int) -> list[float]:
  """One node's ``cost_s``: a list of D seconds, or {device name: s}."""
  if isinstance(value, dict):
    if device_names is None:
      raise GraphError(f"{where} maps device names to seconds, but the file "
                       "names no devices; add a topology, or give a list of "
                       "seconds, one per device.")
    missing = [d for d in device_names if d not in value]
    unknown = [d for d in value if d not in device_names]
    if missing or unknown:
      raise GraphError(f"{where} must give seconds for exactly the devices "
                       f"{list(device_names)}; missing {missing}, unknown "
                       f"{unknown}.")
    return [number(value[d], f"{where}[{d!r}]") for d in device_names]
  if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
    raise GraphError(f"{where} is {value!r}; give a list of seconds, one per "
                     "device, or a {device name: seconds} object.")
  if len(value) != n_devices:
    raise GraphError(f"{where} has {len(value)} entries but there are "
                     f"{n_devices} devices; give one cost per device.")
  return [number(c, f"{where}[{i}]") for i, c in enumerate(value)]


def device_count(nodes: Sequence[tuple[Hashable, dict]],
                 n_devices: Optional[int], where: str) -> Optional[int]:
  """The number of devices ``D``: ``n_devices`` if given, else the length of
  the first ``cost_s`` list (None if nothing says)."""
  if n_devices is not None:
    return n_devices
  for key, attrs in nodes:
    if isinstance(attrs.get("cost_s"), (list, tuple)):
      return len(attrs["cost_s"])
  return None


def transfer_bytes(transfer_s: float, topology) -> int:
  """The bytes whose transfer takes ``transfer_s`` seconds on ``topology``'s
  links on average (latency plus bytes over bandwidth, averaged over the
  ordered pairs of distinct devices, as the critical-path priority does):
  exact where all links are alike. 0 if it is below the mean latency, or
  with one device (nothing is ever sent); ``2**63`` (more than gplace
  counts) if no count of bytes takes that long."""
  d = topology.n_devices
  if d < 2:
    return 0
  off = ~np.eye(d, dtype=bool)
  latency = float(topology.link_latency[off].mean())
  inverse_bandwidth = float((1.0 / topology.link_bandwidth[off]).mean())
  seconds = max(transfer_s - latency, 0.0)
  if seconds == 0.0:
    return 0
  # Links of infinite bandwidth: no count of bytes takes those seconds.
  nbytes = seconds / inverse_bandwidth if inverse_bandwidth else math.inf
  return int(round(nbytes)) if math.isfinite(nbytes) else _INT64_LIMIT


def graph_from_records(nodes: Sequence[tuple[Hashable, dict]],
                       edges: Sequence[tuple[Hashable, Hashable, dict]], *,
                       name: str, where: str,
                       device_names: Sequence[str] | None = None,
                       n_devices: int | None = None,
                       topology=None
                       ) -> tuple[Graph, Optional[np.ndarray]]:
  """Builds a graph (and its cost table, if the nodes carry ``cost_s``).

  Args:
    nodes: ``(id, fields)`` per node, ids unique and hashable.
    edges: ``(src id, dst id, fields)`` per edge.
    name: the graph's label.
    where: what the records came from, for messages (a file path, or
      ``"networkx graph"``); fields are named as ``nodes[i].field``.
    device_names: the topology's device names, when there is one.
    n_devices: ``D`` when known (a topology, or the file says).
    topology: the devices, when known: edges may then give ``transfer_s``
      (seconds to send the tensor between two devices) instead of
      ``bytes`` (see :func:`transfer_bytes`).

  Returns:
    ``(graph, costs)``: ``costs`` is ``[N, D]`` float64 seconds or None.

  Raises:
    GraphError: any malformed field, unknown node id, cycle, or constraint
      naming a device that does not exist.
  """
  if device_names is not None:
    n_devices = len(device_names)
  n_devices = device_count(nodes, n_devices, where)
  if n_devices is not None and n_devices > MAX_DEVICES:
    raise GraphError(f"{where}: {n_devices} devices; gplace places on at "
                     f"most {MAX_DEVICES}.")
  index: dict[Hashable, int] = {}
  rows: list[dict] = []
  labels: dict[Any, int] = {}
  int_labels = all(isinstance(a.get("colocation"), (int, np.integer))
                   for _, a in nodes if a.get("colocation") is not None)
  next_label = [0]

  def label_of(value: Any, at: str) -> int:
    if int_labels:
      label = number(value, at, integer=True)
      if label >= 2**31:
        raise GraphError(f"{at} is {value!r}; an integer class must be "
                         "below 2**31 (or give a string).")
      next_label[0] = max(next_label[0], label + 1)
      return label
    if not isinstance(value, (str, int, np.integer)) or isinstance(value,
                                                                  bool):
      raise GraphError(f"{at} is {value!r}; give a class name (a string) or "
                       "a non-negative integer.")
    key = str(value)
    if key not in labels:
      labels[key] = len(labels)
    return labels[key]

  resident_nodes = []  # (state row, op row)
  for i, (key, attrs) in enumerate(nodes):
    at = f"{where}: nodes[{i}]"
    if not isinstance(attrs, dict):
      raise GraphError(f"{at} is {type(attrs).__name__}, not an object of "
                       "node fields.")
    unknown = sorted(set(attrs) - set(NODE_FIELDS) - {"id"})
    if unknown:
      raise GraphError(f"{at} has unknown fields {unknown}; node fields are "
                       f"{', '.join(NODE_FIELDS)}.")
    if key in index:
      raise GraphError(f"{at}: node id {key!r} appears twice; give every "
                       "node a unique id.")
    kind = _kind(attrs.get("kind"), f"{at}.kind")
    row = dict(
        name=_text(attrs.get("name"), f"{at}.name", str(key)), kind=kind,
        op_type=_text(attrs.get("op_type"), f"{at}.op_type",
                      KIND_NAMES[kind] if kind != NODE_OP else "custom"),
        out_bytes=number(attrs.get("out_bytes"), f"{at}.out_bytes",
                         integer=True),
        out_shape=_shape(attrs.get("out_shape"), f"{at}.out_shape"),
        out_dtype=_text(attrs.get("out_dtype"), f"{at}.out_dtype", "float32"),
        flops=number(attrs.get("flops"), f"{at}.flops", default=0.0),
        bytes_accessed=number(attrs.get("bytes_accessed"),
                              f"{at}.bytes_accessed", default=0.0),
        cost=None, allowed=None, colocation=-1)
    if attrs.get("cost_s") is not None:
      if n_devices is None:
        raise GraphError(f"{at}.cost_s needs the number of devices; add a "
                         "topology or n_devices.")
      row["cost"] = _costs(attrs["cost_s"], f"{at}.cost_s", device_names,
                           n_devices)
    allowed = attrs.get("allowed_devices")
    if allowed is not None:
      if n_devices is None:
        raise GraphError(f"{at}.allowed_devices needs the number of devices; "
                         "add a topology or n_devices.")
      if isinstance(allowed, (str, bytes)) or not isinstance(
          allowed, (list, tuple)) or not allowed:
        raise GraphError(f"{at}.allowed_devices is {allowed!r}; give a "
                         "non-empty list of device names or indices.")
      mask = np.zeros(n_devices, bool)
      for j, device in enumerate(allowed):
        mask[_device_index(device, f"{at}.allowed_devices[{j}]",
                           device_names, n_devices)] = True
      row["allowed"] = mask
    if attrs.get("colocation") is not None:
      row["colocation"] = label_of(attrs["colocation"], f"{at}.colocation")
    resident = number(attrs.get("resident_bytes"), f"{at}.resident_bytes",
                      integer=True, default=0)
    if resident:
      # Bytes the op holds all step: a parameter node that feeds it and
      # shares its device.
      state = dict(row, name=row["name"] + RESIDENT_SUFFIX, kind=NODE_INPUT,
                   op_type="input", out_bytes=resident, out_shape=(resident,),
                   out_dtype="uint8", flops=0.0, bytes_accessed=0.0,
                   cost=None if row["cost"] is None else [0.0] * n_devices)
      rows.append(state)
      resident_nodes.append((len(rows) - 1, len(rows)))
    index[key] = len(rows)
    rows.append(row)
  for state, op in resident_nodes:  # op and state share a class
    if rows[op]["colocation"] < 0:
      rows[op]["colocation"] = next_label[0] if int_labels else len(labels)
      next_label[0] = rows[op]["colocation"] + 1
      labels[("resident", op)] = rows[op]["colocation"]
    rows[state]["colocation"] = rows[op]["colocation"]
  costed = [r["cost"] is not None for r in rows]
  if any(costed):
    for r in rows:
      if r["cost"] is not None:
        continue
      if r["kind"] == NODE_OP:
        raise GraphError(
            f"{where}: node {r['name']!r} has no cost_s but other nodes do; "
            "give cost_s for every op node (input and output nodes default "
            "to 0), or for none and let the roofline price them.")
      r["cost"] = [0.0] * n_devices
  edge_rows = []
  pairs: dict[tuple[int, int], tuple[int, int]] = {}  # -> (first j, bytes)
  for j, edge in enumerate(edges):
    src, dst, attrs = edge
    at = f"{where}: edges[{j}]"
    ends = []
    for end, key in (("src", src), ("dst", dst)):
      position = index.get(_hashable(key))
      if position is None:
        raise GraphError(f"{at}.{end} is {key!r}, which is no node id; "
                         "edges must name the ids of listed nodes.")
      ends.append(position)
    if not isinstance(attrs, dict):
      raise GraphError(f"{at} is not an object of edge fields.")
    if attrs.get("transfer_s") is not None:
      if attrs.get("bytes") is not None:
        raise GraphError(f"{at} gives both bytes and transfer_s; give one "
                         "(the simulator sends bytes over the links).")
      if topology is None:
        raise GraphError(
            f"{at}.transfer_s needs the devices and links to turn seconds "
            "into bytes: add a topology (the file's 'topology', or "
            "from_networkx(..., topology=)), or give bytes.")
      nbytes = transfer_bytes(number(attrs["transfer_s"], f"{at}.transfer_s"),
                              topology)
      if nbytes >= _INT64_LIMIT:
        raise GraphError(
            f"{at}.transfer_s is {attrs['transfer_s']!r} s, longer than any "
            "count of bytes takes on the topology's links (below 2**63 "
            "bytes, latency included; links of infinite bandwidth take the "
            "latency alone); give bytes instead, or the links' real "
            "bandwidth.")
    else:
      nbytes = number(attrs.get("bytes"), f"{at}.bytes", integer=True,
                      default=rows[ends[0]]["out_bytes"])
    if ends[0] == ends[1]:
      raise GraphError(f"{at} goes from node {src!r} to itself; an op graph "
                       "has no self-loops.")
    if rows[ends[1]]["kind"] == NODE_INPUT:
      raise GraphError(
          f"{at} goes from {src!r} into input node {dst!r}; an input is "
          "resident from the start and has no producer. Give node "
          f"{dst!r} \"kind\": \"op\" if it is computed, or drop the edge.")
    # One edge per pair: the tensor moves once per consumer device, so a
    # repeated pair (an op reading a tensor twice, matmul(x, x)) is the
    # same edge, never twice the bytes.
    first = pairs.setdefault((ends[0], ends[1]), (j, nbytes))
    if first[0] != j:
      if first[1] != nbytes:
        raise GraphError(
            f"{at} repeats edges[{first[0]}] ({src!r} -> {dst!r}) with "
            f"{nbytes} bytes instead of {first[1]}; give one edge per pair "
            "of nodes, whose bytes are all that the source sends the "
            "destination.")
      continue
    edge_rows.append((ends[0], ends[1], nbytes))
  edge_rows += [(state, op, rows[state]["out_bytes"])
                for state, op in resident_nodes]
  if any(r["allowed"] is not None for r in rows):
    allowed = np.stack([np.ones(n_devices, bool) if r["allowed"] is None
                        else r["allowed"] for r in rows])
  else:
    allowed = None
  colocation = np.asarray([r["colocation"] for r in rows], np.int32)
  field = lambda f: [r[f] for r in rows]
  try:
    graph = Graph.build(
        names=field("name"), op_type=field("op_type"), kind=field("kind"),
        out_shapes=field("out_shape"), out_dtype=field("out_dtype"),
        out_bytes=field("out_bytes"), flops=field("flops"),
        bytes_accessed=field("bytes_accessed"),
        edges=np.asarray(edge_rows, np.int64).reshape(-1, 3), name=name,
        allowed_devices=allowed,
        colocation=colocation if np.any(colocation >= 0) else None)
  except GraphError as err:
    raise GraphError(f"{where}: {err}") from err
  costs = None
  if any(costed):
    order = _build_order(rows, edge_rows)
    costs = np.asarray([rows[i]["cost"] for i in order], np.float64)
  return graph, costs


def _hashable(key: Any) -> Any:
  """Node ids from JSON may be lists; anything unhashable is no id."""
  try:
    hash(key)
  except TypeError:
    return object()
  return key


def _build_order(rows: list, edge_rows: list) -> np.ndarray:
  """The node order :meth:`Graph.build` gives the same rows."""
  edges = np.asarray(edge_rows, np.int64).reshape(-1, 3)
  return stable_topological_order(len(rows), edges[:, 0], edges[:, 1])
