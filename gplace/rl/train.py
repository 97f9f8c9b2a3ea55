"""Training a placement policy: config in, placements and reports out.

Where this sits: ``experiments/run.py`` parses flags and calls
:func:`train_and_evaluate`, which reads like a flax ``train.py``:

1. :func:`gplace.rl.validation.validate_config` rejects values that cannot
   work before anything is traced or compiled; :func:`prepare_workdir`
   refuses a workdir whose checkpoints come from another config (or, with
   ``config.train.resume=False``, deletes them) and writes ``config.json``.
2. :mod:`gplace.rl.data` (host side): capture the workload(s), score every
   baseline, pick the warm-start targets (:mod:`gplace.rl.warm_start`), pad
   the graphs into one batch.
3. :func:`restore_or_init`: the policy, optimizer and
   :class:`~gplace.rl.state.TrainState` (:mod:`gplace.rl.state`), restored
   from the newest intact checkpoint in the workdir if there is one.
4. :func:`run_loop`, a Python loop over jitted chunks
   (:func:`gplace.rl.chunks.make_step_fns`: a ``lax.scan`` of warm-start or
   RL steps from :mod:`gplace.rl.update` under ``jax.pmap``; with real
   measurements, ``config.rl.reward = "executor"``, sampling and update stay
   jitted and the measurement runs on the host between them). After each
   chunk the periodic actions (:mod:`gplace.rl.run_outputs`):
   ``metrics.jsonl``, ``best_placement.json``, the progress bar, a
   ``progress_fn`` hook, and every ``config.train.checkpoint_every`` steps an
   orbax checkpoint, ``results.json`` and the learning curve. Resuming gives
   the same results as an uninterrupted run: the RNG is in the state and the
   chunk schedule depends only on the step.
5. The final report: the policy's own greedy placement and fresh samples,
   scored without search or best-ever bookkeeping
   (:mod:`gplace.rl.evaluation`); with ``config.refine.evaluations`` that
   greedy placement refined op by op by a second, per-op policy trained on
   single-op moves (:mod:`gplace.rl.refine`), reported in rows of its own;
   then (:mod:`gplace.rl.run_outputs`, :mod:`gplace.rl.reports`) learning
   curve, results, the table of those rows and the best placement found vs
   every baseline and the lower bound, and one line per output file saying
   where it went.

This module holds the set-up of a run (state, warm start, rewards), the loop
and the final result; the compiled chunks and their schedule are in
:mod:`gplace.rl.chunks`.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.rl import checkpoint
from gplace.rl import data
from gplace.rl import policy_file
from gplace.rl import reports
from gplace.rl import reward_setup
from gplace.rl import run_outputs
from gplace.rl.checkpoint import Checkpointer
from gplace.rl.chunks import (HostRewards, Schedule, StepFns,
                              _cached_step_fns, replicate, run_chunk,
                              unreplicate)
from gplace.rl.evaluation import evaluate_policy, policy_verdict
from gplace.rl.grouping import num_simulated_nodes
from gplace.rl.policy_fns import policy_fns
from gplace.rl.refine import (START_GIVEN as REFINE_START_GIVEN,
                              RefineResult, refine_placement)
from gplace.rl.resume import check_resume, config_record
from gplace.rl.rewards import dispatch_reward, simulator_reward
from gplace.rl.state import (TrainState, create_hparams, create_optimizer,
                             create_policy, create_train_state,
                             fresh_adam_moments)
from gplace.rl.validation import (check_reward_topology, num_parallel_devices,
                                  validate_config)
from gplace.rl.warm_start import (WarmStart, ordered_warm_start_targets,
                                  warm_start_targets)
from gplace.sim.simulator import DEFAULT_SCHEDULE

# Called after every chunk with the step and its last metrics; returning True
# ends the run there (it is then evaluated and reported as finished).
ProgressFn = Callable[[int, dict], Optional[bool]]


class TrainResult(NamedTuple):
  """What :func:`train_and_evaluate` returns.

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
  """

  state: Any
  best_placements: list
  best_runtime_s: list
  table: list
  steps_per_second: float
  policy: list = []
  refined: list = []


def restore_or_init(config, batch, policy, optimizer,
                    warm: Optional[WarmStart], checkpointer: Checkpointer,
                    log: Callable[[str], None]) -> TrainState:
  """The newest intact checkpoint of the workdir (corrupted newer ones are
  skipped, see :meth:`Checkpointer.restore_latest`), or a fresh state whose
  best placements are the warm-start baselines (so the result is never worse
  than them)."""
  state = create_train_state(config, batch, policy, optimizer)
  init_path = str(config.get("policy_init", "") or "")
  if init_path:  # fine-tuning: start from a trained policy's parameters
    params = policy_file.params_like(policy_file.load_policy(init_path),
                                     state.params)
    state = state.replace(params=jax.tree.map(jnp.asarray, params),
                          opt_state=optimizer.init(params))
    log(f"[gplace] policy initialised from {init_path}")
  if warm is not None:
    state = state.replace(best_runtime_s=jnp.asarray(warm.runtime_s),
                          best_placement=jnp.asarray(warm.placements))
    if state.best_priority is not None and warm.priority is not None:
      state = state.replace(best_priority=jnp.asarray(warm.priority))
  restored = checkpointer.restore_latest(state, log=log)
  if restored is not None:
    state = restored
    log(f"[gplace] resumed from step {int(state.step)} in "
        f"{os.path.dirname(checkpointer.directory)}")
  return state


def prepare_workdir(config, workdir: str, log: Callable[[str], None]) -> str:
  """Decides what becomes of a run already in ``workdir``, then writes
  ``config.json``; returns the checkpoint directory.

  With checkpoints there, ``config.train.resume=False`` deletes them (the
  run starts over); otherwise the run resumes only if the saved
  ``config.json`` matches ``config`` (:func:`check_resume`). A refused run
  leaves ``config.json`` as it was.

  Raises:
    ConfigError: the saved config differs in a field that changes results.
  """
  directory = os.path.join(workdir, run_outputs.CHECKPOINT_DIR)
  steps = checkpoint.saved_steps(directory)
  if steps and not config.train.get("resume", True):
    checkpoint.discard(directory)
    log(f"[gplace] train.resume=False: deleted the checkpoints of steps "
        f"{', '.join(map(str, steps))} in {directory}; starting over")
  elif steps:
    check_resume(config, workdir, steps[-1])
  run_outputs.write_json(os.path.join(workdir, run_outputs.CONFIG_FILE),
                         config_record(config))
  return directory


def warm_start(config, setups, batch, log, *, topology=None,
               policy=None) -> Optional[WarmStart]:
  """The warm-start targets (None for ``config.warm_start.baseline ==
  "none"``), logged per graph. An ordering ``policy`` (DOPPLER) imitates
  the baseline's placement in its best order
  (:func:`gplace.rl.warm_start.ordered_warm_start_targets`)."""
  if config.warm_start.baseline == "none":
    return None
  plan_actions = (policy_fns(policy).plan_actions if policy is not None
                  else None)
  if plan_actions is not None:
    warm = ordered_warm_start_targets(
        setups, config.warm_start.baseline, batch, topology, plan_actions)
  else:
    warm = warm_start_targets(setups, config.warm_start.baseline,
                              num_simulated_nodes(batch), batch)
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


def host_rewards_for(config, setups, topology) -> Optional[HostRewards]:
  """Host rewards: measured (``config.rl.reward == "executor"``) or
  simulated by :func:`gplace.simulate` under its default schedule
  (``"simulator_host"``: the schedule the baselines and the final table are
  scored with); None for ``"simulator"`` and ``"simulator_dynamic"`` (scored
  inside the jitted step, in node-id order or in the default schedule)."""
  if config.rl.reward not in ("executor", "simulator_host"):
    return None
  return HostRewards(reward_setup.host_reward_fns(setups, topology, config),
                     np.asarray([s.graph.n_nodes for s in setups]))


# -- the loop -----------------------------------------------------------------


def train_and_evaluate(config, workdir: str, *,
                       progress_fn: Optional[ProgressFn] = None,
                       stop_after_step: Optional[int] = None,
                       log: Callable[[str], None] = print) -> TrainResult:
  """Trains a policy as ``config`` says; writes everything to ``workdir``.

  Args:
    config: see ``experiments/configs/quickstart.py`` for every field.
    workdir: output directory (``checkpoints/``, ``config.json``,
      ``metrics.jsonl``, ``best_placement.json``, and at every checkpoint
      ``results.json`` and ``learning_curve.png``; the last lines logged say
      where each went). A run with checkpoints there resumes from the newest
      intact one if its ``config.json`` matches ``config`` (fields that may
      differ: :data:`gplace.rl.resume.FREE_ON_RESUME`);
      ``config.train.resume=False`` starts over instead.
    progress_fn: called as ``progress_fn(step, metrics)`` after every chunk;
      if it returns True the run ends there (after checkpointing when due)
      and is evaluated and reported as finished at that step.
    stop_after_step: stop (after checkpointing) once this step is reached,
      without the final evaluation: simulates a preempted run in tests.
    log: where lines of text go.

  Raises:
    ConfigError: a config value that cannot work, or a workdir holding a
      run with another config (before any compile).
    CheckpointError: the workdir's checkpoints are all corrupted.
  """
  run_start, workdir = time.time(), os.path.abspath(workdir)
  validate_config(config, workdir)
  checkpoint_dir = prepare_workdir(config, workdir, log)
  topology, parallel = data.make_topology(config), num_parallel_devices(config)
  check_reward_topology(config, topology)
  setups = data.setup_graphs(config, topology, data.workload_names(config),
                             log=log)
  host_rewards = host_rewards_for(config, setups, topology)
  dynamic = config.rl.reward == "simulator_dynamic"
  batch = data.make_batch(setups, topology, with_problems=host_rewards is None,
                          schedule="dynamic" if dynamic else "static")
  policy = create_policy(config, topology.n_devices)
  warm = warm_start(config, setups, batch, log, topology=topology,
                    policy=policy)
  schedule = Schedule.from_config(config, warm_start=warm is not None)
  optimizer = create_optimizer(config)
  fns = _cached_step_fns(policy, create_hparams(config), optimizer, parallel,
                         float(config.warm_start.get("label_smoothing", 0.0)),
                         dispatch_reward if dynamic else simulator_reward)
  target = jnp.asarray(warm.targets if warm is not None else np.zeros(
      batch.graphs.nodes["mask"].shape, np.int32))  # [B, N_pad]
  num_nodes = [s.graph.n_nodes for s in setups]

  # RL's samples may be simulated in a cheaper schedule than the table's.
  same_schedule = all(reward_setup.reward_schedule(config, s.graph.n_nodes)
                      == DEFAULT_SCHEDULE for s in setups)

  @functools.lru_cache(maxsize=1)
  def reward_fns():
    """One scorer per graph, for the policy's own placements: the default
    schedule, as the baselines, whatever schedule RL trains in."""
    if host_rewards is not None and same_schedule:
      return host_rewards.reward_fns
    return [reward_setup.make_scorer(s.graph, s.fn, s.args, topology,
                                     config, costs=s.costs) for s in setups]

  def greedy_fn(state):
    """``[B]`` runtimes of the policy's greedy placements (no samples)."""
    return [e.greedy_runtime_s for e in evaluate_policy(
        state.params, batch, apply_fn=policy.apply, reward_fns=reward_fns(),
        num_nodes=num_nodes, num_samples=0, seed=int(config.seed))]
  # Closing both (also on errors) finishes pending asynchronous saves.
  with Checkpointer(checkpoint_dir,
                    max_to_keep=config.train.max_to_keep) as checkpointer:
    state = restore_or_init(config, batch, policy, optimizer, warm,
                            checkpointer, log)
    with run_outputs.RunOutputs(workdir, setups, topology,
                                state.best_runtime_s,
                                total_steps=schedule.total_steps,
                                first_step=int(state.step),
                                progress_bar=config.progress_bar) as outputs:
      loop = run_loop(fns, state, batch, target, schedule, outputs,
                      checkpointer, parallel=parallel,
                      host_rewards=host_rewards, progress_fn=progress_fn,
                      stop_after_step=stop_after_step, run_start=run_start,
                      fresh_optimizer=bool(config.rl.get("fresh_optimizer",
                                                         False)),
                      greedy_fn=greedy_fn if schedule.greedy_every else None)
  finished = loop.step >= schedule.total_steps or stop_after_step is None
  own, refined = None, []
  if finished:
    own = evaluate_policy(
        loop.state.params, batch, apply_fn=policy.apply,
        reward_fns=reward_fns(), num_nodes=num_nodes,
        num_samples=int(config.train.get("eval_samples", 64)),
        seed=int(config.seed))
    refined = refine_own_placements(config, own, reward_fns(), setups,
                                    topology.n_devices, log)
  result = _final_result(config, workdir, setups, topology, loop, outputs,
                         finished, own, log, refined,
                         rescore=None if same_schedule else reward_fns())
  for line in run_outputs.output_lines(workdir):
    log(line)
  return result


