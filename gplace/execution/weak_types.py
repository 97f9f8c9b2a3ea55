"""Weak types: when a placed program may run arguments typed differently.

``jax.jit`` re-traces on a weak-type change; the executor must run the
captured graph, so :func:`resolve_program` does so when
:func:`same_computation` proves both compute the same, else
:func:`weak_type_error` names the argument. Traces, never compiles.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np

from gplace.errors import CaptureError, ExecutionError
from gplace.execution.inputs import is_extended, leaf_aval
from gplace.execution.partition import param_key
from gplace.graphs.capture import (Program, Ref, argument_names,
                                   name_difference)
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP

#: With at most this many candidate leaves every combination of weak flags
#: is tried; with more, only single flips and flipping all of them.
MAX_EXHAUSTIVE = 4

Trace = Callable[[Callable, tuple, dict], Program]


def matches_graph(program: Program, graph: Graph) -> bool:
  """True if ``program`` has ``graph`` 's nodes (count and op types)."""
  return (program.graph.n_nodes == graph.n_nodes
          and np.array_equal(program.graph.op_type, graph.op_type))


def _node_type(graph: Graph, node: int) -> str:
  shape = ",".join(str(d) for d in graph.out_shape[node, :graph.out_rank[node]])
  return f"{graph.out_dtype[node]}[{shape}]"


def check_shapes(program: Program, graph: Graph) -> None:
  """Raises ExecutionError unless every node of ``program`` (which
  :func:`matches_graph` ``graph``) has the output shape and dtype the graph
  records: the same ops on other shapes are another program, whose costs
  the graph (and any simulated runtime of the placement) does not give.

  ``jax.jit`` would re-trace for the new shapes; a placement is made for the
  captured ones.
  """
  traced = program.graph
  differ = np.flatnonzero(
      (traced.out_dtype != graph.out_dtype)
      | (traced.out_rank != graph.out_rank)
      | np.any(traced.out_shape != graph.out_shape, axis=1))
  if differ.size:
    node = int(differ[0])
    raise ExecutionError(
        f"These arguments give other shapes or dtypes than the graph was "
        f"captured with: node {node} ('{graph.names[node]}') is "
        f"{_node_type(traced, node)} here, {_node_type(graph, node)} in the "
        f"graph ({differ.size} of {graph.n_nodes} nodes differ). The "
        "placement and its simulated costs are for the captured shapes; "
        "call it with arguments of those shapes and dtypes, or capture and "
        "place again for these (gplace.capture(fn, *args)).")


def _weak_only_convert(eqn) -> bool:
  """A ``convert_element_type`` to the dtype its operand already has: it
  changes the weak flag only, never a value."""
  if eqn.primitive.name != "convert_element_type" or len(eqn.invars) != 1:
    return False
  aval = getattr(eqn.invars[0], "aval", None)
  return (aval is not None and aval.dtype == eqn.params.get("new_dtype")
          and eqn.params.get("sharding") is None)


def _literal_key(ref: Ref) -> tuple:
  value = ref.literal
  return ("lit", type(value).__name__, str(getattr(value, "dtype", "")),
          repr(value))


def _canonical(program: Program) -> tuple[list, list, tuple]:
  """``(ops, constants, outputs)``: the program with value ids replaced by
  where they come from, weak flags ignored, weak-only converts dropped."""
  source: dict[int, tuple] = {}
  ops: list[tuple] = []
  consts: list[Any] = []

  def read(ref: Ref) -> tuple:
    return source[ref.var] if ref.var >= 0 else _literal_key(ref)

  for record in program.nodes:
    if record.kind == NODE_INPUT:
      kind, payload = record.source
      if kind == "arg":
        source[record.outputs[0]] = ("arg", payload)
      else:
        source[record.outputs[0]] = ("const", len(consts))
        consts.append(payload)
    elif record.kind == NODE_OP:
      eqn = record.eqn
      reads = tuple(read(ref) for ref in record.inputs)
      if _weak_only_convert(eqn):
        if record.outputs[0] >= 0:
          source[record.outputs[0]] = reads[0]
        continue
      # The weak flag never reaches XLA: only dtypes and shapes matter.
      params = ";".join(f"{k}={param_key(eqn.params[k])}"
                        for k in sorted(eqn.params) if k != "weak_type")
      outs = tuple((str(v.aval.dtype), tuple(v.aval.shape))
                   for v in eqn.outvars)
      for j, var in enumerate(record.outputs):
        if var >= 0:
          source[var] = ("op", len(ops), j)
      ops.append((eqn.primitive.name, params, reads, outs))
  outputs = tuple(read(program.nodes[node].inputs[0])
                  for node in program.output_nodes)
  return ops, consts, outputs


