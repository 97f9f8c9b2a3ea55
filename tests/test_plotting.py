"""Tests of gplace.plotting: the drawn schedule is the simulated one."""

import os

import matplotlib
import numpy as np
import pytest

from gplace import plotting
from gplace.errors import (GraphError, PlacementError, PlotError,
                           TopologyError)
from gplace.graphs.graph import NODE_OP, random_dag
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset

matplotlib.use("Agg")


def _setup():
  graph = random_dag(30, seed=3)
  topology = preset("1cpu+2gpu")
  placement = np.random.default_rng(0).integers(0, 3, 30)
  return graph, topology, placement


def test_schedule_is_the_simulated_one_in_each_schedule():
  graph, topology, placement = _setup()
  for args in ({}, {"schedule": "dynamic"}):
    start, finish, runtime = plotting.schedule(graph, placement, topology,
                                               **args)
    result = simulate(graph, placement, topology, return_schedule=True,
                      **args)
    np.testing.assert_array_equal(start, np.asarray(result.start_s))
    np.testing.assert_array_equal(finish, np.asarray(result.finish_s))
    assert runtime == float(result.runtime_s)


def test_plot_schedule_draws_one_bar_per_op_on_its_device_row():
  graph, topology, placement = _setup()
  ax = plotting.plot_schedule(graph, placement, topology, schedule="dynamic")
  start, finish, _ = plotting.schedule(graph, placement, topology,
                                       schedule="dynamic")
  ops = (graph.kind == NODE_OP) & (finish > start)
  bars = [len(c.get_paths()) for c in ax.collections]
  assert sum(bars) == int(ops.sum())
  assert [t.get_text() for t in ax.get_yticklabels()] == list(
      topology.device_names)
  assert "ms per step" in ax.get_title()


def test_graph_layout_puts_every_edge_left_to_right():
  graph, _, _ = _setup()
  xy = plotting.graph_layout(graph)
  assert np.all(xy[graph.edge_dst, 0] > xy[graph.edge_src, 0])
  # Each depth's nodes are at distinct heights.
  for depth in np.unique(xy[:, 0]):
    heights = xy[xy[:, 0] == depth, 1]
    assert len(set(heights.tolist())) == heights.size


def test_plot_placement_graph_colours_each_node_by_its_device():
  graph, topology, placement = _setup()
  ax = plotting.plot_placement_graph(graph, placement, topology)
  points = {h.get_label(): len(h.get_offsets())
            for h in ax.collections[1:]}
  expect = {topology.device_names[d]: int(np.sum(placement == d))
            for d in np.unique(placement)}
  assert points == expect
  assert len(ax.collections[0].get_segments()) == graph.edge_src.size


def test_plot_device_load_shares_sum_to_one():
  graph, topology, placement = _setup()
  ax = plotting.plot_device_load(
      graph, {"random": placement, "one": np.zeros(30, int)}, topology)
  heights = np.zeros(2)
  for patch in ax.patches:
    heights[int(round(patch.get_x() + patch.get_width() / 2))] += (
        patch.get_height())
  np.testing.assert_allclose(heights, 1.0)


@pytest.mark.parametrize("plot", [
    plotting.plot_schedule, plotting.plot_placement_graph,
    lambda graph, placement, topology: plotting.plot_device_load(
        graph, {"p": placement}, topology)])
def test_plots_reject_bad_arguments_before_drawing(plot):
  graph, topology, placement = _setup()
  with pytest.raises(TopologyError, match="topology"):
    plot(graph, topology, placement)          # arguments swapped
  with pytest.raises(GraphError, match="graph"):
    plot("graph", placement, topology)
  with pytest.raises(PlacementError, match="length 31"):
    plot(graph, np.zeros(31, int), topology)
  with pytest.raises(PlacementError, match="devices 0..2"):
    plot(graph, np.full(30, 3), topology)