def refine_own_placements(config, own, reward_fns, setups, num_devices: int,
                          log) -> list[RefineResult]:
  """The second stage (``config.refine``, :mod:`gplace.rl.refine`): per
  graph, a per-op policy trained from the policy's greedy placement (with
  ``config.refine.start = "best"``: from the fastest of it and every
  baseline's placement under the run's reward); empty with
  ``config.refine.evaluations = 0`` (or no such section)."""
  settings = config.get("refine")
  if settings is None or int(settings.evaluations) <= 0:
    return []
  from_best = settings.get("start", "policy") == "best"
  out = []
  for evaluation, reward_fn, setup in zip(own, reward_fns, setups):
    alternatives = ({name: p for name, p in setup.baselines.items()
                     if np.isfinite(setup.baseline_runtime_s.get(name,
                                                                 np.inf))}
                    if from_best else None)
    result = refine_placement(
        reward_fn, evaluation.greedy_placement, num_devices,
        evaluations=int(settings.evaluations),
        num_samples=int(settings.num_samples),
        max_moves=int(settings.max_moves),
        learning_rate=float(settings.learning_rate),
        init_logit=float(settings.init_logit),
        allowed=setup.graph.allowed_devices, seed=int(config.seed),
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


def best_found_name(config) -> str:
  """The table's name for the run's best found placement: it includes
  search (``rl.mutate_best > 0``), or the warm-start seed, or is samples
  only."""
  if float(config.rl.get("mutate_best", 0.0)) > 0:
    return reports.BEST_FOUND_SEARCH_ROW
  if config.warm_start.baseline != "none":
    return reports.BEST_FOUND_SEEDED_ROW
  return reports.BEST_FOUND_ROW


class LoopResult(NamedTuple):
  """Where :func:`run_loop` stopped: the (unreplicated) state, its step, and
  the RL steps per second of the last chunk."""
  state: Any
  step: int
  steps_per_second: float


def run_loop(fns: StepFns, state, batch, target, schedule: Schedule,
             outputs: run_outputs.RunOutputs, checkpointer: Checkpointer, *,
             parallel: int, host_rewards: Optional[HostRewards],
             progress_fn: Optional[ProgressFn],
             stop_after_step: Optional[int], run_start: float,
             fresh_optimizer: bool = False,
             greedy_fn: Optional[Callable[[Any], Sequence[float]]] = None
             ) -> LoopResult:
  """Chunks from ``state.step`` to ``schedule.total_steps`` (or
  ``stop_after_step``); after each the outputs, the ``progress_fn`` hook, and
  at checkpoint steps a checkpoint, ``results.json`` and the curve. With
  ``fresh_optimizer``, Adam's moments are reset when RL starts after a warm
  start (:func:`~gplace.rl.state.fresh_adam_moments`). With ``greedy_fn``
  (``state -> [B]`` runtimes of the policy's greedy placements), it is
  called at the steps :meth:`Schedule.greedy_due` names, and its runtimes
  go to ``metrics.jsonl``; those scorings are not train samples."""
  state_dev = replicate(state, parallel)
  batch_dev = jax.tree.map(jnp.asarray, batch)
  step, steps_per_second = int(state.step), 0.0
  while step < schedule.total_steps:
    length, phase = schedule.next_chunk(step), schedule.phase(step)
    if fresh_optimizer and step == schedule.warm_steps > 0:
      # Depends only on the step: a run resumed here resets as well.
      state = unreplicate(state_dev, parallel)
      state_dev = replicate(state.replace(
          opt_state=fresh_adam_moments(state.opt_state)), parallel)
    t0 = time.time()
    state_dev, metrics = run_chunk(fns, state_dev, batch_dev, target, length,
                                   warm_start=phase == "warm_start",
                                   host_rewards=host_rewards)
    metrics = jax.tree.map(np.asarray, unreplicate(metrics, parallel))
    jax.block_until_ready(state_dev)
    elapsed = time.time() - t0
    if phase == "rl":
      steps_per_second = length / max(elapsed, 1e-9)
    state = unreplicate(state_dev, parallel)
    last = outputs.after_chunk(step, phase, metrics, state,
                               start_s=t0 - run_start, elapsed_s=elapsed)
    step += length
    if greedy_fn is not None and schedule.greedy_due(step):
      outputs.after_greedy(step, greedy_fn(state),
                           start_s=time.time() - run_start)
    stop = progress_fn is not None and bool(progress_fn(step, last))
    if schedule.checkpoint_due(step):
      checkpointer.save(step, state)
      outputs.at_checkpoint(step, state)
    if stop or (stop_after_step is not None and step >= stop_after_step):
      break
  return LoopResult(state, step, steps_per_second)


def _final_result(config, workdir, setups, topology, loop: LoopResult,
                  outputs, finished, own, log, refined=(),
                  rescore=None) -> TrainResult:
  """Writes the end-of-run files and collects the :class:`TrainResult`;
  ``own``: the policy's own placements (:func:`evaluate_policy`) of a
  finished run, else None; ``refined``: their per-op refinements (one per
  graph, or empty); ``rescore``: per graph a scorer in the table's schedule
  when RL trained in another (``config.rl.reward_schedule``), so the best
  sampled placement is reported in the same schedule as every other row."""
  state = loop.state
  outputs.ensure_best_placement(state)
  best_runtime = [float(x) for x in np.asarray(state.best_runtime_s)]
  best_placements = [np.asarray(state.best_placement)[b, :s.graph.n_nodes]
                     for b, s in enumerate(setups)]
  if rescore is not None:
    best_runtime = [float(np.asarray(fn(p[None]))[0]) if np.isfinite(r)
                    else r
                    for fn, p, r in zip(rescore, best_placements,
                                        best_runtime)]
    outputs.best.write(int(state.step), state.best_placement,
                       np.asarray(best_runtime),
                       getattr(state, "best_priority", None))
  tables = []
  if finished:
    refined = list(refined) or [None] * len(own)
    tables = run_outputs.write_final_report(
        workdir, setups, best_runtime, data.workload_names(config), topology,
        log=log if config.print_table else None, step=loop.step,
        policy_rows=[e.rows() + (r.rows() if r else [])
                     for e, r in zip(own, refined)],
        policy_records=[dict(e.record(), **(r.record() if r else {}))
                        for e, r in zip(own, refined)],
        verdicts=[_verdict(e, r, s) for e, r, s in zip(own, refined, setups)],
        best_found_name=best_found_name(config))
  return TrainResult(state, best_placements, best_runtime, tables,
                     loop.steps_per_second, own or [],
                     [r for r in refined or () if r is not None])


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
