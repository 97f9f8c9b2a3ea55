"""Node and edge features, and padded ``jraph.GraphsTuple`` batches
(host-side numpy, once per graph, outside ``jit``).

:func:`to_graphs_tuple` pads graphs to a :class:`Budget` (:func:`budget_for`
rounds up, so similar graphs share one compiled step). The layout policies
read (node ``i`` of graph ``g`` at ``offset(g) + i``; graph ``g``'s forward
edges, then their reversed copies; padding in the first padding graph)::

  nodes: features f32 [N_pad, F], op_type int32 [N_pad] (0: padding),
         mask bool [N_pad], graph_index int32 [N_pad], position int32
         [N_pad], hint int32 [N_pad] (a plan's device, -1: none)
  edges: features f32 [E_pad, F_e], direction int32 [E_pad] (1: reversed
         copy), mask bool [E_pad]; senders, receivers int32 [E_pad]
  n_node, n_edge int32 [G_pad]; globals: mask bool [G_pad]
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, Union

import jax
import jraph
import numpy as np

from gplace.errors import BudgetError, GraphError
from gplace.graphs.graph import KIND_NAMES, MAX_RANK, Graph, check_graph


# -- op-type vocabulary ---------------------------------------------------------

# The vocabulary of op types, fixed so that an id means the same primitive in
# every graph, checkpoint and gplace version. APPEND-ONLY: never reorder,
# rename or remove an entry (a trained op-type embedding would silently read
# the wrong rows); add new primitive names at the end. Names are JAX primitive
# names (``jax.extend.core.primitives``); a few are kept for older or newer JAX
# versions (``pjit``, ``remat``) so that graphs captured there still map.
OP_VOCABULARY: tuple[str, ...] = (
    # 0-3: special buckets.
    "padding", "unknown", "input", "output",
    # Elementwise arithmetic.
    "add", "add_any", "sub", "mul", "div", "rem", "pow", "integer_pow", "neg",
    "sign", "abs", "max", "min", "clamp", "nextafter", "square", "sqrt",
    "rsqrt", "cbrt", "exp", "exp2", "expm1", "log", "log1p", "logistic",
    "tanh", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh",
    "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma",
    "digamma", "polygamma", "igamma", "igammac", "igamma_grad_a",
    "random_gamma_grad", "zeta", "bessel_i0e", "bessel_i1e",
    "regularized_incomplete_beta", "floor", "ceil", "round", "is_finite",
    "real", "imag", "complex", "conj", "mulhi",
    # Comparison, logic, bits.
    "eq", "ne", "lt", "le", "gt", "ge", "eq_to", "le_to", "lt_to", "and", "or",
    "not", "xor", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "population_count", "clz", "select_n",
    # Types and copies.
    "convert_element_type", "bitcast_convert_type", "reduce_precision", "copy",
    "copy_p",
    # Contractions and linear algebra.
    "dot_general", "conv_general_dilated", "ragged_dot_general", "cholesky",
    "triangular_solve", "lu", "lu_pivots_to_permutation", "qr", "svd", "eig",
    "eigh", "schur", "hessenberg", "householder_product", "tridiagonal",
    "tridiagonal_solve", "custom_linear_solve", "fft",
    # Reductions, scans, sorting.
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
    "reduce_or", "reduce_xor", "reduce", "argmax", "argmin", "reduce_window",
    "reduce_window_sum", "reduce_window_max", "reduce_window_min",
    "select_and_scatter", "select_and_scatter_add", "select_and_gather_add",
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "top_k",
    "approx_top_k",
    # Shapes, indexing, data movement.
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims",
    "concatenate", "pad", "rev", "slice", "dynamic_slice",
    "dynamic_update_slice", "gather", "scatter", "scatter-add", "scatter-sub",
    "scatter-mul", "scatter-min", "scatter-max", "iota", "split", "tile",
    # Control flow and calls kept whole.
    "scan", "while", "cond", "jit", "pjit", "closed_call", "call", "core_call",
    "remat", "remat2", "checkpoint", "custom_jvp_call", "custom_vjp_call",
    "custom_vjp_call_jaxpr", "custom_lin", "shard_map", "pallas_call",
    "custom_partitioning",
    # Random numbers.
    "rng_bit_generator", "rng_uniform", "random_bits", "random_seed",
    "random_split", "random_fold_in", "random_wrap", "random_unwrap",
    "random_gamma", "threefry2x32",
    # Collectives.
    "psum", "pmax", "pmin", "ppermute", "all_gather", "all_to_all",
    "ragged_all_to_all", "reduce_scatter", "axis_index", "pbroadcast",
    # Sharding, barriers, effects.
    "stop_gradient", "optimization_barrier", "sharding_constraint",
    "device_put", "mesh_cast", "reshard", "pure_callback", "io_callback",
    "debug_callback", "create_token", "after_all", "platform_index",
    # Added in gplace 0.1 for jax 0.10, which traces jnp.stack to its own
    # primitives (append new names below, never above).
    "stack", "unstack",
    # Added in gplace 0.2: jax 0.11's tanh derivative and jax.debug.print.
    "one_minus_square", "debug_print",
)
OP_TYPE_PADDING = 0
OP_TYPE_UNKNOWN = 1
n_op_types = len(OP_VOCABULARY)
# Rows an op-type embedding table should have: room for the vocabulary to grow
# (append-only) without changing the shape of trained parameters.
VOCABULARY_SIZE = 256
assert n_op_types <= VOCABULARY_SIZE, "grow VOCABULARY_SIZE in a new version"
_OP_INDEX = {name: i for i, name in enumerate(OP_VOCABULARY)}


def is_known_primitive(name: str) -> bool:
  """Whether ``name`` has its own id in :data:`OP_VOCABULARY`."""
  return name in _OP_INDEX and _OP_INDEX[name] > OP_TYPE_UNKNOWN


def op_type_id(op_types) -> np.ndarray:
  """Maps op-type names to ids in :data:`OP_VOCABULARY` (host-side numpy).

  Args:
    op_types: a string or an array / sequence of strings, any shape.

  Returns:
    int32 ids of the same shape; names outside the vocabulary map to
    ``OP_TYPE_UNKNOWN``.
  """
  names = np.asarray(op_types, dtype=np.str_)
  if names.size == 0:
    return np.zeros(names.shape, np.int32)
  unique, inverse = np.unique(names.reshape(-1), return_inverse=True)
  ids = np.asarray([_OP_INDEX.get(str(u), OP_TYPE_UNKNOWN) for u in unique],
                   np.int32)
  return ids[inverse.reshape(-1)].reshape(names.shape)


# -- node and edge features -----------------------------------------------------

# The columns of node_features, in order. Scales are log1p of raw counts (no
# per-dataset normalization, so features of a graph never depend on others).
NODE_FEATURE_NAMES: tuple[str, ...] = (
    ("log1p_flops", "log1p_out_bytes", "log1p_bytes_accessed")
    + tuple(f"log1p_out_dim_{d}" for d in range(MAX_RANK))  # 0 past the rank
    + ("depth_fraction",      # longest path from a source / max over graph
       "log1p_in_degree", "log1p_out_degree")
    + tuple(f"kind_{k}" for k in KIND_NAMES))  # one-hot node kind
n_node_features = len(NODE_FEATURE_NAMES)

# The columns of the edge features.
EDGE_FEATURE_NAMES: tuple[str, ...] = (
    "log1p_bytes",   # bytes flowing along the original edge
    "reversed",      # 0.0 forward copy, 1.0 reversed copy (= direction)
)
n_edge_features = len(EDGE_FEATURE_NAMES)


def node_features(graph: Graph) -> np.ndarray:
  """Per-node float features, columns as in :data:`NODE_FEATURE_NAMES`.

  The op type is not among them: it is an integer (:func:`op_type_id`) for an
  embedding table.

  Args:
    graph: a graph of ``N`` nodes.

  Returns:
    ``[N, n_node_features]`` float32.

  Raises:
    GraphError: ``graph`` is not a :class:`Graph`.
  """
  check_graph(graph, "gplace.features.node_features")
  n = graph.n_nodes
  depth = graph.depth.astype(np.float64)
  max_depth = depth.max() if n else 0.0
  depth_fraction = depth / max_depth if max_depth > 0 else np.zeros(n)
  kind_one_hot = np.zeros((n, len(KIND_NAMES)))
  kind_one_hot[np.arange(n), graph.kind] = 1.0
  columns = [
      np.log1p(graph.flops)[:, None],
      np.log1p(graph.out_bytes.astype(np.float64))[:, None],
      np.log1p(graph.bytes_accessed)[:, None],
      np.log1p(graph.out_shape.astype(np.float64)),
      depth_fraction[:, None],
      np.log1p(graph.in_degree.astype(np.float64))[:, None],
      np.log1p(graph.out_degree.astype(np.float64))[:, None],
      kind_one_hot,
  ]
  return np.concatenate(columns, axis=1).astype(np.float32)


def edge_features(graph: Graph) -> np.ndarray:
  """Features of the forward edges, columns as in :data:`EDGE_FEATURE_NAMES`.

  Returns:
    ``[E, n_edge_features]`` float32 (the ``reversed`` column is 0).

  Raises:
    GraphError: ``graph`` is not a :class:`Graph`.
  """
  check_graph(graph, "gplace.features.edge_features")
  out = np.zeros((graph.n_edges, n_edge_features), np.float32)
  out[:, 0] = np.log1p(graph.edge_bytes.astype(np.float64))
  return out


# -- budgets --------------------------------------------------------------------


class Budget(NamedTuple):
  """Padded sizes of a batch: total nodes, edges and graphs, padding included.

  Every batch padded to one budget has the same array shapes.
  """
  n_nodes: int
  n_edges: int
  n_graphs: int


def _as_graph_list(graph_or_graphs) -> list[Graph]:
  """``[graph]`` or the sequence's graphs; GraphError for anything else."""
  if isinstance(graph_or_graphs, Graph):
    return [graph_or_graphs]
  fix = ("pass a gplace.Graph (gplace.capture(fn, *args)) or a list of "
         "them")
  try:
    if isinstance(graph_or_graphs, (str, bytes)):
      raise TypeError
    graphs = list(graph_or_graphs)
  except TypeError:
    raise GraphError(f"Expected a gplace Graph or a sequence of them, got "
                     f"{type(graph_or_graphs).__name__}; {fix}.") from None
  for i, g in enumerate(graphs):
    if not isinstance(g, Graph):
      raise GraphError(f"Expected a gplace Graph or a sequence of them, but "
                       f"item {i} is a {type(g).__name__}; {fix}.")
  return graphs


