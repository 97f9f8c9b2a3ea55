"""Side effects in placed programs: as under ``jax.jit``, effectful ops run
even when unread and in program order. :func:`effectful_nodes`,
:func:`effect_edges` (their chain), :func:`respect_order` (repairs a
schedule). Host-side.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from gplace.graphs.graph import Graph, NODE_OP

if TYPE_CHECKING:
  from gplace.graphs.capture import Program


def successors_with(graph: Graph, after: np.ndarray | None
                    ) -> Callable[[int], Sequence[int]]:
  """``node -> successors``: the graph's edges plus ``after`` 's ``[E, 2]``
  ``(before, after)`` pairs."""
  ptr, _ = graph.succ_csr
  extra: dict[int, list[int]] = {}
  for src, dst in (after if after is not None else ()):
    extra.setdefault(int(src), []).append(int(dst))

  def successors(node):
    succ = graph.edge_dst[ptr[node]:ptr[node + 1]]
    return list(succ) + extra[node] if node in extra else succ

  return successors


def effectful_nodes(program: Program) -> list[int]:
  """Op nodes with side effects (``eqn.effects``: ``io_callback``,
  ``jax.debug.print``, a loop whose body has one), in program order.

  They run even when no one reads their results, exactly once per call,
  as under ``jax.jit``.
  """
  return [node for node, record in enumerate(program.nodes)
          if record.kind == NODE_OP and record.eqn.effects]


def effect_edges(program: Program) -> np.ndarray:
  """``[E, 2]`` int64 ``(before, after)`` pairs that chain the effectful op
  nodes in program order, so that the executor dispatches them in the order
  ``jax.jit`` runs them (ordered effects, e.g. ``io_callback(...,
  ordered=True)``, must not overtake one another across devices). Node ids
  are a topological order, so the chain keeps the graph acyclic."""
  nodes = effectful_nodes(program)
  return np.asarray(list(zip(nodes[:-1], nodes[1:])),
                    np.int64).reshape(-1, 2)


def respect_order(schedule: np.ndarray, graph: Graph,
                  after: np.ndarray) -> np.ndarray:
  """``schedule`` (a topological order of the nodes) made to respect the
  extra ordering edges ``after`` as well: Kahn's algorithm that always
  takes the ready node ``schedule`` ranks first, so a schedule that already
  respects them comes back unchanged."""
  if not len(after):
    return schedule
  n = graph.n_nodes
  rank = np.empty(n, np.int64)
  rank[schedule] = np.arange(n)
  indegree = np.zeros(n, np.int64)
  np.add.at(indegree, graph.edge_dst, 1)
  np.add.at(indegree, after[:, 1], 1)
  successors = successors_with(graph, after)
  ready = [(int(rank[v]), int(v)) for v in np.flatnonzero(indegree == 0)]
  heapq.heapify(ready)
  order = []
  while ready:
    _, node = heapq.heappop(ready)
    order.append(node)
    for succ in successors(node):
      indegree[succ] -= 1
      if indegree[succ] == 0:
        heapq.heappush(ready, (int(rank[succ]), int(succ)))
  return np.asarray(order, np.int64)
