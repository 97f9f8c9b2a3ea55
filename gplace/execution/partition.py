"""Partitioning a placed program into same-device clusters (host-side).

Op nodes are ordered topologically, preferring to stay on the current device
(a device-greedy Kahn order), and the order is cut into contiguous same-device
clusters; since each cluster is a segment of one topological order, the
cluster graph is acyclic. Op signatures (primitive, params, input shapes)
name what a node computes, so the executor can cache compiled clusters and
the profiler can time each distinct op once.

Pure Python and numpy; nothing here is traced.
"""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple

from jax.extend import core as jex_core
import numpy as np

from gplace.graphs.capture import NodeRecord, Program
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT

# -- signatures -----------------------------------------------------------------


def _value_key(value: Any) -> str:
  """A string that identifies an equation parameter's meaning.

  Jaxprs print their text; closed-over constants (which the text omits) add
  their identities, so two programs only share an executable when that is
  safe. Anything else prints its ``repr`` (objects without a meaningful
  repr print their address, which keeps them apart).
  """
  if isinstance(value, jex_core.ClosedJaxpr):
    consts = ",".join(str(id(c)) for c in value.consts)
    return f"closed[{value.jaxpr}|{consts}]"
  if isinstance(value, jex_core.Jaxpr):
    return f"jaxpr[{value}]"
  if isinstance(value, (tuple, list)):
    return "(" + ",".join(_value_key(v) for v in value) + ")"
  if isinstance(value, np.ndarray):
    return f"nd[{value.dtype}{value.shape}{hash(value.tobytes())}]"
  return repr(value)


def _aval_key(aval) -> str:
  return f"{aval.dtype}{tuple(aval.shape)}{'w' if aval.weak_type else ''}"


def op_signature(record: NodeRecord) -> str:
  """What an op node computes, independent of where its inputs come from:
  the primitive, its parameters, the abstract values it reads (literals by
  value) and which of its outputs are used."""
  eqn = record.eqn
  params = ";".join(f"{k}={_value_key(eqn.params[k])}"
                    for k in sorted(eqn.params))
  reads = ",".join(
      f"lit:{type(ref.literal).__name__}:{ref.literal!r}" if ref.var < 0 else
      _aval_key(var.aval) for ref, var in zip(record.inputs, eqn.invars))
  return f"{eqn.primitive.name}[{params}]({reads})"


# -- the plan -------------------------------------------------------------------


class Cluster(NamedTuple):
  """A contiguous same-device run of ops, compiled as one executable.

  Attributes:
    device_index: index into the placed function's ``devices``.
    nodes: op node ids, in execution order.
    in_vars: value ids it reads from outside, in argument order.
    out_vars: value ids it produces that are read outside, in result order.
  """
  device_index: int
  nodes: tuple[int, ...]
  in_vars: tuple[int, ...]
  out_vars: tuple[int, ...]


def device_greedy_order(graph: Graph, placement: np.ndarray) -> list[int]:
  """A topological order of the op nodes that stays on one device as long
  as that device has a ready op (ties broken by node id).

  Args:
    graph: the op graph.
    placement: ``[N]`` device index per node.

  Returns:
    The op node ids in execution order.
  """
  is_op = graph.kind == NODE_OP
  indegree = np.zeros(graph.n_nodes, np.int64)
  op_edges = is_op[graph.edge_src] & is_op[graph.edge_dst]
  np.add.at(indegree, graph.edge_dst[op_edges], 1)
  ready: dict[int, list[int]] = {}
  for node in np.flatnonzero(is_op & (indegree == 0)):
    ready.setdefault(int(placement[node]), []).append(int(node))
  for heap in ready.values():
    heapq.heapify(heap)
  ptr, _ = graph.succ_csr
  order: list[int] = []
  current = None
  while True:
    if current is None or not ready.get(current):
      live = [(heap[0], dev) for dev, heap in ready.items() if heap]
      if not live:
        break
      current = min(live)[1]
    node = heapq.heappop(ready[current])
    order.append(node)
    for succ in graph.edge_dst[ptr[node]:ptr[node + 1]]:
      if is_op[succ]:
        indegree[succ] -= 1
        if indegree[succ] == 0:
          heapq.heappush(ready.setdefault(int(placement[succ]), []), int(succ))
  return order


def partition(program: Program, placement: np.ndarray,
              mode: str = "cluster") -> list[Cluster]:
  """Cuts a placed program into clusters (host-side).

  Args:
    program: a traced program.
    placement: ``[N]`` device index per node.
    mode: ``"cluster"`` (maximal same-device runs of a device-greedy order)
      or ``"op"`` (one cluster per op).

  Returns:
    Clusters in execution order; the cluster graph is acyclic.
  """
  order = device_greedy_order(program.graph, placement)
  groups: list[list[int]] = []
  for node in order:
    if (mode == "cluster" and groups
        and placement[groups[-1][-1]] == placement[node]):
      groups[-1].append(node)
    else:
      groups.append([node])
  cluster_of = np.full(program.graph.n_nodes, -1, np.int64)
  for index, nodes in enumerate(groups):
    cluster_of[nodes] = index
  # Values read outside their producer's cluster (other clusters, outputs).
  owner = _value_owner(program)
  used_outside: set[int] = set()
  for node, record in enumerate(program.nodes):
    if record.kind == NODE_INPUT:
      continue
    for ref in record.inputs:
      if ref.var >= 0 and (record.kind == NODE_OUTPUT
                           or cluster_of[owner[ref.var]] != cluster_of[node]):
        used_outside.add(ref.var)
  clusters = []
  for index, nodes in enumerate(groups):
    in_vars: dict[int, None] = {}
    out_vars: list[int] = []
    for node in nodes:
      record = program.nodes[node]
      for ref in record.inputs:
        if ref.var >= 0 and cluster_of[owner[ref.var]] != index:
          in_vars.setdefault(ref.var)
      out_vars.extend(v for v in record.outputs if v in used_outside)
    clusters.append(Cluster(int(placement[nodes[0]]), tuple(nodes),
                            tuple(in_vars), tuple(out_vars)))
  return clusters


def _value_owner(program: Program) -> dict[int, int]:
  owner = {}
  for node, record in enumerate(program.nodes):
    for var in record.outputs:
      if var >= 0:
        owner[var] = node
  return owner
