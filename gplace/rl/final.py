"""The end of a training run: the policy's own placements refined per op
(:func:`refine_own_placements`), every placement the run found
(:func:`found_placements`), the final report and ``best_placement.json``
(:func:`final_result`), and what :func:`gplace.rl.training.train` returns
(:class:`TrainResult`)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from gplace.rl import best_placement_file
from gplace.rl import reports
from gplace.rl import run_outputs
from gplace.rl import scoring
from gplace.rl.evaluation import policy_verdict
from gplace.rl.loop import LoopResult
from gplace.rl.refine import (START_GIVEN as REFINE_START_GIVEN,
                              RefineResult, refine_placement)
from gplace.rl.settings import TrainSettings
from gplace.rl.types import GraphSetup


class TrainResult(NamedTuple):
  """What :func:`~gplace.rl.training.train` returns.

  Attributes:
    state: final (unreplicated) :class:`~gplace.rl.state.TrainState`.
    best_placements: ``[N_b]`` int32 per graph, the best placement found.
    best_runtime_s: per graph.
    table: per graph, ``{row name: runtime_s}`` for the learned placement,
      every baseline and the lower bound (empty for a run stopped early).
    steps_per_second: RL training throughput of the last chunk.
    policy: per graph, the policy's own greedy and sampled placements
      (:class:`~gplace.rl.evaluation.PolicyEvaluation`; no search, no
      best-ever bookkeeping; empty for a run stopped early).
    refined: per graph, the per-op refinement (``settings.refine``).
    best_of_run: per graph, the fastest placement of a finished run
      whatever found it (training, the policy's own placements, the
      refinement, every baseline;
      :class:`~gplace.rl.best_placement_file.FoundPlacement`): what
      ``best_placement.json`` holds (empty for a run stopped early).
  """

  state: Any
  best_placements: list
  best_runtime_s: list
  table: list
  steps_per_second: float
  policy: list = []
  refined: list = []
  best_of_run: list = []


#: The verdict of a run whose policy parameters are not finite.
DIVERGED = ("training diverged: the policy's parameters are NaN or "
            "infinite, so its own placements (every node on device 0) say "
            "nothing about what it learnt")


def refine_own_placements(settings: TrainSettings, own, reward_fns, setups,
                          num_devices: int, log) -> list[RefineResult]:
  """The second stage (``settings.refine``, :mod:`gplace.rl.refine`): per
  graph, a per-op policy trained from the policy's greedy placement (with
  ``refine.start = "best"``: from the fastest of it and every baseline's
  placement under the run's reward); empty with ``refine.evaluations=0``."""
  refine = settings.refine
  if refine.evaluations <= 0:
    return []
  out = []
  for evaluation, reward_fn, setup in zip(own, reward_fns, setups):
    alternatives = ({name: p for name, p in setup.baselines.items()
                     if np.isfinite(setup.baseline_runtime_s.get(name,
                                                                 np.inf))}
                    if refine.start == "best" else None)
    result = refine_placement(
        reward_fn, evaluation.greedy_placement, num_devices,
        evaluations=refine.evaluations, num_samples=refine.num_samples,
        max_moves=refine.max_moves, learning_rate=refine.learning_rate,
        init_logit=refine.init_logit,
        allowed=setup.graph.allowed_devices, seed=settings.seed,
        alternatives=alternatives)
    log(f"refined {setup.name} per op from {refine_start_label(result)}: "
        f"{result.start_runtime_s:.6g} -> {result.greedy_runtime_s:.6g} s "
        f"({result.moved_ops} ops moved, {result.evaluations} evaluations, "
        f"{result.wall_s:.0f} s)")
    out.append(result)
  return out


def refine_start_label(result: RefineResult) -> str:
  """Where a refinement started, in words: ``"the policy's greedy
  placement"`` or ``"heft's placement"``."""
  if result.start_name == REFINE_START_GIVEN:
    return "the policy's greedy placement"
  return f"{result.start_name}'s placement"


