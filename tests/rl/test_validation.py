"""Tests of gplace.rl.validation: bad config values fail before any compile."""

import math

import jax
import pytest

from experiments.configs import quickstart
from gplace.errors import ConfigError
from gplace.rl import config_fields
from gplace.rl import data
from gplace.rl import validation


def tiny_config():
  config = quickstart.get_config()
  config.workload = "random_dag:40:1,random_dag:40:2"
  config.topology = "1cpu+2gpu"
  config.rl.reward = "simulator"  # split over the 4 local devices
  config.rl.num_samples = 4
  return config


def test_a_good_config_passes(tmp_path):
  validation.validate_config(tiny_config(), str(tmp_path))
  assert validation.num_parallel_devices(tiny_config()) == 4
  host = tiny_config()
  host.rl.reward = "simulator_host"  # host rewards: one device
  validation.validate_config(host, str(tmp_path))
  assert validation.num_parallel_devices(host) == 1
  config = tiny_config()
  config.pmap = False
  assert validation.num_parallel_devices(config) == 1


@pytest.mark.parametrize("field,value,message", [
    ("workload", "no_such_model", "Unknown workload"),
    ("workload", " , ", "config.workload is empty"),
    ("workload_size", "huge", "workload_size"),
    ("topology", "3tpu", "Unknown topology"),
    ("rl.num_samples", 6, "multiple of the 4 local devices"),
    ("rl.loss", "a2c", "config.rl.loss"),
    ("rl.reward", "oracle", "config.rl.reward"),
    ("rl.explore_epsilon", 1.0, "explore_epsilon"),
    ("policy.num_heads", 3, r"divisible by config.policy.num_heads=3; use "
     r"e.g. --config.policy.num_heads=2 or 4"),
    ("policy.modulation", "scale", "modulation"),
    ("policy.name", "placeto_v9", "Unknown config.policy.name"),
    ("train.chunk_steps", 0, "chunk_steps=0: must be a positive integer"),
    ("optimizer.learning_rate", 0.0, "learning_rate=0.0: must be a finite"),
    ("warm_start.baseline", "oracle", "warm_start.baseline"),
    ("rl.advantage", "gae", "config.rl.advantage"),
    ("optimizer.decay", "linear", r"config.optimizer.decay must be one of "
     r"\('none', 'cosine'\)"),
    ("optimizer.final_fraction", 1.5, "final_fraction=1.5"),
    ("groups.rule", "metis", "config.groups.rule"),
    ("groups.max_groups", -1, "groups.max_groups=-1: must be a non-negative"),
    ("train.eval_samples", 0, "eval_samples=0: must be a positive integer"),
    ("policy.free_logits", -2, "free_logits=-2: must be a non-negative"),
    ("refine.evaluations", 2, "config.refine.evaluations=2 is too few"),
    ("refine.learning_rate", 0.0, "refine.learning_rate=0.0: must be a "
     "finite"),
    ("refine.max_moves", 0, "max_moves=0: must be a positive integer"),
    ("refine.start", "heft", "config.refine.start='heft': use 'policy'"),
    ("rl.reward_schedule", "planned", "reward_schedule='planned': use "
     "'best'"),
    # tiny_config's reward is in the jitted step, not on the host
    ("rl.reward_schedule", "dynamic", "applies to host-simulated rewards"),
])
def test_bad_config_values_fail_at_start(tmp_path, field, value, message):
  config = tiny_config()
  node = config
  *parents, leaf = field.split(".")
  for parent in parents:
    node = node[parent]
  node[leaf] = value
  with pytest.raises(ConfigError, match=message):
    validation.validate_config(config, str(tmp_path))


@pytest.mark.parametrize("reward,mutate_best,message", [
    ("simulator", 0.0, r"own order or priority levels .* or "
     r"--config.policy.priority_levels=0"),
    ("executor", 0.0, "simulator_dynamic"),
    ("simulator_dynamic", 0.01, r"one of 2 priority levels per node.*"
     r"mutate_best=0 or --config.policy.priority_levels=0"),
])
def test_priority_levels_need_a_reward_that_runs_them_and_no_search(
    reward, mutate_best, message):
  config = tiny_config()
  config.policy.priority_levels = 2
  config.rl.update(reward=reward, mutate_best=mutate_best)
  with pytest.raises(ConfigError, match=message):
    validation.validate_policy(config)
  config.rl.update(reward="simulator_dynamic", mutate_best=0.0)
  validation.validate_policy(config)                  # and this one passes


def test_unknown_policy_hyperparameter_is_a_config_error(tmp_path):
  config = tiny_config()
  config.policy.num_layers = 3
  with pytest.raises(ConfigError, match="num_layers"):
    validation.validate_policy(config)


def test_executor_rewards_need_a_runnable_workload():
  config = tiny_config()
  config.rl.reward = "executor"
  with pytest.raises(ConfigError, match="runnable workload"):
    validation.validate_rl(config)


def test_executor_rewards_need_several_devices(monkeypatch):
  config = tiny_config()
  config.rl.reward = "executor"
  config.workload = "rnnlm2"
  monkeypatch.setattr(validation.reward_setup, "placement_devices",
                      lambda: jax.devices()[:1])
  with pytest.raises(ConfigError, match="xla_force_host_platform_device"):
    validation.validate_rl(config)


