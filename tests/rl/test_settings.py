"""Tests of gplace.rl.settings and gplace.rl.checks: bad settings fail
before anything is captured or compiled, with the field, the value and a
fix; configs map onto settings and back."""

import dataclasses
import math

import jax
import pytest

from experiments.configs import quickstart
from experiments.run import check, check_override
from gplace.errors import ConfigError
from gplace.rl import checks
from gplace.rl import data
from gplace.rl import settings as settings_lib
from gplace.rl import workdir as workdir_lib
from gplace.rl.fields import check_fields
from gplace.rl.settings import (LoopSettings, PolicySettings, RLSettings,
                                TrainSettings)


def tiny_config():
  config = quickstart.get_config()
  config.workload = "random_dag:40:1,random_dag:40:2"
  config.topology = "1cpu+2gpu"
  config.rl.reward = "simulator"  # split over the 4 local devices
  config.rl.num_samples = 4
  return config


def _set(config, path, value):
  node = config
  *parents, leaf = path.split(".")
  for parent in parents:
    node = node[parent]
  with node.ignore_type():
    node[leaf] = value


def test_the_quickstart_is_every_default():
  experiment = settings_lib.from_config(quickstart.get_config())
  assert experiment.settings == TrainSettings()
  assert experiment.policy == settings_lib.DEFAULT_POLICY
  assert experiment.workloads == ("rnnlm2",)
  # and back: a config of the settings reads as the same settings
  config = settings_lib.to_config(experiment.settings, experiment.policy)
  config.workload = "rnnlm2"
  assert settings_lib.from_config(config) == experiment


def test_a_good_config_passes_and_picks_the_parallel_devices():
  *_, experiment = check(tiny_config(), log=lambda _: None)
  assert checks.num_parallel_devices(experiment.settings) == 4
  host = tiny_config()
  host.rl.reward = "simulator_host"  # host rewards: one device
  *_, experiment = check(host, log=lambda _: None)
  assert checks.num_parallel_devices(experiment.settings) == 1
  config = tiny_config()
  config.pmap = False
  assert checks.num_parallel_devices(
      settings_lib.from_config(config).settings) == 1


@pytest.mark.parametrize("field,value,message", [
    ("workload", "no_such_model", "Unknown workload"),
    ("workload", " , ", "config.workload is empty"),
    ("workload_size", "huge", "workload_size"),
    ("topology", "3tpu", "Unknown topology"),
    ("rl.num_samples", 6, "multiple of the 4 local devices"),
    ("rl.loss", "a2c", "rl.loss='a2c': must be one of 'ppo', 'reinforce'"),
    ("rl.reward", "oracle", "rl.reward"),
    ("rl.explore_epsilon", 1.0, "explore_epsilon"),
    ("policy.num_heads", 3, r"divisible by policy.num_heads=3; use "
     r"e.g. --config.policy.num_heads=2 or 4"),
    ("policy.modulation", "scale", "modulation"),
    ("policy.name", "placeto_v9", "Unknown policy.name"),
    ("train.chunk_steps", 0, "chunk_steps=0: must be a positive integer"),
    ("optimizer.learning_rate", 0.0, "learning_rate=0.0: must be a finite"),
    ("warm_start.baseline", "oracle", "warm_start.baseline"),
    ("rl.advantage", "gae", "rl.advantage"),
    ("optimizer.decay", "linear", r"optimizer.decay='linear': must be one "
     r"of 'none', 'cosine'"),
    ("optimizer.final_fraction", 1.5, "final_fraction=1.5"),
    ("groups.rule", "metis", "groups.rule"),
    ("groups.max_groups", -1, "groups.max_groups=-1: must be a non-negative"),
    ("train.eval_samples", 0, "eval_samples=0: must be a positive integer"),
    ("policy.free_logits", -2, "free_logits=-2: must be a non-negative"),
    ("refine.evaluations", 2, "refine.evaluations=2 is too few"),
    ("refine.learning_rate", 0.0, "refine.learning_rate=0.0: must be a "
     "finite"),
    ("refine.max_moves", 0, "max_moves=0: must be a positive integer"),
    ("refine.start", "heft", "refine.start='heft': must be one of 'policy'"),
    ("rl.reward_schedule", "planned", "reward_schedule='planned': must be "
     "one of 'best'"),
    # tiny_config's reward is in the jitted step, not on the host
    ("rl.reward_schedule", "dynamic", "applies to host-simulated rewards"),
])
def test_bad_config_values_fail_at_start(field, value, message):
  config = tiny_config()
  _set(config, field, value)
  with pytest.raises(ConfigError, match=message):
    check(config, log=lambda _: None)


