"""Pictures of placements and schedules (matplotlib, host-side): a Gantt
chart of the simulated schedule, the op graph coloured by device, each
device's share of the work, a run's learning curve. ``plot_*`` take an
optional ``ax`` and return it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

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


def _axes(ax, figsize):
  if ax is not None:
    return ax
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  _, ax = plt.subplots(figsize=figsize)
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
    max_ops: draw at most this many of the longest ops (big graphs).
    title: axes title (default: graph name and simulated runtime).
    **schedule_args: ``order=``, ``priority=`` or ``schedule=``, as in
      ``gplace.simulate`` (default: its default schedule, ``"best"``).

  Returns:
    The axes.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  placement = _checked(graph, placement, topology,
                       "gplace.plotting.plot_schedule")
  ax = _axes(ax, (10, 0.5 + 0.45 * topology.n_devices))
  start, finish, runtime = schedule(graph, placement, topology, costs,
                                    **schedule_args)
  ops = np.flatnonzero((graph.kind == NODE_OP) & (finish > start))
  if ops.size > max_ops:
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
  device, one bar per named placement (e.g. every baseline)."""
  placements = {name: _checked(graph, placement, topology,
                               f"gplace.plotting.plot_device_load[{name!r}]")
                for name, placement in placements.items()}
  ax = _axes(ax, (1.5 + 0.8 * len(placements), 3.5))
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
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  from matplotlib.collections import LineCollection  # pylint: disable=g-import-not-at-top
  placement = _checked(graph, placement, topology,
                       "gplace.plotting.plot_placement_graph")
  ax = _axes(ax, (10, 4))
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


def _floats(values) -> np.ndarray:
  """``float64 [n]`` of numbers read from JSON (``null`` -> NaN)."""
  values = values if isinstance(values, list) else [values]
  return np.array([np.nan if v is None else v for v in values], np.float64)


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


def _save_png(plt, fig, path: str) -> None:
  """Writes ``fig`` to ``path`` and closes it."""
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def plot_learning_curve(path: str, records: Sequence[dict], *,
                        best_baseline_s: float, lower_bound_s: float) -> None:
  """A training run's learning curve as a PNG at ``path``: mean sampled and
  best runtime per RL step of ``records`` (``metrics.jsonl`` lines; nothing
  is drawn without RL records, gaps where a runtime is ``null``), with the
  best baseline and the lower bound (NaN: not drawn)."""
  plt = _agg_pyplot()
  rl_records = [r for r in records if r.get("phase") == "rl"]
  if not rl_records:
    return
  fig, ax = plt.subplots(figsize=(7, 4))
  steps = [r["step"] for r in rl_records]
  mean, best = (np.array([np.mean(_floats(r[key])) for r in rl_records])
                for key in ("mean_runtime_s", "best_runtime_s"))
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
  _save_png(plt, fig, path)


def plot_evaluation_curves(path: str, curves: Mapping[str, tuple], *,
                           best_baseline_s: float, lower_bound_s: float,
                           title: str = "") -> None:
  """Runtime against simulator evaluations for several placers as a PNG at
  ``path`` (equal-budget comparisons: a learner's samples, searches).

  Args:
    path: the PNG.
    curves: ``{label: (evaluations [H], runtime_s [H])}``; non-finite
      runtimes are gaps.
    best_baseline_s: drawn as a dashed line (NaN: not drawn).
    lower_bound_s: drawn as a dotted line (NaN: not drawn).
    title: the plot's title.
  """
  plt = _agg_pyplot()
  fig, ax = plt.subplots(figsize=(7, 4))
  for label, (evaluations, runtime) in curves.items():
    runtime = np.array([np.nan if v is None else v for v in runtime],
                       np.float64)
    runtime[~np.isfinite(runtime)] = np.nan
    ax.plot(np.asarray(evaluations, np.float64), runtime, label=label,
            alpha=0.8)
  _reference_lines(ax, best_baseline_s, lower_bound_s)
  ax.set_xscale("log")
  ax.set_xlabel("simulator evaluations")
  ax.set_ylabel("runtime (s)")
  if title:
    ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7)
  _save_png(plt, fig, path)
