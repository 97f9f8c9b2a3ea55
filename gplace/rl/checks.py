"""Checks of a run's arguments, and of its settings against its topology,
policy and graphs.

:func:`check_arguments` (the type of each argument) then :func:`check_run`
are the first things :func:`gplace.rl.train` and :func:`gplace.rl.pretrain`
do, before anything is scored, traced or compiled: each problem raises
:class:`~gplace.errors.ConfigError` naming the argument or setting, its
value and what to use instead. (A setting's own range is checked where it
is declared, :mod:`gplace.rl.settings`.)
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import reprlib
from collections.abc import Iterable, Mapping
from typing import Sequence

import jax
import numpy as np

from gplace.errors import ConfigError, GplaceError, PolicyError, is_int
from gplace.execution import inputs
from gplace.graphs.graph import Graph
from gplace.rl import distributed
from gplace.rl import policy_file
from gplace.rl.policy_fns import policy_fns
from gplace.rl.scoring import placement_devices
from gplace.rl.fields import Section
from gplace.rl.settings import PolicySettings, TrainSettings
from gplace.sim.clusters import copy_costs, launch_costs
from gplace.sim.topology import check_topology
from gplace.workloads import Workload


def _got(value) -> str:
  """``value`` for a message: its type, and a short repr of a plain value."""
  if value is None:
    return "None"
  if isinstance(value, (str, bytes, numbers.Number, Mapping, list, tuple)):
    return f"{type(value).__name__} {reprlib.repr(value)}"
  name = type(value).__name__
  return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _settings_hint(settings) -> str:
  """How to turn ``settings`` (not a TrainSettings) into one."""
  fields = {f.name for f in dataclasses.fields(TrainSettings)}
  if isinstance(settings, Section) and settings.SECTION in fields:
    return (f"wrap it: gplace.rl.TrainSettings({settings.SECTION}=...)")
  if isinstance(settings, Mapping):
    return ("build it with keywords, e.g. gplace.rl.TrainSettings(seed=1, "
            "rl=gplace.rl.RLSettings(num_samples=16)), or "
            "gplace.rl.settings.from_record(...) from a run's config.json")
  return "pass e.g. gplace.rl.TrainSettings() (its defaults)"


def check_arguments(caller: str, graphs, topology, policy, settings, *,
                    workdir, log, progress=None, stop_after_step=None,
                    workdir_required: bool = False) -> None:
  """The type of each argument of :func:`gplace.rl.train` or
  :func:`gplace.rl.pretrain` (``caller``), before anything runs: a bad one
  would otherwise surface as a raw exception deep in the run, or be
  ignored.

  Raises:
    ConfigError: ``graphs`` is not a Graph, Workload or sequence of them
      (the items are checked by :func:`gplace.rl.training.as_workloads`),
      ``policy`` not a PolicySettings, ``settings`` not a TrainSettings,
      ``workdir`` not a path (or None, unless ``workdir_required``),
      ``log`` not callable, ``progress`` neither callable nor None, or
      ``stop_after_step`` not a positive integer or None.
    TopologyError: ``topology`` is not a Topology.
  """
  if not isinstance(graphs, (Graph, Workload)) and (
      isinstance(graphs, (str, bytes, Mapping))
      or not isinstance(graphs, Iterable)):
    named = (" (a workload name? load it: gplace.workloads.load(name))"
             if isinstance(graphs, str) else "")
    raise ConfigError(
        f"{caller}: graphs must be a gplace.Graph, a "
        f"gplace.workloads.Workload or a list of them, got {_got(graphs)}"
        f"{named}; pass e.g. [gplace.workloads.load('random_dag:40')].")
  check_topology(topology, caller)
  if not isinstance(policy, PolicySettings):
    if isinstance(policy, str):
      how = f"pass gplace.rl.PolicySettings(name={policy!r})"
    elif isinstance(policy, Mapping):
      how = ("pass gplace.rl.PolicySettings.from_record(...) ({'name': ..., "
             "**hyperparameters})")
    else:
      how = "pass e.g. gplace.rl.PolicySettings(name='go')"
    raise ConfigError(f"{caller}: policy must be a gplace.rl.PolicySettings, "
                      f"got {_got(policy)}; {how}.")
  if not isinstance(settings, TrainSettings):
    raise ConfigError(f"{caller}: settings must be a gplace.rl.TrainSettings, "
                      f"got {type(settings).__name__}; "
                      f"{_settings_hint(settings)}.")
  if (workdir is None and workdir_required) or (
      workdir is not None and not isinstance(workdir, (str, os.PathLike))):
    raise ConfigError(
        f"{caller}: workdir must be a folder path (str or os.PathLike)"
        f"{'' if workdir_required else ' or None'}, got {_got(workdir)}; "
        "pass e.g. workdir='runs/first'.")
  if not callable(log):
    raise ConfigError(f"{caller}: log must be a callable taking a line of "
                      f"text, got {_got(log)}; pass e.g. log=print.")
  if progress is not None and not callable(progress):
    raise ConfigError(
        f"{caller}: progress must be None or a callable progress(step, "
        f"metrics), got {_got(progress)}; pass e.g. progress=lambda step, "
        "metrics: print(step).")
  if stop_after_step is not None and not (is_int(stop_after_step)
                                          and stop_after_step >= 1):
    raise ConfigError(
        f"{caller}: stop_after_step must be None or a positive integer (a "
        f"train step), got {_got(stop_after_step)}; pass e.g. "
        "stop_after_step=4, or None to run to the end.")


def num_parallel_devices(settings: TrainSettings) -> int:
  """Devices the RL update is split over: the local devices (pmap) for
  rewards scored in the step, in a multi-process run every device of every
  process; else 1 (host rewards, whose update runs on one device of each
  process, or ``pmap=False``)."""
  if not settings.rl.in_step or not settings.pmap:
    return 1
  return jax.device_count()


def check_processes(settings: TrainSettings) -> None:
  """What a multi-process run can split: the samples of in-step rewards
  over all devices of all processes (``pmap=True``), and the scoring of
  host-simulated rewards (``"simulator_host"``) over the processes, each
  scoring its share of every step's samples
  (:func:`gplace.rl.scoring.shared_scored_rollout`). In-step rewards with
  ``pmap=False`` would train the same policy once per process, and
  measured rewards time placements on devices that each process does not
  all own.

  Raises:
    ConfigError: several processes and settings that cannot split.
  """
  if not distributed.is_distributed():
    return
  count = jax.process_count()
  if settings.rl.reward == "executor":
    raise ConfigError(
        f"This run has {count} processes, but rl.reward='executor' measures "
        "each placement on the devices it names, and in a multi-process run "
        "most of them belong to other processes. Use --config.rl.reward="
        "simulator_host (scored on every host, each its share), or measure "
        "in one process.")
  if settings.rl.in_step and not settings.pmap:
    raise ConfigError(
        f"This run has {count} processes, which split the samples of "
        "rewards scored in the jitted step over their devices; with "
        f"rl.reward={settings.rl.reward!r} and pmap=False every process "
        "would train the same policy alone. Use --config.pmap=True, or run "
        "one process.")


def check_run(graphs: Sequence, topology, policy: PolicySettings,
              settings: TrainSettings):
  """Everything about a run that its settings alone do not decide; returns
  the policy module for ``topology``.

  Args:
    graphs: the workloads (anything with ``name``, ``fn``).
    topology: the devices.
    policy: the policy's settings.
    settings: the run's settings.

  Raises:
    ConfigError: a problem, named with the setting that fixes it.
  """
  if not graphs:
    raise ConfigError("No graphs to train on; pass at least one workload.")
  if settings.rl.reward == "executor":
    for graph in graphs:
      if getattr(graph, "fn", None) is None:
        raise ConfigError(
            f"Executor rewards (rl.reward='executor') run each placement, "
            f"but {graph.name!r} has no function to run (a graph file or a "
            "random DAG); use a simulated reward, e.g. "
            "--config.rl.reward=simulator_host.")
    try:
      inputs.check_several_devices(
          placement_devices(), "Executor rewards (config.rl.reward='executor')")
    except GplaceError as err:
      raise ConfigError(str(err)) from err
  check_reward_topology(settings, topology)
  check_processes(settings)
  parallel = num_parallel_devices(settings)
  k = settings.rl.num_samples
  if k % parallel:
    good = parallel * -(-k // parallel)
    where = (f"devices of the run's {jax.process_count()} processes"
             if distributed.is_distributed() else "local devices")
    raise ConfigError(
        f"rl.num_samples={k!r} must be a positive multiple of the "
        f"{parallel} {where} the update is split over; use e.g. "
        f"--config.rl.num_samples={good} or --config.pmap=False.")
  module = policy.create(topology.n_devices)
  check_actions(settings, policy.name, module)
  check_policy_init(settings, policy, topology.n_devices)
  return module


def ignores_host_costs(reward: str, topology) -> bool:
  """Whether ``reward`` (an ``rl.reward``) runs in the jitted step,
  which leaves out the executor's host work (``Device.cluster_launch_s``
  per cluster and ``Device.copy_issue_s`` per copy, which
  ``gplace.profile`` fits and a graph file's topology can carry) and holds
  a link for each transfer's latency, on a topology that has host work or
  ``pipelined_links`` (also from ``gplace.profile``); ``gplace.simulate``
  and the host reward model both."""
  return reward in ("simulator", "simulator_dynamic") and bool(
      np.any(launch_costs(topology) > 0) or np.any(copy_costs(topology) > 0)
      or topology.has_pipelined_links)


def check_reward_topology(settings: TrainSettings, topology) -> None:
  """Refuses a reward that :func:`ignores_host_costs` of ``topology``.

  Raises:
    ConfigError: such a reward on a topology with a launch cost.
  """
  if ignores_host_costs(settings.rl.reward, topology):
    ms = lambda costs: ", ".join(f"{s * 1e3:.3g} ms" for s in costs)
    raise ConfigError(
        f"rl.reward={settings.rl.reward!r} runs in the jitted step, "
        "which does not charge the executor's host work (a launch per "
        "cluster, an issue per copy), but the topology "
        f"{topology.name!r} does (cluster_launch_s "
        f"{ms(launch_costs(topology))}; copy_issue_s "
        f"{ms(copy_costs(topology))}; pipelined links "
        f"{topology.has_pipelined_links}), as gplace.simulate and the results "
        "table do. Train with --settings.rl.reward=simulator_host, or set the "
        "devices' cluster_launch_s and copy_issue_s to 0 and "
        "pipelined_links to false in the topology file.")


def check_actions(settings: TrainSettings, name: str, policy) -> None:
  """What a policy's actions (:func:`gplace.rl.policy_fns.policy_fns`) rule
  out: the exploration mixture for a sequential policy (one-shot only); for
  a policy that chooses the schedule too (an order, or priority levels), a
  reward that cannot run a placement in its own schedule; and unless its
  actions are placements, a search around the best, and a sequential
  policy's warm start unless it can turn a plan into actions
  (``plan_actions``)."""
  fns = policy_fns(policy)
  if fns.sequential and settings.rl.explore_epsilon:
    raise ConfigError(
        f"config.rl.explore_epsilon applies to one-shot policies; the "
        f"{name!r} policy decodes step by step. Set "
        "--config.rl.explore_epsilon=0 (rl.entropy_weight keeps it "
        "exploring).")
  levels = int(getattr(policy, "priority_levels", 0) or 0)
  if fns.schedule is not None and settings.rl.reward not in (
      "simulator_dynamic", "simulator_host"):
    raise ConfigError(
        f"config.rl.reward={settings.rl.reward!r}: the {name!r} policy "
        "chooses the schedule too, and that reward cannot run a placement "
        "in a policy's own order or priority levels (node-id order, or the "
        "executor's own dispatch). Use --config.rl.reward=simulator_dynamic "
        "(in the jitted step) or simulator_host" + (
            ", or --config.policy.priority_levels=0." if levels else "."))
  if fns.fusion is not None and settings.rl.reward != "simulator_host":
    raise ConfigError(
        f"config.rl.reward={settings.rl.reward!r}: the {name!r} policy "
        "decides the fusion too (fusion_head=True), which only the host "
        "simulator runs (each sample's fused graph is contracted on the "
        "host). Use --config.rl.reward=simulator_host, or "
        "--config.policy.fusion_head=False.")
  if fns.placement_actions:
    return
  can_imitate = callable(getattr(type(policy), "plan_actions", None))
  if (fns.sequential and settings.warm_start.enabled
      and not can_imitate):
    raise ConfigError(
        f"config.warm_start.baseline={settings.warm_start.baseline!r}: the "
        f"{name!r} policy's actions are not placements (it also chooses "
        "groups), so it cannot be fitted to a baseline placement; set "
        "--config.warm_start.baseline=none.")
  if settings.rl.mutate_best:
    raise ConfigError(
        f"config.rl.mutate_best needs actions that are placements; the "
        f"{name!r} policy's are not" + (
            f" (it also takes one of {levels} priority levels per node)"
            if levels else "") + ". Set --config.rl.mutate_best=0" + (
                " or --config.policy.priority_levels=0." if levels else
                "."))


def check_policy_init(settings: TrainSettings, policy: PolicySettings,
                      num_devices: int) -> None:
  """``settings.policy_init`` (optional): a readable policy file made for
  ``policy``, ``settings.groups`` and ``num_devices`` devices."""
  path = settings.policy_init
  if not path:
    return
  try:
    loaded = policy_file.load_policy(path)
  except PolicyError as err:
    raise ConfigError(f"config.policy_init: {err}") from err
  diffs = policy_file.policy_differences(loaded, policy, num_devices)
  if diffs:
    raise ConfigError(
        f"config.policy_init={path!r} was trained with other settings "
        f"({'; '.join(diffs)}); use its policy settings "
        f"(--config.policy.<field>=..., they are {loaded.policy}) and a "
        f"topology of {loaded.n_devices} devices (it was trained on "
        f"{loaded.topology!r}), or drop policy_init to start fresh.")
