"""Single charts (matplotlib, host-side): a Gantt chart of the simulated
schedule, the op graph coloured by device, each device's share of the
work, a run's learning curve. ``plot_*`` take an optional ``ax`` and
return it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping as MappingType
from typing import Mapping, Sequence

import numpy as np

from gplace.errors import PlacementError, PlotError, first_line, is_int
from gplace.graphs.graph import Graph, NODE_OP, check_graph
from gplace.graphs.placement import check_placements
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, check_topology


def _checked(graph, placement, topology, caller: str) -> np.ndarray:
  """``placement`` as ``[N]`` int32 after checking all three arguments.

  Raises:
    GraphError, TopologyError, PlacementError: as :func:`gplace.simulate`.
  """
  check_graph(graph, caller)
  check_topology(topology, caller)
  return check_placements(placement, graph, topology.n_devices,
                          device_names=topology.device_names, batched=False)


def _png_path(path, caller: str) -> str:
  """``path`` as a str whose directory exists, else PlotError."""
  if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
    raise PlotError(f"{caller} needs path to be a str or os.PathLike, got "
                    f"{type(path).__name__}; pass e.g. 'curve.png'.")
  path = os.fspath(path)
  folder = os.path.dirname(path) or "."
  if not os.path.isdir(folder):
    raise PlotError(f"{caller}: the folder of path {path!r} does not exist; "
                    f"create it first (os.makedirs({folder!r}, "
                    "exist_ok=True)).")
  return path


def _save(fig, path: str, caller: str) -> None:
  """Writes ``fig`` to ``path`` and closes it; PlotError if it cannot."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  try:
    fig.savefig(path, dpi=100)
  except OSError as err:
    raise PlotError(f"{caller} cannot write path {path!r} "
                    f"({first_line(err)}); check that its folder is "
                    "writable.") from err
  finally:
    plt.close(fig)


def _line_level(value, argument: str, caller: str) -> float:
  """A real number (a line's level, NaN: not drawn; a step), else
  PlotError."""
  if isinstance(value, (bool, np.bool_)) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise PlotError(f"{caller}: {argument} must be a number, got "
                    f"{value!r}.")
  return float(value)


def _runtime_level(value, argument: str, caller: str) -> float:
  """A runtime line's level: a number of seconds, not negative (NaN or
  inf: not drawn), else PlotError."""
  level = _line_level(value, argument, caller)
  if level < 0:
    raise PlotError(f"{caller}: {argument} is a runtime in seconds and "
                    f"cannot be negative, got {value!r}; pass float('nan') "
                    "to draw no line.")
  return level


def _series(values, what: str, caller: str) -> np.ndarray:
  """``float64 [n]`` of numbers (``None`` -> NaN), else PlotError."""
  if isinstance(values, (str, bytes, MappingType)):
    raise PlotError(f"{caller}: {what} must be numbers, got {values!r}.")
  try:
    values = values if np.ndim(values) else [values]
    array = np.array([np.nan if v is None else v for v in values],
                     np.float64)
  except (TypeError, ValueError) as err:
    raise PlotError(f"{caller}: {what} must be numbers (None for a gap), "
                    f"got {values!r} ({first_line(err)}).") from err
  if array.ndim != 1:
    raise PlotError(f"{caller}: {what} must be a list of numbers, got shape "
                    f"{array.shape}.")
  return array


def _axes(ax, figsize, caller: str):
  """``ax`` if it is a matplotlib Axes, a new figure's for None, else
  PlotError."""
  import matplotlib.axes  # pylint: disable=g-import-not-at-top
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  if ax is None:
    _, ax = plt.subplots(figsize=figsize)
    return ax
  if not isinstance(ax, matplotlib.axes.Axes):
    raise PlotError(f"{caller}: ax must be None (a new figure) or a "
                    f"matplotlib Axes, got {type(ax).__name__}; pass e.g. "
                    "ax=plt.subplots()[1].")
  return ax


def schedule(graph: Graph, placement, topology: Topology, costs=None,
             **schedule_args):
  """Simulated ``(start_s [N], finish_s [N], runtime_s)`` of one placement;
  ``schedule_args`` (``order=``, ``priority=``, ``schedule="dynamic"``) pick
  the schedule as in ``gplace.simulate``."""
  result = simulate(graph, np.asarray(placement), topology, costs=costs,
                    return_schedule=True, **schedule_args)
  return (np.asarray(result.start_s), np.asarray(result.finish_s),
          float(result.runtime_s))


