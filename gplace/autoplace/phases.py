"""Four of :func:`gplace.optimize`'s phases, each appending what it found
to the candidates tried so far: :func:`search_phase` (the searches over
placements, then over placement and schedule), :func:`solver_phase` (the
exact solver, or a probe of it), :func:`plan_probe` (LNS from the best
classical plan, first, on large graphs under memory pressure) and
:func:`lns_phase` (LNS with CP-SAT windows from the incumbent).
:mod:`gplace.autoplace.optimizer` decides whether each runs and for how
long (:mod:`gplace.autoplace.budget`).
"""

from __future__ import annotations

import math
import time
from typing import Optional

from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace.candidates import BaselineRuns, best_of
from gplace.autoplace.inputs import Problem
from gplace.autoplace.progress import Progress


def show_best(bar: Progress, tried: list) -> None:
  """Shows the fastest of ``tried`` on the progress bar (if any fits)."""
  best = best_of(tried)
  if best is not None:
    bar.best(best.runtime_s)


def search_phase(problem: Problem, runs: BaselineRuns, tried: list, *,
                 kind: str, name: Optional[str], search_s: float, seed: int,
                 max_evaluations: Optional[int], stall_s: Optional[float],
                 blocks: float, bar: Progress) -> None:
  """The searches of methods ``"auto"`` and ``"search"`` for ``search_s``
  seconds, their candidates appended to ``tried``.

  ``"search"`` runs the search ``name`` (default annealing) from the
  fastest placement in the default schedule (a joint search: from the
  fastest in its own schedule). ``"auto"`` anneals placements from
  :func:`~gplace.autoplace.candidates.search_starts` (whole op chains
  first on large graphs) for ``1 - JOINT_SHARE`` of the time, then
  placement and schedule together from the fastest so far for the rest
  (with what a stalled placement search gave back).

  Args:
    problem: the resolved problem.
    runs: the baselines (``runs.default`` not empty).
    tried: the candidates so far; extended in place.
    kind: the method's kind, ``"auto"`` or ``"search"``.
    name: the search named by the method, or None.
    search_s: seconds for the phase.
    seed, max_evaluations: as ``gplace.optimize``'s.
    stall_s: a search stops after this many seconds without a gain.
    blocks: the share of moves that move blocks of ops.
    bar: the progress bar.
  """
  name = name or "annealing"
  joint = name == candidates_lib.JOINT
  if kind == "auto":  # placements, then placement + schedule
    placement_s = search_s * (1 - budget.JOINT_SHARE)
    bar.stage(name)
    starts = candidates_lib.search_starts(runs.default, tried)
    chains = candidates_lib.chain_groups(
        problem, budget.CHAIN_SEARCH_MIN_NODES,
        budget.CHAIN_SEARCH_MAX_SHARE)
    began_search = time.perf_counter()
    for start in starts:
      each_s = placement_s / len(starts)
      each = (1 - budget.JOINT_SHARE) / len(starts)
      if chains is not None:  # whole op chains first, then single ops
        began_chains = time.perf_counter()
        start = candidates_lib.search_candidate(
            problem, name, start,
            time_s=each_s * budget.CHAIN_SEARCH_SHARE, seed=seed,
            max_evaluations=budget.evaluation_share(
                max_evaluations, each * budget.CHAIN_SEARCH_SHARE),
            stall_s=stall_s, groups=chains, block_share=blocks)
        tried.append(start)
        each_s -= time.perf_counter() - began_chains
        each *= 1 - budget.CHAIN_SEARCH_SHARE
      tried.append(candidates_lib.search_candidate(
          problem, name, start, time_s=each_s, seed=seed,
          max_evaluations=budget.evaluation_share(max_evaluations, each),
          stall_s=stall_s, block_share=blocks))
    # What a stalled placement search gives back goes to the joint one.
    placement_s = min(placement_s, time.perf_counter() - began_search)
    show_best(bar, tried)
    search_s -= placement_s
    joint, name = True, candidates_lib.JOINT
  bar.stage(name)
  # A joint search starts from the fastest placement in its schedule.
  start = (best_of(tried) if joint else best_of(runs.default + [
      c for c in tried if c.order is None])) or runs.default[0]
  tried.append(candidates_lib.search_candidate(
      problem, name, start, time_s=search_s, seed=seed,
      max_evaluations=budget.evaluation_share(
          max_evaluations, budget.JOINT_SHARE)
      if kind == "auto" else max_evaluations, stall_s=stall_s,
      block_share=blocks))
  show_best(bar, tried)


def solver_phase(problem: Problem, tried: list, *, solver_s: float,
                 probe: bool, seed: int, bar: Progress) -> tuple[float, bool]:
  """The exact solver (``gplace.solvers.solve``) from the fastest of
  ``tried`` for ``solver_s`` seconds, its candidates appended to
  ``tried``. With ``probe``, it first runs for
  :data:`~gplace.autoplace.budget.SOLVER_PROBE_SHARE` of them (at least
  :data:`~gplace.autoplace.budget.MIN_SOLVER_S`), and goes on from its
  answer for the rest only when that answer is faster than the best
  before it (in the simulator) and unproven.

  Returns:
    ``(bound_s, proven)``: the solver's proven lower bound in seconds, and
    whether its last answer is proven optimal in the simulator too
    (status ``"OPTIMAL"``, see
    :func:`~gplace.autoplace.candidates.solver_candidate`).
  """
  began = time.perf_counter()
  bar.stage("solver")
  before = best_of(tried)
  first_s = solver_s
  if probe:
    first_s = min(solver_s, max(budget.MIN_SOLVER_S,
                                budget.SOLVER_PROBE_SHARE * solver_s))
  outcome = candidates_lib.solver_candidate(
      problem, before, time_s=max(first_s, 1.0), seed=seed)
  tried.append(outcome.candidate)
  bound_s = outcome.bound_s
  rest_s = began + solver_s - time.perf_counter()
  gained = before is None or outcome.candidate.runtime_s < before.runtime_s
  if (probe and outcome.status != "OPTIMAL" and gained
      and rest_s >= budget.MIN_SOLVER_S):
    outcome = candidates_lib.solver_candidate(
        problem, outcome.candidate, time_s=rest_s, seed=seed)
    tried.append(outcome.candidate)
    bound_s = max(bound_s, outcome.bound_s)
  show_best(bar, tried)
  return bound_s, outcome.status == "OPTIMAL"


