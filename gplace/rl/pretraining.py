"""Pretraining one policy over many graphs (GO's transfer setting; Zhou et
al. 2020, sec. 3.3 and 4.2).

``pretrain(graphs, topology, policy, settings, *, workdir)`` switches batches
of ``settings.pretrain.graphs_per_batch`` graphs every chunk, all padded to
one budget, with in-step rewards and per-batch baselines, and writes a
policy file. Why: ``docs/design.md``, "Pretraining, and why the shipped
policy is given a plan".
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import ConfigError
from gplace.graphs.graph import Graph
from gplace.policies import is_sequential
from gplace.rl import data
from gplace.rl import distributed
from gplace.rl import policy_file
from gplace.rl import workdir as workdir_lib
from gplace.rl.checkpoint import Checkpointer
from gplace.rl.checks import (check_arguments, check_run,
                              num_parallel_devices)
from gplace.rl.evaluation import evaluate_policy
from gplace.rl.grouping import num_simulated_nodes
from gplace.rl.loop import (Schedule, cached_step_fns, replicate, run_chunk,
                            unreplicate)
from gplace.rl.metrics import trim_metrics
from gplace.rl.reports import best_classical
from gplace.rl.scoring import make_scorer
from gplace.rl.rewards import dispatch_reward, simulator_reward
from gplace.rl.settings import (IN_STEP_REWARDS, PolicySettings,
                                TrainSettings)
from gplace.rl.state import create_optimizer, fresh_adam_moments
from gplace.rl.training import as_workloads, restore_or_init
from gplace.rl.warm_start import warm_start_targets
from gplace.sim.topology import Topology
from gplace.workloads import Workload

POLICY_FILE = "policy.npz"
METRICS_FILE = "pretrain_metrics.jsonl"


class PretrainResult(NamedTuple):
  """What :func:`pretrain` made.

  Attributes:
    params: the trained parameters.
    path: the policy file written (``workdir/policy.npz``).
    step: the last step.
    graphs: the training graphs' names.
    greedy_vs_best_baseline: per training graph, the policy's own greedy
      placement's runtime over the graph's best classical plan's, in any
      schedule (1.0 = as fast; empty for a run stopped early).
    wall_s: seconds, set-up included.
  """

  params: Any
  path: str
  step: int
  graphs: list
  greedy_vs_best_baseline: dict
  wall_s: float


def batch_members(num_graphs: int, graphs_per_batch: int) -> list[list[int]]:
  """Graph indices of every batch: consecutive runs of ``graphs_per_batch``;
  the last is filled up from the first graphs, so every batch has the same
  size (and shapes)."""
  size = min(graphs_per_batch, num_graphs)
  count = -(-num_graphs // size)
  return [[(b * size + i) % num_graphs for i in range(size)]
          for b in range(count)]


def batch_at(step: int, chunk_steps: int, num_batches: int) -> int:
  """The batch that trains at ``step``: the next one every chunk."""
  return (step // chunk_steps) % num_batches


def check_pretrain(policy: PolicySettings, settings: TrainSettings) -> None:
  """What pretraining needs beyond a training run's settings.

  Raises:
    ConfigError: no ``settings.pretrain``, a host reward, a graph-specific
      policy (``free_logits > 0``), or a sequential policy.
    DistributedError: a multi-process run (pretraining runs in one).
  """
  distributed.check_single_process("gplace.rl.pretrain")
  if settings.pretrain is None:
    raise ConfigError("Pretraining needs settings.pretrain "
                      "(PretrainSettings; experiments/configs/pretrain.py "
                      "sets config.pretrain).")
  if not settings.rl.in_step:
    raise ConfigError(f"config.rl.reward={settings.rl.reward!r}: pretraining "
                      f"scores inside the jitted step; use one of "
                      f"{IN_STEP_REWARDS}.")
  free_logits = policy.hparams.get("free_logits", 0)
  if free_logits:
    raise ConfigError(
        f"config.policy.free_logits={free_logits}: a per-position logit "
        "offset is specific to one graph and does not transfer; use "
        "--config.policy.free_logits=0 for a pretrained policy.")


def pretrain(graphs: Sequence[Union[Graph, Workload]], topology: Topology,
             policy: PolicySettings, settings: TrainSettings, *, workdir: str,
             log: Callable[[str], None] = print,
             stop_after_step: Optional[int] = None) -> PretrainResult:
  """Trains one policy over every graph of ``graphs``.

  Args:
    graphs: the training graphs (as for :func:`gplace.rl.train`).
    topology: the devices.
    policy: a one-shot policy family (e.g. ``"go"``), ``free_logits=0``.
    settings: training settings with ``pretrain`` set
      (:class:`~gplace.rl.settings.PretrainSettings`).
    workdir: output directory: ``checkpoints/`` (resumed as a training run
      is), ``config.json``, ``pretrain_metrics.jsonl`` (one line per chunk)
      and, at the end, ``policy.npz``.
    log: where lines of text go.
    stop_after_step: stop (after checkpointing) once this step is reached,
      without writing the policy file (simulates a preempted run).

  Raises:
    ConfigError: an argument of the wrong type
      (:func:`gplace.rl.checks.check_arguments`), or see
      :func:`check_pretrain` and :func:`gplace.rl.checks.check_run`.
    TopologyError: ``topology`` is not a :class:`~gplace.Topology`.
    WorkdirBusyError: another process is running in ``workdir``.
  """
  check_arguments("gplace.rl.pretrain", graphs, topology, policy, settings,
                  workdir=workdir, log=log, stop_after_step=stop_after_step,
                  workdir_required=True)
  workdir = os.path.abspath(workdir)
  with workdir_lib.locked(workdir, log):
    return _pretrain(graphs, topology, policy, settings, workdir=workdir,
                     log=log, stop_after_step=stop_after_step)


def _pretrain(graphs, topology, policy, settings, *, workdir, log,
              stop_after_step) -> PretrainResult:
  """:func:`pretrain` with ``workdir`` (absolute) locked."""
  began = time.time()
  check_pretrain(policy, settings)
  loaded = as_workloads(graphs)
  module = check_run(loaded, topology, policy, settings)
  if is_sequential(module):
    raise ConfigError(f"config.policy.name={policy.name!r}: pretraining "
                      "takes a one-shot policy (e.g. 'go').")
  parallel = num_parallel_devices(settings)
  checkpoint_dir = workdir_lib.prepare_workdir(
      workdir, workdir_lib.run_record(settings, policy, topology, loaded),
      settings, log)
  names = [w.name for w in loaded]
  setups = data.setup_graphs(loaded, topology, settings, log=log)
  dynamic = settings.rl.reward == "simulator_dynamic"
  members = batch_members(len(setups), settings.pretrain.graphs_per_batch)
  batches = [data.make_batch([setups[i] for i in m], topology,
                             schedule="dynamic" if dynamic else "static",
                             pad_like=setups) for m in members]
  targets = _warm_targets(settings, setups, members, batches)
  schedule = Schedule.from_settings(settings, warm_start=targets is not None)
  optimizer = create_optimizer(settings)
  width = settings.pretrain.dispatch_width
  fns = cached_step_fns(module, settings.rl, optimizer, parallel,
                        float(settings.warm_start.label_smoothing),
                        _dispatch_reward(width) if dynamic
                        else simulator_reward)
  reference = [float(np.mean([best_classical(setups[i])[1] for i in m]))
               for m in members]
  log(f"[gplace] pretraining on {len(setups)} graphs in {len(members)} "
      f"batches of {len(members[0])}, {schedule.total_steps} steps")
  chunk = settings.train.chunk_steps
  with Checkpointer(checkpoint_dir,
                    max_to_keep=settings.train.max_to_keep) as checkpointer:
    state = restore_or_init(settings, batches[0], module, optimizer, None,
                            checkpointer, log)
    blank, per_batch = state, {}
    current = batch_at(int(state.step), chunk, len(batches))
    step = int(state.step)
    fresh = settings.rl.fresh_optimizer
    # Lines an interrupted run wrote after its checkpoint would be written
    # again (and a fresh run's file starts empty).
    for line in trim_metrics(os.path.join(workdir, METRICS_FILE), step,
                             per_step=False):
      log(line)
    with open(os.path.join(workdir, METRICS_FILE), "a") as metrics_file:
      while step < schedule.total_steps and (stop_after_step is None
                                             or step < stop_after_step):
        b = batch_at(step, chunk, len(batches))
        if b != current:  # shared: params, optimizer, step, RNG
          per_batch[current] = state
          state = per_batch.get(b, blank).replace(
              params=state.params, opt_state=state.opt_state,
              step=state.step, rng=state.rng)
          current = b
        phase = schedule.phase(step)
        length = min(schedule.next_chunk(step), chunk - step % chunk)
        if fresh and step == schedule.warm_steps > 0:
          state = state.replace(opt_state=fresh_adam_moments(state.opt_state))
        t0 = time.time()
        state_dev, metrics = run_chunk(
            fns, replicate(state, parallel), jax.tree.map(jnp.asarray,
                                                          batches[b]),
            jnp.asarray(targets[b] if targets is not None else 0), length,
            warm_start=phase == "warm_start")
        metrics = jax.tree.map(np.asarray, unreplicate(metrics, parallel))
        state = unreplicate(state_dev, parallel)
        step += length
        record = _chunk_record(step, phase, b, metrics, reference[b],
                               time.time() - t0)
        metrics_file.write(json.dumps(record) + "\n")
        metrics_file.flush()
        log("[gplace] " + " ".join(f"{k}={v}" for k, v in record.items()))
        if schedule.checkpoint_due(step):
          checkpointer.save(step, state)
  finished = step >= schedule.total_steps
  ratios = {}
  path = os.path.join(workdir, POLICY_FILE)
  if finished:
    ratios = _greedy_ratios(settings, state.params, module, setups, topology,
                            members, batches)
    policy_file.save_policy(
        path, state.params, policy, settings, topology, steps=step,
        trained_on=names, greedy_vs_best_baseline=ratios)
    log(f"[gplace] wrote the pretrained policy to {path}")
  return PretrainResult(state.params, path if finished else "", step, names,
                        ratios, time.time() - began)


@functools.lru_cache(maxsize=4)
def _dispatch_reward(width: int):
  """:func:`~gplace.rl.rewards.dispatch_reward` with a candidate buffer of
  ``width`` (one object per width, so compiled steps are reused)."""
  return functools.partial(dispatch_reward, width=width)


def _warm_targets(settings: TrainSettings, setups, members,
                  batches) -> Optional[list]:
  """Per batch, the warm start's targets ``int32 [B, N_pad]`` (each
  graph's best baseline, or the named one); None without a warm start."""
  if not settings.warm_start.enabled:
    return None
  return [warm_start_targets([setups[i] for i in m],
                             settings.warm_start.baseline,
                             num_simulated_nodes(batch), batch).targets
          for m, batch in zip(members, batches)]


