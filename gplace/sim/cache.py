"""Built simulation problems, kept per graph for :func:`gplace.simulate`.

:func:`cached_problem` reuses a problem for the same :class:`~gplace.Graph`
and :class:`~gplace.Topology` objects, costs and order of equal content
and builder settings (:data:`PER_GRAPH` per graph, LRU); :func:`clear`.
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


# id(array) -> (a weak reference to it, its digest), for arrays a caller
# froze (made read-only) and keeps unchanged: see freeze.
_frozen: dict[int, tuple[weakref.ref, bytes]] = {}


def freeze(array: np.ndarray) -> np.ndarray:
  """``array`` made read-only, its :func:`digest` computed now and reused
  while it lives: for a table passed to ``gplace.simulate`` many times (a
  search's costs), whose hashing would otherwise cost a pass over it per
  call. Pass an array of your own (a copy), and do not make it writeable
  again."""
  array.setflags(write=False)
  key, value = id(array), _digest(array)
  with _lock:
    _frozen[key] = (weakref.ref(array, lambda ref: _unfreeze(ref, key)),
                    value)
  return array


def pinned(array: Optional[np.ndarray]) -> Optional[np.ndarray]:
  """``array`` when :func:`freeze` froze it, else a frozen copy: hashed
  once however many problems one call builds or looks up with it (None
  for None)."""
  if array is None or _kept(array) is not None:
    return array
  return freeze(np.array(array))


def _kept(array: np.ndarray) -> Optional[bytes]:
  """The digest :func:`freeze` kept for ``array``, or None."""
  entry = _frozen.get(id(array))
  if entry is not None and entry[0]() is array and \
      not array.flags.writeable:
    return entry[1]
  return None


def _unfreeze(ref: weakref.ref, key: int) -> None:
  with _lock:
    entry = _frozen.get(key)
    if entry is not None and entry[0] is ref:
      del _frozen[key]


def digest(array: Optional[np.ndarray]) -> Optional[bytes]:
  """A content hash of ``array`` (dtype, shape and bytes); None for None."""
  if array is None:
    return None
  kept = _kept(array)
  return kept if kept is not None else _digest(array)


def _digest(array: np.ndarray) -> bytes:
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