def race_plan(problem: Problem, runs: BaselineRuns,
              tried: list) -> Optional[candidates_lib.Candidate]:
  """The plan whose LNS chain races the incumbent's, or None: the best
  classical plan in any schedule (or :func:`plan_probe`'s LNS from it) on
  graphs of at least :data:`~gplace.autoplace.budget.LNS_LARGE_MIN_NODES`
  ops (:data:`~gplace.autoplace.budget.LNS_FROM_PLAN_TOO`); below, the fastest
  of those and gplace's critical-chain plans in ``tried``
  (:data:`~gplace.autoplace.budget.LNS_FROM_CHAIN_TOO`)."""
  if problem.graph.n_nodes >= budget.LNS_LARGE_MIN_NODES:
    probed = [c for c in tried if c.label.endswith(candidates_lib.PROBE)]
    return (best_of(list(runs.best) + probed) if budget.LNS_FROM_PLAN_TOO
            else None)
  if not budget.LNS_FROM_CHAIN_TOO:
    return None
  return best_of(list(runs.best) + _chain_plans(tried))


def _chain_plans(tried: list) -> list:
  """gplace's critical-chain plans in ``tried`` (no search from them)."""
  return [c for c in tried
          if c.label.startswith(candidates_lib.CHAIN + " (")]


def plan_probe(problem: Problem, runs: BaselineRuns, tried: list, *,
               probe_s: float, seed: int, bound_s: float,
               bar: Progress) -> bool:
  """LNS from the best classical plan (in any schedule) for at most
  ``probe_s`` seconds, until it beats gplace's own plans in ``tried``
  (its critical-chain plans); its candidate appended to ``tried``
  (labelled with :data:`~gplace.autoplace.candidates.PROBE`). No probe
  unless one of those plans is ahead of the classical one.

  Returns:
    Whether it beat them: then LNS's basin from the plan is the one to
    follow (``optimize`` skips its searches and goes on from it); if not,
    it is the plan whose chain races the searches' (:func:`race_plan`).
  """
  plan = best_of(runs.best)
  rival = best_of(_chain_plans(tried))
  if plan is None or rival is None or rival.runtime_s >= plan.runtime_s:
    return False
  bar.stage("lns from the best plan")
  probe = candidates_lib.lns_candidate(
      problem, plan, time_s=probe_s, seed=seed, bound_s=bound_s,
      target_s=math.nextafter(rival.runtime_s, 0.0))
  tried.append(probe._replace(label=probe.label + candidates_lib.PROBE))
  show_best(bar, tried)
  return probe.runtime_s < rival.runtime_s


def lns_phase(problem: Problem, runs: BaselineRuns, tried: list, *,
              lns_s: float, seed: int, bound_s: float,
              max_evaluations: Optional[int], hedge: bool,
              bar: Progress, order_search: bool = False,
              blocks: float = budget.BLOCK_SHARE) -> None:
  """LNS (CP-SAT windows) for ``lns_s`` seconds from the fastest of
  ``tried`` (else the first baseline), its candidates appended to
  ``tried``. With ``hedge``, a chain from the plan of :func:`race_plan`
  (the best classical plan from
  :data:`~gplace.autoplace.budget.LNS_LARGE_MIN_NODES` ops, the fastest
  plan no search made below) races the incumbent's when the plan is
  slower (:data:`~gplace.autoplace.budget.LNS_RACE_SHARE`). With
  ``order_search``, LNS gets ``1 -``
  :data:`~gplace.autoplace.budget.ORDER_SEARCH_SHARE` of the time, then
  annealing moves the ops of the fastest so far in the order it runs in
  for the rest (``blocks``: its share of block moves)."""
  began = time.perf_counter()
  ordered = order_search and problem.topology.n_devices > 1
  share = budget.ORDER_SEARCH_SHARE if ordered else 0.0
  bar.stage("lns")
  starts = [best_of(tried) or runs.default[0]]
  plan = race_plan(problem, runs, tried) if hedge else None
  if plan is not None and plan.runtime_s > starts[0].runtime_s:
    starts.append(plan)        # hedge a single-op search's start
  lns_evaluations = budget.evaluation_share(max_evaluations, 1 - share)
  tried.extend(candidates_lib.lns_candidates(
      problem, starts, time_s=max(lns_s * (1 - share), 1.0), seed=seed,
      bound_s=bound_s,
      max_iterations=None if max_evaluations is None else max(
          1, lns_evaluations // candidates_lib.BATCH),
      race_share=budget.LNS_RACE_SHARE))
  show_best(bar, tried)
  left = began + lns_s - time.perf_counter()
  incumbent = best_of(tried)
  if (not ordered or incumbent is None or incumbent.order is None
      or left < budget.MIN_ORDER_SEARCH_S):
    return
  bar.stage("annealing in LNS's order")
  tried.append(candidates_lib.search_candidate(
      problem, "annealing", incumbent, time_s=left, seed=seed,
      max_evaluations=budget.evaluation_share(max_evaluations, share),
      block_share=blocks, in_order=True))
  show_best(bar, tried)