def best_found_name(settings: TrainSettings) -> str:
  """The table's name for the run's best found placement: it includes
  search (``rl.mutate_best > 0``), or the warm-start seed, or is samples
  only."""
  if settings.rl.mutate_best > 0:
    return reports.BEST_FOUND_SEARCH_ROW
  if settings.warm_start.enabled:
    return reports.BEST_FOUND_SEEDED_ROW
  return reports.BEST_FOUND_ROW


def final_result(settings: TrainSettings, workdir: Optional[str],
                 setups: Sequence[GraphSetup], topology, loop: LoopResult,
                 outputs, finished, own, log, refined=(),
                 rescore=None, diverged=False) -> TrainResult:
  """Writes the end-of-run files and collects the :class:`TrainResult`;
  ``own``: the policy's own placements
  (:func:`~gplace.rl.evaluation.evaluate_policy`) of a finished run, else
  None; ``refined``: their per-op refinements (one per graph, or empty);
  ``rescore``: per graph a scorer in the table's schedule
  when RL trained in another (``rl.reward_schedule``), so the best
  sampled placement is reported in the same schedule as every other row
  (``rl.reward_schedule``)."""
  state = loop.state
  outputs.ensure_best_placement(state)
  best_runtime = [float(x) for x in np.asarray(state.best_runtime_s)]
  best_placements = [np.asarray(state.best_placement)[b, :s.graph.n_nodes]
                     for b, s in enumerate(setups)]
  best_priority = getattr(state, "best_priority", None)
  best_orders = [None if best_priority is None else
                 best_placement_file.priority_order(
                     np.asarray(best_priority)[b, :s.graph.n_nodes])
                 for b, s in enumerate(setups)]
  best_fusion = getattr(state, "best_fusion", None)
  best_choices = [None if best_fusion is None else
                  np.asarray(best_fusion)[b, :s.graph.n_nodes]
                  for b, s in enumerate(setups)]
  if rescore is not None:
    best_runtime = [_rescore(fn, p, r, None if best_priority is None else
                             np.asarray(best_priority)[b, :len(p)],
                             best_choices[b])
                    for b, (fn, p, r) in enumerate(zip(
                        rescore, best_placements, best_runtime))]
    if outputs.best is not None:
      outputs.best.schedules = ([best_placement_file.DEFAULT_SCHEDULE]
                                * len(setups))
      outputs.best.write(int(state.step), state.best_placement,
                         np.asarray(best_runtime), best_priority,
                         best_fusion)
  tables = []
  if finished:
    refined = list(refined) or [None] * len(own)
    tables = run_outputs.write_final_report(
        workdir, setups, best_runtime, [s.name for s in setups], topology,
        log=log if settings.print_table else None, step=loop.step,
        policy_rows=[e.rows() + (r.rows() if r else [])
                     for e, r in zip(own, refined)],
        policy_records=[dict(e.record(), **(r.record() if r else {}))
                        for e, r in zip(own, refined)],
        verdicts=[DIVERGED if diverged else _verdict(e, r, s)
                  for e, r, s in zip(own, refined, setups)],
        measured=settings.rl.reward == "executor",
        best_found_name=best_found_name(settings))
  best_of_run = []
  if finished:
    found = [found_placements(
        settings, s, best_placements[b], best_runtime[b], best_orders[b],
        None if outputs.best is None else outputs.best.found_steps[b],
        own[b], refined[b], loop.step, best_choices[b])
             for b, s in enumerate(setups)]
    best_of_run = [best_placement_file.fastest(f) for f in found]
    if outputs.best is not None:
      outputs.best.write_best_of_run(loop.step, best_of_run,
                                     [len(f) for f in found])
    for s, best in zip(setups, best_of_run):
      log(f"[gplace] {s.name}: the fastest placement of the run is "
          f"{best.source}'s ({best.runtime_s * 1e3:.4f} ms)")
  return TrainResult(state, best_placements, best_runtime, tables,
                     loop.steps_per_second, own or [],
                     [r for r in refined or () if r is not None],
                     best_of_run)


