"""One model's three decisions in one figure (matplotlib, host-side): which
device each op runs on, in which order (the simulated timeline), and which
ops fuse into one kernel. See :func:`plot_decisions`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.errors import PlotError, is_int
from gplace.graphs.graph import Graph, NODE_OP, check_graph
from gplace.graphs.placement import check_placements
from gplace.plotting.charts import graph_layout
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, check_topology

CALLER = "gplace.plotting.plot_decisions"
#: Ops drawn with their schedule number next to them (larger graphs: none).
MAX_NUMBERED = 80


class Kernels(NamedTuple):
  """The launches of one simulated schedule: an op alone or a fused group.

  Attributes:
    kernel_of: ``int64 [N]`` kernel index per node.
    members: per kernel, its node ids (ascending).
    rank: ``int64 [K]`` the kernel's place in the schedule (0 first; by the
      simulated dispatch order, its first member's).
    fused: ``bool [K]`` more than one member.
  """

  kernel_of: np.ndarray
  members: list
  rank: np.ndarray
  fused: np.ndarray


def kernels(labels: np.ndarray, dispatch_order: np.ndarray) -> Kernels:
  """The kernels of fusion ``labels [N]`` (-1: alone) in
  ``dispatch_order [N]`` (node ids as the schedule runs them)."""
  n = labels.shape[0]
  key = np.where(labels >= 0, labels,
                 np.max(labels, initial=-1) + 1 + np.arange(n))
  _, kernel_of = np.unique(key, return_inverse=True)
  position = np.empty(n, np.int64)
  position[np.asarray(dispatch_order, np.int64)] = np.arange(n)
  count = int(kernel_of.max()) + 1 if n else 0
  first = np.full(count, n, np.int64)
  np.minimum.at(first, kernel_of, position)
  rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")
  members = [np.flatnonzero(kernel_of == k) for k in range(count)]
  fused = np.array([m.size > 1 for m in members], bool)
  return Kernels(kernel_of, members, rank, fused)


def _check_figure_args(max_listed, figsize) -> tuple:
  if not is_int(max_listed) or max_listed < 1:
    raise PlotError(f"{CALLER}: max_listed must be a positive integer (how "
                    f"many fused groups the list names), got {max_listed!r}.")
  try:
    width, height = (float(v) for v in figsize)
  except (TypeError, ValueError) as err:
    raise PlotError(f"{CALLER}: figsize must be (width, height) in inches, "
                    f"got {figsize!r}.") from err
  if not (width > 0 and height > 0):
    raise PlotError(f"{CALLER}: figsize must be positive, got {figsize!r}.")
  return width, height


def plot_decisions(graph: Graph, topology: Topology, placement, order=None,
                   fusion=None, *, costs=None, title: str | None = None,
                   max_listed: int = 12, figsize=(13.0, 7.5)):
  """Device, schedule and fusion of one placement, in one figure of three
  axes.

  * top, the op graph left to right by depth, each op coloured by its
    device, fused groups joined by thick edges, each op numbered by its
    kernel's place in the schedule (graphs of up to :data:`MAX_NUMBERED`
    nodes);
  * bottom left, the simulated timeline: one row per device, one bar per
    kernel in the device's colour, a fused group's bar hatched, numbered
    as in the graph;
  * bottom right, the fused groups: their ops, device and kernel number.

  Args:
    graph: the op graph (``N`` nodes; a few hundred stay legible).
    topology: the devices (``D``).
    placement: ``[N]`` int device per node.
    order: optional ``[N]`` topological op order, as ``gplace.simulate``
      takes it (``result.order`` or ``result.schedule()`` of
      ``gplace.optimize``); None: the simulator's default schedule.
    fusion: optional ``[N]`` int fusion group labels (-1: alone), as
      ``gplace.simulate`` takes them; None: every op alone.
    costs: optional measured ``[N, D]`` cost table.
    title: the figure's title (default: graph name and simulated runtime).
    max_listed: how many fused groups the list names (the largest first).
    figsize: ``(width, height)`` in inches.

  Returns:
    The matplotlib ``Figure`` (``fig.axes``: graph, timeline, groups).

  Raises:
    GraphError, TopologyError, PlacementError: as :func:`gplace.simulate`.
    ScheduleError: a bad ``order``. FusionError: a bad ``fusion``, or a
      group the placement splits across devices.
    PlotError: ``max_listed`` or ``figsize`` is malformed.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  check_graph(graph, CALLER)
  check_topology(topology, CALLER)
  placement = check_placements(placement, graph, topology.n_devices,
                               device_names=topology.device_names,
                               batched=False)
  figsize = _check_figure_args(max_listed, figsize)
  result = simulate(graph, placement, topology, costs, order=order,
                    return_schedule=True, fusion=fusion)
  start, finish = np.asarray(result.start_s), np.asarray(result.finish_s)
  labels = (np.full(graph.n_nodes, -1, np.int64) if fusion is None
            else np.asarray(fusion, np.int64))
  launches = kernels(labels, np.asarray(result.order))
  colours = [matplotlib.colormaps["tab10"](d % 10)
             for d in range(topology.n_devices)]

  fig = plt.figure(figsize=figsize)
  grid = fig.add_gridspec(2, 2, width_ratios=(3, 1.2), height_ratios=(1, 1))
  graph_ax = fig.add_subplot(grid[0, :])
  timeline_ax = fig.add_subplot(grid[1, 0])
  groups_ax = fig.add_subplot(grid[1, 1])
  _draw_graph(graph_ax, graph, topology, placement, launches, colours)
  _draw_timeline(timeline_ax, graph, topology, placement, launches, colours,
                 start, finish)
  _draw_groups(groups_ax, graph, topology, placement, launches, max_listed)
  fig.suptitle(title or f"{graph.name}: {float(result.runtime_s) * 1e3:.3f} "
               f"ms per step, {int(launches.fused.sum())} fused groups")
  fig.tight_layout()
  return fig