@pytest.mark.parametrize("reward,mutate_best,message", [
    ("simulator", 0.0, r"own order or priority levels .* or "
     r"--config.policy.priority_levels=0"),
    ("executor", 0.0, "simulator_dynamic"),
    ("simulator_dynamic", 0.01, r"one of 2 priority levels per node.*"
     r"mutate_best=0 or --config.policy.priority_levels=0"),
])
def test_priority_levels_need_a_reward_that_runs_them_and_no_search(
    reward, mutate_best, message):
  policy = PolicySettings("go", dict(priority_levels=2))
  module = policy.create(3)
  settings = TrainSettings(rl=RLSettings(reward=reward,
                                         mutate_best=mutate_best))
  with pytest.raises(ConfigError, match=message):
    checks.check_actions(settings, "go", module)
  checks.check_actions(TrainSettings(rl=RLSettings(
      reward="simulator_dynamic")), "go", module)  # and this one passes


def test_unknown_policy_hyperparameter_is_a_config_error():
  config = tiny_config()
  config.policy.num_layers = 3
  with pytest.raises(ConfigError, match="num_layers"):
    settings_lib.from_config(config)


def test_executor_rewards_need_a_runnable_workload():
  config = tiny_config()
  config.rl.reward = "executor"
  with pytest.raises(ConfigError, match="runnable workload"):
    data.check_experiment(settings_lib.from_config(config))


def test_executor_rewards_need_several_devices(monkeypatch):
  graph = data.experiment_topology  # any module attribute: keep pylint calm
  del graph
  loaded = [type("W", (), dict(name="w", fn=lambda: 0))()]
  monkeypatch.setattr(checks, "placement_devices", lambda: jax.devices()[:1])
  settings = TrainSettings(rl=RLSettings(reward="executor"))
  with pytest.raises(ConfigError, match="xla_force_host_platform_device"):
    checks.check_run(loaded, data.experiment_topology("1cpu+2gpu", []),
                     settings_lib.DEFAULT_POLICY, settings)


def test_workdir_probe(tmp_path):
  workdir_lib.check_workdir(str(tmp_path / "new" / "dir"))
  assert (tmp_path / "new" / "dir").is_dir()
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  with pytest.raises(ConfigError, match="Cannot write to workdir"):
    workdir_lib.check_workdir(str(blocker / "sub"))


# The cases the fuzzing of issue 13 found, and what they did before.
@pytest.mark.parametrize("path,value", [
    ("policy.num_heads", 0),           # ZeroDivisionError in validation
    ("rl.ppo_epochs", 0),              # IndexError from JAX after 79 s
    ("policy.hidden_size", 0),         # ZeroDivisionError in flax
    ("rl.entropy_weight", math.nan),   # a NaN policy, exit 0
    ("train.max_to_keep", 0),          # nothing to resume, exit 0
    ("rl.baseline_decay", 2.0),        # accepted
])
def test_issue_13_values_name_field_value_and_fix(path, value):
  config = tiny_config()
  _set(config, path, value)
  with pytest.raises(ConfigError) as info:
    check(config, log=lambda _: None)
  message = str(info.value)
  if path.startswith("policy."):  # the policy family checks its own fields
    assert f"{path.split('.')[1]}={value!r}" in message
    assert "--config.policy.<field>=" in message
  else:
    assert f"{path}={value!r}" in message
    assert f"use e.g. --config.{path}=" in message


_SECTIONS = [TrainSettings] + [type(getattr(TrainSettings(), f.name))
                               for f in dataclasses.fields(TrainSettings)
                               if dataclasses.is_dataclass(
                                   getattr(TrainSettings(), f.name))]
_CHECKED = [(cls, f) for cls in _SECTIONS for f in dataclasses.fields(cls)
            if f.metadata.get("check") is not None]


def _bad_values(check):
  """Values just outside a field's check (and non-finite / mistyped)."""
  name = type(check).__name__
  if name == "_Int":
    bad = [check.minimum - 1, float(check.example), True, "3"]
    if check.maximum is not None:
      bad.append(check.maximum)
    return bad
  if name == "_Real":
    bad = [math.nan, math.inf, -math.inf, "0.1"]
    bad.append(check.low - 1e-3 if check.low_included else check.low)
    if math.isfinite(check.high):
      bad.append(check.high + 1e-3 if check.high_included else check.high)
    return bad
  if name == "_Choice":
    return ["no_such_choice", 3]
  return ["yes", 1]


@pytest.mark.parametrize("cls,field", _CHECKED,
                         ids=[f"{c.__name__}.{f.name}" for c, f in _CHECKED])
def test_every_declared_field_is_checked(cls, field):
  check_fields(cls())  # the defaults pass
  example = field.metadata["check"].example
  dataclasses.replace(cls(), **{field.name: example})  # so does the example
  for value in _bad_values(field.metadata["check"]):
    with pytest.raises(ConfigError, match=f"{field.name}="):
      dataclasses.replace(cls(), **{field.name: value})


