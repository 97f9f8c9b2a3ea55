"""Checks a training config before anything is captured or compiled.

Where this sits: the first thing :func:`gplace.rl.train.train_and_evaluate`
does. One small function per sub-config, each raising
:class:`~gplace.errors.ConfigError` with the field, the bad value and what to
use instead. The numeric fields' ranges are checked first, from one table
(:func:`gplace.rl.config_fields.validate_numbers`); this module checks what
the values mean (workloads, topology, policy, rewards, warm start). Probing
the workdir and the graph cache is separate (:func:`check_workdir`,
:func:`check_graph_cache`), and so is the check that a workdir's checkpoints
were written under the same config (:func:`gplace.rl.resume.check_resume`).
"""

from __future__ import annotations

import math
import os
from typing import Optional

import jax
import numpy as np

from gplace import baselines
from gplace import policies
from gplace import workloads
from gplace.errors import (ConfigError, GplaceError, PolicyError, first_line,
                           is_int)
from gplace.graphs import coarsening
from gplace.graphs import interchange
from gplace.rl import data
from gplace.rl import policy_file
from gplace.rl import reward_setup
from gplace.rl.config_fields import (POLICY_INT_FIELDS, IntRange,
                                     describe_int_range, is_real, lookup,
                                     out_of_range, validate_numbers)
from gplace.rl.policy_fns import policy_fns
from gplace.workloads import resolve
from gplace.sim import topology as topology_lib
from gplace.sim.clusters import copy_costs, launch_costs

LOSSES = ("ppo", "reinforce")
ADVANTAGES = ("ema", "batch")
# RL learning-rate schedules (state.create_optimizer).
DECAYS = ("none", "cosine")
REWARDS = ("simulator", "simulator_dynamic", "simulator_host", "executor")
REWARD_SCHEDULES = ("best", "dynamic", "auto")


def num_parallel_devices(config) -> int:
  """Devices the RL update is split over (pmap over local devices; 1 with
  host rewards, executor or simulator_host, or ``config.pmap=False``)."""
  if config.rl.reward not in ("simulator", "simulator_dynamic") or (
      not config.pmap):
    return 1
  return jax.local_device_count()


def validate_config(config, workdir: str) -> None:
  """Raises :class:`ConfigError` for any value that cannot work, and when
  ``workdir`` or ``config.graph_cache`` cannot be written."""
  validate_numbers(config)
  validate_workloads(config)
  validate_topology(config)
  validate_policy(config)
  validate_rl(config)
  validate_warm_start(config)
  check_workdir(workdir)
  check_graph_cache(config)


# -- sub-configs ---------------------------------------------------------------


def validate_workloads(config) -> None:
  """``config.workload`` (names), ``workload_size``, ``workload_step``,
  ``baselines``."""
  names = data.workload_names(config)
  if not names:
    raise ConfigError("config.workload is empty; name a workload, e.g. "
                      "'rnnlm2', or 'random_dag:1000'.")
  for name in names:
    match = data.RANDOM_DAG.match(name)
    if match and int(match.group(1)) < 2:
      raise ConfigError(f"config.workload={name!r}: a random_dag needs at "
                        "least 2 nodes; use e.g. 'random_dag:100'.")
    if resolve.is_reference(name):
      if config.rl.reward == "executor" and interchange.is_graph_path(name):
        raise ConfigError(
            f"config.workload={name!r} is a saved graph, which cannot be "
            "run: use a simulated reward (config.rl.reward='simulator'), "
            "or name a module:function that returns (fn, args).")
      continue
    if not match and name not in workloads.names():
      raise ConfigError(
          f"Unknown workload {name!r} in config.workload; choose from "
          f"{', '.join(workloads.names())}, 'random_dag:N[:seed]', a graph "
          "file (.npz / .json) or module:function.")
  if config.workload_size not in workloads.SIZES:
    raise ConfigError(f"Unknown config.workload_size "
                      f"{config.workload_size!r}; choose from "
                      f"{', '.join(workloads.SIZES)}.")
  if config.workload_step not in workloads.STEPS:
    raise ConfigError(f"Unknown config.workload_step "
                      f"{config.workload_step!r}; choose from "
                      f"{', '.join(workloads.STEPS)}.")
  selected = data.selected_baselines(config)
  if selected == []:
    raise ConfigError(f"config.baselines={config.baselines!r} names no "
                      "baseline; use 'all' or names from "
                      f"{', '.join(baselines.names())}.")
  for name in selected or ():
    if name not in baselines.names():
      raise ConfigError(f"Unknown baseline {name!r} in config.baselines; "
                        f"use 'all' or names from "
                        f"{', '.join(baselines.names())}.")


