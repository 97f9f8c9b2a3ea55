"""One loader for every way a workload is named.

``load(name, size, step)`` takes a zoo name (:func:`gplace.workloads.names`),
``random_dag:N[:seed]``, a graph file (``.npz`` / ``.json``) or
``module:function`` (:mod:`gplace.workloads.resolve`) and returns a
:class:`Workload`. Zoo graphs captured for simulation are cached as
``<cache_dir>/<name>_<size>_<step>.npz``. Host-side Python.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional

import numpy as np

from gplace.errors import WorkloadError, check_seed, first_line
from gplace.graphs.capture import capture
from gplace.graphs.graph import Graph, random_dag
from gplace.workloads import resolve
from gplace.workloads import registry

#: ``random_dag:N[:seed]``: a random DAG of ``N`` nodes (tests, benchmarks).
RANDOM_DAG = resolve.RANDOM_DAG


class Workload(NamedTuple):
  """A loaded workload.

  Attributes:
    name: the name it was loaded by.
    graph: the op graph (``N`` nodes).
    fn, args: the runnable function and its arguments, or None (a graph
      file, a random DAG, or a graph loaded from the cache).
    topology: the devices a graph file describes, or None.
    costs: ``[N, D]`` float64 measured seconds a graph file gives, or None.
  """

  name: str
  graph: Graph
  fn: Any = None
  args: Any = None
  topology: Any = None
  costs: Optional[np.ndarray] = None


def is_random_dag(name: str) -> bool:
  """Whether ``name`` is of the form ``random_dag:N[:seed]``."""
  return isinstance(name, str) and RANDOM_DAG.match(name) is not None


def is_graph_file(name: str) -> bool:
  """Whether ``name`` is a graph file path (``.npz`` / ``.json``)."""
  return resolve.is_reference(name) and not resolve.FUNCTION_REFERENCE.match(
      name)


def cache_path(cache_dir: str, name: str, size: str, step: str) -> str:
  """The cache file of a zoo workload's captured graph."""
  return os.path.join(cache_dir, f"{name}_{size}_{step}.npz")


def load(name: str, size: str = "tiny", step: str = "train", *,
         runnable: bool = False, cache_dir: Optional[str] = None,
         seed: int = 0) -> Workload:
  """The :class:`Workload` that ``name`` names.

  Args:
    name: a zoo name, ``random_dag:N[:seed]`` (seed default ``seed``), a
      graph file path or ``module:function``.
    size, step: of a zoo workload (:data:`gplace.workloads.SIZES`,
      :data:`gplace.workloads.STEPS`).
    runnable: build real arguments so that ``fn(*args)`` runs (else
      ``jax.ShapeDtypeStruct`` leaves, enough to capture); a runnable zoo
      workload is never read from the cache.
    cache_dir: read a zoo workload's graph from
      ``<cache_dir>/<name>_<size>_<step>.npz`` if there, else capture it and
      write it there; None captures every time.
    seed: of the parameter values and of a random DAG without its own.

  Raises:
    WorkloadError: an unknown workload, size or step, or a function
      reference that cannot be imported or called.
    GraphError: a graph file that is missing or malformed.
  """
  if not isinstance(name, str) or not name.strip():
    raise WorkloadError(f"A workload name must be a non-empty string, got "
                        f"{name!r}; e.g. 'rnnlm2' or 'random_dag:100'.")
  problem = resolve.random_dag_problem(name)
  if problem:
    raise WorkloadError(problem)
  check_seed(seed, "gplace.workloads.load", WorkloadError)
  if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
    raise WorkloadError(f"gplace.workloads.load: cache_dir must be a folder "
                        f"path or None, got {type(cache_dir).__name__}.")
  match = RANDOM_DAG.match(name)
  if match:
    n_nodes = int(match.group(1))
    graph_seed = int(match.group(2) or seed)
    return Workload(name, random_dag(n_nodes, seed=graph_seed, name=name))
  if resolve.is_reference(name):
    found = resolve.load_reference(name)
    return Workload(name, found.graph, found.fn, found.args, found.topology,
                    found.costs)
  path = (cache_path(cache_dir, name, size, step)
          if cache_dir and not runnable else None)
  if path and os.path.exists(path):
    return Workload(name, Graph.load(path).replace(name=name))
  fn, args = registry.get(name, size, step, abstract=not runnable, seed=seed)
  graph = capture(fn, *args).replace(name=name)
  if path:
    try:
      os.makedirs(cache_dir, exist_ok=True)
    except OSError as err:
      raise WorkloadError(
          f"gplace.workloads.load: cannot make the graph cache folder "
          f"{cache_dir!r} ({first_line(err)}); pass a writable folder as "
          "cache_dir, or cache_dir=None to capture every time.") from err
    graph.save(path)
  return Workload(name, graph, fn, args)