def _chunk_record(step: int, phase: str, batch: int, metrics: dict,
                  reference_s: float, seconds: float) -> dict:
  """One line of ``pretrain_metrics.jsonl``: the chunk's last metrics; for
  RL ``samples_vs_baselines``, the samples' mean runtime over the mean of
  the batch's best classical plans (in any schedule)."""
  record = {"step": step, "phase": phase, "batch": batch,
            "seconds": round(seconds, 2)}
  if phase == "rl":
    record["samples_vs_baselines"] = round(
        float(np.mean(metrics["mean_runtime_s"])) / reference_s, 4)
    record["fail_fraction"] = round(float(np.mean(
        metrics["fail_fraction"])), 4)
  else:
    record["accuracy"] = round(float(metrics["accuracy"][-1]), 4)
  record["loss"] = round(float(np.asarray(metrics["loss"])[-1]), 5)
  return record


def _greedy_ratios(settings: TrainSettings, params, policy, setups, topology,
                   members, batches) -> dict:
  """Per training graph: its greedy placement's runtime over its best
  classical plan's in any schedule (:func:`gplace.rl.reports.best_classical`;
  each graph scored once, in the batch it first appears)."""
  ratios = {}
  for m, batch in zip(members, batches):
    own = evaluate_policy(
        params, batch, apply_fn=policy.apply,
        reward_fns=[make_scorer(setups[i].graph, None, None, topology,
                                settings, costs=setups[i].costs)
                    for i in m],
        num_nodes=[setups[i].graph.n_nodes for i in m], num_samples=1,
        seed=settings.seed)
    for i, e in zip(m, own):
      best = best_classical(setups[i])[1]
      ratios.setdefault(setups[i].name, round(e.greedy_runtime_s / best, 4))
  return ratios