def validate_topology(config) -> None:
  """``config.topology``: a preset name, ``"local"`` or ``"file"`` (the
  workloads' graph files give it)."""
  if (config.topology not in ("local", "file")
      and config.topology not in topology_lib.preset_names()):
    raise ConfigError(
        f"Unknown topology {config.topology!r}; choose from "
        f"{', '.join(topology_lib.preset_names())}, 'local' or 'file' (the "
        "workload's graph file gives the devices).")


def ignores_host_costs(reward: str, topology) -> bool:
  """Whether ``reward`` (a ``config.rl.reward``) runs in the jitted step,
  which leaves out the executor's host work (``Device.cluster_launch_s``
  per cluster and ``Device.copy_issue_s`` per copy, which
  ``gplace.profile`` fits and a graph file's topology can carry) and holds
  a link for each transfer's latency, on a topology that has host work or
  ``pipelined_links`` (also from ``gplace.profile``); ``gplace.simulate``
  and the host reward model both."""
  return reward in ("simulator", "simulator_dynamic") and bool(
      np.any(launch_costs(topology) > 0) or np.any(copy_costs(topology) > 0)
      or topology.has_pipelined_links)


def check_reward_topology(config, topology) -> None:
  """Refuses a reward that :func:`ignores_host_costs` of ``topology``.

  Raises:
    ConfigError: such a reward on a topology with a launch cost.
  """
  if ignores_host_costs(config.rl.reward, topology):
    ms = lambda costs: ", ".join(f"{s * 1e3:.3g} ms" for s in costs)
    raise ConfigError(
        f"config.rl.reward={config.rl.reward!r} runs in the jitted step, "
        "which does not charge the executor's host work (a launch per "
        "cluster, an issue per copy), but the topology "
        f"{topology.name!r} does (cluster_launch_s "
        f"{ms(launch_costs(topology))}; copy_issue_s "
        f"{ms(copy_costs(topology))}; pipelined links "
        f"{topology.has_pipelined_links}), as gplace.simulate and the results "
        "table do. Train with --config.rl.reward=simulator_host, or set the "
        "devices' cluster_launch_s and copy_issue_s to 0 and "
        "pipelined_links to false in the topology file.")


def _divisors_near(number: int, near: int, reach: int = 10_000) -> str:
  """The divisors of ``number`` closest to ``near`` (``"2 or 4"``), looking
  at most ``reach`` values each way (1 divides everything; the numbers may
  be huge, so never loop up to ``number``)."""
  below = next((d for d in range(min(near - 1, number),
                                 max(near - 1 - reach, 0), -1)
                if number % d == 0), 1)
  above = next((d for d in range(near + 1, min(number, near + reach) + 1)
                if number % d == 0), None)
  return " or ".join(str(d) for d in (below, above) if d is not None)


def validate_policy(config) -> None:
  """``config.policy``: a registered family, integer hyperparameters in
  range (:data:`~gplace.rl.config_fields.POLICY_INT_FIELDS`), finite floats,
  ``hidden_size`` divisible by ``num_heads``, and values the family
  accepts."""
  hparams = dict(config.policy.items())
  name = hparams.pop("name", "go")
  if name not in policies.policy_names():
    raise ConfigError(f"Unknown config.policy.name {name!r}; choose from "
                      f"{', '.join(policies.policy_names())}.")
  for key, value in hparams.items():
    valid = POLICY_INT_FIELDS.get(key, IntRange(0, None, 1))
    if is_int(value) and value < valid.minimum:
      raise out_of_range(f"policy.{key}", value, describe_int_range(valid),
                          valid.example)
    if is_real(value) and not is_int(value) and not math.isfinite(value):
      raise out_of_range(f"policy.{key}", value, "a finite number", 1.0)
  hidden, heads = hparams.get("hidden_size"), hparams.get("num_heads")
  if is_int(hidden) and is_int(heads) and hidden % heads:
    raise ConfigError(
        f"config.policy.hidden_size={hidden} must be divisible by "
        f"config.policy.num_heads={heads}; use e.g. "
        f"--config.policy.num_heads={_divisors_near(hidden, heads)}.")
  num_devices = 1
  if config.topology in topology_lib.preset_names():
    num_devices = topology_lib.preset(config.topology).n_devices
  try:
    policy = policies.create_policy(name, num_devices, **hparams)
  except PolicyError as err:
    raise ConfigError(f"config.policy: {err}") from err
  except (TypeError, ValueError, ZeroDivisionError) as err:
    raise ConfigError(f"config.policy: the {name!r} policy rejects these "
                      f"hyperparameters ({first_line(err)}); compare them "
                      "with experiments/configs/quickstart.py.") from err
  _validate_actions(config, name, policy)
  validate_policy_init(config, num_devices)