def test_learning_curve_png_and_nothing_without_rl_records(tmp_path):
  records = [{"phase": "rl", "step": i, "mean_runtime_s": [2.0 - 0.1 * i],
              "best_runtime_s": [1.5 if i else None]} for i in range(5)]
  path = tmp_path / "curve.png"
  plotting.plot_learning_curve(str(path), records, best_baseline_s=1.8,
                               lower_bound_s=float("nan"))
  assert path.read_bytes()[:4] == b"\x89PNG"
  empty = tmp_path / "none.png"
  plotting.plot_learning_curve(str(empty), [{"phase": "warm_start",
                                             "step": 0}],
                               best_baseline_s=1.0, lower_bound_s=0.5)
  assert not empty.exists()


def test_evaluation_curves_png(tmp_path):
  path = str(tmp_path / "curves.png")
  plotting.plot_evaluation_curves(
      path, {"policy": ([64, 128, 192], [3.0, 2.5, float("inf")]),
             "local search": (np.array([1, 100]), np.array([2.9, 2.4]))},
      best_baseline_s=2.6, lower_bound_s=float("nan"), title="g")
  assert os.path.getsize(path) > 1000


def test_plot_schedule_max_ops_is_a_positive_count_or_none():
  # max_ops=-1 drew all ops but the shortest before (issue 47).
  graph, topology, placement = _setup()
  for max_ops in (-1, 0, 2.5, True, "5"):
    with pytest.raises(PlotError, match="max_ops must be a positive"):
      plotting.plot_schedule(graph, placement, topology, max_ops=max_ops)
  start, finish, _ = plotting.schedule(graph, placement, topology)
  ops = int(((graph.kind == NODE_OP) & (finish > start)).sum())
  for max_ops, drawn in ((None, ops), (3, 3)):
    ax = plotting.plot_schedule(graph, placement, topology, max_ops=max_ops)
    assert sum(len(c.get_paths()) for c in ax.collections) == drawn


def test_plot_device_load_needs_a_mapping():
  graph, topology, placement = _setup()
  with pytest.raises(PlacementError, match=r"\{name: placement\} mapping, "
                     "got list"):                 # AttributeError before
    plotting.plot_device_load(graph, [placement], topology)


_RECORD = {"phase": "rl", "step": 1, "mean_runtime_s": [2.0],
           "best_runtime_s": [1.5]}


@pytest.mark.parametrize("records,levels,match", [
    ([[1, 2]], {}, r"records\[0\] is a list, not a dict"),
    ("rl", {}, "list of dicts"),
    ({"phase": "rl"}, {}, "list of dicts"),
    ([dict(_RECORD, step=None), _RECORD], {},
     r"records\[0\].step must be a number"),
    ([{"phase": "rl", "step": 1}], {}, "has no 'mean_runtime_s'"),
    ([dict(_RECORD, best_runtime_s=["fast"])], {},
     r"records\[0\].best_runtime_s must be numbers"),
    ([_RECORD], {"best_baseline_s": "1.8"},
     "best_baseline_s must be a number"),
    ([_RECORD], {"lower_bound_s": None}, "lower_bound_s must be a number"),
])
def test_learning_curve_bad_records_are_plot_errors(tmp_path, records, levels,
                                                    match):
  # AttributeError, KeyError, TypeError or ValueError before (issue 47).
  with pytest.raises(PlotError, match=match):
    plotting.plot_learning_curve(
        str(tmp_path / "c.png"), records,
        **{"best_baseline_s": 1.8, "lower_bound_s": 1.0, **levels})
  assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize("curves,match", [
    ([([1, 2], [1.0, 2.0])], "mapping, got list"),
    ({"a": [1, 2, 3]}, r"curves\['a'\] must be a pair"),
    ({"a": "ab"}, r"curves\['a'\] must be a pair"),
    ({"a": ([1, 2], [1.0])}, "2 evaluations but 1 runtimes"),
    ({"a": (["x", "y"], [1.0, 2.0])}, "evaluations must be numbers"),
    ({"a": ([1, 2], {"r": 1.0})}, "runtime_s must be numbers"),
])
def test_evaluation_curves_bad_curves_are_plot_errors(tmp_path, curves,
                                                      match):
  # AttributeError or ValueError before (issue 47).
  with pytest.raises(PlotError, match=match):
    plotting.plot_evaluation_curves(str(tmp_path / "c.png"), curves,
                                    best_baseline_s=1.0, lower_bound_s=0.5)
  assert not (tmp_path / "c.png").exists()


