"""Tests of gplace.plotting.plot_decisions: one figure of a placement's
device, schedule and fusion, drawn as simulated."""

import matplotlib
import numpy as np
import pytest

from gplace import plotting
from gplace._testing import random_fusion
from gplace.errors import (FusionError, GraphError, PlacementError,
                           PlotError, ScheduleError, TopologyError)
from gplace.graphs.graph import NODE_OP, random_dag
from gplace.plotting.decisions import kernels
from gplace.sim.presets import preset
from gplace.sim.simulator import simulate

matplotlib.use("Agg")


def _setup():
  graph = random_dag(30, seed=3)
  topology = preset("1cpu+2gpu")
  placement = np.random.default_rng(0).integers(0, 3, 30).astype(np.int32)
  fusion = random_fusion(graph, placement, np.random.default_rng(1),
                         skip=0.0)
  return graph, topology, placement, fusion


def _bars(ax):
  return sum(len(c.get_paths()) for c in ax.collections)


def test_three_axes_one_bar_per_kernel_groups_listed():
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  graph, topology, placement, fusion = _setup()
  result = simulate(graph, placement, topology, return_schedule=True,
                    fusion=fusion)
  launches = kernels(fusion, np.asarray(result.order))
  assert launches.fused.sum() > 0          # the decision fuses something
  fig = plotting.plot_decisions(graph, topology, placement, fusion=fusion)
  graph_ax, timeline_ax, groups_ax = fig.axes
  start, finish = np.asarray(result.start_s), np.asarray(result.finish_s)
  computing = {launches.kernel_of[n] for n in range(graph.n_nodes)
               if graph.kind[n] == NODE_OP and finish[n] > start[n]}
  assert _bars(timeline_ax) == len(computing)
  hatched = [c for c in timeline_ax.collections if c.get_hatch()]
  assert len(hatched) == len(computing & set(np.flatnonzero(
      launches.fused)))
  # The graph: every edge drawn once, thin or (inside a group) thick.
  edges = graph_ax.collections[:2]
  assert sum(len(c.get_segments()) for c in edges) == graph.edge_src.size
  points = sum(len(c.get_offsets()) for c in graph_ax.collections[2:])
  assert points == graph.n_nodes
  listed = groups_ax.texts[0].get_text()
  assert listed.count(" ops\n") == int(launches.fused.sum())
  assert f"{float(result.runtime_s) * 1e3:.3f} ms" in fig.get_suptitle()
  plt.close(fig)


def test_without_fusion_and_with_an_order():
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  graph, topology, placement, _ = _setup()
  order = np.arange(graph.n_nodes)
  fig = plotting.plot_decisions(graph, topology, placement, order)
  timeline_ax, groups_ax = fig.axes[1:]
  ops = (graph.kind == NODE_OP)
  start, finish, _ = plotting.schedule(graph, placement, topology,
                                       order=order)
  assert _bars(timeline_ax) == int((ops & (finish > start)).sum())
  assert not any(c.get_hatch() for c in timeline_ax.collections)
  assert "every op runs alone" in groups_ax.texts[0].get_text()
  # Bars are numbered by the static order: node-id order here.
  numbers = [int(t.get_text()) for t in timeline_ax.texts]
  assert numbers == sorted(numbers)
  plt.close(fig)


def test_kernels_number_groups_by_their_first_member_in_the_schedule():
  labels = np.array([-1, 5, 5, -1, 2, 2])
  launches = kernels(labels, np.array([0, 4, 1, 2, 5, 3]))
  assert [m.tolist() for m in launches.members] == [[4, 5], [1, 2], [0],
                                                    [3]]
  assert launches.rank.tolist() == [1, 2, 0, 3]
  assert launches.fused.tolist() == [True, True, False, False]


def test_bad_inputs_raise_gplace_errors():
  graph, topology, placement, fusion = _setup()
  with pytest.raises(GraphError):
    plotting.plot_decisions("graph", topology, placement)
  with pytest.raises(TopologyError):
    plotting.plot_decisions(graph, placement, topology)    # swapped
  with pytest.raises(PlacementError, match="length 31"):
    plotting.plot_decisions(graph, topology, np.zeros(31, int))
  with pytest.raises(ScheduleError):
    plotting.plot_decisions(graph, topology, placement,
                            order=np.arange(graph.n_nodes)[::-1])
  with pytest.raises(FusionError):
    plotting.plot_decisions(graph, topology, placement,
                            fusion=np.zeros(graph.n_nodes - 1, int))
  split = fusion.copy()
  split[:] = 0                                # one group on three devices
  with pytest.raises(FusionError):
    plotting.plot_decisions(graph, topology, placement, fusion=split)
  with pytest.raises(PlotError, match="max_listed"):
    plotting.plot_decisions(graph, topology, placement, max_listed=0)
  with pytest.raises(PlotError, match="figsize"):
    plotting.plot_decisions(graph, topology, placement, figsize=(0, 3))
  with pytest.raises(PlotError, match="figsize"):
    plotting.plot_decisions(graph, topology, placement, figsize="big")
