"""Learned candidates for :func:`gplace.optimize`: a pretrained policy
zero-shot or fine-tuned, or GO trained from scratch, each labelled as the
policy's own placement; training stops with the budget between chunks.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from typing import Any, NamedTuple, Optional

import jax
import numpy as np

from gplace import policies
from gplace.errors import SearchError
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace.candidates import Candidate, score
from gplace.autoplace.inputs import Problem
from gplace.rl import checks
from gplace.rl import data
from gplace.rl import grouping
from gplace.rl import policy_file as policy_file_lib
from gplace.rl import settings as settings_lib
from gplace.rl import training
from gplace.rl.evaluation import jitted_policy_placements
from gplace.rl.settings import DEFAULT_POLICY, PolicySettings, TrainSettings
from gplace.rl.types import GraphSetup
from gplace.workloads import Workload

# Steps per jitted chunk: how often the budget is checked.
CHUNK_STEPS = 10
# An upper bound on steps; the budget stops the run long before.
MAX_STEPS = 1_000_000
# Fine-tuning steps at most (GO fine-tunes in under 50).
FINETUNE_STEPS = 50
# Fresh samples of a policy scored next to its greedy placement.
NUM_SAMPLES = 16
# What a first chunk of training takes before this process has measured one
# (setting up and compiling the training step included: 20-40 s on two CPU
# cores); a training candidate with less time left is not started.
FIRST_CHUNK_S = 30.0
# Seconds the first chunk of a training run took in this process (setting
# up and compiling included), by (label, nodes, devices): a later call on
# the same problem reuses the compiled step and knows what it costs.
_first_chunk_s: dict = {}


def resolve_policy_file(policy: Any, topology) -> Optional[
    policy_file_lib.PolicyFile]:
  """The policy file ``optimize`` applies: ``policy`` (a path), or by
  default the one shipped for ``topology.name`` (None if there is none);
  None for ``policy=False`` (no learned candidates).

  Raises:
    SearchError: ``policy`` is not a path, or the file was trained for
      another device count.
    PolicyError: the file cannot be read.
  """
  if policy is False:
    return None
  if policy is None:
    path = policy_file_lib.shipped_policy_path(topology.name)
    if path is None:
      return None
  elif isinstance(policy, (str, os.PathLike)):
    path = os.fspath(policy)
  else:
    raise SearchError(f"gplace.optimize: policy must be the path of a policy "
                      f"file (.npz), None (the shipped one) or False (none), got "
                      f"{type(policy).__name__}.")
  loaded = policy_file_lib.load_policy(path)
  if loaded.n_devices != topology.n_devices:
    shipped = policy_file_lib.shipped_topologies()
    raise SearchError(
        f"gplace.optimize: the policy {path} places on "
        f"{loaded.n_devices} devices ({loaded.topology!r}); "
        f"{topology.name!r} has {topology.n_devices}. Pass a policy trained "
        f"for this topology (experiments/configs/pretrain.py with "
        f"--config.topology=...), or a topology with a shipped policy "
        f"({', '.join(shipped) or 'none'}).")
  return loaded


def zero_shot_candidates(problem: Problem,
                         loaded: policy_file_lib.PolicyFile, *, seed: int,
                         num_samples: int = NUM_SAMPLES,
                         default_baselines: Optional[list[Candidate]] = None
                         ) -> list[Candidate]:
  """The pretrained policy's own placements of ``problem.graph``, no
  training: its greedy placement and the best of ``num_samples`` fresh
  samples, scored in the default schedule (with ``problem.costs``).

  A policy that reads a classical plan (``policy.hint``) is given the
  fastest of ``default_baselines`` (the baselines in the default schedule,
  :func:`~gplace.autoplace.candidates.baseline_runs`; scored here when
  None), as in its training, and its labels name that plan.

  Raises:
    ConfigError: the file's parameters do not fit its own policy settings.
  """
  name = str(loaded.policy.get("name", "go"))
  model = _policy_model(json.dumps(loaded.policy, sort_keys=True),
                        loaded.n_devices)
  groups = loaded.groups
  coarse = grouping.coarsen_for_policy(
      problem.graph, max_groups=int(groups.get("max_groups", 0)),
      rule=str(groups.get("rule", "colocation")),
      min_nodes=int(groups.get("min_nodes", 0)))
  label = f"pretrained {name.upper()} zero-shot"
  known, known_s = {}, {}
  if loaded.policy.get("hint"):
    if default_baselines is None:
      default_baselines = candidates_lib.baseline_runs(problem,
                                                       seed=seed).default
    plan = candidates_lib.best_of(default_baselines)
    if plan is not None:
      known = {plan.label: np.asarray(plan.placement, np.int32)}
      known_s = {plan.label: plan.runtime_s}
      label += f" (given the {plan.label} plan)"
  setup = GraphSetup(problem.graph.name, problem.graph, None, None,
                          known, known_s, float("nan"), float("inf"), coarse)
  batch = data.make_batch([setup], problem.topology, with_problems=False)
  batch = jax.tree.map(jax.numpy.asarray, batch)
  first = jax.tree.map(lambda x: x[0], batch.graphs)
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), first)
  params = policy_file_lib.params_like(loaded, shapes)
  own = jitted_policy_placements(model.apply, int(num_samples))(
      params, batch, jax.random.PRNGKey(seed))
  n = problem.graph.n_nodes
  greedy = np.asarray(own.greedy)[0, :n]
  samples = np.asarray(own.samples)[0, :, :n]
  runtimes = score(problem, np.concatenate([greedy[None], samples])).runtime_s
  best = int(np.argmin(runtimes[1:]))
  return [Candidate(f"{label}: greedy", greedy, None, float(runtimes[0])),
          Candidate(f"{label}: best of {num_samples} samples", samples[best],
                    None, float(runtimes[1 + best]))]


@functools.lru_cache(maxsize=4)
def _policy_model(policy_json: str, n_devices: int):
  """One module per policy setting, so its jitted sampler compiles once per
  graph size (not once per call)."""
  hparams = json.loads(policy_json)
  return policies.create_policy(hparams.pop("name", "go"), n_devices,
                                **hparams)


def finetune_candidates(problem: Problem,
                        loaded: policy_file_lib.PolicyFile,
                        *, time_s: float, seed: int,
                        steps: int = FINETUNE_STEPS,
                        notes: Optional[list] = None) -> list[Candidate]:
  """The pretrained policy fine-tuned on ``problem.graph`` for at most
  ``steps`` RL steps (fewer if ``time_s`` runs out), with the settings it
  was trained with (a file's record read as its version read it), no warm
  start: its greedy placement afterwards and the best placement it sampled
  while fine-tuning. ``notes``: see :func:`train_candidates`."""
  record = {k: v for k, v in loaded.config.items() if k != "pretrain"}
  settings = settings_lib.from_record(record, legacy=True).replace(
      policy_init=loaded.path, warm_start=dict(baseline="none"))
  label = f"pretrained {str(loaded.policy.get('name', 'go')).upper()} " \
          "fine-tuned"
  if loaded.policy.get("hint"):
    label += " (given the best default-schedule baseline's plan)"
  return train_candidates(problem, PolicySettings.from_record(loaded.policy),
                          settings, time_s=time_s, seed=seed,
                          max_steps=steps, label=label, notes=notes)


def policy_candidates(problem: Problem, *, time_s: float, seed: int,
                      notes: Optional[list] = None,
                      give_up: Optional[GiveUp] = None) -> list[Candidate]:
  """GO trained by RL on ``problem.graph`` from scratch (the default
  settings, :data:`DEFAULT_POLICY`) for about ``time_s`` seconds (chunks of
  :data:`CHUNK_STEPS`; none if the first would not fit): its greedy
  placement at the end and the best placement it sampled. ``notes``,
  ``give_up``: see :func:`train_candidates`."""
  return train_candidates(problem, DEFAULT_POLICY, TrainSettings(),
                          time_s=time_s, seed=seed, max_steps=MAX_STEPS,
                          label="GO trained on this graph", notes=notes,
                          give_up=give_up)


class GiveUp(NamedTuple):
  """Evidence that stops a training run early: after ``after_s`` seconds
  (setting up and compiling included) its best sampled placement is not
  faster than ``unless_below_s`` (e.g. the best baseline's runtime); or it
  stalls: its best sample is not ``min_gain`` (relative) faster than it
  was ``stall_s`` seconds before (never, by default)."""
  after_s: float
  unless_below_s: float
  stall_s: float = math.inf
  min_gain: float = 0.0


def stop_reason(now: float, began: float, deadline: float, last_chunk_s: float,
                best_s: float, give_up: Optional[GiveUp],
                best_before_s: float = math.nan) -> Optional[str]:
  """Why a training run stops after a chunk, or None to go on: ``"spent"``
  when the next chunk (timed as the last, ``last_chunk_s``) would end past
  ``deadline``; ``"behind"`` when ``give_up`` says so for the best sampled
  runtime ``best_s`` so far (NaN or inf: nothing sampled fitted);
  ``"stalled"`` when ``best_s`` is not ``give_up.min_gain`` faster than
  ``best_before_s``, the best ``give_up.stall_s`` seconds before (NaN: no
  chunk had ended then). Times in seconds of one clock."""
  if now + last_chunk_s > deadline:
    return "spent"
  if give_up is None:
    return None
  if now - began >= give_up.after_s and not best_s < give_up.unless_below_s:
    return "behind"
  if (math.isfinite(give_up.stall_s) and math.isfinite(best_before_s)
      and not best_s < (1.0 - give_up.min_gain) * best_before_s):
    return "stalled"
  return None


def best_before(history: list, now: float, stall_s: float) -> float:
  """The best runtime of the last ``(time, best)`` entry of ``history`` (in
  time order) at or before ``now - stall_s``; NaN when there is none."""
  found = math.nan
  for at, best in history:
    if at > now - stall_s:
      break
    found = best
  return found


def train_candidates(problem: Problem, policy: PolicySettings,
                     settings: TrainSettings, *, time_s: float, seed: int,
                     max_steps: int, label: str,
                     notes: Optional[list] = None,
                     give_up: Optional[GiveUp] = None) -> list[Candidate]:
  """Trains ``policy`` with ``settings`` on ``problem`` (its graph,
  topology and costs) until ``max_steps`` RL steps or ``time_s`` seconds,
  whichever ends first, then scores, in the default schedule, the policy's
  greedy placement and the best placement it sampled, labelled ``"<label>
  (<steps> steps): greedy"`` and ``"...: best sampled"`` (``"(<steps> of
  <max_steps> steps, budget spent)"`` when the time ran out first).

  ``time_s`` covers setting up and compiling: training does not start when
  less is left than its first chunk takes (:data:`FIRST_CHUNK_S`, or what
  this process measured for the same problem), and stops between chunks
  once the time is spent or the next chunk (timed as the last) would
  overrun it, or, with ``give_up``, once its evidence says the run is
  behind (:func:`stop_reason`). The policy's final evaluation comes after
  that. Each of these cases appends a line to ``notes`` (if given) and
  returns what there is.
  """
  began = time.perf_counter()
  deadline = began + time_s
  key = (label, problem.graph.n_nodes, problem.topology.n_devices)
  expected_s = _first_chunk_s.get(key, FIRST_CHUNK_S)
  if time_s < expected_s:
    if notes is not None:
      notes.append(
          f"{label}: not trained: {time_s:.1f} s of budget_s were left and "
          f"its first {CHUNK_STEPS} steps (compiling included) take about "
          f"{expected_s:.0f} s here; raise budget_s to train.")
    return []
  steps, chunk_s, last, reason = [0], [], [began], [None]
  history = []   # (time, best sampled runtime) after each chunk

  def stop_when_spent(step: int, metrics: dict) -> bool:
    now = time.perf_counter()
    if not chunk_s:
      _first_chunk_s[key] = now - began
    chunk_s.append(now - last[0])
    steps[0], last[0] = step, now
    best = metrics.get("best_runtime_s", [None])[0]
    best = math.nan if best is None else float(best)
    before = (best_before(history, now, give_up.stall_s)
              if give_up is not None else math.nan)
    history.append((now, best))
    reason[0] = stop_reason(now, began, deadline, chunk_s[-1], best,
                            give_up, before)
    return reason[0] is not None

  rl = settings.rl
  if checks.ignores_host_costs(rl.reward, problem.topology):
    # The host reward charges a profiled topology's launches and copy
    # issues, as the candidates are scored.
    rl = dataclasses.replace(rl, reward="simulator_host")
  settings = settings.replace(
      rl=rl, seed=seed, pmap=False, progress_bar=False, print_table=False,
      train=dict(num_steps=max_steps,
                 chunk_steps=min(CHUNK_STEPS, max_steps),
                 checkpoint_every=max_steps, resume=False,
                 eval_samples=NUM_SAMPLES))
  workload = Workload(problem.graph.name, problem.graph, costs=problem.costs)
  result = training.train([workload], problem.topology, policy, settings,
                           progress=stop_when_spent, log=lambda line: None)
  done = f"{steps[0]} steps"
  if reason[0] in ("behind", "stalled"):
    done = f"{steps[0]} steps, " + (
        "stopped behind" if reason[0] == "behind" else "stalled")
    why = (f"its best sample was not faster than "
           f"{give_up.unless_below_s * 1e3:.4g} ms (the best so far)"
           if reason[0] == "behind" else
           f"its best sample gained less than {give_up.min_gain:.1%} in "
           f"its last {give_up.stall_s:.0f} s")
    if notes is not None:
      notes.append(f"{label}: stopped after {steps[0]} steps "
                   f"({time.perf_counter() - began:.0f} s): {why}; the rest "
                   "of its time went to the search.")
  elif steps[0] < max_steps and max_steps < MAX_STEPS:  # the time ran out
    done = f"{steps[0]} of {max_steps} steps, budget spent"
    if notes is not None:
      notes.append(
          f"{label}: the budget stopped training after {steps[0]} of "
          f"{max_steps} steps (the first {min(CHUNK_STEPS, max_steps)}, "
          f"compiling included, took {chunk_s[0]:.0f} s); raise budget_s "
          "to train longer.")
  out = []
  n = problem.graph.n_nodes
  if result.policy:
    greedy = np.asarray(result.policy[0].greedy_placement, np.int32)[:n]
    out.append(Candidate(f"{label} ({done}): greedy", greedy, None,
                         float(score(problem, greedy[None]).runtime_s[0])))
  if np.isfinite(result.best_runtime_s[0]):  # else nothing sampled fitted
    best = np.asarray(result.best_placements[0], np.int32)[:n]
    out.append(Candidate(f"{label} ({done}): best sampled", best,
                         None, float(score(problem, best[None]).runtime_s[0])))
  return out