def test_workdir_probe(tmp_path):
  validation.check_workdir(str(tmp_path / "new" / "dir"))
  assert (tmp_path / "new" / "dir").is_dir()
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  with pytest.raises(ConfigError, match="Cannot write to workdir"):
    validation.check_workdir(str(blocker / "sub"))


def _set(config, path, value):
  node = config
  *parents, leaf = path.split(".")
  for parent in parents:
    node = node[parent]
  with node.ignore_type():
    node[leaf] = value


# The cases the fuzzing of issue 13 found, and what they did before.
@pytest.mark.parametrize("path,value", [
    ("policy.num_heads", 0),           # ZeroDivisionError in validation
    ("rl.ppo_epochs", 0),              # IndexError from JAX after 79 s
    ("policy.hidden_size", 0),         # ZeroDivisionError in flax
    ("rl.entropy_weight", math.nan),   # a NaN policy, exit 0
    ("train.max_to_keep", 0),          # nothing to resume, exit 0
    ("rl.baseline_decay", 2.0),        # accepted
])
def test_issue_13_values_name_field_value_and_fix(tmp_path, path, value):
  config = tiny_config()
  _set(config, path, value)
  with pytest.raises(ConfigError) as info:
    validation.validate_config(config, str(tmp_path))
  message = str(info.value)
  assert f"config.{path}={value!r}" in message
  assert f"use e.g. --config.{path}=" in message


def _bad_values(valid):
  """Values just outside ``valid`` (and non-finite / mistyped ones)."""
  if isinstance(valid, config_fields.IntRange):
    bad = [valid.minimum - 1, float(valid.example), True, "3"]
    if valid.maximum is not None:
      bad.append(valid.maximum)
    return bad
  bad = [math.nan, math.inf, -math.inf, "0.1"]
  bad.append(valid.low - 1e-3 if valid.low_included else valid.low)
  if math.isfinite(valid.high):
    bad.append(valid.high + 1e-3 if valid.high_included else valid.high)
  return bad


@pytest.mark.parametrize("path", sorted({**config_fields.INT_FIELDS,
                                         **config_fields.FLOAT_FIELDS}))
def test_every_numeric_field_is_range_checked(tmp_path, path):
  valid = {**config_fields.INT_FIELDS, **config_fields.FLOAT_FIELDS}[path]
  config = tiny_config()
  _set(config, path, valid.example)
  config_fields.validate_numbers(config)  # the example is valid
  for value in _bad_values(valid):
    _set(config, path, value)
    with pytest.raises(ConfigError, match=f"config.{path}="):
      config_fields.validate_numbers(config)


@pytest.mark.parametrize("path,value", [
    ("policy.num_sage_layers", -1), ("policy.segment_length", 0),
    ("policy.op_embedding_size", 0), ("policy.head_hidden_size", 0)])
def test_policy_sizes_are_range_checked(path, value):
  config = tiny_config()
  _set(config, path, value)
  with pytest.raises(ConfigError, match=f"config.{path}={value}: must be"):
    validation.validate_policy(config)


def test_bool_fields_and_missing_fields(tmp_path):
  config = tiny_config()
  _set(config, "train.resume", "yes")
  with pytest.raises(ConfigError, match="train.resume='yes': must be True"):
    config_fields.validate_numbers(config)
  config = tiny_config()
  del config.train["num_steps"]
  with pytest.raises(ConfigError, match="config.train.num_steps is missing"):
    config_fields.validate_numbers(config)


@pytest.mark.parametrize("field,value,message", [
    ("workload", "random_dag:1", "at least 2 nodes"),
    ("baselines", "m_etf,no_such", "Unknown baseline 'no_such'"),
    # Passed, then the run failed on baseline '' after writing config.json.
    ("baselines", "", "names no baseline"),
    ("baselines", " , ", "names no baseline"),
    ("warm_start.baseline", "heft", "not among config.baselines"),
])
def test_workload_and_baseline_names(tmp_path, field, value, message):
  config = tiny_config()
  config.baselines = "m_etf,round_robin"
  _set(config, field, value)
  with pytest.raises(ConfigError, match=message):
    validation.validate_config(config, str(tmp_path))


def test_selected_baselines_skip_blanks():
  config = tiny_config()
  config.baselines = "m_etf, ,heft,"
  assert data.selected_baselines(config) == ["m_etf", "heft"]
  config.baselines = "all"
  assert data.selected_baselines(config) is None


def test_graph_cache_must_hold_the_graphs_or_be_writable(tmp_path):
  config = tiny_config()
  config.workload = "rnnlm2"
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  config.graph_cache = str(blocker / "cache")  # FileNotFoundError before
  with pytest.raises(ConfigError, match="graph_cache=.*cannot be written"):
    validation.check_graph_cache(config)
  config.graph_cache = str(tmp_path / "new_cache")
  validation.check_graph_cache(config)  # created, writable
  # A read-only cache that holds every graph is fine.
  readonly = tmp_path / "readonly"
  readonly.mkdir()
  (readonly / "rnnlm2_tiny_train.npz").write_bytes(b"")
  readonly.chmod(0o555)
  try:
    config.graph_cache = str(readonly)
    validation.check_graph_cache(config)
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
    config_fields.check_override(tiny_config(), path)
  assert expected in str(info.value)
  assert "\n" not in str(info.value)
  config_fields.check_override(tiny_config(), "rl.num_samples")