def _same_constant(a: Any, b: Any) -> bool:
  if a is b:
    return True
  dtype_a, dtype_b = getattr(a, "dtype", None), getattr(b, "dtype", None)
  if (dtype_a is None or dtype_b is None or is_extended(dtype_a)
      or is_extended(dtype_b)):
    return False
  a, b = np.asarray(a), np.asarray(b)
  return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
      a, b, equal_nan=a.dtype.kind in "fc")


def same_computation(a: Program, b: Program) -> bool:
  """True if ``a`` and ``b`` compute the same outputs from the same
  argument values: equal pytrees, argument shapes and dtypes, and the same
  ops (primitive, parameters, input wiring, output dtypes and shapes) in the
  same order, once converts that change only the weak type are dropped.
  Weak flags themselves are ignored: they steer tracing, not XLA."""
  if a.in_tree != b.in_tree or a.out_tree != b.out_tree:
    return False
  if len(a.in_avals) != len(b.in_avals) or any(
      x.shape != y.shape or x.dtype != y.dtype
      for x, y in zip(a.in_avals, b.in_avals)):
    return False
  ops_a, consts_a, outs_a = _canonical(a)
  ops_b, consts_b, outs_b = _canonical(b)
  return (ops_a == ops_b and outs_a == outs_b
          and len(consts_a) == len(consts_b)
          and all(_same_constant(x, y) for x, y in zip(consts_a, consts_b)))


def _can_be_weak(aval) -> bool:
  dtype = aval.dtype
  return not is_extended(dtype) and np.dtype(dtype).kind in "iufc"


def _flips(avals: Sequence[Any]) -> Iterator[tuple[int, ...]]:
  """Sets of leaf indices whose weak flag to flip, fewest first: scalars
  (what Python numbers become) and leaves that are weak now."""
  candidates = [i for i, aval in enumerate(avals)
                if _can_be_weak(aval) and (aval.shape == () or
                                           aval.weak_type)]
  if len(candidates) <= MAX_EXHAUSTIVE:
    for size in range(1, len(candidates) + 1):
      yield from itertools.combinations(candidates, size)
    return
  yield from ((i,) for i in candidates)
  for weak in (True, False):
    flips = tuple(i for i in candidates if avals[i].weak_type != weak)
    if flips:
      yield flips


def _describe(aval) -> str:
  if aval.weak_type:
    return f"a weakly typed {aval.dtype} (e.g. a Python scalar)"
  return (f"a strongly typed {aval.dtype} (e.g. jnp.{aval.dtype}(x) or an "
          "array)")


def weak_type_error(names: Sequence[str], captured: Sequence[Any],
                    now: Sequence[Any]) -> ExecutionError:
  """The error for arguments whose weak type changed in a way that changes
  what ``fn`` computes."""
  changes = "; ".join(
      f"argument {name} was {_describe(before)} at capture and is "
      f"{_describe(after)} now" for name, before, after in
      zip(names, captured, now))
  dtype = now[0].dtype if now else "float32"
  return ExecutionError(
      f"{changes[:1].upper()}{changes[1:]}. With these argument types fn "
      "traces to a different program than the captured graph (jax.jit would "
      "re-trace), so this placement does not describe it. Capture and call "
      f"with the same argument types, e.g. jnp.{dtype}(x) in both (or Python "
      "scalars in both), then place again.")


