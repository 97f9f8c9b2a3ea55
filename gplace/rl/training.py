"""Training a placement policy: one call from graphs to a trained policy.

``train(graphs, topology, policy, settings, *, workdir=None,
progress=None) -> TrainResult`` (as brax's ``ppo.train``): checks, batches,
the jitted loop, then the policy's own placements against every baseline;
with a ``workdir`` it checkpoints, resumes and writes its outputs.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import ConfigError
from gplace.graphs.graph import Graph
from gplace.rl import data
from gplace.rl import distributed
from gplace.rl import policy_file
from gplace.rl import reports
from gplace.rl import scoring
from gplace.rl import run_outputs
from gplace.rl import workdir as workdir_lib
from gplace.rl.checkpoint import Checkpointer
from gplace.rl.checks import (check_arguments, check_run,
                              num_parallel_devices)
from gplace.rl.evaluation import evaluate_policy, policy_verdict
from gplace.rl.grouping import num_simulated_nodes
from gplace.rl.loop import (HostRewards, LoopResult, ProgressFn, Schedule,
                            cached_step_fns, run_loop)
from gplace.rl.policy_fns import policy_fns
from gplace.rl.refine import (START_GIVEN as REFINE_START_GIVEN,
                              RefineResult, refine_placement)
from gplace.rl.rewards import dispatch_reward, simulator_reward
from gplace.rl.settings import (DEFAULT_POLICY, Experiment, PolicySettings,
                                TrainSettings)
from gplace.rl.state import (TrainState, create_optimizer,
                             create_train_state)
from gplace.rl.types import GraphSetup
from gplace.rl.warm_start import (WarmStart, ordered_warm_start_targets,
                                  warm_start_targets)
from gplace.sim.simulator import DEFAULT_SCHEDULE
from gplace.sim.topology import Topology
from gplace.workloads import Workload


class TrainResult(NamedTuple):
  """What :func:`train` returns.

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
      :class:`~gplace.rl.run_outputs.FoundPlacement`): what
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


def as_workloads(graphs: Sequence[Union[Graph, Workload]]) -> list[Workload]:
  """Graphs as :class:`~gplace.workloads.Workload` s (a bare graph: no
  function to run, the topology's roofline costs).

  Raises:
    ConfigError: an item is neither.
  """
  if isinstance(graphs, (Graph, Workload)):
    graphs = [graphs]
  out = []
  for i, item in enumerate(graphs):
    if isinstance(item, Workload):
      out.append(item)
    elif isinstance(item, Graph):
      out.append(Workload(item.name, item))
    else:
      raise ConfigError(
          f"graphs[{i}] is a {type(item).__name__}; pass gplace.Graph s or "
          "gplace.workloads.Workload s (gplace.workloads.load).")
  return out


def restore_or_init(settings: TrainSettings, batch, policy, optimizer,
                    warm: Optional[WarmStart],
                    checkpointer: Optional[Checkpointer],
                    log: Callable[[str], None]) -> TrainState:
  """The newest intact checkpoint of the workdir (corrupted newer ones are
  skipped, see :meth:`Checkpointer.restore_latest`), or a fresh state whose
  best placements are the warm-start baselines (so the result is never worse
  than them)."""
  state = create_train_state(settings.seed, batch, policy, optimizer)
  if settings.policy_init:  # fine-tuning: start from a trained policy
    params = policy_file.params_like(
        policy_file.load_policy(settings.policy_init), state.params)
    state = state.replace(params=jax.tree.map(jnp.asarray, params),
                          opt_state=optimizer.init(params))
    log(f"[gplace] policy initialised from {settings.policy_init}")
  if warm is not None:
    state = state.replace(best_runtime_s=jnp.asarray(warm.runtime_s),
                          best_placement=jnp.asarray(warm.placements))
    if state.best_priority is not None and warm.priority is not None:
      state = state.replace(best_priority=jnp.asarray(warm.priority))
  if checkpointer is None:
    return state
  restored = checkpointer.restore_latest(state, log=log)
  if restored is not None:
    state = restored
    log(f"[gplace] resumed from step {int(state.step)} in "
        f"{os.path.dirname(checkpointer.directory)}")
  return state


