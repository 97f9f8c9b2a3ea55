"""Pictures of placements and schedules (matplotlib, host-side): single
charts (:mod:`gplace.plotting.charts`) and one model's three decisions,
device, schedule and fusion, in one figure
(:mod:`gplace.plotting.decisions`)."""

from gplace.plotting.charts import (graph_layout, plot_device_load,
                                    plot_evaluation_curves,
                                    plot_learning_curve,
                                    plot_placement_graph, plot_schedule,
                                    schedule)
from gplace.plotting.decisions import plot_decisions

__all__ = ["graph_layout", "plot_decisions", "plot_device_load",
           "plot_evaluation_curves", "plot_learning_curve",
           "plot_placement_graph", "plot_schedule", "schedule"]
