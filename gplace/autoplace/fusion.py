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
  fusion there; ``runtime_s`` and ``peak_bytes`` become the fused ones.

  Args:
    result: the chosen placement, unfused.
    problem: what was placed.
    time_s: wall-clock seconds for the search.
    seed: of the search.
    max_evaluations: simulator evaluations at most (default as many as
      fit in ``time_s``).

  Returns:
    The :class:`PlacementResult` with ``fusion`` (``[N]`` int64 labels;
    all ``-1`` when no fusion pays) and ``fusion_runtimes``.
  """
  found = fusion_annealing(
      problem.graph, problem.topology, placement=result.placement,
      costs=problem.costs, order=result.order, seed=seed,
      budget=max_evaluations or DEFAULT_BUDGET,
      time_limit_s=max(time_s, 1e-3))
  began = time.perf_counter()
  final = simulate(problem.graph, found.placement, problem.topology,
                   problem.costs, result.order, fusion=found.fusion)
  runtimes = {"no fusion": found.unfused_runtime_s,
              "default (XLA-like)": found.default_runtime_s,
              "searched": found.runtime_s}
  return result._replace(
      fusion=np.asarray(found.fusion, np.int64),
      runtime_s=float(np.asarray(final.runtime_s)),
      peak_bytes=np.asarray(final.peak_bytes, np.float64),
      fusion_runtimes=runtimes,
      wall_s=result.wall_s + found.wall_s + time.perf_counter() - began)
