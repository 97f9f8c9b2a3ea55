"""Built simulation problems, kept per graph for :func:`gplace.simulate`.

Where this sits: :func:`gplace.simulate` validates its arguments on the host
and builds a problem (:func:`gplace.sim.problem.make_problem` for a shared
order, :func:`gplace.sim.dispatch.make_dispatch_problem` for per-placement
schedules) before it runs the jitted simulator. Building is host-side numpy
over all nodes and edges (the arrival-table colouring is a Python heap loop)
and then a copy to the device; on a 10k-node graph it cost about as much as
simulating 256 placements. Search loops and the RL loop's host rewards call
``simulate`` on the same graph thousands of times, so the problem is built
once and reused.

What makes two calls share a problem: the same :class:`~gplace.Graph` object
(its arrays are read-only; its entries go when it is garbage collected),
the same :class:`~gplace.Topology` object (read-only as well), costs and
order of equal content (hashed: a caller may reuse one array), and the same
builder settings. At most :data:`PER_GRAPH` problems are kept per graph,
least recently used first out.
"""

from __future__ import annotations

import collections
import hashlib
import threading
import weakref
from typing import Any, Callable, Optional

import numpy as np

#: Problems kept per graph (different builders, topologies, costs, orders or
#: budgets).
PER_GRAPH = 8

# id(graph) -> (a weak reference to the graph, {key: problem} in LRU order).
# Graphs compare by value and are not hashable, so they are tracked by
# identity; the reference's callback drops the entry when the graph goes.
_problems: dict[int, tuple[weakref.ref, collections.OrderedDict]] = {}
# Reentrant: a garbage collection inside a locked block can collect a graph
# and run its callback (_forget) in the same thread.
_lock = threading.RLock()


def _forget(ref: weakref.ref, graph_id: int) -> None:
  with _lock:
    entry = _problems.get(graph_id)
    if entry is not None and entry[0] is ref:
      del _problems[graph_id]


def digest(array: Optional[np.ndarray]) -> Optional[bytes]:
  """A content hash of ``array`` (dtype, shape and bytes); None for None."""
  if array is None:
    return None
  array = np.ascontiguousarray(array)
  h = hashlib.blake2b(f"{array.dtype.str}{array.shape}".encode(),
                      digest_size=16)
  if array.size:  # memoryview cannot cast an empty array; shape is hashed
    h.update(memoryview(array).cast("B"))
  return h.digest()


def cached_problem(build: Callable[..., Any], graph, topology, *,
                   costs: Optional[np.ndarray] = None,
                   order: Optional[np.ndarray] = None, **settings) -> Any:
  """``build(graph, topology, costs=costs, [order=order,] **settings)``,
  built once per graph, topology, content of ``costs`` and ``order``, and
  ``settings`` (hashable values).

  Args:
    build: a problem builder (``make_problem`` or ``make_dispatch_problem``).
    graph: a :class:`~gplace.Graph` (weakly referenced).
    topology: a :class:`~gplace.Topology` (by identity).
    costs: optional ``[N, D]`` cost table (by content).
    order: optional ``[N]`` order (by content); not passed when None.
    **settings: the builder's other keyword arguments.

  Returns:
    The builder's problem (the same object for a repeated call).
  """
  key = (build, topology, digest(costs), digest(order),
         tuple(sorted(settings.items())))
  with _lock:
    entry = _problems.get(id(graph))
    if entry is not None and entry[0]() is graph and key in entry[1]:
      entry[1].move_to_end(key)
      return entry[1][key]
  kwargs = dict(settings, costs=costs)
  if order is not None:
    kwargs["order"] = order
  problem = build(graph, topology, **kwargs)
  with _lock:
    entry = _problems.get(id(graph))
    if entry is None or entry[0]() is not graph:
      graph_id = id(graph)
      entry = (weakref.ref(graph, lambda ref: _forget(ref, graph_id)),
               collections.OrderedDict())
      _problems[graph_id] = entry
    entries = entry[1]
    entries[key] = problem
    while len(entries) > PER_GRAPH:
      entries.popitem(last=False)
  return problem


def clear() -> None:
  """Drops every kept problem."""
  with _lock:
    _problems.clear()
