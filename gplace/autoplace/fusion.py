"""``gplace.optimize(..., fusion=True)``: fusion decisions for the winner.

After the placement (and its order) are chosen, :func:`with_fusion`
searches fusion decisions of that placement
(:func:`gplace.search.fusion_annealing`, from the best of no fusion and
XLA's default) within :data:`FUSION_SHARE` of the budget and returns the
:class:`~gplace.autoplace.result.PlacementResult` with the decision.
``docs/design.md#fusion``.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from gplace.autoplace.inputs import Problem
from gplace.autoplace.result import PlacementResult
from gplace.search.common import DEFAULT_BUDGET
from gplace.search.fusion import fusion_annealing
from gplace.sim.simulator import simulate

#: Share of ``budget_s`` the fusion search gets (at least
#: :data:`MIN_FUSION_S` seconds).
FUSION_SHARE = 0.2
MIN_FUSION_S = 0.5


def fusion_budget_s(budget_s: float) -> float:
  """Seconds of ``budget_s`` kept for the fusion search."""
  return max(FUSION_SHARE * budget_s, min(MIN_FUSION_S, budget_s / 2))


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