def warm_start(settings: TrainSettings, setups, batch, log, *,
               topology=None, policy=None) -> Optional[WarmStart]:
  """The warm-start targets (None without a warm start), logged per graph.
  An ordering ``policy`` (DOPPLER) imitates the baseline's placement in its
  best order (:func:`gplace.rl.warm_start.ordered_warm_start_targets`)."""
  if not settings.warm_start.enabled:
    return None
  baseline = settings.warm_start.baseline
  plan_actions = (policy_fns(policy).plan_actions if policy is not None
                  else None)
  if plan_actions is not None:
    warm = ordered_warm_start_targets(setups, baseline, batch, topology,
                                      plan_actions)
  else:
    warm = warm_start_targets(setups, baseline, num_simulated_nodes(batch),
                              batch)
  for b, (s, name, runtime) in enumerate(zip(setups, warm.baseline_names,
                                             warm.runtime_s)):
    if warm.priority is None:
      log(f"[gplace] {s.name}: warm start from {name!r} "
          f"({runtime * 1e3:.4f} ms)")
    else:
      log(f"[gplace] {s.name}: warm start from {name!r} in its best order "
          f"({runtime * 1e3:.4f} ms); its actions as the policy takes them "
          f"run {warm.target_runtime_s[b] * 1e3:.4f} ms")
  return warm


def host_rewards_for(settings: TrainSettings, setups,
                     topology) -> Optional[HostRewards]:
  """Host rewards (measured, or simulated by :func:`gplace.simulate`); None
  for rewards scored inside the jitted step."""
  if settings.rl.in_step:
    return None
  return HostRewards(scoring.host_reward_fns(setups, topology, settings),
                     np.asarray([s.graph.n_nodes for s in setups]))


def train(graphs: Sequence[Union[Graph, Workload]], topology: Topology,
          policy: PolicySettings = DEFAULT_POLICY,
          settings: TrainSettings = TrainSettings(), *,
          workdir: Optional[str] = None,
          progress: Optional[ProgressFn] = None,
          stop_after_step: Optional[int] = None,
          log: Callable[[str], None] = print) -> TrainResult:
  """Trains ``policy`` to place ``graphs`` on ``topology``.

  In a multi-process run (:func:`gplace.rl.distributed.initialize` first)
  every process calls it with the same arguments: the samples are split
  over all devices of all processes, gradients averaged over them; process
  0 alone writes ``workdir`` (and holds its lock), logs and draws the
  progress bar; every process returns the same result.

  Args:
    graphs: ``B`` graphs (``gplace.Graph``, or
      :class:`~gplace.workloads.Workload` with a runnable function for
      measured rewards, or measured costs), trained on as one batch.
    topology: the devices.
    policy: the policy family and its hyperparameters.
    settings: everything else (:class:`~gplace.rl.settings.TrainSettings`).
    workdir: where checkpoints and outputs go (``checkpoints/``,
      ``config.json``, ``metrics.jsonl``, ``best_placement.json``,
      ``results.json``, ``learning_curve.png``); a run with checkpoints
      there resumes from the newest intact one if its ``config.json``
      matches (or starts over with ``train.resume=False``). None: nothing is
      written and nothing resumes.
    progress: called as ``progress(step, metrics)`` after every chunk; if it
      returns True the run ends there (after checkpointing when due) and is
      evaluated and reported as finished at that step (across processes:
      when process 0's does; pass one on every process or on none).
    stop_after_step: stop (after checkpointing) once this step is reached,
      without the final evaluation: simulates a preempted run in tests.
    log: where lines of text go.

  Raises:
    ConfigError: an argument of the wrong type (settings an RLSettings,
      a fractional stop_after_step, ...), settings that cannot work with
      these graphs, topology or policy, or a workdir holding another run
      (before any compile).
    TopologyError: ``topology`` is not a :class:`~gplace.Topology`.
    WorkdirBusyError: another process is running in ``workdir`` (its
      pid, host and start are named); the run holds ``workdir/run.lock``
      until it returns, and takes over one a crashed run left.
    CheckpointError: the workdir's checkpoints are all corrupted.
    DistributedError: on the other processes of a multi-process run, when
      process 0 failed before training.
  """
  check_arguments("gplace.rl.train", graphs, topology, policy, settings,
                  workdir=workdir, log=log, progress=progress,
                  stop_after_step=stop_after_step)
  if workdir is not None:
    workdir = os.path.abspath(workdir)
  if not distributed.is_primary():
    # Process 0 alone writes, checkpoints, logs and draws the bar; the
    # others train their share of the samples and return the same result.
    workdir, log = None, distributed.silent
    settings = settings.replace(progress_bar=False)
  with distributed.entered_on_primary(workdir_lib.locked(workdir, log)):
    return _train(graphs, topology, policy, settings, workdir=workdir,
                  progress=progress, stop_after_step=stop_after_step,
                  log=log)




