"""What :func:`gplace.optimize` was given, checked and resolved into a
:class:`Problem` (graph, topology, costs) and a :class:`Method`, or rejected
with a :class:`~gplace.errors.GplaceError` naming what is accepted.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from gplace import errors
from gplace import placers
from gplace.errors import (CaptureError, GraphError, SearchError,
                           TopologyError)
from gplace.execution.inputs import default_devices
from gplace.execution.profiler import profile
from gplace.graphs import constraints
from gplace.graphs import interchange
from gplace.graphs.capture import capture
from gplace.graphs.graph import Graph
from gplace.sim import graph_files
from gplace.sim.presets import local, preset, preset_names
from gplace.sim.topology import Topology, check_topology, validate_costs

# What fn_or_graph may be, for messages.
ACCEPTED_INPUTS = ("a jittable function (with its example arguments), a "
                   "gplace.Graph, a networkx.DiGraph, or a path to a saved "
                   "graph (.npz or .json)")
DEFAULT_PRESET = "1cpu+4gpu"
LOCAL = "local"
SEARCH_NAMES = ("annealing", "local_search", "genetic", "joint_annealing")
DEFAULT_SEARCH = "annealing"


class Problem(NamedTuple):
  """What is placed, on what, at what cost.

  Attributes:
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: ``[N, D]`` float64 measured seconds per node and device, or None
      (the topology's roofline, ``topology.op_costs(graph)``).
    fn: the function ``graph`` was captured from, or None.
    local: ``topology`` is this machine's devices (``"local"``, a profile),
      so placements can be measured here.
    calibrated: its costs were measured (``gplace.profile``).
  """

  graph: Graph
  topology: Topology
  costs: Optional[np.ndarray] = None
  fn: Optional[Callable] = None
  local: bool = False
  calibrated: bool = False


class Method(NamedTuple):
  """A parsed ``method=`` argument.

  Attributes:
    kind: ``"auto"``, ``"baseline"``, ``"search"``, ``"solver"``, ``"lns"``,
      ``"pretrained"``, ``"finetune"`` or ``"policy"``.
    name: the baseline or search name (``""`` for the other kinds).
  """

  kind: str
  name: str = ""


def _method_help() -> str:
  return ("'auto', 'search' (or 'search:<name>' / a search name: "
          f"{', '.join(SEARCH_NAMES)}), 'solver', 'lns', 'pretrained', "
          "'finetune', "
          f"'policy', or a baseline "
          f"('baseline:<name>' or the name: "
          f"{', '.join(placers.names(placers.BASELINE))})")


def check_method(method: Any) -> Method:
  """The :class:`Method` that ``method`` names.

  Raises:
    SearchError: not a string, or an unknown method or baseline.
  """
  if not isinstance(method, str):
    raise SearchError(f"gplace.optimize: method must be a string, got "
                      f"{type(method).__name__} {method!r}; use "
                      f"{_method_help()}.")
  if method in ("auto", "solver", "lns", "pretrained", "finetune", "policy"):
    return Method(method)
  if method == "search":
    return Method("search", DEFAULT_SEARCH)
  kind, _, name = method.partition(":")
  if kind == "search" and name in SEARCH_NAMES:
    return Method("search", name)
  if method in SEARCH_NAMES:
    return Method("search", method)
  baseline_names = placers.names(placers.BASELINE)
  if kind == "baseline" and name in baseline_names:
    return Method("baseline", name)
  if method in baseline_names:
    return Method("baseline", method)
  raise SearchError(f"gplace.optimize: unknown method {method!r}; use "
                    f"{_method_help()}.")


def check_budget(budget_s: Any) -> float:
  """``budget_s`` as a positive, finite float.

  Raises:
    SearchError: not a number, or not positive and finite.
  """
  ok = (isinstance(budget_s, numbers.Real) and not isinstance(budget_s, bool)
        and math.isfinite(budget_s) and budget_s > 0)
  if not ok:
    raise SearchError(f"gplace.optimize: budget_s must be a positive, finite "
                      f"number of seconds, got {budget_s!r}; pass e.g. "
                      "budget_s=30.0.")
  return float(budget_s)


def check_seed(seed: Any) -> int:
  """``seed`` as an int in ``[0, 2**31)`` (numpy's and CP-SAT's seeds).

  Raises:
    SearchError: not an integer in that range.
  """
  return errors.check_seed(seed, "gplace.optimize", SearchError)


def check_max_evaluations(max_evaluations: Any) -> Optional[int]:
  """``max_evaluations`` as a positive int, or None.

  Raises:
    SearchError: not None and not a positive integer.
  """
  if max_evaluations is None:
    return None
  if (not isinstance(max_evaluations, numbers.Integral)
      or isinstance(max_evaluations, bool) or max_evaluations < 1):
    raise SearchError(f"gplace.optimize: max_evaluations must be a positive "
                      f"integer or None, got {max_evaluations!r}; it caps the "
                      "search's simulator evaluations, e.g. 2000.")
  return int(max_evaluations)


def check_topology_spec(topology: Any) -> Any:
  """``topology`` if it is None, a :class:`Topology`, a preset name or
  ``"local"``.

  Raises:
    TopologyError: anything else (the message lists the presets).
  """
  if topology is None or isinstance(topology, Topology):
    return topology
  if isinstance(topology, str) and (topology == LOCAL
                                    or topology in preset_names()):
    return topology
  raise TopologyError(
      f"gplace.optimize: unknown topology {topology!r}; pass a preset name "
      f"({', '.join(map(repr, preset_names()))}), 'local' (this machine's "
      "devices) or a gplace.Topology.")


def local_topology() -> Topology:
  """This machine's devices in the executor's order (CPUs first), as
  ``gplace.place`` indexes them by default."""
  return local(default_devices())


def _is_networkx(value: Any) -> bool:
  return type(value).__module__.split(".")[0] == "networkx"


class Source(NamedTuple):
  """A graph and what its source said about devices and costs."""
  graph: Graph
  topology: Optional[Topology] = None
  costs: Optional[np.ndarray] = None
  fn: Optional[Callable] = None


def load_source(fn_or_graph: Any, args: tuple) -> Source:
  """The graph that ``fn_or_graph`` is, holds or traces to.

  Args:
    fn_or_graph: a function (captured with ``gplace.capture(fn, *args)``), a
      :class:`~gplace.Graph`, a ``networkx.DiGraph``, a
      :class:`~gplace.sim.graph_files.GraphFile`, or a ``.npz`` /
      ``.json`` path.
    args: the function's example arguments (empty for anything else).

  Raises:
    CaptureError: the function does not trace with ``args``.
    GraphError: a missing or malformed file or graph, ``args`` given with a
      graph, or something that is none of the above.
  """
  is_path = isinstance(fn_or_graph, (str, os.PathLike))
  is_graph = isinstance(fn_or_graph, (Graph, graph_files.GraphFile)) or (
      _is_networkx(fn_or_graph))
  if (is_path or is_graph) and args:
    raise GraphError(
        f"gplace.optimize was given a {type(fn_or_graph).__name__} and "
        f"{len(args)} more positional argument(s); example arguments are "
        "only for a function (gplace.optimize(fn, *args)). Pass the graph "
        "alone, and topology=, costs= etc. by keyword.")
  if isinstance(fn_or_graph, Graph):
    return Source(fn_or_graph)
  if isinstance(fn_or_graph, graph_files.GraphFile):
    return Source(fn_or_graph.graph, fn_or_graph.topology, fn_or_graph.costs)
  if _is_networkx(fn_or_graph):
    loaded = graph_files.from_networkx(fn_or_graph)
    return Source(loaded.graph, loaded.topology, loaded.costs)
  if is_path:
    path = os.fspath(fn_or_graph)
    if not interchange.is_graph_path(path):
      raise GraphError(
          f"gplace.optimize was given the string {path!r}, which is not a "
          "graph file path (.npz or .json); pass "
          f"{ACCEPTED_INPUTS}. For a zoo workload: fn, args = "
          "gplace.workloads.get(name); gplace.optimize(fn, *args).")
    loaded = graph_files.load(path)
    return Source(loaded.graph, loaded.topology, loaded.costs)
  if callable(fn_or_graph):
    # capture raises CaptureError (not a JAX trace) for bad arguments.
    return Source(capture(fn_or_graph, *args), fn=fn_or_graph)
  raise GraphError(f"gplace.optimize cannot place a value of type "
                   f"{type(fn_or_graph).__name__} ({fn_or_graph!r:.60}); "
                   f"pass {ACCEPTED_INPUTS}.")


def profiled_source(fn_or_graph: Any, args: tuple,
                    time_s: Optional[float] = None
                    ) -> tuple[Source, Topology]:
  """The graph, calibrated local topology and measured costs of a function
  (``gplace.profile`` within ``time_s`` seconds; it runs the function many
  times), from the profile cache (``gplace.profile(..., cache=True)``:
  ``$GPLACE_CACHE_DIR`` or ``~/.cache/gplace/profiles``) where this program
  was profiled on these devices before.

  Raises:
    CaptureError: not a function, or it does not trace with ``args``.
  """
  if not callable(fn_or_graph) or isinstance(fn_or_graph, Graph):
    raise CaptureError(
        "gplace.optimize: profile=True measures a program on this machine, "
        f"so it needs a function and its arguments, got "
        f"{type(fn_or_graph).__name__}; pass gplace.optimize(fn, *args, "
        "topology='local', profile=True), or give a graph's measured costs "
        "as costs=[N, D].")
  measured = profile(fn_or_graph, *args, time_s=time_s, cache=True)
  return (Source(measured.graph, measured.topology, measured.costs,
                 fn=fn_or_graph), measured.topology)


def resolve_problem(source: Source, topology: Any, costs: Any, *,
                    calibrated: bool = False) -> Problem:
  """The :class:`Problem`: ``topology`` (default: the source's, else the
  ``"1cpu+4gpu"`` preset) and ``costs`` (default: the source's measured
  costs, else the roofline).

  Raises:
    TopologyError: a bad cost table, or source costs for another device
      count than the topology's.
    PlacementError: device constraints for another device count.
  """
  graph = source.graph
  local_spec = topology == LOCAL or calibrated or (
      isinstance(topology, Topology) and topology.name.startswith(LOCAL))
  if topology is None:
    topology = (source.topology if source.topology is not None
                else preset(DEFAULT_PRESET))
  elif topology == LOCAL:
    topology = local_topology()
  elif isinstance(topology, str):
    topology = preset(topology)
  check_topology(topology, "gplace.optimize")
  constraints.check_device_count(graph, topology.n_devices,
                                 "gplace.optimize")
  if costs is None and source.costs is not None:
    if source.costs.shape[1] != topology.n_devices:
      raise TopologyError(
          f"graph {graph.name!r} carries measured costs for "
          f"{source.costs.shape[1]} devices but the topology has "
          f"{topology.n_devices}; leave topology unset to use the graph "
          "file's own, or pass costs=topology.op_costs(graph) to price the "
          "nodes with the roofline instead.")
    costs = source.costs
  if costs is not None:
    costs = validate_costs(costs, graph, topology)
  return Problem(graph, topology, costs, source.fn, local=local_spec,
                 calibrated=calibrated)
