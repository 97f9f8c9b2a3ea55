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
from typing import Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import ConfigError
from gplace.graphs.graph import Graph
from gplace.rl import data
from gplace.rl import distributed
from gplace.rl import policy_file
from gplace.rl import scoring
from gplace.rl import run_outputs
from gplace.rl import workdir as workdir_lib
from gplace.rl.checkpoint import Checkpointer, saved_steps
from gplace.rl.checks import (check_arguments, check_run,
                              num_parallel_devices)
from gplace.rl.evaluation import evaluate_policy
from gplace.rl.final import (DIVERGED, TrainResult, final_result,
                             refine_own_placements)
from gplace.rl.grouping import num_simulated_nodes
from gplace.rl.loop import (HostRewards, ProgressFn, Schedule,
                            cached_step_fns, run_loop)
from gplace.rl.policy_fns import policy_fns
from gplace.rl.rewards import dispatch_reward, simulator_reward
from gplace.rl.settings import (DEFAULT_POLICY, Experiment, PolicySettings,
                                TrainSettings)
from gplace.rl.state import (TrainState, create_optimizer,
                             create_train_state)
from gplace.rl.warm_start import (WarmStart, ordered_warm_start_targets,
                                  warm_start_targets)
from gplace.sim.simulator import DEFAULT_SCHEDULE
from gplace.sim.topology import Topology
from gplace.workloads import Workload


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
  every process calls it with the same arguments: the samples of in-step
  rewards are split over all devices of all processes, gradients averaged
  over them; host-simulated rewards are scored each process its share
  (:func:`gplace.rl.scoring.shared_scored_rollout`); process 0 alone writes
  ``workdir`` (and holds its lock), logs and draws the progress bar; every
  process returns the same result. If another process dies, this one
  prints a ``ProcessLostError`` line and exits with status 75
  (:func:`gplace.processes.exit_when_a_peer_is_lost`).

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
  run_workdir = workdir
  if not distributed.is_primary():
    # Process 0 alone writes, checkpoints, logs and draws the bar; the
    # others train their share of the samples and return the same result.
    workdir, log = None, distributed.silent
    settings = settings.replace(progress_bar=False)
  # If another process dies, this one stops with a line saying so (after
  # the workdir's lock is released and pending checkpoints are written).
  with distributed.exit_when_a_peer_is_lost(
      functools.partial(checkpoints_left, run_workdir)):
    with distributed.entered_on_primary(workdir_lib.locked(workdir, log)):
      return _train(graphs, topology, policy, settings, workdir=workdir,
                    progress=progress, stop_after_step=stop_after_step,
                    log=log)


def checkpoints_left(workdir: Optional[str]) -> str:
  """What a restart resumes from, for the line of a process whose peer
  died: process 0 reads its checkpoints (every save finished), the others
  name process 0's workdir."""
  if workdir is None:
    return "this run keeps no checkpoints (no workdir); a restart starts over"
  if not distributed.is_primary():
    return (f"process 0 keeps the checkpoints in {workdir} (a restart "
            "resumes from its newest intact one)")
  steps = saved_steps(os.path.join(workdir, "checkpoints"))
  if not steps:
    return f"no checkpoint was saved in {workdir} yet; a restart starts over"
  return (f"the last checkpoint, step {steps[-1]} in {workdir}, is intact "
          "(a restart resumes from it)")




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
  result = final_result(settings, workdir, setups, topology, loop, outputs,
                        finished, own, log, refined,
                        rescore=None if same_schedule else reward_fns(),
                        diverged=diverged)
  if workdir is not None:
    for line in run_outputs.output_lines(workdir):
      log(line)
  return result


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