def _train(graphs, topology, policy, settings, *, workdir, progress,
           stop_after_step, log) -> TrainResult:
  """:func:`train` with ``workdir`` (absolute, or None) locked."""
  run_start = time.time()
  loaded = as_workloads(graphs)
  module = check_run(loaded, topology, policy, settings)
  parallel = num_parallel_devices(settings)
  # Every process takes part (None elsewhere): a failure on process 0 stops
  # all of them here rather than leaving them in the next collective.
  checkpoint_dir = distributed.first_on_primary(
      lambda: workdir and workdir_lib.prepare_workdir(
          workdir, workdir_lib.run_record(settings, policy, topology,
                                          loaded), settings, log))
  setups = data.setup_graphs(loaded, topology, settings, log=log)
  host_rewards = host_rewards_for(settings, setups, topology)
  dynamic = settings.rl.reward == "simulator_dynamic"
  batch = data.make_batch(setups, topology, with_problems=host_rewards is None,
                          schedule="dynamic" if dynamic else "static")
  warm = warm_start(settings, setups, batch, log, topology=topology,
                    policy=module)
  schedule = Schedule.from_settings(settings, warm_start=warm is not None)
  optimizer = create_optimizer(settings)
  fns = cached_step_fns(module, settings.rl, optimizer, parallel,
                        float(settings.warm_start.label_smoothing),
                        dispatch_reward if dynamic else simulator_reward)
  target = jnp.asarray(warm.targets if warm is not None else np.zeros(
      batch.graphs.nodes["mask"].shape, np.int32))  # [B, N_pad]
  num_nodes = [s.graph.n_nodes for s in setups]

  # RL's samples may be simulated in another schedule than the table's (a
  # cheaper one, or node-id order inside the jitted step); the run's best
  # is then scored again in the table's.
  schedules = [scoring.sample_schedule(settings.rl, s.graph.n_nodes)
               for s in setups]
  same_schedule = all(schedule in (DEFAULT_SCHEDULE, scoring.MEASURED)
                      for schedule in schedules)

  @functools.lru_cache(maxsize=1)
  def reward_fns():
    """One scorer per graph, for the policy's own placements: the default
    schedule, as the baselines, whatever schedule RL trains in."""
    if host_rewards is not None and same_schedule:
      return host_rewards.reward_fns
    return [scoring.make_scorer(s.graph, s.fn, s.args, topology,
                                     settings, costs=s.costs)
            for s in setups]

  def greedy_fn(state):
    """``[B]`` runtimes of the policy's greedy placements (no samples)."""
    return [e.greedy_runtime_s for e in evaluate_policy(
        state.params, batch, apply_fn=module.apply, reward_fns=reward_fns(),
        num_nodes=num_nodes, num_samples=0, seed=settings.seed)]
  checkpointer = distributed.first_on_primary(
      lambda: checkpoint_dir and Checkpointer(
          checkpoint_dir, max_to_keep=settings.train.max_to_keep))
  try:
    # Process 0 restores (or starts) the state every process continues.
    state = distributed.broadcast(distributed.first_on_primary(
        lambda: restore_or_init(settings, batch, module, optimizer, warm,
                                checkpointer, log),
        default=lambda: restore_or_init(settings, batch, module, optimizer,
                                        warm, None, log)))
    with run_outputs.RunOutputs(workdir, setups, topology,
                                state.best_runtime_s,
                                total_steps=schedule.total_steps,
                                first_step=int(state.step),
                                progress_bar=settings.progress_bar,
                                log=log, schedules=schedules) as outputs:
      loop = run_loop(fns, state, batch, target, schedule, outputs,
                      checkpointer, parallel=parallel,
                      host_rewards=host_rewards, progress_fn=progress,
                      stop_after_step=stop_after_step, run_start=run_start,
                      fresh_optimizer=settings.rl.fresh_optimizer,
                      greedy_fn=greedy_fn if schedule.greedy_every else None)
  finally:
    # Closing (also on errors) finishes pending asynchronous saves.
    if checkpointer is not None:
      checkpointer.close()
  finished = loop.step >= schedule.total_steps or stop_after_step is None
  diverged = not all(bool(np.all(np.isfinite(np.asarray(leaf))))
                     for leaf in jax.tree.leaves(loop.state.params))
  if diverged:  # its argmax is device 0 everywhere: a placement, not learnt
    log(f"[gplace] {DIVERGED} after step {loop.step}; lower "
        "--config.optimizer.learning_rate or --config.optimizer.grad_clip "
        "and start over")
  own, refined = None, []
  if finished:
    own = evaluate_policy(
        loop.state.params, batch, apply_fn=module.apply,
        reward_fns=reward_fns(), num_nodes=num_nodes,
        num_samples=settings.train.eval_samples, seed=settings.seed)
    refined = refine_own_placements(settings, own, reward_fns(), setups,
                                    topology.n_devices, log)
  result = _final_result(settings, workdir, setups, topology, loop, outputs,
                         finished, own, log, refined,
                         rescore=None if same_schedule else reward_fns(),
                         diverged=diverged)
  if workdir is not None:
    for line in run_outputs.output_lines(workdir):
      log(line)
  return result


#: The verdict of a run whose policy parameters are not finite.
DIVERGED = ("training diverged: the policy's parameters are NaN or "
            "infinite, so its own placements (every node on device 0) say "
            "nothing about what it learnt")


