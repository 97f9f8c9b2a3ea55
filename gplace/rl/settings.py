"""The settings of a training run, as frozen dataclasses.

:class:`TrainSettings` (sections :class:`RLSettings`, ...,
:class:`PretrainSettings`) and :class:`PolicySettings` hold every default and
range, raising :class:`~gplace.errors.ConfigError`; :func:`from_config` /
:func:`to_config`, the only code that reads a config.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, NamedTuple, Optional

from gplace import baselines as baselines_lib
from gplace import policies
from gplace.errors import ConfigError, PolicyError, is_int
from gplace.graphs.coarsening import RULES
from gplace.rl.fields import (Section, bad_value, choice_field,
                              divisors_near, field, flag_field, int_field,
                              is_real, real_field, unknown_field)
from gplace.sim.dispatch import BUFFER_WIDTH

REWARDS = ("simulator", "simulator_dynamic", "simulator_host", "executor")
# Rewards scored inside the jitted step (the others on the host).
IN_STEP_REWARDS = ("simulator", "simulator_dynamic")
REWARD_SCHEDULES = ("best", "dynamic", "auto")
LOSSES = ("ppo", "reinforce")
ADVANTAGES = ("ema", "batch")
DECAYS = ("none", "cosine")
REFINE_STARTS = ("policy", "best")


# -- the sections -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RLSettings(Section):
  """Reinforcement learning (ColocRL / GO): rewards, loss and exploration.

  Attributes:
    reward: ``"simulator_host"``: ``gplace.simulate`` on the host in
      ``reward_schedule``; ``"simulator_dynamic"`` / ``"simulator"``: scored
      inside the jitted step in the dynamic schedule / in node-id order;
      ``"executor"``: measured on the local devices.
    reward_schedule: for ``simulator_host``: ``"best"`` (the default
      schedule, as the baselines and the final table), ``"dynamic"``, or
      ``"auto"`` (dynamic on graphs of over 10,000 ops).
    num_samples: ``K`` placements sampled per graph per step.
    loss: ``"ppo"`` or ``"reinforce"``; ``ppo_epochs`` gradient steps per
      batch of samples, ratio clip ``ppo_clip``.
    entropy_weight: weight of the mean per-node entropy bonus.
    entropy_floor: nats; each node (group) whose entropy falls under it is
      penalised by ``entropy_floor_weight`` times the shortfall. 0: off.
    baseline_decay: EMA decay of the reward baseline (``advantage="ema"``).
    normalize_rewards: divide advantages by the EMA reward std.
    advantage: ``"batch"`` (relative to this step's samples) or ``"ema"``
      (to a moving average of past rewards).
    fresh_optimizer: reset Adam's moments when RL starts after a warm start.
    oom_penalty_factor: a failed placement costs this times the fastest
      single-device runtime.
    explore_epsilon: sample from ``(1 - eps) softmax + eps uniform`` per node.
    mutate_best: > 0 turns sampling into policy-guided search around the
      best placement found (each node keeps its draw with this probability).
  """

  SECTION = "rl"
  reward: str = choice_field("simulator_host", REWARDS)
  reward_schedule: str = choice_field("auto", REWARD_SCHEDULES)
  num_samples: int = int_field(64, 1)
  loss: str = choice_field("ppo", LOSSES)
  ppo_epochs: int = int_field(4, 1)
  ppo_clip: float = real_field(0.2, 0.0, 1.0, low_included=False)
  entropy_weight: float = real_field(1e-2)
  entropy_floor: float = real_field(0.05)
  entropy_floor_weight: float = real_field(1.0)
  baseline_decay: float = real_field(0.9, 0.0, 1.0)
  normalize_rewards: bool = flag_field(True)
  advantage: str = choice_field("batch", ADVANTAGES)
  fresh_optimizer: bool = flag_field(True)
  oom_penalty_factor: float = real_field(10.0, 1.0)
  explore_epsilon: float = real_field(0.0, 0.0, 1.0, example=0.01)
  mutate_best: float = real_field(0.0, 0.0, 1.0, high_included=True,
                             example=0.01)

  def __post_init__(self):
    super().__post_init__()
    if self.reward_schedule == "dynamic" and self.reward != "simulator_host":
      raise ConfigError(
          f"rl.reward_schedule='dynamic' applies to host-simulated rewards; "
          f"rl.reward={self.reward!r} is not. Use "
          "--config.rl.reward=simulator_host, or "
          "--config.rl.reward_schedule=best.")

  @property
  def in_step(self) -> bool:
    """Whether rewards are scored inside the jitted step."""
    return self.reward in IN_STEP_REWARDS


@dataclasses.dataclass(frozen=True)
class OptimizerSettings(Section):
  """Adam with global-norm clipping; ``decay="cosine"`` lowers RL's rate
  along a half cosine to ``final_fraction`` of it over the run's updates."""

  SECTION = "optimizer"
  learning_rate: float = real_field(3e-3, low_included=False)
  grad_clip: float = real_field(1.0, low_included=False)
  decay: str = choice_field("none", DECAYS)
  final_fraction: float = real_field(0.1, 0.0, 1.0, high_included=True)


@dataclasses.dataclass(frozen=True)
class WarmStartSettings(Section):
  """Supervised imitation of a baseline before RL: ``baseline`` is
  ``"none"`` (pure RL), ``"best"`` or a baseline name; ``steps`` updates at
  ``learning_rate`` with ``label_smoothing``."""

  SECTION = "warm_start"
  steps: int = int_field(50)
  baseline: str = field("none", None)
  learning_rate: float = real_field(1e-2, low_included=False)
  label_smoothing: float = real_field(0.0, 0.0, 1.0)

  def __post_init__(self):
    super().__post_init__()
    if self.baseline not in ("best", "none") + tuple(baselines_lib.names()):
      raise ConfigError(
          f"warm_start.baseline={self.baseline!r}: use 'best', 'none' or "
          f"one of {', '.join(baselines_lib.names())}.")

  @property
  def enabled(self) -> bool:
    return self.baseline != "none"


@dataclasses.dataclass(frozen=True)
class GroupSettings(Section):
  """Group-level actions: a graph of more than ``min_nodes`` nodes is
  coarsened by ``rule`` to at most ``max_groups`` groups (0: ops)."""

  SECTION = "groups"
  max_groups: int = int_field(256)
  rule: str = choice_field("colocation", RULES)
  min_nodes: int = int_field(256)


@dataclasses.dataclass(frozen=True)
class RefineSettings(Section):
  """A per-op second stage after RL (:mod:`gplace.rl.refine`);
  ``evaluations=0`` turns it off. ``start``: ``"policy"`` (its greedy
  placement) or ``"best"`` (the fastest of it and every baseline)."""

  SECTION = "refine"
  evaluations: int = int_field(0, example=3200, free_on_resume=True)
  num_samples: int = int_field(64, 1, free_on_resume=True)
  max_moves: int = int_field(1, 1, free_on_resume=True)
  learning_rate: float = real_field(4.0, low_included=False, free_on_resume=True)
  init_logit: float = real_field(5.0, free_on_resume=True)
  start: str = choice_field("policy", REFINE_STARTS, free_on_resume=True)

  def __post_init__(self):
    super().__post_init__()
    if 0 < self.evaluations < 3:
      raise ConfigError(
          f"refine.evaluations={self.evaluations} is too few for the per-op "
          "refinement (the start, a sample and the final greedy placement);"
          " use 0 (no refinement) or e.g. --config.refine.evaluations=3200.")


@dataclasses.dataclass(frozen=True)
class LoopSettings(Section):
  """The training loop: ``num_steps`` RL steps after the warm start, in
  jitted chunks of ``chunk_steps``; a checkpoint every ``checkpoint_every``
  steps (``max_to_keep`` kept); ``resume=False`` discards a workdir's
  checkpoints; ``eval_samples`` fresh samples scored at the end;
  ``greedy_every > 0`` scores the greedy placement that often."""

  SECTION = "train"
  num_steps: int = int_field(200, free_on_resume=True)
  chunk_steps: int = int_field(25, 1, free_on_resume=True)
  checkpoint_every: int = int_field(100, 1, free_on_resume=True)
  max_to_keep: int = int_field(2, 1, free_on_resume=True)
  resume: bool = flag_field(True, free_on_resume=True)
  eval_samples: int = int_field(64, 1, free_on_resume=True)
  greedy_every: int = int_field(0, free_on_resume=True)


@dataclasses.dataclass(frozen=True)
class ExecutorSettings(Section):
  """Measured rewards: ``repeats`` timed calls after ``warmup``."""

  SECTION = "executor"
  repeats: int = int_field(5, 1)
  warmup: int = int_field(1)


@dataclasses.dataclass(frozen=True)
class PretrainSettings(Section):
  """One policy over many graphs: batches of ``graphs_per_batch`` graphs,
  switched every chunk; ``dispatch_width``: the dynamic scheduler's
  candidate buffer."""

  SECTION = "pretrain"
  graphs_per_batch: int = int_field(4, 1)
  dispatch_width: int = int_field(BUFFER_WIDTH, 1)


_SECTIONS = {"rl": RLSettings, "optimizer": OptimizerSettings,
             "warm_start": WarmStartSettings, "groups": GroupSettings,
             "refine": RefineSettings, "train": LoopSettings,
             "executor": ExecutorSettings, "pretrain": PretrainSettings}


@dataclasses.dataclass(frozen=True)
class TrainSettings(Section):
  """Everything a training run is set by, besides its graphs, topology and
  policy.

  Attributes:
    seed: of the policy's initialisation, sampling and the baselines.
    pmap: split the samples of in-step rewards over the local devices.
    progress_bar, print_table: what the run shows.
    baselines: the baselines scored (and imitated), None for all.
    policy_init: a policy file (:mod:`gplace.rl.policy_file`) to start
      from, "" for a fresh initialisation.
    rl, optimizer, warm_start, groups, refine, train, executor: sections.
    pretrain: set for one policy over many graphs (:mod:`~.pretrain`).
  """

  SECTION = ""
  seed: int = int_field(0, 0, 2**31)
  pmap: bool = flag_field(True)
  progress_bar: bool = flag_field(True, free_on_resume=True)
  print_table: bool = flag_field(True, free_on_resume=True)
  baselines: Optional[tuple[str, ...]] = None
  policy_init: str = ""
  rl: RLSettings = RLSettings()
  optimizer: OptimizerSettings = OptimizerSettings()
  warm_start: WarmStartSettings = WarmStartSettings()
  groups: GroupSettings = GroupSettings()
  refine: RefineSettings = RefineSettings()
  train: LoopSettings = LoopSettings()
  executor: ExecutorSettings = ExecutorSettings()
  pretrain: Optional[PretrainSettings] = None

  def __post_init__(self):
    super().__post_init__()
    for name, cls in _SECTIONS.items():
      value = getattr(self, name)
      if not isinstance(value, cls) and not (name == "pretrain"
                                             and value is None):
        raise ConfigError(f"TrainSettings.{name} must be a {cls.__name__}, "
                          f"got {type(value).__name__}.")
    if self.baselines is not None:
      known = ", ".join(baselines_lib.names())
      if isinstance(self.baselines, str) or not self.baselines:
        raise ConfigError(f"baselines={self.baselines!r} names no baseline; "
                          f"use 'all' or names from {known}.")
      for name in self.baselines:
        if name not in baselines_lib.names():
          raise ConfigError(f"Unknown baseline {name!r} in baselines; use "
                            f"'all' or names from {known}.")
      warm = self.warm_start.baseline
      if warm not in ("best", "none") and warm not in self.baselines:
        raise ConfigError(
            f"warm_start.baseline={warm!r} is not among baselines="
            f"{','.join(self.baselines)!r}; add it there or use "
            "--config.warm_start.baseline=best.")
    if not isinstance(self.policy_init, str):
      raise ConfigError(f"policy_init={self.policy_init!r}: must be the path "
                        "of a policy file or ''.")

  @property
  def warm_steps(self) -> int:
    """Supervised steps before RL (0 without a warm start)."""
    return self.warm_start.steps if self.warm_start.enabled else 0

  @property
  def total_steps(self) -> int:  # the warm start's and RL's
    return self.warm_steps + self.train.num_steps

  def replace(self, **changes) -> "TrainSettings":
    """A copy with fields or sections replaced; a section may be a dict of
    its changed fields (``replace(rl=dict(num_samples=16))``)."""
    for name, value in changes.items():
      if isinstance(value, Mapping) and name in _SECTIONS:
        base = getattr(self, name) or _SECTIONS[name]()
        changes[name] = dataclasses.replace(base, **value)
    return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class PolicySettings:
  """A policy family (:func:`gplace.policies.policy_names`) and its
  hyperparameters (omitted ones take the family's defaults).

  The family checks its own ranges when built; this adds that integers are
  non-negative and floats finite, so bad values fail before any trace.
  """

  name: str = "go"
  hparams: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if not isinstance(self.name, str) or (
        self.name not in policies.policy_names()):
      raise ConfigError(f"Unknown policy.name {self.name!r}; choose from "
                        f"{', '.join(policies.policy_names())}.")
    if not isinstance(self.hparams, Mapping):
      raise ConfigError(
          f"policy hparams must be a mapping of hyperparameter names to "
          f"values, got {type(self.hparams).__name__} {self.hparams!r}; "
          "e.g. hparams={'hidden_size': 64}.")
    object.__setattr__(self, "hparams", dict(self.hparams))
    for key, value in self.hparams.items():
      if is_int(value) and value < 0:
        raise bad_value(f"policy.{key}", value, "a non-negative integer", 1)
      if is_real(value) and not is_int(value) and not math.isfinite(value):
        raise bad_value(f"policy.{key}", value, "a finite number", 1.0)
    self.create(1)  # the family's own checks

  def create(self, num_devices: int) -> policies.Policy:
    """The policy module for ``num_devices`` devices.

    Raises:
      ConfigError: the family rejects these hyperparameters.
    """
    hidden, heads = (self.hparams.get("hidden_size"),
                     self.hparams.get("num_heads"))
    if is_int(hidden) and is_int(heads) and heads and hidden % heads:
      raise ConfigError(
          f"policy.hidden_size={hidden} must be divisible by "
          f"policy.num_heads={heads}; use e.g. --config.policy.num_heads="
          f"{divisors_near(hidden, heads)}.")
    try:
      return policies.create_policy(self.name, num_devices, **self.hparams)
    except PolicyError as err:
      raise ConfigError(f"policy: {err} (set the policy's fields with "
                        f"--config.policy.<field>=...)") from err

  def record(self) -> dict:
    """``{"name": ..., **hparams}``: the ``policy`` section of a config."""
    return dict(name=self.name, **self.hparams)

  @classmethod
  def from_record(cls, record: Mapping) -> "PolicySettings":
    hparams = dict(record)
    return cls(str(hparams.pop("name", "go")), hparams)


#: GO as the quickstart trains it on one graph (``free_logits``: a learned
#: logit offset per group position, for a policy trained on one graph).
DEFAULT_POLICY = PolicySettings("go", dict(
    hidden_size=64, num_sage_layers=2, num_attention_layers=2, num_heads=4,
    segment_length=128, aggregator="max", modulation="film",
    op_embedding_size=16, head_hidden_size=64, free_logits=256,
    priority_levels=0))


# -- records: settings <-> nested dicts (config.json, policy files) ----------

#: The values that records written before a field existed were read with
#: (policy files and run directories of older versions): reading them with
#: today's defaults would change what they do.
LEGACY_DEFAULTS = {"rl.advantage": "ema", "rl.reward_schedule": "best",
                   "rl.fresh_optimizer": False, "rl.entropy_floor": 0.0,
                   "groups.max_groups": 0, "groups.min_nodes": 0}

#: A config's fields naming the graphs and devices (:class:`Experiment`'s).
EXPERIMENT_FIELDS = ("workload", "workload_size", "workload_step",
                     "topology", "graph_cache")


def free_on_resume() -> tuple[str, ...]:
  """The dotted fields a resumed run may change (how long it runs, how it
  reports, the refinement after training); any other changes results."""
  out = [f.name for f in dataclasses.fields(TrainSettings)
         if f.metadata.get("free_on_resume")]
  for name, cls in _SECTIONS.items():
    out += [f"{name}.{f.name}" for f in dataclasses.fields(cls)
            if f.metadata.get("free_on_resume")]
  return tuple(out)


def to_record(settings: TrainSettings) -> dict:
  """``settings`` as nested plain values, sectioned as a config."""
  record = {}
  for name in (f.name for f in dataclasses.fields(settings)):
    value = getattr(settings, name)
    if dataclasses.is_dataclass(value):
      value = dataclasses.asdict(value)
    elif name == "baselines":
      value = "all" if value is None else ",".join(value)
    if value is not None:
      record[name] = value
  return record


def _section(cls, values: Mapping, legacy: bool):
  if not isinstance(values, Mapping):
    raise ConfigError(f"{cls.SECTION} must be a group of settings, got "
                      f"{values!r}.")
  names = {f.name for f in dataclasses.fields(cls)}
  if set(values) - names:
    raise unknown_field(set(values) - names, names, cls.SECTION)
  values = dict(values)
  if legacy:
    for path, old in LEGACY_DEFAULTS.items():
      section, name = path.split(".")
      if section == cls.SECTION:
        values.setdefault(name, old)
  return cls(**values)


def from_record(record: Mapping, *, legacy: bool = False) -> TrainSettings:
  """:class:`TrainSettings` from nested values (a config, or a record of
  one: ``config.json``, a policy file's ``config``). Missing fields take
  their defaults, or with ``legacy`` the values older versions read them
  with (:data:`LEGACY_DEFAULTS`); the ``policy`` section and
  :data:`EXPERIMENT_FIELDS` are skipped.

  Raises:
    ConfigError: an unknown field, or a value a field cannot take.
  """
  record = dict(record)
  for skipped in ("policy",) + EXPERIMENT_FIELDS:
    record.pop(skipped, None)
  names = {f.name for f in dataclasses.fields(TrainSettings)}
  if set(record) - names:
    raise unknown_field(set(record) - names, names | {"policy"},
                   "the config")
  values = {}
  for name, value in record.items():
    if name in _SECTIONS:
      values[name] = _section(_SECTIONS[name], value, legacy)
    elif name == "baselines":
      values[name] = _baseline_names(value)
    else:
      values[name] = value
  if legacy:
    for name in ("rl", "groups"):
      if name not in values:
        values[name] = _section(_SECTIONS[name], {}, True)
  return TrainSettings(**values)


def _baseline_names(value) -> Optional[tuple[str, ...]]:  # "all": None
  if value is None or value == "all":
    return None
  if not isinstance(value, str):
    raise ConfigError(f"baselines={value!r}: use 'all' or a comma-separated "
                      "list of baseline names.")
  return tuple(b.strip() for b in value.split(",") if b.strip())


class Experiment(NamedTuple):
  """What a config asks for: workload names (for
  :func:`gplace.workloads.load`), their size and step, the topology (a
  preset, ``"local"`` or ``"file"``), a graph cache directory (or ``""``),
  the policy and the settings; :func:`gplace.rl.data.load_experiment`
  checks the names and loads them."""

  workloads: tuple[str, ...]
  workload_size: str
  workload_step: str
  topology: str
  graph_cache: str
  policy: PolicySettings
  settings: TrainSettings


def from_config(config) -> Experiment:
  """The :class:`Experiment` an ``ml_collections.ConfigDict`` (or nested
  mapping) describes, checked.

  Raises:
    ConfigError: an unknown field, or a value that cannot work.
  """
  record = config.to_dict() if hasattr(config, "to_dict") else dict(config)
  settings = from_record(record)
  policy = PolicySettings.from_record(record.get("policy", {}))
  return Experiment(
      workloads=tuple(w.strip() for w in str(
          record.get("workload", "")).split(",") if w.strip()),
      workload_size=record.get("workload_size", "tiny"),
      workload_step=record.get("workload_step", "train"),
      topology=record.get("topology", "1cpu+4gpu"),
      graph_cache=str(record.get("graph_cache", "") or ""), policy=policy,
      settings=settings)


def to_config(settings: TrainSettings, policy: Optional[PolicySettings] = None):
  """An ``ml_collections.ConfigDict`` of ``settings`` (and ``policy``), as
  ``experiments/configs`` build on; ``from_config`` reads it back."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  record = to_record(settings)
  if policy is not None:
    record["policy"] = policy.record()
  return ml_collections.ConfigDict(record)