def _draw_graph(ax, graph, topology, placement, launches, colours) -> None:
  """Ops coloured by device, fused groups' edges thick, schedule numbers."""
  from matplotlib.collections import LineCollection  # pylint: disable=g-import-not-at-top
  xy = graph_layout(graph)
  src, dst = graph.edge_src, graph.edge_dst
  inside = (launches.kernel_of[src] == launches.kernel_of[dst]) & (
      launches.fused[launches.kernel_of[src]])
  segments = np.stack([xy[src], xy[dst]], 1)
  ax.add_collection(LineCollection(segments[~inside], colors="0.8",
                                   linewidths=0.6, zorder=1))
  ax.add_collection(LineCollection(segments[inside], colors="k",
                                   linewidths=3.0, alpha=0.55, zorder=1.5,
                                   label="fused into one kernel"))
  for dev in range(topology.n_devices):
    mine = placement == dev
    if mine.any():
      ax.scatter(xy[mine, 0], xy[mine, 1], s=40, color=colours[dev],
                 edgecolors="k", linewidths=0.4,
                 label=topology.device_names[dev], zorder=2)
  if graph.n_nodes <= MAX_NUMBERED:
    for node in range(graph.n_nodes):
      ax.annotate(str(launches.rank[launches.kernel_of[node]] + 1),
                  xy[node], xytext=(0, 5), textcoords="offset points",
                  ha="center", fontsize=6)
  ax.autoscale()
  ax.set_xlabel("depth (numbers: kernel's place in the schedule)")
  ax.set_yticks([])
  ax.set_title("device per op, fused groups joined", fontsize=10)
  ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _draw_timeline(ax, graph, topology, placement, launches, colours, start,
                   finish) -> None:
  """One bar per kernel that computes, per device row; fused ones hatched."""
  drawn = [k for k, members in enumerate(launches.members)
           if np.any(graph.kind[members] == NODE_OP)
           and finish[members[0]] > start[members[0]]]
  for k in drawn:
    node = launches.members[k][0]
    dev = int(placement[node])
    width = (finish[node] - start[node]) * 1e3
    ax.broken_barh([(start[node] * 1e3, width)], (dev - 0.4, 0.8),
                   facecolors=colours[dev], edgecolors="k", linewidths=0.4,
                   hatch="////" if launches.fused[k] else None)
    if len(drawn) <= MAX_NUMBERED:
      ax.text(start[node] * 1e3 + width / 2, dev, str(launches.rank[k] + 1),
              ha="center", va="center", fontsize=6,
              bbox=dict(boxstyle="round,pad=0.1", fc="w", ec="none",
                        alpha=0.8))
  ax.set_yticks(range(topology.n_devices), topology.device_names)
  ax.set_ylim(topology.n_devices - 0.5, -0.5)
  ax.set_xlabel("simulated time (ms)")
  ax.set_title("schedule: one bar per kernel (hatched: fused)", fontsize=10)


def _draw_groups(ax, graph, topology, placement, launches, max_listed) -> None:
  """The fused groups, largest first, as text."""
  fused = [k for k in np.flatnonzero(launches.fused)]
  fused.sort(key=lambda k: (-launches.members[k].size, launches.rank[k]))
  lines = []
  for k in fused[:max_listed]:
    members = launches.members[k]
    ops = ", ".join(str(t) for t in graph.op_type[members][:6])
    more = f" +{members.size - 6}" if members.size > 6 else ""
    lines.append(f"#{launches.rank[k] + 1} on "
                 f"{topology.device_names[int(placement[members[0]])]}: "
                 f"{members.size} ops\n  {ops}{more}")
  if len(fused) > max_listed:
    lines.append(f"... {len(fused) - max_listed} more groups")
  text = "\n".join(lines) if lines else "no fusion: every op runs alone"
  ax.text(0.0, 1.0, text, va="top", ha="left", family="monospace",
          fontsize=7, transform=ax.transAxes)
  ax.axis("off")
  ax.set_title(f"fused groups ({len(fused)})", fontsize=10)