def _rescore(fn, placement, runtime_s, priority, fusion=None) -> float:
  """``placement``'s runtime under the table's scorer ``fn`` (with the
  policy's own ``priority`` and fusion choices, if any); a failed one stays
  failed."""
  if not np.isfinite(runtime_s):
    return runtime_s
  extra = {name: value[None] for name, value in
           (("priority", priority), ("fusion", fusion)) if value is not None}
  return float(np.asarray(fn(placement[None], **extra))[0])


def found_placements(settings: TrainSettings, setup: GraphSetup,
                     best_placement, best_runtime_s: float, best_order,
                     found_step, own, refined, step: int,
                     best_fusion=None
                     ) -> list[best_placement_file.FoundPlacement]:
  """Every placement of one graph a finished run scored in the table's
  schedule, each with its runtime as ``results.json`` lists it: every
  baseline, each list scheduler's own plan, the best found in training,
  the policy's greedy placement and best fresh sample (``own``, a
  :class:`~gplace.rl.evaluation.PolicyEvaluation`) and the per-op
  refinement's (``refined``, or None). Baselines come first, so a
  training best that is still the warm-start seed is named by its
  baseline. A policy with a fusion head (``best_fusion``: the training
  best's choices ``[N]``) records the labels each of its placements was
  scored with."""
  # pylint: disable-next=invalid-name
  FoundPlacement = best_placement_file.FoundPlacement
  table = (scoring.MEASURED if settings.rl.reward == "executor"
           else best_placement_file.DEFAULT_SCHEDULE)
  ordered = best_placement_file.ordered_schedule(table)
  out = [FoundPlacement(f"baseline: {name}", setup.baselines[name],
                        float(runtime), table)
         for name, runtime in setup.baseline_runtime_s.items()]
  for name, runtime in (setup.planned_runtime_s or {}).items():
    order = (setup.planned_orders or {}).get(name)
    if order is not None:
      out.append(FoundPlacement(f"baseline: {name} (own plan)",
                                setup.baselines[name], float(runtime),
                                best_placement_file.STATIC_SCHEDULE, order))
  what = ("training samples and search" if settings.rl.mutate_best > 0
          else best_placement_file.TRAINING_SOURCE)
  def labels(placement, choices):
    return best_placement_file.fusion_labels(setup, placement, choices)

  out.append(FoundPlacement(
      f"{what} (found by step {found_step})" if found_step else what,
      best_placement, float(best_runtime_s),
      table if best_order is None else ordered, best_order,
      labels(best_placement, best_fusion)))
  if own is not None:
    out.append(FoundPlacement(
        f"policy greedy (step {step})", own.greedy_placement,
        own.greedy_runtime_s,
        table if own.greedy_order is None else ordered, own.greedy_order,
        labels(own.greedy_placement, own.greedy_fusion)))
    if own.best_sample is not None:
      out.append(FoundPlacement(
          f"policy sample (best of {own.num_samples}, step {step})",
          own.best_sample, own.sampled_best_s,
          table if own.best_sample_order is None else ordered,
          own.best_sample_order,
          labels(own.best_sample, own.best_sample_fusion)))
  if refined is not None:
    out.append(FoundPlacement("policy refined per op: greedy",
                              refined.greedy_placement,
                              refined.greedy_runtime_s, table))
    out.append(FoundPlacement("policy refined per op: best sample",
                              refined.best_sample,
                              refined.best_sample_runtime_s, table))
  return out


def _verdict(own, refined, setup) -> str:
  """The run's one-line verdict: the refined greedy placement if there is
  one, else the policy's."""
  if refined is None:
    return policy_verdict(own.greedy_runtime_s,
                          reports.classical_runtimes(setup))
  start = ("" if refined.start_name == REFINE_START_GIVEN else
           f" from {refine_start_label(refined)}")
  return policy_verdict(refined.greedy_runtime_s,
                        reports.classical_runtimes(setup),
                        who=f"the policy refined per op{start} (greedy, no "
                        "search)")