def train_experiment(experiment: Experiment, *,
                     workdir: Optional[str] = None,
                     log: Callable[[str], None] = print,
                     **kwargs) -> TrainResult:
  """:func:`train` on what an :class:`~gplace.rl.settings.Experiment`
  names (its graphs loaded by :func:`gplace.rl.data.load_experiment`);
  ``kwargs`` go to :func:`train`."""
  loaded, topology = data.load_experiment(experiment, log=log)
  return train(loaded, topology, experiment.policy, experiment.settings,
               workdir=workdir, log=log, **kwargs)


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


def _final_result(settings: TrainSettings, workdir: Optional[str],
                  setups: Sequence[GraphSetup], topology, loop: LoopResult,
                  outputs, finished, own, log, refined=(),
                  rescore=None, diverged=False) -> TrainResult:
  """Writes the end-of-run files and collects the :class:`TrainResult`;
  ``own``: the policy's own placements (:func:`evaluate_policy`) of a
  finished run, else None; ``refined``: their per-op refinements (one per
  graph, or empty); ``rescore``: per graph a scorer in the table's schedule
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
                 run_outputs.priority_order(
                     np.asarray(best_priority)[b, :s.graph.n_nodes])
                 for b, s in enumerate(setups)]
  if rescore is not None:
    best_runtime = [_rescore(fn, p, r, None if best_priority is None else
                             np.asarray(best_priority)[b, :len(p)])
                    for b, (fn, p, r) in enumerate(zip(
                        rescore, best_placements, best_runtime))]
    if outputs.best is not None:
      outputs.best.schedules = [run_outputs.DEFAULT_SCHEDULE] * len(setups)
      outputs.best.write(int(state.step), state.best_placement,
                         np.asarray(best_runtime), best_priority)
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
        best_found_name=best_found_name(settings))
  best_of_run = []
  if finished:
    found = [found_placements(
        settings, s, best_placements[b], best_runtime[b], best_orders[b],
        None if outputs.best is None else outputs.best.found_steps[b],
        own[b], refined[b], loop.step) for b, s in enumerate(setups)]
    best_of_run = [run_outputs.fastest(f) for f in found]
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


def _rescore(fn, placement, runtime_s, priority) -> float:
  """``placement``'s runtime under the table's scorer ``fn`` (with the
  policy's own ``priority``, if any); a failed one stays failed."""
  if not np.isfinite(runtime_s):
    return runtime_s
  if priority is None:
    return float(np.asarray(fn(placement[None]))[0])
  return float(np.asarray(fn(placement[None], priority=priority[None]))[0])


def found_placements(settings: TrainSettings, setup: GraphSetup,
                     best_placement, best_runtime_s: float, best_order,
                     found_step, own, refined, step: int
                     ) -> list[run_outputs.FoundPlacement]:
  """Every placement of one graph a finished run scored in the table's
  schedule, each with its runtime as ``results.json`` lists it: every
  baseline, each list scheduler's own plan, the best found in training,
  the policy's greedy placement and best fresh sample (``own``, a
  :class:`~gplace.rl.evaluation.PolicyEvaluation`) and the per-op
  refinement's (``refined``, or None). Baselines come first, so a
  training best that is still the warm-start seed is named by its
  baseline."""
  FoundPlacement = run_outputs.FoundPlacement  # pylint: disable=invalid-name
  table = (scoring.MEASURED if settings.rl.reward == "executor"
           else run_outputs.DEFAULT_SCHEDULE)
  ordered = run_outputs.ordered_schedule(table)
  out = [FoundPlacement(f"baseline: {name}", setup.baselines[name],
                        float(runtime), table)
         for name, runtime in setup.baseline_runtime_s.items()]
  for name, runtime in (setup.planned_runtime_s or {}).items():
    order = (setup.planned_orders or {}).get(name)
    if order is not None:
      out.append(FoundPlacement(f"baseline: {name} (own plan)",
                                setup.baselines[name], float(runtime),
                                run_outputs.STATIC_SCHEDULE, order))
  what = ("training samples and search" if settings.rl.mutate_best > 0
          else run_outputs.TRAINING_SOURCE)
  out.append(FoundPlacement(
      f"{what} (found by step {found_step})" if found_step else what,
      best_placement, float(best_runtime_s),
      table if best_order is None else ordered, best_order))
  if own is not None:
    out.append(FoundPlacement(
        f"policy greedy (step {step})", own.greedy_placement,
        own.greedy_runtime_s,
        table if own.greedy_order is None else ordered, own.greedy_order))
    if own.best_sample is not None:
      out.append(FoundPlacement(
          f"policy sample (best of {own.num_samples}, step {step})",
          own.best_sample, own.sampled_best_s,
          table if own.best_sample_order is None else ordered,
          own.best_sample_order))
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
