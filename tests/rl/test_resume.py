"""Tests of gplace.rl.resume: a workdir resumes only under the config
that wrote it."""

import json
import os

import pytest

from gplace.errors import ConfigError
from gplace.rl import resume
from test_validation import tiny_config


def _saved_run(tmp_path, config, step=4):
  workdir = tmp_path / "run"
  (workdir / "checkpoints" / str(step)).mkdir(parents=True)
  with open(workdir / "config.json", "w") as f:
    json.dump(resume.config_record(config), f)
  return str(workdir)


def _with_search(config):
  config.optimizer.learning_rate = 3e-4
  config.rl.mutate_best = 0.01
  return config


def test_resume_refuses_a_different_config(tmp_path):
  workdir = _saved_run(tmp_path, _with_search(tiny_config()))
  config = _with_search(tiny_config())
  config.rl.mutate_best = 0.0
  config.optimizer.learning_rate = 1e-3
  with pytest.raises(ConfigError) as info:
    resume.check_resume(config, workdir, 4)
  message = str(info.value)
  assert "optimizer.learning_rate: 0.0003 -> 0.001" in message
  assert "rl.mutate_best: 0.01 -> 0.0" in message
  assert "--config.train.resume=False" in message and "new --workdir" in message


def test_resume_allows_fields_that_do_not_change_results(tmp_path):
  workdir = _saved_run(tmp_path, tiny_config())
  config = tiny_config()
  config.train.num_steps = 500
  config.train.chunk_steps = 3
  config.train.checkpoint_every = 7
  config.train.max_to_keep = 5
  config.progress_bar = not config.progress_bar
  config.graph_cache = "/tmp/elsewhere"
  resume.check_resume(config, workdir, 4)
  assert resume.config_differences(
      resume.config_record(tiny_config()), config) == []


def test_resume_refuses_a_checkpoint_past_the_last_step(tmp_path):
  saved = tiny_config()
  saved.warm_start.steps, saved.warm_start.baseline = 50, "best"
  workdir = _saved_run(tmp_path, saved, step=120)
  config = tiny_config()
  config.warm_start.steps, config.warm_start.baseline = 50, "best"
  # 50 warm-start + 60 RL steps
  config.train.num_steps = 60
  with pytest.raises(ConfigError, match="past this config's last step 110"):
    resume.check_resume(config, workdir, 120)


def test_resume_refuses_without_a_readable_config_json(tmp_path):
  workdir = _saved_run(tmp_path, tiny_config())
  with open(os.path.join(workdir, "config.json"), "w") as f:
    f.write('{"seed": ')
  with pytest.raises(ConfigError, match="cannot be read"):
    resume.check_resume(tiny_config(), workdir, 4)
