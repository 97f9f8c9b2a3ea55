"""Tests of gplace.rl.workdir: a workdir resumes only the run that wrote
it."""

import json
import os

import pytest

from gplace.errors import ConfigError
from gplace.graphs.graph import random_dag
from gplace.rl import workdir as workdir_lib
from gplace.rl.settings import DEFAULT_POLICY, TrainSettings
from gplace.sim import topology as topology_lib
from gplace.workloads import Workload

TOPOLOGY = topology_lib.preset("1cpu+2gpu")
GRAPHS = [Workload("g", random_dag(20, seed=1))]


def _record(settings, graphs=GRAPHS, topology=TOPOLOGY):
  return workdir_lib.run_record(settings, DEFAULT_POLICY, topology, graphs)


def _saved_run(tmp_path, settings, step=4):
  workdir = tmp_path / "run"
  (workdir / "checkpoints" / str(step)).mkdir(parents=True)
  with open(workdir / "config.json", "w") as f:
    json.dump(_record(settings), f)
  return str(workdir)


SEARCH = TrainSettings().replace(optimizer=dict(learning_rate=3e-4),
                                 rl=dict(mutate_best=0.01))


def test_resume_refuses_different_settings(tmp_path):
  workdir = _saved_run(tmp_path, SEARCH)
  settings = SEARCH.replace(optimizer=dict(learning_rate=1e-3),
                            rl=dict(mutate_best=0.0))
  with pytest.raises(ConfigError) as info:
    workdir_lib.check_resume(_record(settings), workdir, 4, settings)
  message = str(info.value)
  assert "optimizer.learning_rate: 0.0003 -> 0.001" in message
  assert "rl.mutate_best: 0.01 -> 0.0" in message
  assert "--config.train.resume=False" in message and "new --workdir" in message


def test_resume_refuses_other_graphs_or_devices(tmp_path):
  workdir = _saved_run(tmp_path, TrainSettings())
  other = [Workload("g", random_dag(20, seed=2))]
  with pytest.raises(ConfigError, match="graphs"):
    workdir_lib.check_resume(_record(TrainSettings(), graphs=other), workdir,
                             4, TrainSettings())
  with pytest.raises(ConfigError, match="topology"):
    workdir_lib.check_resume(_record(TrainSettings(), topology=(
        topology_lib.preset("1cpu+4gpu"))), workdir, 4, TrainSettings())


def test_resume_allows_fields_that_do_not_change_results(tmp_path):
  workdir = _saved_run(tmp_path, TrainSettings())
  settings = TrainSettings(progress_bar=False).replace(train=dict(
      num_steps=500, chunk_steps=3, checkpoint_every=7, max_to_keep=5))
  workdir_lib.check_resume(_record(settings), workdir, 4, settings)
  assert workdir_lib.record_differences(_record(TrainSettings()),
                                        _record(settings)) == []


def test_resume_refuses_a_checkpoint_past_the_last_step(tmp_path):
  saved = TrainSettings().replace(warm_start=dict(steps=50, baseline="best"))
  workdir = _saved_run(tmp_path, saved, step=120)
  settings = saved.replace(train=dict(num_steps=60))  # 50 + 60 steps
  with pytest.raises(ConfigError, match="past this run's last step 110"):
    workdir_lib.check_resume(_record(settings), workdir, 120, settings)


def test_resume_refuses_without_a_readable_config_json(tmp_path):
  workdir = _saved_run(tmp_path, TrainSettings())
  with open(os.path.join(workdir, "config.json"), "w") as f:
    f.write('{"seed": ')
  with pytest.raises(ConfigError, match="cannot be read"):
    workdir_lib.check_resume(_record(TrainSettings()), workdir, 4,
                             TrainSettings())


def test_a_graph_fingerprint_ignores_names_not_structure():
  a, b = random_dag(20, seed=1), random_dag(20, seed=1, name="other")
  assert workdir_lib.graph_fingerprint(a) == workdir_lib.graph_fingerprint(b)
  assert workdir_lib.graph_fingerprint(a) != workdir_lib.graph_fingerprint(
      random_dag(20, seed=2))