def test_unknown_fields_are_named_with_the_closest():
  with pytest.raises(ConfigError, match="'num_sample' in rl; did you mean "
                     "num_samples"):
    settings_lib.from_record(dict(rl=dict(num_sample=3)))
  with pytest.raises(ConfigError, match="'trian'"):
    settings_lib.from_record(dict(trian=dict(num_steps=3)))


def test_a_missing_field_takes_its_default_or_its_legacy_value():
  config = tiny_config()
  del config.train["num_steps"]
  del config.rl["advantage"]
  settings = settings_lib.from_config(config).settings
  assert settings.train.num_steps == LoopSettings().num_steps
  assert settings.rl.advantage == "batch"
  # A record an older version wrote is read as that version read it.
  old = settings_lib.from_record(dict(rl=dict(num_samples=16)), legacy=True)
  assert (old.rl.advantage, old.rl.reward_schedule, old.rl.entropy_floor,
          old.rl.fresh_optimizer) == ("ema", "best", 0.0, False)
  assert (old.groups.max_groups, old.groups.min_nodes) == (0, 0)


def test_settings_say_which_fields_may_change_on_resume():
  free = settings_lib.free_on_resume()
  assert "train.num_steps" in free and "refine.evaluations" in free
  assert "progress_bar" in free
  assert "rl.num_samples" not in free and "seed" not in free


def test_replace_takes_sections_as_dicts():
  settings = TrainSettings().replace(rl=dict(num_samples=8), seed=3)
  assert settings.rl.num_samples == 8 and settings.seed == 3
  assert settings.rl.loss == RLSettings().loss
  with pytest.raises(ConfigError, match="rl.num_samples=0"):
    TrainSettings().replace(rl=dict(num_samples=0))


@pytest.mark.parametrize("field,value,message", [
    ("workload", "random_dag:1", "at least 2 nodes"),
    # Was "cannot import module 'random_dag'" (taken for module:function).
    ("workload", "random_dag:abc", r"not a well-formed random DAG name.*"
                                   r"random_dag:N\[:seed\]"),
    ("workload", "random_dag:10:x", "not a well-formed random DAG name"),
    ("baselines", "m_etf,no_such", "Unknown baseline 'no_such'"),
    # Passed, then the run failed on baseline '' after writing config.json.
    ("baselines", "", "names no baseline"),
    ("baselines", " , ", "names no baseline"),
    ("warm_start.baseline", "heft", "not among baselines"),
])
def test_workload_and_baseline_names(field, value, message):
  config = tiny_config()
  config.baselines = "m_etf,round_robin"
  _set(config, field, value)
  with pytest.raises(ConfigError, match=message):
    data.check_experiment(settings_lib.from_config(config))


def test_selected_baselines_skip_blanks():
  config = tiny_config()
  config.baselines = "m_etf, ,heft,"
  assert settings_lib.from_config(config).settings.baselines == (
      "m_etf", "heft")
  config.baselines = "all"
  assert settings_lib.from_config(config).settings.baselines is None


def test_graph_cache_must_hold_the_graphs_or_be_writable(tmp_path):
  config = tiny_config()
  config.workload = "rnnlm2"
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  config.graph_cache = str(blocker / "cache")  # FileNotFoundError before
  experiment = settings_lib.from_config(config)
  with pytest.raises(ConfigError, match="graph_cache=.*cannot be written"):
    data.load_experiment(experiment)
  # A read-only cache that holds every graph is fine (checked, not read).
  readonly = tmp_path / "readonly"
  readonly.mkdir()
  (readonly / "rnnlm2_tiny_train.npz").write_bytes(b"")
  readonly.chmod(0o555)
  try:
    data._check_graph_cache(str(readonly),  # pylint: disable=protected-access
                            [str(readonly / "rnnlm2_tiny_train.npz")])
  finally:
    readonly.chmod(0o755)


@pytest.mark.parametrize("path,expected", [
    ("rl.num_sample", "unknown field 'num_sample' in config.rl; did you mean "
                      "--config.rl.num_samples?"),
    ("trian.num_steps", "unknown field 'trian' in the config; did you mean "
                        "--config.train.num_steps?"),
    ("seed.x", "config.seed is a value"),
])
def test_unknown_overrides_name_the_closest_fields(path, expected):
  with pytest.raises(ConfigError) as info:
    check_override(tiny_config(), path)
  assert expected in str(info.value)
  assert "\n" not in str(info.value)
  check_override(tiny_config(), "rl.num_samples")


@pytest.mark.parametrize("hparams", ["big", 3, [("hidden_size", 8)]])
def test_policy_hparams_must_be_a_mapping(hparams):
  # "big" was dict()'s ValueError, 3 its TypeError.
  with pytest.raises(ConfigError, match="hparams must be a mapping"):
    PolicySettings("go", hparams)