def needed_budget(graph_or_graphs) -> Budget:
  """The smallest budget that fits the graphs: one padding node (padding edges
  need a node to point at), both directions of every edge, one padding graph.
  """
  graphs = _as_graph_list(graph_or_graphs)
  return Budget(
      n_nodes=sum(g.n_nodes for g in graphs) + 1,
      n_edges=2 * sum(g.n_edges for g in graphs),
      n_graphs=len(graphs) + 1)


def _round_up(size: int, multiple: int, power_of_two: bool) -> int:
  size = max(size, 1)
  if power_of_two:
    return max(multiple, 1 << (size - 1).bit_length())
  return -(-size // multiple) * multiple


def budget_for(graph_or_graphs, multiple: int = 64, *,
               power_of_two: bool = False) -> Budget:
  """A padding budget that fits the graphs, rounded so that batches of similar
  size share it (and a jitted function compiles once for all of them).

  Node and edge counts are rounded up to a multiple of ``multiple`` (the
  default: little waste, one compile per 64-node step of size), or, with
  ``power_of_two=True``, to the next power of two at least ``multiple`` (more
  waste, far fewer distinct budgets when graph sizes vary widely). Edge counts
  are at least ``multiple``, so no array is empty. ``n_graphs`` is the number
  of graphs plus one padding graph, not rounded.

  Args:
    graph_or_graphs: a :class:`Graph` or a sequence of them.
    multiple: positive rounding step.
    power_of_two: round to powers of two instead of multiples.

  Returns:
    A :class:`Budget`.
  """
  if multiple < 1:
    raise BudgetError(f"multiple must be a positive integer, got {multiple}.")
  need = needed_budget(graph_or_graphs)
  return Budget(
      n_nodes=_round_up(need.n_nodes, multiple, power_of_two),
      n_edges=_round_up(need.n_edges, multiple, power_of_two),
      n_graphs=need.n_graphs)


# -- GraphsTuple ----------------------------------------------------------------


def to_graphs_tuple(graph_or_graphs: Union[Graph, Sequence[Graph]],
                    budget: Budget | None = None) -> jraph.GraphsTuple:
  """Batches graphs into one padded ``jraph.GraphsTuple`` (host-side numpy).

  The layout is described in this module's docstring. Every graph edge appears
  twice: forward (``direction`` 0) and reversed (``direction`` 1), so a
  message-passing layer can tell producers from consumers.

  Args:
    graph_or_graphs: a :class:`Graph` or a sequence of them.
    budget: padded sizes; default :func:`budget_for` of the graphs.

  Returns:
    A ``GraphsTuple`` of numpy arrays with ``N_pad = budget.n_nodes``,
    ``E_pad = budget.n_edges`` and ``G_pad = budget.n_graphs``.

  Raises:
    BudgetError: if the budget is too small; the message names the sizes
      needed.
  """
  graphs = _as_graph_list(graph_or_graphs)
  if budget is None:
    budget = budget_for(graphs)
  budget = Budget(*(int(b) for b in budget))
  need = needed_budget(graphs)
  short = [f"{field} >= {n}" for field, n, b in
           zip(Budget._fields, need, budget) if b < n]
  if short:
    raise BudgetError(
        f"Budget {budget} is too small for {len(graphs)} graph(s) of "
        f"{need.n_nodes - 1} nodes and {need.n_edges // 2} edges in all; it "
        f"needs {', '.join(short)} (one padding node, both edge directions, "
        "one padding graph). Use budget_for(graphs) or a larger budget.")

  n_pad, e_pad, g_pad = budget
  features = np.zeros((n_pad, n_node_features), np.float32)
  op_type = np.zeros(n_pad, np.int32)          # OP_TYPE_PADDING
  node_mask = np.zeros(n_pad, bool)
  graph_index = np.full(n_pad, len(graphs), np.int32)
  position = np.zeros(n_pad, np.int32)
  hint = np.full(n_pad, -1, np.int32)
  edge_feats = np.zeros((e_pad, n_edge_features), np.float32)
  direction = np.zeros(e_pad, np.int32)
  edge_mask = np.zeros(e_pad, bool)
  senders = np.full(e_pad, n_pad - 1, np.int32)
  receivers = np.full(e_pad, n_pad - 1, np.int32)
  n_node = np.zeros(g_pad, np.int32)
  n_edge = np.zeros(g_pad, np.int32)
  graph_mask = np.zeros(g_pad, bool)

  node_at = edge_at = 0
  for index, g in enumerate(graphs):
    n, e = g.n_nodes, g.n_edges
    nodes = slice(node_at, node_at + n)
    features[nodes] = node_features(g)
    op_type[nodes] = op_type_id(g.op_type)
    node_mask[nodes] = True
    graph_index[nodes] = index
    position[nodes] = np.arange(n, dtype=np.int32)
    forward = slice(edge_at, edge_at + e)
    backward = slice(edge_at + e, edge_at + 2 * e)
    feats = edge_features(g)
    edge_feats[forward] = feats
    feats[:, 1] = 1.0
    edge_feats[backward] = feats
    direction[backward] = 1
    edge_mask[edge_at:edge_at + 2 * e] = True
    senders[forward] = node_at + g.edge_src
    receivers[forward] = node_at + g.edge_dst
    senders[backward] = node_at + g.edge_dst
    receivers[backward] = node_at + g.edge_src
    n_node[index], n_edge[index], graph_mask[index] = n, 2 * e, True
    node_at += n
    edge_at += 2 * e
  n_node[len(graphs)] = n_pad - node_at
  n_edge[len(graphs)] = e_pad - edge_at

  return jraph.GraphsTuple(
      nodes={"features": features, "op_type": op_type, "mask": node_mask,
             "graph_index": graph_index, "position": position,
             "hint": hint},
      edges={"features": edge_feats, "direction": direction,
             "mask": edge_mask},
      senders=senders, receivers=receivers, n_node=n_node, n_edge=n_edge,
      globals={"mask": graph_mask})


def stack_graphs_tuples(
    graphs_tuples: Sequence[jraph.GraphsTuple]) -> jraph.GraphsTuple:
  """Stacks same-budget ``GraphsTuple`` s along a new leading axis (for
  ``jax.vmap`` / ``jax.pmap``); every array gets a leading ``[B]`` axis.

  Raises:
    BudgetError: if the tuples were padded to different budgets.
  """
  graphs_tuples = list(graphs_tuples)
  if not graphs_tuples:
    raise BudgetError("stack_graphs_tuples needs at least one GraphsTuple.")
  shapes = [jax.tree_util.tree_map(np.shape, gt) for gt in graphs_tuples]
  for i, s in enumerate(shapes[1:], 1):
    if s != shapes[0]:
      raise BudgetError(
          f"GraphsTuple {i} has shapes {_budget_of(graphs_tuples[i])} but "
          f"GraphsTuple 0 has {_budget_of(graphs_tuples[0])}; pad all of them "
          "to one Budget (to_graphs_tuple(graphs, budget)) before stacking.")
  return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *graphs_tuples)