def resolve_program(fn: Callable, graph: Graph, args: tuple, kwargs: dict,
                    trace: Trace, name_of: Callable[[int], str]) -> Program:
  """The traced program of ``fn`` whose graph is ``graph``.

  Traces ``fn`` with the given arguments; if that does not give ``graph``,
  re-traces with the weak flags of scalar arguments flipped, and returns
  such a variant when it gives ``graph`` and computes the same as the
  arguments' own program (:func:`same_computation`).

  Args:
    fn: the placed function.
    graph: the graph the placement refers to.
    args, kwargs: example or call arguments (arrays or
      ``jax.ShapeDtypeStruct``).
    trace: ``(fn, args, kwargs) -> Program``, e.g. the executor's cache.
    name_of: flat argument index -> its name, for messages.

  Raises:
    ExecutionError: ``graph`` is not ``fn`` 's with these argument shapes
      and dtypes (other ops, or the same ops on other shapes:
      :func:`check_shapes`), or it is only with other weak types that
      change the computation (the message names the arguments and how to
      capture consistently).
  """
  try:
    program = trace(fn, args, kwargs)
  except CaptureError as err:
    # A key fewer in a params dict fails inside fn: say which.
    _, in_tree = jax.tree_util.tree_flatten((args, kwargs))
    difference = _input_difference(graph, argument_names(in_tree))
    if difference:
      raise _other_arguments_error(fn, difference) from err
    raise
  if matches_graph(program, graph):
    check_shapes(program, graph)
    return program
  leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
  avals = [leaf_aval(leaf) for leaf in leaves]
  for flips in _flips(avals):
    variant = list(leaves)
    for i in flips:
      variant[i] = jax.ShapeDtypeStruct(avals[i].shape, avals[i].dtype,
                                        weak_type=not avals[i].weak_type)
    v_args, v_kwargs = jax.tree_util.tree_unflatten(in_tree, variant)
    try:
      candidate = trace(fn, v_args, v_kwargs)
    except CaptureError:
      continue
    if not matches_graph(candidate, graph):
      continue
    if same_computation(candidate, program):
      check_shapes(candidate, graph)
      return candidate
    raise weak_type_error([name_of(i) for i in flips],
                          [candidate.in_avals[i] for i in flips],
                          [avals[i] for i in flips])
  difference = _input_difference(graph, [
      str(program.graph.names[node])
      for node, record in enumerate(program.nodes)
      if record.kind == NODE_INPUT and record.source[0] == "arg"])
  if difference:
    raise _other_arguments_error(fn, difference)
  raise ExecutionError(
      f"The graph was captured from a different function/arguments: tracing "
      f"{getattr(fn, '__name__', 'fn')!r} with these arguments gives "
      f"{program.graph.n_nodes} nodes, the graph has {graph.n_nodes} (or "
      "their op types differ). Capture the graph from the same function and "
      "argument shapes and dtypes you place.")


def _input_difference(graph: Graph, arguments: Sequence[str]) -> str:
  """The argument leaves (by input-node name, ``arg0/params/w``) that
  ``arguments`` has and ``graph`` lacks, and the other way round ("" if
  none): the arguments' pytree changed, e.g. a key more in a params dict.
  Captured constants are left out: they differ when the function does."""
  captured = [str(name) for name, kind in zip(graph.names, graph.kind)
              if kind == NODE_INPUT]
  is_const = lambda name: name == "const" or name.endswith("/const")
  return name_difference([n for n in captured if not is_const(n)],
                         list(arguments), "inputs")


def _other_arguments_error(fn: Callable, difference: str) -> ExecutionError:
  return ExecutionError(
      f"These arguments are not the ones the graph was captured with: "
      f"{difference} (input nodes by argument path). Call "
      f"{getattr(fn, '__name__', 'fn')!r} with arguments of the captured "
      "structure, or capture and place again for these "
      "(gplace.capture(fn, *args)).")


def check_call_weak_types(program: Program, fn: Callable, args: tuple,
                          kwargs: dict, changed: Sequence[int],
                          trace: Trace, name_of: Callable[[int], str]
                          ) -> None:
  """Checks that ``program`` may run a call whose leaves ``changed`` differ
  from its arguments in weak type only.

  Raises:
    ExecutionError: with these weak types ``fn`` computes something else
      (:func:`weak_type_error`).
  """
  actual = trace(fn, args, kwargs)
  if not same_computation(program, actual):
    raise weak_type_error([name_of(i) for i in changed],
                          [program.in_avals[i] for i in changed],
                          [actual.in_avals[i] for i in changed])
