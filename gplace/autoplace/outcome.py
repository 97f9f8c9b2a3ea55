"""The end of :func:`gplace.optimize`: from the tried candidates to the
:class:`~gplace.autoplace.result.PlacementResult`.

:func:`placement_result` makes the result of the chosen candidate (the
fastest, measured where measured, or a simpler one as fast within the
noise). With ``fusion=True``, :func:`with_fusion` then searches fusion
decisions of that placement (:func:`gplace.search.fusion_annealing`, from
the best of no fusion and XLA's default) within
:data:`~gplace.autoplace.budget.FUSION_SHARE` of the budget and returns the
result with the decision. ``docs/design.md#fusion``.
"""

from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from gplace.errors import PlacementError
from gplace.autoplace import measured as measured_lib
from gplace.autoplace.candidates import score
from gplace.autoplace.inputs import Problem
from gplace.autoplace.result import PlacementResult
from gplace.search.common import DEFAULT_BUDGET
from gplace.search.fusion import fusion_annealing
from gplace.sim.simulator import simulate


def placement_result(problem: Problem, tried: list, bound_s: float,
                     began: float, measurements: dict, tie: float,
                     notes=()) -> PlacementResult:
  """The :class:`PlacementResult` of the chosen candidate
  (:func:`gplace.autoplace.measured.choose`: the fastest, measured where
  measured, or a simpler one as fast within the noise).

  Raises:
    PlacementError: no candidate fits in memory and keeps the constraints.
  """
  choice = measured_lib.choose(tried, problem.graph, problem.topology,
                               problem.costs, measured=measurements, tie=tie)
  if choice is None:
    tried_labels = ", ".join(c.label for c in tried) or "no baseline ran"
    raise PlacementError(
        f"gplace.optimize found no placement of graph "
        f"{problem.graph.name!r} that fits in the memory of "
        f"{problem.topology.name!r} and keeps its device constraints "
        f"(tried: {tried_labels}). Use a topology with more memory or more "
        "devices, relax the graph's allowed_devices / colocation, or try "
        "method='auto' with a larger budget_s.")
  winner = choice.winner
  # Scored again alone: the peak bytes, and a last check that it is feasible.
  final = score(problem, winner.placement[None], winner.order)
  runtime_s = float(final.runtime_s[0])
  assert math.isfinite(runtime_s), "the winner became infeasible"
  ranked = {}       # fastest first; a label tried twice keeps its fastest
  for c in sorted(tried, key=lambda c: c.runtime_s):
    ranked.setdefault(c.label, c)
  return PlacementResult(
      placement=np.asarray(winner.placement, np.int32),
      order=winner.order, runtime_s=runtime_s,
      peak_bytes=final.peak_bytes[0], method=winner.label,
      candidates={label: c.runtime_s for label, c in ranked.items()},
      lower_bound_s=float(bound_s), graph=problem.graph,
      topology=problem.topology, costs=problem.costs,
      wall_s=time.perf_counter() - began,
      placements={c.label: np.asarray(c.placement, np.int32)
                  for c in ranked.values()},
      measured=measurements, reason=choice.reason, notes=tuple(notes))


def with_fusion(result: PlacementResult, problem: Problem, *,
                time_s: float, seed: int,
                max_evaluations: Optional[int] = None) -> PlacementResult:
  """``result`` with a searched fusion decision for its placement.

  The search runs the winner's placement in its schedule (``result.order``,
  or the default schedule) and never returns a decision slower than no
  fusion there. A decision is used only when it is simulated faster than
  the placement without one (maximal same-device clusters, XLA fusing
  inside each); then ``runtime_s`` and ``peak_bytes`` become the fused
  ones, else ``fusion`` stays None and a note says so.

  Args:
    result: the chosen placement, unfused.
    problem: what was placed.
    time_s: wall-clock seconds for the search.
    seed: of the search.
    max_evaluations: simulator evaluations at most (default as many as
      fit in ``time_s``).

  Returns:
    The :class:`PlacementResult` with ``fusion`` (``[N]`` int64 labels,
    or None when no decision beats the clusters) and ``fusion_runtimes``.
  """
  found = fusion_annealing(
      problem.graph, problem.topology, placement=result.placement,
      costs=problem.costs, order=result.order, seed=seed,
      budget=max_evaluations or DEFAULT_BUDGET,
      time_limit_s=max(time_s, 1e-3))
  began = time.perf_counter()
  runtimes = {"XLA clusters (no decision)": result.runtime_s,
              "no fusion": found.unfused_runtime_s,
              "default (XLA-like)": found.default_runtime_s,
              "searched": found.runtime_s}
  notes = result.notes
  if problem.local:
    notes += ("fusion: chosen by simulation, not measured; with a decision "
              "each group and each unfused op is its own executable",)
  if not found.runtime_s < result.runtime_s:
    return result._replace(
        fusion_runtimes=runtimes,
        notes=notes + ("fusion: no decision is simulated faster than the "
                       "clusters without one; none is used",),
        wall_s=result.wall_s + found.wall_s)
  final = simulate(problem.graph, found.placement, problem.topology,
                   problem.costs, result.order, fusion=found.fusion)
  return result._replace(
      fusion=np.asarray(found.fusion, np.int64),
      runtime_s=float(np.asarray(final.runtime_s)),
      peak_bytes=np.asarray(final.peak_bytes, np.float64),
      fusion_runtimes=runtimes, notes=notes,
      wall_s=result.wall_s + found.wall_s + time.perf_counter() - began)