def _budget_of(gt: jraph.GraphsTuple) -> Budget:
  return Budget(int(np.shape(gt.nodes["mask"])[-1]),
                int(np.shape(gt.senders)[-1]), int(np.shape(gt.n_node)[-1]))


def unpad_node_values(values, graphs_tuple: jraph.GraphsTuple,
                      graph_index: int = 0, *, axis: int = 0):
  """The slice of per-node ``values`` that belongs to one graph (host-side).

  Args:
    values: an array with a node axis of length ``N_pad`` at ``axis``, e.g.
      ``[N_pad, D]`` logits or ``[K, N_pad]`` placements (``axis=1``).
    graphs_tuple: the (unstacked) ``GraphsTuple`` the values were computed on;
      its ``n_node`` must be concrete.
    graph_index: which graph of the batch.
    axis: the node axis of ``values``.

  Returns:
    ``values`` restricted to graph ``graph_index``'s nodes along ``axis``, in
    node id order (length ``graph.n_nodes``).
  """
  n_node = np.asarray(graphs_tuple.n_node)
  if n_node.ndim != 1:
    raise BudgetError("unpad_node_values takes an unstacked GraphsTuple; "
                      "index the stacked one first.")
  n_real = int(np.asarray(graphs_tuple.globals["mask"]).sum())
  if not 0 <= graph_index < n_real:
    raise BudgetError(f"graph_index {graph_index} is not one of the "
                      f"{n_real} real graphs of the batch.")
  if values.shape[axis] != int(n_node.sum()):
    raise BudgetError(
        f"values have {values.shape[axis]} entries on axis {axis}, but the "
        f"GraphsTuple has {int(n_node.sum())} nodes (padding included).")
  start = int(n_node[:graph_index].sum())
  index = [slice(None)] * values.ndim
  index[axis] = slice(start, start + int(n_node[graph_index]))
  return values[tuple(index)]
