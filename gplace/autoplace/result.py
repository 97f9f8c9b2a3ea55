"""What :func:`gplace.optimize` returns: :class:`PlacementResult`, the
winner, its schedule and cost, and everything it was compared with;
:meth:`PlacementResult.place` runs it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from gplace.errors import PlacementError
from gplace.execution.executor import place
from gplace.graphs.graph import Graph
from gplace.report import format_seconds
from gplace.sim.explain import Explanation, explain
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology


def measured_text(measurement: Any) -> str:
  """``"12.3 ms ± 410 µs"`` (median ± interquartile range), ``"failed"``,
  or ``""`` for None."""
  if measurement is None:
    return ""
  if measurement.failed:
    return "failed"
  return (f"{format_seconds(measurement.runtime_s)} ± "
          f"{format_seconds(measurement.iqr_s)}")


class PlacementResult(NamedTuple):
  """The placement :func:`gplace.optimize` chose.

  Attributes:
    placement: ``[N]`` int32 device index per node (into ``topology``).
    order: ``[N]`` int32 topological op order of the winning schedule (each
      device runs its ops in this order), or None: the simulator's default
      (dynamic) schedule.
    runtime_s: simulated seconds of ``placement`` in that schedule.
    peak_bytes: ``[D]`` float64 simulated peak live bytes per device.
    method: which candidate won, e.g. ``"heft (own plan)"`` or
      ``"annealing from heft"``.
    candidates: ``{label: runtime_s}`` of everything tried, fastest first
      (``inf``: out of memory or breaking the graph's device constraints).
    lower_bound_s: seconds no placement can beat
      (``gplace.lower_bound``, tightened by the solver's proof when it ran).
    graph: the placed graph (``N`` nodes).
    topology: the devices (``D``).
    costs: ``[N, D]`` float64 measured seconds per node and device that
      were used, or None (the topology's roofline).
    wall_s: seconds the whole call took.
    placements: ``{label: [N] int32 placement}`` of everything tried (see
      :meth:`placement_of`).
    measured: ``{label: gplace.Measurement}`` of the candidates timed on
      this machine (empty unless the topology is the local one and a
      function was given); with them the winner is the measured fastest.
    reason: why the winner won, in one line (e.g. a simpler plan as fast
      within the noise).
    notes: lines on what the budget cut short or left out (a training
      method stopped early or not started), printed under the table.
    fusion: ``[N]`` int64 fusion group labels searched for the winner
      (``gplace.optimize(..., fusion=True)``; ``-1``: alone), or None: not
      searched, or no decision beat the clusters without one.
      ``runtime_s`` and ``peak_bytes`` are then the fused ones.
    fusion_runtimes: ``{"XLA clusters (no decision)", "no fusion" (every
      op alone), "default (XLA-like)", "searched": runtime_s}`` of the
      winner's placement (empty when not searched).
  """

  placement: np.ndarray
  order: Optional[np.ndarray]
  runtime_s: float
  peak_bytes: np.ndarray
  method: str
  candidates: dict
  lower_bound_s: float
  graph: Graph
  topology: Topology
  costs: Optional[np.ndarray]
  wall_s: float
  placements: dict = {}
  measured: dict = {}
  reason: str = ""
  notes: tuple = ()
  fusion: Optional[np.ndarray] = None
  fusion_runtimes: dict = {}

  def placement_of(self, label: str) -> np.ndarray:
    """``[N]`` int32 placement of the candidate ``label`` (a key of
    ``candidates``), e.g. the pretrained policy's own greedy placement.

    Raises:
      PlacementError: no candidate has that label.
    """
    if label not in self.placements:
      raise PlacementError(f"no candidate {label!r}; the candidates are "
                           f"{list(self.candidates)}.")
    return self.placements[label]

  def schedule(self) -> np.ndarray:
    """``[N]`` int32 op order the simulator ran the winner in (``order``, or
    the default schedule's dispatch order, with ``fusion`` where searched),
    for ``gplace.place(..., schedule=)``."""
    if self.order is not None:
      return self.order
    result = simulate(self.graph, self.placement, self.topology, self.costs,
                      return_schedule=True, fusion=self.fusion)
    return np.asarray(result.order, np.int32)

  def explain(self) -> Explanation:
    """Where the winner's simulated time goes (``gplace.explain``): its
    critical path in the schedule it was scored in, split into compute,
    transfers and waits, and each device's busy time. Unfused: with
    ``fusion`` searched, the placement's time without the decision.
    ``print(result.explain())`` shows it as a table."""
    return explain(self.graph, self.placement, self.topology, self.costs,
                   self.order, bound_s=self.lower_bound_s)

  def place(self, fn: Callable, devices=None, **kwargs: Any):
    """``gplace.place(fn, graph, placement, devices, schedule=...,
    fusion=...)``: runs the placement in the schedule it was simulated in,
    with its fusion decision (each group one executable) where searched.

    Args:
      fn: the function the graph was captured from.
      devices: ``jax.Device`` s that device indices refer to (default: all
        local devices, CPU first); one per device of ``topology``, so
        optimize with ``topology="local"`` (or ``gplace.topology.local(
        devices)``) to run on this machine.
      **kwargs: more arguments of :func:`gplace.place` (``mode``,
        ``example_args``...).

    Returns:
      The :class:`~gplace.PlacedFunction`.
    """
    kwargs.setdefault("fusion", self.fusion)
    return place(fn, self.graph, self.placement, devices,
                 schedule=self.schedule(), **kwargs)

  @property
  def gap(self) -> float:
    """How far the result's simulated runtime is above the lower bound, as
    a fraction (0.05: 5%; 0: proven optimal; inf without a bound). The
    bound knows no fusion: with ``fusion`` searched, the gap is the
    unfused winner's."""
    if not self.lower_bound_s > 0:
      return math.inf
    runtime_s = self.fusion_runtimes.get("XLA clusters (no decision)",
                                         self.runtime_s)
    return max(runtime_s / self.lower_bound_s - 1.0, 0.0)

  @property
  def measured_s(self) -> Optional[float]:
    """The winner's measured median seconds on this machine, or None."""
    found = self.measured.get(self.method)
    return None if found is None or found.failed else found.runtime_s

  def table(self) -> str:
    """A short text table: every candidate's simulated runtime against the
    bound, and its measured one where measured; the winner marked ``*``;
    a last line says what the times are."""
    bound = self.lower_bound_s
    width = max([len(label) for label in self.candidates] + [11]) + 2
    lines = [f"gplace.optimize: {self.graph.name!r} ({self.graph.n_nodes} "
             f"nodes) on {self.topology.name} ({self.topology.n_devices} "
             f"devices), {self.wall_s:.1f} s",
             f"  {'method':<{width}}{'simulated':>12}  {'x bound':>8}"
             + (f"  {'measured (median ± IQR)':>24}" if self.measured
                else "")]
    for label, runtime in self.candidates.items():
      mark = "*" if label == self.method else " "
      ratio = (f"{runtime / bound:8.2f}" if bound > 0 and
               math.isfinite(runtime) else f"{'-':>8}")
      line = f"{mark} {label:<{width}}{format_seconds(runtime):>12}  {ratio}"
      if self.measured:
        line += f"  {measured_text(self.measured.get(label)):>24}"
      lines.append(line.rstrip())
    lines.append(f"  {'lower bound':<{width}}{format_seconds(bound):>12}")
    if math.isfinite(self.gap):
      lines.append(f"  gap to the lower bound: {100 * self.gap:.1f}% "
                   "(no placement can beat the bound; the optimum lies "
                   "between it and the winner)")
    if self.measured:
      lines.append(f"  times: simulated on {self.topology.name!r}, and "
                   "measured on this machine's devices where given; the "
                   "winner is the measured fastest (a simpler plan wins a "
                   "tie within the spread)")
    else:
      lines.append(f"  times: simulated on {self.topology.name!r} (a model "
                   "of those devices, not a measurement)")
    if self.reason:
      lines.append(f"  chosen: {self.reason}")
    lines.append(f"  fusion: {self.fusion_text()}")
    lines += [f"  note: {note}" for note in self.notes]
    return "\n".join(lines)

  def fusion_text(self) -> str:
    """One line on the fusion decision used."""
    times = ", ".join(f"{name} {format_seconds(runtime)}"
                      for name, runtime in self.fusion_runtimes.items())
    if self.fusion is None:
      if times:
        return f"none used (searched; simulated: {times})"
      return ("none (each same-device cluster is one executable, XLA "
              "fusing inside it); fusion=True searches a decision")
    labels = np.asarray(self.fusion)
    fused = labels[labels >= 0]
    groups = np.unique(fused).size
    return (f"searched: {fused.size} of {labels.size} nodes in {groups} "
            f"groups, each group one executable (simulated: {times})")

  def __str__(self) -> str:
    return self.table()

  def __repr__(self) -> str:
    return (f"PlacementResult(method={self.method!r}, runtime_s="
            f"{self.runtime_s:.6g}, lower_bound_s={self.lower_bound_s:.6g}, "
            f"graph={self.graph.name!r}, n_nodes={self.graph.n_nodes}, "
            f"topology={self.topology.name!r}, "
            f"candidates={len(self.candidates)})")
