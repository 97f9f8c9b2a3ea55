"""Tests of gplace.rl.validation: bad config values fail before any compile."""

import pytest

from experiments.configs import quickstart
from gplace.errors import ConfigError
from gplace.rl import validation


def tiny_config():
  config = quickstart.get_config()
  config.workload = "random_dag:40:1,random_dag:40:2"
  config.topology = "1cpu+2gpu"
  config.rl.num_samples = 4
  return config


def test_a_good_config_passes(tmp_path):
  validation.validate_config(tiny_config(), str(tmp_path))
  assert validation.num_parallel_devices(tiny_config()) == 4
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
    ("policy.num_heads", 3, "divisible by num_heads"),
    ("policy.modulation", "scale", "modulation"),
    ("policy.name", "placeto_v9", "Unknown config.policy.name"),
    ("train.chunk_steps", 0, "chunk_steps must be positive"),
    ("optimizer.learning_rate", 0.0, "Learning rates"),
    ("warm_start.baseline", "oracle", "warm_start.baseline"),
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


def test_workdir_probe(tmp_path):
  validation.check_workdir(str(tmp_path / "new" / "dir"))
  assert (tmp_path / "new" / "dir").is_dir()
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  with pytest.raises(ConfigError, match="Cannot write to workdir"):
    validation.check_workdir(str(blocker / "sub"))