def validate_policy_init(config, num_devices: int) -> None:
  """``config.policy_init`` (optional): a readable policy file
  (:mod:`gplace.rl.policy_file`) made for ``config.policy`` and the
  topology's device count (checked for presets; ``"local"`` is checked
  when the run builds its topology)."""
  path = str(config.get("policy_init", "") or "")
  if not path:
    return
  try:
    loaded = policy_file.load_policy(path)
  except PolicyError as err:
    raise ConfigError(f"config.policy_init: {err}") from err
  if config.topology not in topology_lib.preset_names():
    num_devices = loaded.n_devices
  diffs = policy_file.policy_differences(loaded, config, num_devices)
  if diffs:
    raise ConfigError(
        f"config.policy_init={path!r} was trained with other settings "
        f"({'; '.join(diffs)}); use its policy settings "
        f"(--config.policy.<field>=..., they are {loaded.policy}) and a "
        f"topology of {loaded.n_devices} devices (it was trained on "
        f"{loaded.topology!r}), or drop policy_init to start fresh.")


def _validate_actions(config, name: str, policy) -> None:
  """What a policy's actions (:func:`gplace.rl.policy_fns.policy_fns`) rule
  out: the exploration mixture for a sequential policy (one-shot only); for
  a policy that chooses the schedule too (an order, or priority levels), a
  reward that cannot run a placement in its own schedule; and unless its
  actions are placements, a search around the best, and a sequential
  policy's warm start unless it can turn a plan into actions
  (``plan_actions``)."""
  fns = policy_fns(policy)
  if fns.sequential and float(config.rl.get("explore_epsilon", 0.0)):
    raise ConfigError(
        f"config.rl.explore_epsilon applies to one-shot policies; the "
        f"{name!r} policy decodes step by step. Set "
        "--config.rl.explore_epsilon=0 (rl.entropy_weight keeps it "
        "exploring).")
  levels = int(getattr(policy, "priority_levels", 0) or 0)
  if fns.schedule is not None and config.rl.reward not in (
      "simulator_dynamic", "simulator_host"):
    raise ConfigError(
        f"config.rl.reward={config.rl.reward!r}: the {name!r} policy "
        "chooses the schedule too, and that reward cannot run a placement "
        "in a policy's own order or priority levels (node-id order, or the "
        "executor's own dispatch). Use --config.rl.reward=simulator_dynamic "
        "(in the jitted step) or simulator_host" + (
            ", or --config.policy.priority_levels=0." if levels else "."))
  if fns.placement_actions:
    return
  can_imitate = callable(getattr(type(policy), "plan_actions", None))
  if (fns.sequential and config.warm_start.baseline != "none"
      and not can_imitate):
    raise ConfigError(
        f"config.warm_start.baseline={config.warm_start.baseline!r}: the "
        f"{name!r} policy's actions are not placements (it also chooses "
        "groups), so it cannot be fitted to a baseline placement; set "
        "--config.warm_start.baseline=none.")
  if float(config.rl.get("mutate_best", 0.0)):
    raise ConfigError(
        f"config.rl.mutate_best needs actions that are placements; the "
        f"{name!r} policy's are not" + (
            f" (it also takes one of {levels} priority levels per node)"
            if levels else "") + ". Set --config.rl.mutate_best=0" + (
                " or --config.policy.priority_levels=0." if levels else
                "."))


