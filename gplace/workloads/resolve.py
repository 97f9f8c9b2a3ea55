"""Workloads named by a graph file (``.npz``, ``.json``) or
``module:function`` (returning a graph, a ``networkx.DiGraph``, a
``GraphFile`` or ``(fn, args)``): :func:`is_reference`,
:func:`load_reference`.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, NamedTuple, Optional

import numpy as np

from gplace.errors import GplaceError, WorkloadError, first_line
from gplace.graphs import interchange
from gplace.graphs.capture import capture
from gplace.graphs.graph import Graph
from gplace.sim import graph_files

# A dotted module path, a colon, a function name (random_dag:100 is not one).
FUNCTION_REFERENCE = re.compile(
    r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_]\w*)$")

#: ``random_dag:N[:seed]``: a random DAG of ``N`` nodes (tests, benchmarks).
RANDOM_DAG = re.compile(r"^random_dag:(\d+)(?::(\d+))?$")
RANDOM_DAG_FORM = ("random_dag:N[:seed] with N >= 2 nodes and an optional "
                   "integer seed, e.g. 'random_dag:100' or 'random_dag:100:3'")


def random_dag_problem(name: Any) -> Optional[str]:
  """Why ``name`` is a malformed ``random_dag:N[:seed]`` name (one line
  that shows the form), or None: a well-formed one, or no random_dag name
  at all. Anything that starts with ``random_dag`` means one."""
  if not isinstance(name, str) or not name.strip().startswith("random_dag"):
    return None
  match = RANDOM_DAG.match(name)
  if match is None:
    return f"{name!r} is not a well-formed random DAG name; write " + (
        RANDOM_DAG_FORM + ".")
  if int(match.group(1)) < 2:
    return f"{name!r}: a random_dag needs at least 2 nodes; write " + (
        RANDOM_DAG_FORM + ".")
  return None


class Resolved(NamedTuple):
  """A workload that is not in the zoo.

  Attributes:
    graph: the op graph (``N`` nodes).
    fn, args: the runnable function and its arguments, or None (a graph
      from a file or a graph-returning function cannot be executed).
    topology: the devices a JSON file describes, or None.
    costs: ``[N, D]`` float64 measured seconds from the file, or None.
  """

  graph: Graph
  fn: Any = None
  args: Any = None
  topology: Any = None
  costs: Optional[np.ndarray] = None


def is_reference(name: str) -> bool:
  """Whether ``name`` is a graph file path or ``module:function`` (a
  ``random_dag:...`` name never is one, even a malformed one)."""
  return isinstance(name, str) and (
      interchange.is_graph_path(name)
      or (FUNCTION_REFERENCE.match(name) is not None
          and not name.startswith("random_dag")))


def load_reference(name: str) -> Resolved:
  """The workload a graph path or ``module:function`` names.

  Raises:
    GraphError: a graph file that is missing or malformed (named field).
    WorkloadError: not a reference, a module or function that cannot be
      imported, or a function that fails or returns something else.
  """
  problem = random_dag_problem(name)
  if problem:
    raise WorkloadError(problem)
  if not is_reference(name):
    raise WorkloadError(
        f"{name!r} is neither a graph file (.npz, .json) nor "
        "module:function; see gplace.workloads.resolve.")
  if interchange.is_graph_path(name):
    loaded = graph_files.load(name)
    return Resolved(loaded.graph, topology=loaded.topology,
                    costs=loaded.costs)
  return _call_function(name)


def _call_function(name: str) -> Resolved:
  module_name, function_name = FUNCTION_REFERENCE.match(name).groups()
  # A script's sys.path starts at the script's folder; users expect their
  # own modules in the working directory to be found.
  if os.getcwd() not in sys.path:
    sys.path.append(os.getcwd())
  try:
    module = importlib.import_module(module_name)
  except Exception as err:  # pylint: disable=broad-except
    raise WorkloadError(
        f"workload {name!r}: cannot import module {module_name!r} "
        f"({first_line(err)}); check the module path (it must be importable "
        "from the working directory or PYTHONPATH).") from err
  function = getattr(module, function_name, None)
  if not callable(function):
    raise WorkloadError(
        f"workload {name!r}: module {module_name!r} has no function "
        f"{function_name!r}; name a function that takes no arguments and "
        "returns a gplace.Graph, a networkx.DiGraph or (fn, args).")
  try:
    value = function()
  except GplaceError:
    raise
  except Exception as err:  # pylint: disable=broad-except
    raise WorkloadError(f"workload {name!r}: calling {function_name}() "
                        f"failed ({first_line(err)}).") from err
  return _as_resolved(value, name)


def _as_resolved(value: Any, name: str) -> Resolved:
  if isinstance(value, Graph):
    return Resolved(value)
  if isinstance(value, graph_files.GraphFile):
    return Resolved(value.graph, topology=value.topology, costs=value.costs)
  if type(value).__module__.startswith("networkx"):
    loaded = graph_files.from_networkx(value)
    return Resolved(loaded.graph, costs=loaded.costs)
  if isinstance(value, tuple) and len(value) == 2 and callable(value[0]):
    fn, args = value
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    return Resolved(capture(fn, *args), fn=fn, args=args)
  raise WorkloadError(
      f"workload {name!r} returned {type(value).__name__}; return a "
      "gplace.Graph, a networkx.DiGraph, a GraphFile or a (fn, args) pair.")