def plot_schedule(graph: Graph, placement, topology: Topology, *, costs=None,
                  ax=None, max_ops: int = 20000, title: str | None = None,
                  **schedule_args):
  """Gantt chart: one row per device, one bar per op, coloured by op type.

  Args:
    graph: the op graph.
    placement: ``[N]`` device per node.
    topology: devices the placement indexes.
    costs: optional measured ``[N, D]`` cost table.
    ax: matplotlib axes to draw into (default: a new figure).
    max_ops: draw at most this many of the longest ops (big graphs), a
      positive integer; None draws every op.
    title: axes title (default: graph name and simulated runtime).
    **schedule_args: ``order=``, ``priority=`` or ``schedule=``, as in
      ``gplace.simulate`` (default: its default schedule, ``"best"``).

  Returns:
    The axes.

  Raises:
    PlotError: ``max_ops`` is not a positive integer or None, or ``ax``
      is not a matplotlib Axes or None.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  placement = _checked(graph, placement, topology,
                       "gplace.plotting.plot_schedule")
  if max_ops is not None and (not is_int(max_ops) or max_ops < 1):
    raise PlotError(f"gplace.plotting.plot_schedule: max_ops must be a "
                    f"positive integer (or None for every op), got "
                    f"{max_ops!r}.")
  ax = _axes(ax, (10, 0.5 + 0.45 * topology.n_devices),
             "gplace.plotting.plot_schedule")
  start, finish, runtime = schedule(graph, placement, topology, costs,
                                    **schedule_args)
  ops = np.flatnonzero((graph.kind == NODE_OP) & (finish > start))
  if max_ops is not None and ops.size > max_ops:
    ops = ops[np.argsort(start[ops] - finish[ops])[:max_ops]]
  types = sorted(set(graph.op_type[ops]))
  cmap = matplotlib.colormaps["tab20"]
  colour = {t: cmap(i % 20) for i, t in enumerate(types)}
  for dev in range(topology.n_devices):
    mine = ops[placement[ops] == dev]
    if mine.size:
      ax.broken_barh(list(zip(start[mine], finish[mine] - start[mine])),
                     (dev - 0.4, 0.8),
                     facecolors=[colour[t] for t in graph.op_type[mine]])
  ax.set_yticks(range(topology.n_devices), topology.device_names)
  ax.set_ylim(topology.n_devices - 0.5, -0.5)
  ax.set_xlabel("simulated time (s)")
  ax.set_title(title or f"{graph.name}: {runtime * 1e3:.2f} ms per step")
  common = sorted(types, key=lambda t: -np.sum(
      (finish - start)[ops][graph.op_type[ops] == t]))[:8]
  handles = [matplotlib.patches.Patch(color=colour[t], label=t)
             for t in common]
  ax.legend(handles=handles, loc="upper right", fontsize="small", ncol=2)
  return ax


def plot_device_load(graph: Graph, placements: Mapping[str, np.ndarray],
                     topology: Topology, *, ax=None):
  """Stacked bars: share of the graph's FLOPs each placement gives each
  device, one bar per named placement (e.g. every baseline).

  Raises:
    PlacementError: ``placements`` is not a ``{name: placement}``
      mapping, or a placement is malformed.
    PlotError: ``ax`` is not a matplotlib Axes or None.
  """
  if not isinstance(placements, MappingType):
    raise PlacementError(
        f"gplace.plotting.plot_device_load needs placements as a "
        f"{{name: placement}} mapping, got {type(placements).__name__}; "
        "pass e.g. {'random': placement}.")
  placements = {name: _checked(graph, placement, topology,
                               f"gplace.plotting.plot_device_load[{name!r}]")
                for name, placement in placements.items()}
  ax = _axes(ax, (1.5 + 0.8 * len(placements), 3.5),
             "gplace.plotting.plot_device_load")
  names = list(placements)
  total = max(graph.flops.sum(), 1.0)
  bottom = np.zeros(len(names))
  for dev in range(topology.n_devices):
    share = np.array([graph.flops[np.asarray(placements[n]) == dev].sum()
                      / total for n in names])
    ax.bar(names, share, bottom=bottom, label=topology.device_names[dev])
    bottom += share
  ax.set_ylabel("share of FLOPs")
  ax.tick_params(axis="x", rotation=45)
  ax.legend(fontsize="small")
  return ax


def graph_layout(graph: Graph) -> np.ndarray:
  """``f64 [N, 2]`` positions for drawing a DAG left to right: ``x`` is a
  node's depth (longest path from a source), ``y`` spreads the nodes of one
  depth evenly over ``[-1, 1]`` in id order."""
  depth = np.zeros(graph.n_nodes, np.int64)
  order = np.argsort(graph.edge_dst, kind="stable")  # ids are topological
  for src, dst in zip(graph.edge_src[order], graph.edge_dst[order]):
    depth[dst] = max(depth[dst], depth[src] + 1)
  y = np.zeros(graph.n_nodes)
  for d in np.unique(depth):
    members = np.flatnonzero(depth == d)
    y[members] = np.linspace(-1, 1, members.size + 2)[1:-1]
  return np.stack([depth.astype(np.float64), y], 1)


def plot_placement_graph(graph: Graph, placement, topology: Topology, *,
                         ax=None, title: str | None = None):
  """The op graph, left to right by depth, each node coloured by its device
  (as the ColocRL paper draws its NMT and Inception placements).

  Args:
    graph: the op graph (a few thousand nodes at most stay legible).
    placement: ``[N]`` device per node.
    topology: devices the placement indexes (legend names).
    ax: matplotlib axes to draw into (default: a new figure).
    title: axes title (default: the graph's name).

  Returns:
    The axes.

  Raises:
    PlotError: ``ax`` is not a matplotlib Axes or None.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  from matplotlib.collections import LineCollection  # pylint: disable=g-import-not-at-top
  placement = _checked(graph, placement, topology,
                       "gplace.plotting.plot_placement_graph")
  ax = _axes(ax, (10, 4), "gplace.plotting.plot_placement_graph")
  xy = graph_layout(graph)
  segments = np.stack([xy[graph.edge_src], xy[graph.edge_dst]], 1)
  ax.add_collection(LineCollection(segments, colors="0.8", linewidths=0.5,
                                   zorder=1))
  cmap = matplotlib.colormaps["tab10"]
  for dev in range(topology.n_devices):
    mine = placement == dev
    if mine.any():
      ax.scatter(xy[mine, 0], xy[mine, 1], s=12, color=cmap(dev % 10),
                 label=topology.device_names[dev], zorder=2)
  ax.set_xlabel("depth")
  ax.set_yticks([])
  ax.set_title(title or graph.name)
  ax.legend(fontsize="small", loc="upper right")
  return ax


def _agg_pyplot():
  """``matplotlib.pyplot`` on the Agg backend (PNG files, no display)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _reference_lines(ax, best_baseline_s: float,
                     lower_bound_s: float) -> None:
  """The best baseline (dashed) and the lower bound (dotted), each drawn
  where finite."""
  if np.isfinite(best_baseline_s):
    ax.axhline(best_baseline_s, color="k", ls="--", label="best baseline")
  if np.isfinite(lower_bound_s):
    ax.axhline(lower_bound_s, color="g", ls=":", label="lower bound")


def plot_learning_curve(path: str, records: Sequence[dict], *,
                        best_baseline_s: float, lower_bound_s: float) -> None:
  """A training run's learning curve as a PNG at ``path``: mean sampled and
  best runtime per RL step of ``records`` (``metrics.jsonl`` lines; nothing
  is drawn without RL records, gaps where a runtime is ``null``), with the
  best baseline and the lower bound (NaN: not drawn).

  Raises:
    PlotError: ``records`` is not a list of dicts, an RL record lacks
      ``step``, ``mean_runtime_s`` or ``best_runtime_s`` or holds
      something other than numbers there, a line level is not a number
      or is negative, or ``path`` cannot be written (its folder must
      exist).
  """
  caller = "gplace.plotting.plot_learning_curve"
  path = _png_path(path, caller)
  best_baseline_s = _runtime_level(best_baseline_s, "best_baseline_s",
                                   caller)
  lower_bound_s = _runtime_level(lower_bound_s, "lower_bound_s", caller)
  if isinstance(records, (str, bytes, MappingType)) or not isinstance(
      records, Sequence):
    raise PlotError(f"{caller} needs records as a list of dicts (the lines "
                    f"of metrics.jsonl), got {type(records).__name__}.")
  for i, record in enumerate(records):
    if not isinstance(record, MappingType):
      raise PlotError(f"{caller}: records[{i}] is a "
                      f"{type(record).__name__}, not a dict (a line of "
                      "metrics.jsonl).")
  rl_records = [r for r in records if r.get("phase") == "rl"]
  if not rl_records:
    return
  columns = {}
  for key in ("step", "mean_runtime_s", "best_runtime_s"):
    missing = [i for i, r in enumerate(records)
               if r.get("phase") == "rl" and key not in r]
    if missing:
      raise PlotError(f"{caller}: RL records[{missing[0]}] has no {key!r}; "
                      "every RL record needs step, mean_runtime_s and "
                      "best_runtime_s.")
    columns[key] = [(r[key], f"records[{i}].{key}")
                    for i, r in enumerate(records) if r.get("phase") == "rl"]
  steps = [_line_level(step, where, caller) for step, where in columns["step"]]
  for key in ("mean_runtime_s", "best_runtime_s"):
    columns[key] = [_series(values, where, caller)
                    for values, where in columns[key]]
  mean, best = (np.array([np.mean(values) if values.size else np.nan
                          for values in columns[key]])
                for key in ("mean_runtime_s", "best_runtime_s"))
  plt = _agg_pyplot()
  fig, ax = plt.subplots(figsize=(7, 4))
  ax.plot(steps, mean, label="mean sampled runtime (failed = penalty)",
          alpha=0.7)
  ax.plot(steps, best, label="best runtime so far")
  _reference_lines(ax, best_baseline_s, lower_bound_s)
  ax.set_xlabel("train step")
  ax.set_ylabel("runtime (s), mean over graphs")
  shown = np.concatenate([mean, best])
  if np.any(np.isfinite(shown) & (shown > 0)):
    ax.set_yscale("log")
  ax.legend(fontsize=8)
  fig.tight_layout()
  _save(fig, path, caller)


def plot_evaluation_curves(path: str, curves: Mapping[str, tuple], *,
                           best_baseline_s: float, lower_bound_s: float,
                           title: str = "") -> None:
  """Runtime against simulator evaluations for several placers as a PNG at
  ``path`` (equal-budget comparisons: a learner's samples, searches).

  Args:
    path: the PNG.
    curves: ``{label: (evaluations [H], runtime_s [H])}``; non-finite
      runtimes are gaps (a curve of gaps only draws no line, and the axis
      of evaluations is logarithmic only if some point is drawn at a
      positive count).
    best_baseline_s: drawn as a dashed line (NaN: not drawn).
    lower_bound_s: drawn as a dotted line (NaN: not drawn).
    title: the plot's title.

  Raises:
    PlotError: ``curves`` is not such a mapping (a curve not a pair of
      equally long lists of numbers), a line level is not a number or is
      negative, or ``path`` cannot be written (its folder must exist).
  """
  caller = "gplace.plotting.plot_evaluation_curves"
  path = _png_path(path, caller)
  best_baseline_s = _runtime_level(best_baseline_s, "best_baseline_s",
                                   caller)
  lower_bound_s = _runtime_level(lower_bound_s, "lower_bound_s", caller)
  if not isinstance(curves, MappingType):
    raise PlotError(f"{caller} needs curves as a {{label: (evaluations, "
                    f"runtime_s)}} mapping, got {type(curves).__name__}.")
  lines = {}
  for label, curve in curves.items():
    if isinstance(curve, (str, bytes, MappingType)) or not isinstance(
        curve, Sequence) or len(curve) != 2:
      raise PlotError(f"{caller}: curves[{label!r}] must be a pair "
                      f"(evaluations, runtime_s), got {curve!r}.")
    evaluations = _series(curve[0], f"curves[{label!r}] evaluations",
                          caller)
    runtime = _series(curve[1], f"curves[{label!r}] runtime_s", caller)
    if evaluations.shape != runtime.shape:
      raise PlotError(f"{caller}: curves[{label!r}] has {evaluations.size} "
                      f"evaluations but {runtime.size} runtimes; give one "
                      "runtime per evaluation count.")
    runtime[~np.isfinite(runtime)] = np.nan
    lines[label] = (evaluations, runtime)
  plt = _agg_pyplot()
  fig, ax = plt.subplots(figsize=(7, 4))
  for label, (evaluations, runtime) in lines.items():
    ax.plot(evaluations, runtime, label=label, alpha=0.8)
  _reference_lines(ax, best_baseline_s, lower_bound_s)
  # matplotlib cannot log-scale an axis without positive data.
  if any(np.any((evaluations > 0) & np.isfinite(evaluations)
                & np.isfinite(runtime))
         for evaluations, runtime in lines.values()):
    ax.set_xscale("log")
  ax.set_xlabel("simulator evaluations")
  ax.set_ylabel("runtime (s)")
  if title:
    ax.set_title(title, fontsize=9)
  if ax.get_legend_handles_labels()[0]:  # no curves, no lines: no legend
    ax.legend(fontsize=7)
  fig.tight_layout()
  _save(fig, path, caller)