def validate_rl(config) -> None:
  """``config.rl``: reward, loss, advantage, sample count; and
  ``config.groups.rule`` (ranges of the numbers:
  :func:`~gplace.rl.config_fields.validate_numbers`)."""
  rl = config.rl
  if rl.reward not in REWARDS:
    raise ConfigError(f"config.rl.reward must be one of {REWARDS}, got "
                      f"{rl.reward!r}.")
  if rl.reward == "executor" and any(
      data.is_random_dag(n) for n in data.workload_names(config)):
    raise ConfigError("Executor rewards need a runnable workload, not a "
                      "random_dag.")
  if rl.reward == "executor":
    from gplace.execution import inputs  # pylint: disable=g-import-not-at-top
    try:
      inputs.check_several_devices(
          reward_setup.placement_devices(),
          "Executor rewards (config.rl.reward='executor')")
    except GplaceError as err:
      raise ConfigError(str(err)) from err
  schedule = rl.get("reward_schedule", "best")
  if schedule not in REWARD_SCHEDULES:
    raise ConfigError(
        f"config.rl.reward_schedule={schedule!r}: use 'best' (the default "
        "schedule, as the baselines and the table are scored), 'dynamic' "
        f"(its cheaper half) or 'auto' (dynamic on graphs of over "
        f"{reward_setup.AUTO_DYNAMIC_NODES:,} ops).")
  if schedule == "dynamic" and rl.reward != "simulator_host":
    raise ConfigError(
        f"config.rl.reward_schedule={schedule!r} applies to host-simulated "
        f"rewards; config.rl.reward={rl.reward!r} is not. Use "
        "--config.rl.reward=simulator_host, or "
        "--config.rl.reward_schedule=best.")
  if rl.loss not in LOSSES:
    raise ConfigError(f"config.rl.loss must be one of {LOSSES}, got "
                      f"{rl.loss!r}.")
  if rl.get("advantage", "ema") not in ADVANTAGES:
    raise ConfigError(f"config.rl.advantage must be one of {ADVANTAGES}, got "
                      f"{rl.advantage!r}.")
  decay = lookup(config, "optimizer.decay", "none")
  if decay not in DECAYS:
    raise ConfigError(f"config.optimizer.decay must be one of {DECAYS}, got "
                      f"{decay!r}; e.g. --config.optimizer.decay=cosine.")
  rule = lookup(config, "groups.rule", "colocation")
  if rule not in coarsening.RULES:
    raise ConfigError(f"config.groups.rule must be one of {coarsening.RULES}"
                      f", got {rule!r}; use e.g. "
                      "--config.groups.rule=colocation, or "
                      "--config.groups.max_groups=0 to place ops.")
  n_dev = num_parallel_devices(config)
  k = rl.num_samples
  if not is_int(k) or k < 1 or k % n_dev:
    good = n_dev * max(1, -(-int(k) // n_dev)) if is_int(k) else 4 * n_dev
    raise ConfigError(
        f"config.rl.num_samples={k!r} must be a positive multiple of the "
        f"{n_dev} local devices the update is split over; use e.g. "
        f"--config.rl.num_samples={good} or --config.pmap=False.")
  refine = lookup(config, "refine.evaluations", 0)
  if 0 < refine < 3:
    raise ConfigError(
        f"config.refine.evaluations={refine} is too few for the per-op "
        "refinement (the start, a sample and the final greedy placement); "
        "use 0 (no refinement) or e.g. --config.refine.evaluations=3200.")
  start = lookup(config, "refine.start", "policy")
  if start not in ("policy", "best"):
    raise ConfigError(
        f"config.refine.start={start!r}: use 'policy' (refine the policy's "
        "greedy placement) or 'best' (the fastest of it and every "
        "baseline's placement).")


def validate_warm_start(config) -> None:
  """``config.warm_start.baseline``: ``"best"``, ``"none"`` or a baseline
  among ``config.baselines``."""
  warm = config.warm_start.baseline
  if warm in ("best", "none"):
    return
  if warm not in baselines.names():
    raise ConfigError(f"config.warm_start.baseline={warm!r}: use 'best', "
                      f"'none' or one of {', '.join(baselines.names())}.")
  only = data.selected_baselines(config)
  if only is not None and warm not in only:
    raise ConfigError(f"config.warm_start.baseline={warm!r} is not among "
                      f"config.baselines={config.baselines!r}; add it there "
                      "or use --config.warm_start.baseline=best.")


# -- directories ---------------------------------------------------------------


def _write_probe(directory: str) -> Optional[OSError]:
  """Creates ``directory`` and writes a file there: None, or the error."""
  try:
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, ".gplace_write_test")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as err:
    return err
  return None


def check_workdir(workdir: str) -> None:
  """Creates ``workdir`` and writes a probe file there.

  Raises:
    ConfigError: it cannot be written.
  """
  err = _write_probe(workdir)
  if err is not None:
    raise ConfigError(f"Cannot write to workdir {workdir!r}: {err}. Pass a "
                      "writable --workdir.") from err


def check_graph_cache(config) -> None:
  """``config.graph_cache``: it must hold every graph the run reads, or be
  writable (the run writes the graphs it captures there).

  Raises:
    ConfigError: graphs are missing and the directory cannot be written.
  """
  cache_dir = str(config.get("graph_cache", "") or "")
  if not cache_dir or config.rl.reward == "executor":
    return  # executor rewards capture every time (data.load_graph)
  # The file names gplace.rl.data.load_graph reads and writes.
  missing = [f"{name}_{config.workload_size}_{config.workload_step}.npz"
             for name in data.workload_names(config)
             if not data.is_random_dag(name)]
  missing = [f for f in missing
             if not os.path.isfile(os.path.join(cache_dir, f))]
  if not missing:
    return
  err = _write_probe(cache_dir)
  if err is not None:
    raise ConfigError(
        f"config.graph_cache={cache_dir!r} lacks {', '.join(missing)} and "
        f"cannot be written ({err}); pass a writable directory, or "
        "--config.graph_cache='' to capture every time.") from err
