"""The op graph: the immutable value every stage of gplace shares.

A :class:`Graph` (numpy arrays) numbers its ``N`` nodes in a topological
order (checked) and has input, op and output nodes; ``out_bytes`` sums a
node's outputs, an edge's ``bytes`` the tensors its consumer reads.
:func:`random_dag` builds test graphs. Host-side.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import numpy as np

from gplace.errors import GraphError, check_type, first_line
from gplace.graphs.build_checks import (MAX_RANK, edge_array, merge_edges,
                                        pad_shapes, sequence_length,
                                        stable_topological_order)
from gplace.graphs.constraints import (check_allowed_devices,
                                       check_colocation, check_feasible)
from gplace.graphs import export
from gplace.graphs import storage
from gplace.graphs.schema import (ARRAY_FIELDS, CONSTRAINT_FIELDS,
                                  KIND_NAMES, NODE_INPUT, NODE_OP,
                                  NODE_OUTPUT)


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
  """Equal values of the same dtype (strings of any width)."""
  same_kind = a.dtype == b.dtype or a.dtype.kind == b.dtype.kind == "U"
  return same_kind and np.array_equal(a, b)


def _same_optional(a: np.ndarray | None, b: np.ndarray | None) -> bool:
  if a is None or b is None:
    return a is None and b is None
  return _same_array(a, b)


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
  """An op graph of ``N`` nodes and ``E`` directed edges.

  Attributes:
    names: ``[N]`` str, readable name per node from the flax module path /
      name stack, e.g. ``"Encoder/layer_3/attention/dot_general"``; inputs are
      named by their pytree path (``"params/Dense_0/kernel"``). Not unique.
    op_type: ``[N]`` str, the JAX primitive name (``"input"`` / ``"output"``
      for those kinds, ``"unknown"`` for a primitive gplace could not cost).
    kind: ``[N]`` int8, ``NODE_INPUT`` / ``NODE_OP`` / ``NODE_OUTPUT``.
    out_shape: ``[N, MAX_RANK]`` int64, the output shape, zero beyond
      ``out_rank`` (ranks above ``MAX_RANK`` fold leading dims together).
    out_rank: ``[N]`` int8.
    out_dtype: ``[N]`` str, e.g. ``"float32"``.
    out_bytes: ``[N]`` int64, bytes of all the node's outputs.
    flops: ``[N]`` float64, floating point operations of one execution.
    bytes_accessed: ``[N]`` float64, bytes read plus bytes written.
    edge_src: ``[E]`` int32, producer node, ``edge_src < edge_dst``.
    edge_dst: ``[E]`` int32, consumer node.
    edge_bytes: ``[E]`` int64, bytes that flow along the edge.
    name: a label for the graph (the workload name).
    allowed_devices: optional ``[N, D]`` bool, the devices each node may run
      on (None: any device); see :mod:`gplace.graphs.constraints`.
    colocation: optional ``[N]`` int32 co-location class per node, ``-1``
      for none; nodes of one class must share a device.
  """

  names: np.ndarray
  op_type: np.ndarray
  kind: np.ndarray
  out_shape: np.ndarray
  out_rank: np.ndarray
  out_dtype: np.ndarray
  out_bytes: np.ndarray
  flops: np.ndarray
  bytes_accessed: np.ndarray
  edge_src: np.ndarray
  edge_dst: np.ndarray
  edge_bytes: np.ndarray
  name: str = "graph"
  allowed_devices: np.ndarray | None = None
  colocation: np.ndarray | None = None

  def __post_init__(self):
    casts = dict(
        names=np.str_, op_type=np.str_, kind=np.int8, out_shape=np.int64,
        out_rank=np.int8, out_dtype=np.str_, out_bytes=np.int64,
        flops=np.float64, bytes_accessed=np.float64, edge_src=np.int32,
        edge_dst=np.int32, edge_bytes=np.int64)
    if not isinstance(self.name, str):
      raise GraphError(f"A graph's name must be a str, got "
                       f"{type(self.name).__name__}; pass name='my_model'.")
    for field, dtype in casts.items():
      try:
        value = np.asarray(getattr(self, field))
        if dtype is np.str_:
          value = (value.astype(np.str_) if value.size
                   else value.astype("<U1"))
        elif value.dtype.kind not in "biuf":
          raise TypeError(f"got values of dtype {value.dtype}")
        elif (dtype is not np.float64 and value.dtype.kind == "f"
              and not np.all(value == np.round(value))):
          raise TypeError("got non-integer values")
        elif dtype is not np.float64 and value.size and (
            value.min() < np.iinfo(dtype).min
            or value.max() >= np.iinfo(dtype).max + 1):
          # astype would wrap them around: kind 257 would read as an op.
          raise OverflowError(f"got values outside {np.iinfo(dtype).min}.."
                              f"{np.iinfo(dtype).max}")
        else:
          value = value.astype(dtype, copy=False)
      except (TypeError, ValueError, OverflowError) as err:
        raise GraphError(
            f"Graph field {field!r} cannot be read as {np.dtype(dtype).name} "
            f"({first_line(err)}); give "
            f"{'strings' if dtype is np.str_ else 'numbers'} of that kind, "
            "one per node (edge_* fields: one per edge).") from err
      value = np.array(value, copy=True)
      value.setflags(write=False)
      object.__setattr__(self, field, value)
    self._validate()
    n = self.names.shape[0]
    object.__setattr__(self, "allowed_devices",
                       check_allowed_devices(self.allowed_devices, n))
    object.__setattr__(self, "colocation",
                       check_colocation(self.colocation, n))
    check_feasible(self.allowed_devices, self.colocation)

  def _validate(self) -> None:
    n = self.names.shape[0]
    for field in ("op_type", "kind", "out_rank", "out_dtype", "out_bytes",
                  "flops", "bytes_accessed"):
      if getattr(self, field).shape != (n,):
        raise GraphError(
            f"Graph field {field!r} has shape {getattr(self, field).shape}, "
            f"expected ({n},) to match the {n} node names.")
    if self.out_shape.shape != (n, MAX_RANK):
      raise GraphError(
          f"Graph field 'out_shape' has shape {self.out_shape.shape}, "
          f"expected ({n}, {MAX_RANK}).")
    e = self.edge_src.shape[0]
    if self.edge_dst.shape != (e,) or self.edge_bytes.shape != (e,):
      raise GraphError("edge_src, edge_dst and edge_bytes must be 1-D arrays "
                       "of the same length.")
    if e:
      if self.edge_src.min() < 0 or self.edge_dst.max() >= n:
        raise GraphError(f"An edge names a node outside 0..{n - 1}.")
      if np.any(self.edge_src >= self.edge_dst):
        bad = int(np.argmax(self.edge_src >= self.edge_dst))
        raise GraphError(
            f"Edge {self.edge_src[bad]}->{self.edge_dst[bad]} does not go from "
            "a lower to a higher node id; node ids must be a topological "
            "order (build graphs with Graph.build, which renumbers them).")
      keys = self.edge_src.astype(np.int64) * n + self.edge_dst
      if np.any(np.diff(keys) <= 0):
        raise GraphError("Edges must be unique and sorted by (src, dst); "
                         "build graphs with Graph.build, which does this.")
    for field in ("flops", "bytes_accessed"):
      value = getattr(self, field)
      if np.any(~np.isfinite(value)) or np.any(value < 0):
        node = int(np.argmax(~np.isfinite(value) | (value < 0)))
        raise GraphError(
            f"Graph field {field!r} must be finite and non-negative, node "
            f"{node} has {value[node]}; fix the cost of that node.")
    for field in ("out_bytes", "edge_bytes", "out_shape"):
      if np.any(getattr(self, field) < 0):
        raise GraphError(f"Graph field {field!r} holds negative values; byte "
                         "counts and shapes must be non-negative.")
    if np.any((self.kind < NODE_INPUT) | (self.kind > NODE_OUTPUT)):
      raise GraphError("Graph field 'kind' must hold NODE_INPUT, NODE_OP or "
                       "NODE_OUTPUT (0, 1 or 2) per node.")
    into_input = self.kind[self.edge_dst] == NODE_INPUT
    if np.any(into_input):
      # The simulators treat an input as resident at time 0: an edge into
      # it would be dropped silently, and its consumers start too early.
      bad = int(np.argmax(into_input))
      src, dst = int(self.edge_src[bad]), int(self.edge_dst[bad])
      raise GraphError(
          f"Edge {src} ({self.names[src]}) -> {dst} ({self.names[dst]}) goes "
          f"into an input node; an input is resident from the start and has "
          f"no producer. Make node {dst} ({self.names[dst]}) an op (kind "
          "NODE_OP, \"op\" in a graph file) if it is computed, or drop the "
          "edge.")
    if np.any((self.out_rank < 0) | (self.out_rank > MAX_RANK)):
      raise GraphError(f"Graph field 'out_rank' must be in 0..{MAX_RANK}.")

  # -- construction -----------------------------------------------------------

  @classmethod
  def build(cls, *, names, op_type, kind, out_shapes, out_dtype, out_bytes,
            flops, bytes_accessed, edges, name: str = "graph",
            allowed_devices=None, colocation=None) -> "Graph":
    """Builds a graph from per-node lists and an edge list, in any order.

    Args:
      names, op_type, kind, out_dtype, out_bytes, flops, bytes_accessed:
        per-node sequences of length ``N``.
      out_shapes: ``N`` shape tuples of any rank.
      edges: ``(src, dst, bytes)`` integer triples, ``src`` and ``dst`` in
        ``0 .. N-1``, one per distinct tensor of ``src`` that ``dst``
        reads (as capture gives them): rows of one pair are merged with
        their bytes summed, so list a tensor once however often ``dst``
        reads it. Self-loops are dropped; an edge into an input node is
        an error.
      name: label of the graph.
      allowed_devices: optional ``[N, D]`` bool, devices each node may run
        on.
      colocation: optional ``[N]`` int co-location class per node (-1:
        none).

    Returns:
      A graph whose nodes are renumbered into a stable topological order (the
      given order wherever it already is one).

    Raises:
      GraphError: per-node sequences of different lengths, malformed edges
        or an edge to a node that does not exist or into an input node,
        negative byte counts or costs, or a cycle.
    """
    n = sequence_length(names, "names")
    per_node = dict(op_type=op_type, kind=kind, out_shapes=out_shapes,
                    out_dtype=out_dtype, out_bytes=out_bytes, flops=flops,
                    bytes_accessed=bytes_accessed)
    for field, value in per_node.items():
      if sequence_length(value, field) != n:
        raise GraphError(
            f"Graph.build got {n} names but {sequence_length(value, field)} entries "
            f"in {field}; give every per-node argument one entry per node.")
    edges = edge_array(edges, n)
    edges = edges[edges[:, 0] != edges[:, 1]]
    order = stable_topological_order(n, edges[:, 0], edges[:, 1],
                                     names=names)
    new_id = np.empty(n, np.int64)
    new_id[order] = np.arange(n)
    src, dst = new_id[edges[:, 0]], new_id[edges[:, 1]]
    src, dst, nbytes = merge_edges(n, src, dst, edges[:, 2])
    shape, rank = pad_shapes(out_shapes)
    try:
      names = np.asarray(names, dtype=np.str_)
      op_type = np.asarray(op_type, dtype=np.str_)
      out_dtype = np.asarray(out_dtype, dtype=np.str_)
    except (TypeError, ValueError) as err:
      raise GraphError(f"Graph.build: names, op_type and out_dtype must be "
                       f"sequences of strings ({first_line(err)}).") from err
    take = lambda seq: np.asarray(seq)[order]
    allowed_devices = check_allowed_devices(allowed_devices, n)
    colocation = check_colocation(colocation, n)
    return cls(
        names=take(names), op_type=take(op_type), kind=take(kind),
        out_shape=shape[order], out_rank=rank[order],
        out_dtype=take(out_dtype), out_bytes=take(out_bytes),
        flops=take(flops), bytes_accessed=take(bytes_accessed),
        edge_src=src, edge_dst=dst, edge_bytes=nbytes, name=name,
        allowed_devices=(None if allowed_devices is None
                         else allowed_devices[order]),
        colocation=None if colocation is None else colocation[order])

  def replace(self, **changes: Any) -> "Graph":
    """Returns a copy with some fields replaced (validated again)."""
    return dataclasses.replace(self, **changes)

  # -- sizes and structure ----------------------------------------------------

  @property
  def n_nodes(self) -> int:
    return int(self.names.shape[0])

  @property
  def n_edges(self) -> int:
    return int(self.edge_src.shape[0])

  @property
  def topo_order(self) -> np.ndarray:
    """``[N]`` int32, a topological order: node ids themselves are one."""
    return np.arange(self.n_nodes, dtype=np.int32)

  @functools.cached_property
  def in_degree(self) -> np.ndarray:
    """``[N]`` int32, number of distinct producers each node reads."""
    return np.bincount(self.edge_dst, minlength=self.n_nodes).astype(np.int32)

  @functools.cached_property
  def out_degree(self) -> np.ndarray:
    """``[N]`` int32, number of distinct consumers of each node."""
    return np.bincount(self.edge_src, minlength=self.n_nodes).astype(np.int32)

  @functools.cached_property
  def pred_csr(self) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr [N+1], edge_ids [E])``: the edges into node i are
    ``edge_ids[ptr[i]:ptr[i+1]]``, in increasing producer order."""
    edge_ids = np.lexsort((self.edge_src, self.edge_dst)).astype(np.int32)
    ptr = np.zeros(self.n_nodes + 1, np.int64)
    np.cumsum(self.in_degree, out=ptr[1:])
    return ptr, edge_ids

  @functools.cached_property
  def succ_csr(self) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr [N+1], edge_ids [E])``: the edges out of node i are
    ``edge_ids[ptr[i]:ptr[i+1]]`` (edges are sorted by src already)."""
    ptr = np.zeros(self.n_nodes + 1, np.int64)
    np.cumsum(self.out_degree, out=ptr[1:])
    return ptr, np.arange(self.n_edges, dtype=np.int32)

  @functools.cached_property
  def depth(self) -> np.ndarray:
    """``[N]`` int32, longest path (in edges) from any source to each node."""
    depth = np.zeros(self.n_nodes, np.int32)
    ptr, edge_ids = self.pred_csr
    src = self.edge_src[edge_ids]
    for node in range(self.n_nodes):
      lo, hi = ptr[node], ptr[node + 1]
      if hi > lo:
        depth[node] = depth[src[lo:hi]].max() + 1
    return depth

  def predecessors(self, node: int) -> np.ndarray:
    ptr, edge_ids = self.pred_csr
    return self.edge_src[edge_ids[ptr[node]:ptr[node + 1]]]

  def successors(self, node: int) -> np.ndarray:
    ptr, _ = self.succ_csr
    return self.edge_dst[ptr[node]:ptr[node + 1]]

  def shape_of(self, node: int) -> tuple[int, ...]:
    return tuple(int(d) for d in self.out_shape[node, :self.out_rank[node]])

  # -- equality, persistence, display ----------------------------------------

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, Graph):
      return NotImplemented
    return self.name == other.name and all(
        _same_array(getattr(self, f), getattr(other, f))
        for f in ARRAY_FIELDS) and all(
            _same_optional(getattr(self, f), getattr(other, f))
            for f in CONSTRAINT_FIELDS)

  __hash__ = None  # mutable-looking arrays: no hashing

  def save(self, path: str | os.PathLike) -> None:
    """Writes the graph to ``path`` (a ``.npz`` file) atomically; JSON is
    :func:`gplace.sim.graph_files.save`'s.

    Raises:
      GraphError: ``path`` is not a path or ends in ``.json``, or the file
        cannot be written.
    """
    storage.save_graph(self, path)

  @classmethod
  def load(cls, path: str | os.PathLike) -> "Graph":
    """Reads a graph written by :meth:`save`.

    Raises:
      GraphError: ``path`` is missing, unreadable, truncated or corrupted,
        or holds something other than a gplace graph; the message names the
        file and what was wrong.
    """
    return storage.load_graph(path, cls)

  def summary(self) -> str:
    """A short human-readable description: sizes, costs, commonest ops."""
    kinds = np.bincount(self.kind, minlength=3)
    ops = self.op_type[self.kind == NODE_OP]
    types, counts = np.unique(ops, return_counts=True)
    top = sorted(zip(counts, types), reverse=True)[:8]
    lines = [
        f"Graph {self.name!r}: {self.n_nodes} nodes ({kinds[0]} inputs, "
        f"{kinds[1]} ops, {kinds[2]} outputs), {self.n_edges} edges",
        f"  FLOPs {self.flops.sum():.3e}, bytes accessed "
        f"{self.bytes_accessed.sum():.3e}, input bytes "
        f"{self.out_bytes[self.kind == NODE_INPUT].sum():.3e}",
        f"  depth {int(self.depth.max()) if self.n_nodes else 0}, "
        "commonest ops: " + ", ".join(f"{t} x{c}" for c, t in top),
    ]
    return "\n".join(lines)

  def __repr__(self) -> str:
    return (f"Graph(name={self.name!r}, n_nodes={self.n_nodes}, "
            f"n_edges={self.n_edges})")

  def to_networkx(self, costs=None):
    """A ``networkx.DiGraph`` with every field as node and edge attributes;
    see :func:`gplace.graphs.interchange.to_networkx`."""
    return export.networkx_of(self, costs=costs)


# -- helpers shared by capture, coarsening and tests ---------------------------


def check_graph(graph: Any, caller: str) -> None:
  """Raises GraphError unless ``graph`` is a :class:`Graph` (``caller``:
  who needs it, for the message, e.g. ``"gplace.simulate"``)."""
  check_type(graph, Graph, "graph", caller, GraphError,
             "capture one with gplace.capture(fn, *args) or read one with "
             "gplace.Graph.load(path)")


def random_dag(n_nodes: int, *, avg_degree: float = 2.0, n_inputs: int = 0,
               seed: int = 0, name: str = "random") -> Graph:
  """A random connected DAG with random costs, for tests and benchmarks.

  Each op node reads 1..~2*avg_degree earlier nodes, biased to recent ones
  (like real programs, which are long and narrow). The first ``n_inputs``
  nodes are inputs (parameters), the last node is an output.

  Args:
    n_nodes: number of nodes, at least 2.
    avg_degree: mean number of producers per op.
    n_inputs: number of input nodes (default: about 10% of nodes, at least 1).
    seed: numpy seed.
    name: graph label.
  """
  if n_nodes < 2:
    raise GraphError("random_dag needs at least 2 nodes.")
  rng = np.random.default_rng(seed)
  n_inputs = n_inputs or max(1, n_nodes // 10)
  n_inputs = min(n_inputs, n_nodes - 1)
  kind = np.full(n_nodes, NODE_OP, np.int8)
  kind[:n_inputs] = NODE_INPUT
  kind[-1] = NODE_OUTPUT
  size = rng.choice([1, 4, 16, 64, 256], size=n_nodes) * 1024
  out_bytes = (size * 4).astype(np.int64)
  flops = np.where(kind == NODE_OP,
                   size * rng.lognormal(3.0, 1.5, n_nodes), 0.0)
  src, dst = [], []
  for node in range(n_inputs, n_nodes):
    n_in = 1 if kind[node] == NODE_OUTPUT else 1 + rng.poisson(
        max(avg_degree - 1.0, 0.0))
    lo = max(0, node - 64)
    window = np.arange(lo, node)
    picks = rng.choice(window, size=min(n_in, window.size), replace=False)
    # Keep it connected: the first op reads the previous node.
    if node - 1 not in picks and rng.random() < 0.7:
      picks[0] = node - 1
    src.extend(int(p) for p in picks)
    dst.extend([node] * len(picks))
  src = np.asarray(src)
  dst = np.asarray(dst)
  edges = np.stack([src, dst, out_bytes[src]], 1)
  ops = np.where(kind == NODE_INPUT, "input",
                 np.where(kind == NODE_OUTPUT, "output",
                          rng.choice(["dot_general", "add", "mul", "tanh",
                                      "reduce_sum", "conv_general_dilated"],
                                     size=n_nodes)))
  shapes = [(int(s) // 256, 256) for s in size]
  return Graph.build(
      names=[f"{name}/n{i}" for i in range(n_nodes)], op_type=ops, kind=kind,
      out_shapes=shapes, out_dtype=["float32"] * n_nodes,
      out_bytes=np.where(kind == NODE_OUTPUT, out_bytes[src[-1]], out_bytes),
      flops=flops, bytes_accessed=out_bytes * 2.0, edges=edges, name=name)