def test_curves_to_a_missing_folder_are_plot_errors(tmp_path):
  # FileNotFoundError after drawing, before (issue 47).
  path = str(tmp_path / "no" / "c.png")
  with pytest.raises(PlotError, match=r"folder of path .* does not exist.*"
                     "os.makedirs"):
    plotting.plot_learning_curve(path, [_RECORD], best_baseline_s=1.0,
                                 lower_bound_s=0.5)
  with pytest.raises(PlotError, match="does not exist"):
    plotting.plot_evaluation_curves(path, {"a": ([1], [1.0])},
                                    best_baseline_s=1.0, lower_bound_s=0.5)
  with pytest.raises(PlotError, match="str or os.PathLike"):
    plotting.plot_evaluation_curves(3, {"a": ([1], [1.0])},
                                    best_baseline_s=1.0, lower_bound_s=0.5)
  (tmp_path / "file").write_text("")
  with pytest.raises(PlotError, match="does not exist"):
    plotting.plot_learning_curve(str(tmp_path / "file" / "c.png"), [_RECORD],
                                 best_baseline_s=1.0, lower_bound_s=0.5)


@pytest.mark.parametrize("plot", [
    plotting.plot_schedule, plotting.plot_placement_graph,
    lambda graph, placement, topology, **kw: plotting.plot_device_load(
        graph, {"p": placement}, topology, **kw)])
def test_ax_is_none_or_a_matplotlib_axes(plot):
  # ax=3 raised AttributeError ('int' object has no attribute ...) (issue 47).
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  graph, topology, placement = _setup()
  for ax in (3, "left", plt.figure()):
    with pytest.raises(PlotError, match="ax must be None .* or a "
                       f"matplotlib Axes, got {type(ax).__name__}"):
      plot(graph, placement, topology, ax=ax)
  _, ax = plt.subplots()
  assert plot(graph, placement, topology, ax=ax) is ax
  plt.close("all")


@pytest.mark.parametrize("plot", [
    lambda path, **levels: plotting.plot_learning_curve(path, [_RECORD],
                                                        **levels),
    lambda path, **levels: plotting.plot_evaluation_curves(
        path, {"a": ([1, 2], [1.0, 2.0])}, **levels)])
def test_runtime_lines_are_not_negative_and_nan_draws_none(tmp_path, plot):
  # lower_bound_s=-1 was drawn below zero before (issue 47).
  path = str(tmp_path / "c.png")
  for levels, argument in (({"lower_bound_s": -1.0}, "lower_bound_s"),
                           ({"best_baseline_s": -0.5}, "best_baseline_s"),
                           ({"lower_bound_s": float("-inf")},
                            "lower_bound_s")):
    with pytest.raises(PlotError, match=f"{argument} is a runtime in seconds "
                       "and cannot be negative"):
      plot(path, **{"best_baseline_s": 1.0, "lower_bound_s": 0.5, **levels})
  assert not os.path.exists(path)
  plot(path, best_baseline_s=float("nan"), lower_bound_s=float("inf"))
  assert os.path.getsize(path) > 1000


def test_evaluation_curves_of_gaps_only_are_drawn(tmp_path):
  # Every runtime NaN: matplotlib's "Data cannot be log-scaled" before
  # (issue 47); a curve of gaps draws no line, on a linear axis.
  path = str(tmp_path / "gaps.png")
  plotting.plot_evaluation_curves(
      path, {"a": ([1, 2], [float("nan")] * 2)}, best_baseline_s=1.0,
      lower_bound_s=0.5)
  assert os.path.getsize(path) > 1000
  plotting.plot_evaluation_curves(path, {}, best_baseline_s=float("nan"),
                                  lower_bound_s=float("nan"))
  plotting.plot_evaluation_curves(
      path, {"a": ([0, -1], [1.0, 2.0])}, best_baseline_s=1.0,
      lower_bound_s=0.5)
