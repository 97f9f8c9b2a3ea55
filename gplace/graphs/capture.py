"""Capture: turn any jittable JAX function into a :class:`gplace.Graph`.

``capture(fn, *args, **kwargs) -> Graph`` traces with ``jax.make_jaxpr``
(public JAX only): argument leaves and constants become input nodes, nested
calls are inlined, ``scan`` / ``while`` / ``cond`` stay single nodes.
:func:`trace_program` also returns the :class:`Program` the executor re-runs
(same node ids). Host-side.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from typing import Any, Callable, NamedTuple, Sequence

import jax
from jax.extend import core as jex_core
import numpy as np

from gplace.errors import CaptureError, first_line
from gplace.graphs.features import is_known_primitive
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.graphs.op_costs import INLINED, aval_bytes, eqn_cost


class Ref(NamedTuple):
  """A value a node reads: ``var`` is a program-wide value id, or -1 for a
  literal, in which case ``literal`` holds it."""
  var: int
  literal: Any = None


class NodeRecord(NamedTuple):
  """How to compute one node.

  Attributes:
    kind: ``NODE_INPUT`` / ``NODE_OP`` / ``NODE_OUTPUT``.
    eqn: for op nodes, the jaxpr equation (its primitive and params); the
      values it reads are ``inputs``, not the equation's own variables.
    inputs: values read, in the equation's operand order (output nodes: one).
    outputs: value ids written (``-1`` for a dropped output). Input nodes
      write one value.
    source: for input nodes, ``("arg", i)`` = flat argument leaf ``i`` or
      ``("const", value)``; ``None`` otherwise.
  """
  kind: int
  eqn: Any
  inputs: tuple[Ref, ...]
  outputs: tuple[int, ...]
  source: Any = None


class Program(NamedTuple):
  """A captured program: its graph, one record per node, and its signature.

  ``nodes[i]`` computes ``graph`` node ``i``; ``output_nodes`` are the ids of
  the output nodes in the order of the flat outputs; ``in_tree`` /
  ``out_tree`` are the pytree structures of ``(args, kwargs)`` and of the
  result; ``in_avals`` are the abstract values of the flat argument leaves.
  """
  graph: Graph
  nodes: tuple[NodeRecord, ...]
  in_tree: Any
  out_tree: Any
  in_avals: tuple[Any, ...]
  output_nodes: tuple[int, ...]


def eval_node(record: NodeRecord, values: Sequence[Any]) -> list[Any]:
  """Applies an op node's primitive to the values of its inputs.

  Works eagerly and under tracing (the executor jits clusters of nodes by
  calling this inside a traced function).
  """
  eqn = record.eqn
  subfuns, params = _bind_params(eqn)
  out = eqn.primitive.bind(*subfuns, *values, **params)
  return list(out) if eqn.primitive.multiple_results else [out]


def _bind_params(eqn) -> tuple[tuple, dict]:
  """``(subfuns, params)`` to bind ``eqn`` 's primitive with, as
  ``jax.core.eval_jaxpr`` does: a ``shard_map`` (what ``jax.pmap`` traces
  to) binds its body as a function, not the jaxpr it records. JAX returns
  the params alone (0.5 on) or ``(subfuns, params)`` (before)."""
  get = getattr(eqn.primitive, "get_bind_params", None)
  if get is None:
    return (), eqn.params
  bound = get(eqn.params)
  if isinstance(bound, tuple) and len(bound) == 2 and isinstance(bound[1],
                                                                 dict):
    return tuple(bound[0]), bound[1]
  return (), bound


# -- naming ---------------------------------------------------------------------

_WRAPPER = re.compile(r"^[A-Za-z_]\w*\((.*)\)$")


def _clean_scope(part: str) -> str:
  """``"transpose(jvp(Encoder))"`` -> ``"Encoder"``."""
  while True:
    match = _WRAPPER.match(part)
    if not match:
      return part
    part = match.group(1)


def _scope_name(prefix: str, name_stack: Any) -> str:
  parts = [p for p in str(name_stack).split("/") if p]
  cleaned = [c for c in (_clean_scope(p) for p in parts) if c]
  return "/".join([p for p in [prefix] if p] + cleaned)


def _path_name(path) -> str:
  parts = []
  for key in path:
    if isinstance(key, jax.tree_util.SequenceKey):
      parts.append(str(key.idx))
    elif isinstance(key, jax.tree_util.DictKey):
      parts.append(str(key.key))
    elif isinstance(key, jax.tree_util.GetAttrKey):
      parts.append(str(key.name))
    else:
      parts.append(str(key).strip(".[]'\""))
  return "/".join(parts)


# -- flattening -----------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _known_primitive(name: str) -> bool:
  """Whether the features vocabulary has an id for this primitive."""
  return is_known_primitive(name)


class _Builder:
  """Accumulates nodes while walking a jaxpr and its inlined sub-programs."""

  def __init__(self):
    self.records: list[NodeRecord] = []
    self.names: list[str] = []
    self.op_type: list[str] = []
    self.kind: list[int] = []
    self.shapes: list[tuple[int, ...]] = []
    self.dtypes: list[str] = []
    self.out_bytes: list[int] = []
    self.flops: list[float] = []
    self.accessed: list[float] = []
    self.var_owner: list[int] = []   # value id -> producing node
    self.var_bytes: list[int] = []
    self.unknown: set[str] = set()

  def new_var(self, owner: int, aval) -> int:
    self.var_owner.append(owner)
    self.var_bytes.append(aval_bytes(aval))
    return len(self.var_owner) - 1

  def add_node(self, record_fn, *, name, op_type, kind, avals, flops=0.0,
               accessed=0.0) -> int:
    node = len(self.records)
    largest = max(avals, key=aval_bytes) if avals else None
    self.names.append(name)
    self.op_type.append(op_type)
    self.kind.append(kind)
    self.shapes.append(tuple(getattr(largest, "shape", ()) or ()))
    self.dtypes.append(str(getattr(largest, "dtype", "none")))
    self.out_bytes.append(sum(aval_bytes(a) for a in avals))
    self.flops.append(float(flops))
    self.accessed.append(float(accessed))
    self.records.append(record_fn(node))
    return node

  def add_input(self, name: str, aval, source) -> Ref:
    holder = {}

    def record(node):
      holder["var"] = self.new_var(node, aval)
      return NodeRecord(NODE_INPUT, None, (), (holder["var"],), source)

    self.add_node(record, name=name, op_type="input", kind=NODE_INPUT,
                  avals=[aval])
    return Ref(holder["var"])

  def walk(self, jaxpr, env: dict, prefix: str) -> None:
    for eqn in jaxpr.eqns:
      name = eqn.primitive.name
      scope = _scope_name(prefix, eqn.source_info.name_stack)
      reads = tuple(self.read(env, v) for v in eqn.invars)
      if name in INLINED:
        sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        if sub is not None:
          self.inline(eqn, sub, reads, env, scope)
          continue
      flops, accessed = eqn_cost(eqn)
      op_type = name
      if not _known_primitive(name):
        if name not in self.unknown:
          warnings.warn(f"gplace.capture: primitive {name!r} is not in the "
                        "op vocabulary; it is captured as type 'unknown' with "
                        "a generic cost.", stacklevel=3)
        self.unknown.add(name)
        op_type = "unknown"
      holder = {}

      def record(node, eqn=eqn, reads=reads):
        outs = tuple(-1 if isinstance(v, jex_core.DropVar)
                     else self.new_var(node, v.aval) for v in eqn.outvars)
        holder["outs"] = outs
        return NodeRecord(NODE_OP, eqn, reads, outs)

      self.add_node(record, name=f"{scope}/{name}" if scope else name,
                    op_type=op_type, kind=NODE_OP,
                    avals=[v.aval for v in eqn.outvars], flops=flops,
                    accessed=accessed)
      for var, out in zip(eqn.outvars, holder["outs"]):
        if out >= 0:
          env[var] = Ref(out)

  def inline(self, eqn, sub, reads, env, scope) -> None:
    inner = getattr(sub, "jaxpr", sub)
    consts = list(getattr(sub, "consts", ()))
    inner_env: dict = {}
    for var, value in zip(inner.constvars, consts):
      inner_env[var] = self.const(value, var.aval, scope)
    for var, ref in zip(inner.invars, reads):
      inner_env[var] = ref
    self.walk(inner, inner_env, scope)
    for outer, inner_var in zip(eqn.outvars, inner.outvars):
      if not isinstance(outer, jex_core.DropVar):
        env[outer] = self.read(inner_env, inner_var)

  def const(self, value, aval, scope) -> Ref:
    return self.add_input(f"{scope + '/' if scope else ''}const", aval,
                          ("const", value))

  @staticmethod
  def read(env, var) -> Ref:
    if isinstance(var, jex_core.Literal):
      return Ref(-1, var.val)
    return env[var]

  def add_output(self, name: str, ref: Ref, aval) -> int:
    return self.add_node(
        lambda node: NodeRecord(NODE_OUTPUT, None, (ref,), ()),
        name=name, op_type="output", kind=NODE_OUTPUT, avals=[aval])

  def edges(self):
    src, dst, nbytes = [], [], []
    for node, record in enumerate(self.records):
      seen = set()
      for ref in record.inputs:
        if ref.var >= 0 and ref.var not in seen:
          seen.add(ref.var)
          src.append(self.var_owner[ref.var])
          dst.append(node)
          nbytes.append(self.var_bytes[ref.var])
    return np.stack([np.asarray(src, np.int64), np.asarray(dst, np.int64),
                     np.asarray(nbytes, np.int64)], 1) if src else np.zeros(
                         (0, 3), np.int64)


def _argument_name(path) -> str:
  """Pytree path of a leaf of ``(args, kwargs)`` -> ``"arg0/params/Dense_0/kernel"``
  for positional arguments, ``"batch/x"`` for keyword arguments."""
  which, first, rest = path[0].idx, path[1], path[2:]
  head = f"arg{first.idx}" if which == 0 else str(first.key)
  tail = _path_name(rest)
  return f"{head}/{tail}" if tail else head


#: A tree difference names at most this many leaves of each kind.
_MAX_NAMED_LEAVES = 5


def _listed(names: Sequence[str]) -> str:
  shown = ", ".join(names[:_MAX_NAMED_LEAVES])
  more = len(names) - _MAX_NAMED_LEAVES
  return shown + (f" and {more} more" if more > 0 else "")


def name_difference(expected: Sequence[str], got: Sequence[str],
                    what: str = "argument leaves") -> str:
  """``"extra argument leaves: arg0/b; missing: arg1"``: the names in
  ``got`` and not in ``expected`` and the other way round (at most five
  of each), or "" when both hold the same names."""
  expected_set, got_set = set(expected), set(got)
  extra = [n for n in got if n not in expected_set]
  missing = [n for n in expected if n not in got_set]
  parts = []
  if extra:
    parts.append(f"extra {what}: {_listed(extra)}")
  if missing:
    parts.append(f"missing {what}: {_listed(missing)}")
  return "; ".join(parts)


def argument_names(in_tree) -> list[str]:
  """Names of the leaves of an ``(args, kwargs)`` tree structure, as
  capture names its input nodes (``arg0/params/w``, ``batch/x``)."""
  try:
    rebuilt = jax.tree_util.tree_unflatten(in_tree, [0] * in_tree.num_leaves)
    paths = [path for path, _ in
             jax.tree_util.tree_flatten_with_path(rebuilt)[0]]
    return [_argument_name(path) for path in paths]
  except Exception:  # pylint: disable=broad-except
    return []  # a custom node that will not hold placeholders


def tree_difference(expected, got) -> str:
  """What differs between two ``(args, kwargs)`` tree structures, in one
  line: the extra and missing leaves by name, or, when the leaves are the
  same, that their containers differ (a tuple for a list, another dict
  type), with both structures shortened."""
  difference = name_difference(argument_names(expected), argument_names(got))
  if difference:
    return difference
  shorten = lambda tree: (str(tree) if len(str(tree)) <= 160
                          else str(tree)[:157] + "...")
  return (f"the same leaves in other containers: got {shorten(got)}, "
          f"captured {shorten(expected)}")


def _static_arguments(fn: Callable, args: tuple, kwargs: dict
                      ) -> list[tuple[str, str]]:
  """The static arguments of a ``jax.jit(..., static_argnums=...,
  static_argnames=...)`` function among ``args`` / ``kwargs``, each as
  ``("argument 1 (n=3)", "n=3")``; [] for any other function."""
  info = getattr(fn, "_jit_info", None)  # what jax.jit records (private)
  if info is None:
    return []
  try:
    parameters = list(inspect.signature(fn).parameters)
  except (TypeError, ValueError):
    parameters = []
  found = []
  for i in sorted({i % len(args) for i in getattr(info, "static_argnums", ())
                   or () if -len(args) <= i < len(args)}):
    bind = (f"{parameters[i]}={args[i]!r}" if i < len(parameters)
            else f"<name of argument {i}>={args[i]!r}")
    found.append((f"argument {i} ({bind})", bind))
  for key in getattr(info, "static_argnames", ()) or ():
    if key in kwargs:
      found.append((f"keyword argument {key}={kwargs[key]!r}",
                    f"{key}={kwargs[key]!r}"))
  return found


def trace_program(fn: Callable, *args, name: str | None = None,
                  **kwargs) -> Program:
  """Traces ``fn(*args, **kwargs)`` and flattens it into a :class:`Program`.

  Args:
    fn: any jittable function.
    *args, **kwargs: its arguments, pytrees of arrays (or of
      ``jax.ShapeDtypeStruct``, so huge programs capture without allocating).
    name: label of the graph (default: ``fn.__name__``).

  Raises:
    CaptureError: if ``fn`` cannot be traced with these arguments.
  """
  if not callable(fn):
    raise CaptureError(f"capture needs a function, got {type(fn).__name__}.")
  try:
    leaves_with_path, in_tree = jax.tree_util.tree_flatten_with_path(
        (args, kwargs))
  except Exception as err:  # pylint: disable=broad-except
    raise CaptureError(
        f"The arguments are not a pytree JAX can flatten ({first_line(err)}"
        "); e.g. a dict's keys must be mutually sortable (all strings, or "
        "all ints).") from err
  leaves = []
  for path, leaf in leaves_with_path:
    if isinstance(leaf, (str, bytes)) or leaf is None or not (
        hasattr(leaf, "shape") or isinstance(leaf, (bool, int, float,
                                                    complex, np.generic))):
      raise CaptureError(
          f"Argument leaf {_path_name(path) or '<root>'} is a "
          f"{type(leaf).__name__}, not an array; bind non-array arguments "
          "with functools.partial before capturing.")
    leaves.append(leaf)

  def flat_fn(*flat):
    call_args, call_kwargs = jax.tree_util.tree_unflatten(in_tree, flat)
    return fn(*call_args, **call_kwargs)

  try:
    closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*leaves)
  except Exception as err:  # pylint: disable=broad-except
    static = _static_arguments(fn, args, kwargs)
    if static:
      fn_name = getattr(fn, "__name__", "fn")
      binds = ", ".join(bind for _, bind in static)
      raise CaptureError(
          f"Could not trace {fn_name!r}: it is jax.jit-wrapped with static "
          f"arguments ({', '.join(label for label, _ in static)}), and "
          "gplace traces every argument it is given as an array. Bind the "
          "static arguments by keyword and pass only the array ones, e.g. "
          f"gplace.capture(functools.partial({fn_name}, {binds}), ...), and "
          "place and call that same partial.") from err
    raise CaptureError(
        f"Could not trace {getattr(fn, '__name__', fn)!r} with the given "
        f"arguments: {first_line(err)}. The function must be jittable "
        "(no Python control flow on array values) and accept these "
        "arguments.") from err
  out_leaves_with_path, out_tree = jax.tree_util.tree_flatten_with_path(
      out_shape)

  builder = _Builder()
  env: dict = {}
  jaxpr = closed.jaxpr
  arg_names = [_argument_name(path) for path, _ in leaves_with_path]
  for i, (var, leaf_name) in enumerate(zip(jaxpr.invars, arg_names)):
    env[var] = builder.add_input(leaf_name, var.aval, ("arg", i))
  for var, value in zip(jaxpr.constvars, closed.consts):
    env[var] = builder.const(value, var.aval, "")
  builder.walk(jaxpr, env, "")
  output_nodes = []
  for (path, _), var in zip(out_leaves_with_path, jaxpr.outvars):
    ref = builder.read(env, var)
    label = _path_name(path)
    output_nodes.append(builder.add_output(
        "output" + (f"/{label}" if label else ""), ref, var.aval))

  graph = Graph.build(
      names=builder.names, op_type=builder.op_type, kind=builder.kind,
      out_shapes=builder.shapes, out_dtype=builder.dtypes,
      out_bytes=builder.out_bytes, flops=builder.flops,
      bytes_accessed=builder.accessed, edges=builder.edges(),
      name=name if name is not None else getattr(fn, "__name__", "graph"))
  # The walk visits nodes in a topological order, so Graph.build keeps ids.
  assert list(graph.names) == builder.names, "capture renumbered nodes"
  return Program(graph=graph, nodes=tuple(builder.records), in_tree=in_tree,
                 out_tree=out_tree, in_avals=tuple(v.aval for v in jaxpr.invars),
                 output_nodes=tuple(output_nodes))


def capture(fn: Callable, *args, name: str | None = None, **kwargs) -> Graph:
  """Captures a jittable function into an op :class:`Graph`.

  Args:
    fn: any jittable function (a flax ``apply``, a full training step...).
    *args, **kwargs: example arguments, any pytrees of arrays or
      ``jax.ShapeDtypeStruct``.
    name: label of the graph (default: ``fn.__name__``).

  Returns:
    The op graph; node ids are a topological order.

  Raises:
    CaptureError: if ``fn`` cannot be traced or the arguments do not fit it.

  Example::

    graph = gplace.capture(train_step, params, opt_state, batch)
    print(graph.summary())
  """
  return trace_program(fn, *args, name=name, **kwargs).graph


def evaluate(program: Program, *args, **kwargs):
  """Runs a program node by node on the host's default device.

  A reference interpreter: the executor's placed runs must agree with it,
  and with ``jax.jit(fn)``. Returns the output pytree of the function.

  Raises:
    CaptureError: if the arguments' structure differs from the captured one.
  """
  leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
  if in_tree != program.in_tree:
    raise CaptureError(
        "The arguments' pytree structure differs from the one the program "
        f"was captured with: {tree_difference(program.in_tree, in_tree)}. "
        "Call it with arguments of the captured structure.")
  values: dict[int, Any] = {}
  read = lambda ref: values[ref.var] if ref.var >= 0 else ref.literal
  outputs = []
  for record in program.nodes:
    if record.kind == NODE_INPUT:
      source, payload = record.source
      values[record.outputs[0]] = leaves[payload] if source == "arg" else payload
    elif record.kind == NODE_OP:
      results = eval_node(record, [read(ref) for ref in record.inputs])
      for var, value in zip(record.outputs, results):
        if var >= 0:
          values[var] = value
    else:
      outputs.append(read(record.inputs[0]))
  return jax.tree_util.tree_unflatten(program.out_tree, outputs)
