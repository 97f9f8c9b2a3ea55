"""Tests of gplace.rl.workdir: a workdir resumes only the run that wrote
it."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from gplace.errors import ConfigError, WorkdirBusyError
from gplace.graphs.graph import random_dag
from gplace.rl import workdir as workdir_lib
from gplace.rl.settings import DEFAULT_POLICY, TrainSettings
from gplace.sim import presets
from gplace.workloads import Workload

TOPOLOGY = presets.preset("1cpu+2gpu")
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
        presets.preset("1cpu+4gpu"))), workdir, 4, TrainSettings())


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


# -- one run per workdir --------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
  """The pid of a process that has ended."""
  child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True)
  return int(child.stdout)


def test_a_second_lock_on_a_workdir_names_the_holder(tmp_path):
  lines = []
  with workdir_lib.WorkdirLock(str(tmp_path), lines.append):
    with pytest.raises(WorkdirBusyError) as info:
      workdir_lib.WorkdirLock(str(tmp_path), lines.append).acquire()
    message = str(info.value)
    assert f"process {os.getpid()} on host {socket.gethostname()}" in message
    assert "pass another --workdir" in message
    assert isinstance(info.value, ConfigError)
  assert lines == []
  # Released cleanly: the next run takes it without a word.
  with workdir_lib.WorkdirLock(str(tmp_path), lines.append):
    pass
  assert lines == []
  assert (tmp_path / workdir_lib.LOCK_FILE).read_text() == ""


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
  pid = _dead_pid()
  (tmp_path / workdir_lib.LOCK_FILE).write_text(json.dumps(
      {"pid": pid, "host": socket.gethostname(),
       "since": "2026-01-01 10:00:00", "command": "run.py"}))
  lines = []
  with workdir_lib.WorkdirLock(str(tmp_path), lines.append):
    held = json.loads((tmp_path / workdir_lib.LOCK_FILE).read_text())
    assert held["pid"] == os.getpid()
  assert len(lines) == 1
  assert f"took over the lock of {tmp_path} left by process {pid}" in lines[0]
  assert "no longer running" in lines[0]


_HOLDER = """
import os, sys, time
from gplace import rl
from gplace.graphs.graph import random_dag
from gplace.sim import presets
workdir, holding, release = sys.argv[1:4]

def hold(line):
  # The first line comes after the workdir is locked: say so, wait, crash.
  if not os.path.exists(holding):
    open(holding, "w").close()
    deadline = time.time() + 240
    while not os.path.exists(release) and time.time() < deadline:
      time.sleep(0.1)
    os._exit(3)

settings = rl.TrainSettings(progress_bar=False, print_table=False).replace(
    rl=dict(num_samples=4), train=dict(num_steps=4, chunk_steps=2))
rl.train([random_dag(20, seed=1)], presets.preset("1cpu+2gpu"),
         settings=settings, workdir=workdir, log=hold)
"""


def test_two_processes_on_one_workdir(tmp_path):
  # A real second run (experiments/run.py) on a workdir that a live process
  # holds fails fast and names it; once that process has crashed, its lock
  # is taken over.
  workdir, holding, release = (tmp_path / "run", tmp_path / "holding",
                               tmp_path / "release")
  env = {**os.environ, "JAX_PLATFORMS": "cpu",
         "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                               "")}
  first = subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, "-c", _HOLDER, str(workdir), str(holding),
       str(release)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True)
  try:
    deadline = time.time() + 240
    while not holding.exists():
      assert first.poll() is None, first.communicate()[0]
      assert time.time() < deadline, "the first run never started"
      time.sleep(0.2)
    second = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"),
         "--config", str(ROOT / "experiments" / "configs" / "quickstart.py"),
         "--workdir", str(workdir), "--config.workload=random_dag:20:1",
         "--config.topology=1cpu+2gpu", "--config.train.num_steps=4",
         "--config.progress_bar=False"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        check=False)
    assert first.poll() is None  # the first still runs
    assert second.returncode == 1, second.stderr
    assert second.stderr.startswith("WorkdirBusyError: workdir ")
    assert (f"in use by another gplace run: process {first.pid} on host "
            f"{socket.gethostname()} since ") in second.stderr
    assert not (workdir / "metrics.jsonl").exists()
  finally:
    release.touch()
    first.wait(timeout=120)
    first.stdout.close()
  assert first.returncode == 3  # crashed holding the lock
  lines = []
  with workdir_lib.WorkdirLock(str(workdir), lines.append):
    pass
  assert len(lines) == 1 and f"left by process {first.pid}" in lines[0]
  assert "no longer running" in lines[0]
