"""Checks a training config before anything is captured or compiled.

Where this sits: the first thing :func:`gplace.rl.train.train_and_evaluate`
does. One small function per sub-config, each raising
:class:`~gplace.errors.ConfigError` with the field, the bad value and what to
use instead; probing the workdir is separate (:func:`check_workdir`).
"""

from __future__ import annotations

import os

import jax

from gplace import baselines
from gplace import policies
from gplace import workloads
from gplace.errors import ConfigError, PolicyError
from gplace.rl import data
from gplace.sim import topology as topology_lib

LOSSES = ("ppo", "reinforce")
REWARDS = ("simulator", "executor")


def num_parallel_devices(config) -> int:
  """Devices the RL update is split over (pmap over local devices; 1 with
  executor rewards or ``config.pmap=False``)."""
  if config.rl.reward == "executor" or not config.pmap:
    return 1
  return jax.local_device_count()


def validate_config(config, workdir: str) -> None:
  """Raises :class:`ConfigError` for any value that cannot work, and when
  ``workdir`` cannot be written."""
  validate_workloads(config)
  validate_topology(config)
  validate_policy(config)
  validate_rl(config)
  validate_schedule(config)
  validate_warm_start(config)
  check_workdir(workdir)


def validate_workloads(config) -> None:
  """``config.workload`` (names), ``workload_size``, ``workload_step``."""
  names = data.workload_names(config)
  if not names:
    raise ConfigError("config.workload is empty; name a workload, e.g. "
                      "'rnnlm2', or 'random_dag:1000'.")
  for name in names:
    if not data.is_random_dag(name) and name not in workloads.names():
      raise ConfigError(
          f"Unknown workload {name!r} in config.workload; choose from "
          f"{', '.join(workloads.names())}, or 'random_dag:N[:seed]'.")
  if config.workload_size not in workloads.SIZES:
    raise ConfigError(f"Unknown config.workload_size "
                      f"{config.workload_size!r}; choose from "
                      f"{', '.join(workloads.SIZES)}.")
  if config.workload_step not in workloads.STEPS:
    raise ConfigError(f"Unknown config.workload_step "
                      f"{config.workload_step!r}; choose from "
                      f"{', '.join(workloads.STEPS)}.")


def validate_topology(config) -> None:
  """``config.topology``: a preset name or ``"local"``."""
  if (config.topology != "local"
      and config.topology not in topology_lib.preset_names()):
    raise ConfigError(
        f"Unknown topology {config.topology!r}; choose from "
        f"{', '.join(topology_lib.preset_names())} or 'local'.")


def validate_policy(config) -> None:
  """``config.policy``: a registered family and hyperparameters it accepts
  (the policy module checks its own values)."""
  hparams = dict(config.policy.items())
  name = hparams.pop("name", "go")
  if name not in policies.policy_names():
    raise ConfigError(f"Unknown config.policy.name {name!r}; choose from "
                      f"{', '.join(policies.policy_names())}.")
  try:
    policies.create_policy(name, 1, **hparams)
  except PolicyError as err:
    raise ConfigError(f"config.policy: {err}") from err


def validate_rl(config) -> None:
  """``config.rl``: reward, loss, sample count, exploration, penalty."""
  rl = config.rl
  if rl.reward not in REWARDS:
    raise ConfigError(f"config.rl.reward must be one of {REWARDS}, got "
                      f"{rl.reward!r}.")
  if rl.reward == "executor" and any(
      data.is_random_dag(n) for n in data.workload_names(config)):
    raise ConfigError("Executor rewards need a runnable workload, not a "
                      "random_dag.")
  if rl.loss not in LOSSES:
    raise ConfigError(f"config.rl.loss must be one of {LOSSES}, got "
                      f"{rl.loss!r}.")
  n_dev = num_parallel_devices(config)
  k = rl.num_samples
  if k < 1 or k % n_dev:
    raise ConfigError(
        f"config.rl.num_samples={k} must be a positive multiple of the "
        f"{n_dev} local devices the update is split over; use e.g. "
        f"--config.rl.num_samples={max(n_dev, (k // n_dev + 1) * n_dev)} or "
        "--config.pmap=False.")
  if not 0.0 <= float(rl.get("explore_epsilon", 0.0)) < 1.0:
    raise ConfigError("config.rl.explore_epsilon must be in [0, 1).")
  if not 0.0 <= float(rl.get("mutate_best", 0.0)) <= 1.0:
    raise ConfigError("config.rl.mutate_best must be in [0, 1].")
  if rl.oom_penalty_factor < 1:
    raise ConfigError("config.rl.oom_penalty_factor must be at least 1.")


def validate_schedule(config) -> None:
  """``config.train`` step counts and ``config.optimizer``."""
  t = config.train
  for field in ("chunk_steps", "checkpoint_every"):
    if t[field] < 1:
      raise ConfigError(f"config.train.{field} must be positive.")
  if t.num_steps < 0 or config.warm_start.steps < 0:
    raise ConfigError("Step counts must be non-negative.")
  if not (config.optimizer.learning_rate > 0
          and config.warm_start.learning_rate > 0):
    raise ConfigError("Learning rates must be positive.")


def validate_warm_start(config) -> None:
  """``config.warm_start.baseline``: ``"best"``, ``"none"`` or a baseline."""
  warm = config.warm_start.baseline
  if warm not in ("best", "none") and warm not in baselines.names():
    raise ConfigError(f"config.warm_start.baseline={warm!r}: use 'best', "
                      f"'none' or one of {', '.join(baselines.names())}.")


def check_workdir(workdir: str) -> None:
  """Creates ``workdir`` and writes a probe file there.

  Raises:
    ConfigError: it cannot be written.
  """
  try:
    os.makedirs(workdir, exist_ok=True)
    probe = os.path.join(workdir, ".gplace_write_test")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as err:
    raise ConfigError(f"Cannot write to workdir {workdir!r}: {err}. Pass a "
                      "writable --workdir.") from err
