"""Training across processes (gplace.rl.distributed, issue 48).

The slow tests start ``experiments/run.py`` as two processes of two forced
CPU devices each (gloo over a free loopback port) and compare them with one
process of four devices: ``pytest --run-slow`` (or ``GPLACE_SLOW_TESTS=1``)
runs them, a few minutes on two cores.
"""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from experiments import run as run_script
from experiments.configs import quickstart
from gplace import processes
from gplace._testing import finish_processes, start_processes
from gplace.errors import ConfigError, DistributedError, GplaceError
from gplace.rl import checkpoint
from gplace.rl import checks
from gplace.rl import distributed
from gplace.rl import scoring
from gplace.rl import settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# A quickstart-like run: two small graphs, a tiny GO, rewards in the step;
# 4 warm-start and 16 RL steps, checkpoints at 10 and 20.
OVERRIDES = {
    "workload": "random_dag:40:1,random_dag:40:2",
    "topology": "1cpu+2gpu",
    "baselines": "single_device,round_robin,m_etf",
    "progress_bar": False,
    "print_table": False,
    "policy.hidden_size": 8, "policy.num_sage_layers": 1,
    "policy.num_attention_layers": 1, "policy.num_heads": 2,
    "policy.segment_length": 16, "policy.op_embedding_size": 4,
    "policy.head_hidden_size": 8,
    "rl.reward": "simulator", "rl.num_samples": 8, "rl.ppo_epochs": 2,
    "warm_start.baseline": "best", "warm_start.steps": 4,
    "train.num_steps": 16, "train.chunk_steps": 5,
    "train.checkpoint_every": 10, "train.eval_samples": 8,
}
TOTAL_STEPS = 20


def small_config(**changes):
  config = quickstart.get_config()
  for path, value in dict(OVERRIDES, **changes).items():
    node = config
    *parents, name = path.split(".")
    for parent in parents:
      node = node[parent]
    node[name] = value
  return config


def launch(workdir, num_processes=2, devices=2, heartbeat_s=5,
           overrides=OVERRIDES, **changes):
  """``num_processes`` ``run.py`` processes of ``devices`` forced CPU
  devices each, training into ``workdir`` (the quickstart config with
  ``overrides`` and ``changes``): their Popen objects."""
  args = [os.path.join(ROOT, "experiments", "run.py"),
          "--config", os.path.join(ROOT, "experiments/configs/quickstart.py"),
          f"--workdir={workdir}", f"--heartbeat_timeout_s={heartbeat_s}"]
  args += [f"--config.{k}={v}" for k, v in dict(overrides, **changes).items()]
  return start_processes(args, num_processes, devices=devices, root=ROOT)


def finish(processes, timeout_s=300):
  """``[(returncode, stdout, stderr)]``, killing all after ``timeout_s``."""
  return finish_processes(processes, timeout_s)


def saved_state(workdir, step):
  """The training state saved at ``step`` in ``workdir``, as a plain tree."""
  path = os.path.join(workdir, "checkpoints", str(step), "default")
  with ocp.StandardCheckpointer() as checkpointer:
    return checkpointer.restore(path)


def losses(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [(row["step"], row["loss"]) for row in map(json.loads, f)]


def assert_states_close(got, want, atol=1e-5):
  jax.tree.map(lambda a, b: np.testing.assert_allclose(
      np.asarray(a, np.float64), np.asarray(b, np.float64), atol=atol),
               got["params"], want["params"])
  for name in ("step", "rng", "best_placement"):
    np.testing.assert_array_equal(got[name], want[name])


slow = pytest.mark.slow


# -- the layout and its errors (no processes started) --------------------------


def test_one_process_when_nothing_is_set():
  layout = distributed.resolve_layout(environ={})
  assert layout == distributed.ProcessLayout(None, 1, 0, "single")
  assert distributed.initialize(environ={}).num_processes == 1


def test_the_layout_comes_from_arguments_or_the_environment():
  assert distributed.resolve_layout("10.0.0.1:1234", 4, 3, environ={}) == (
      distributed.ProcessLayout("10.0.0.1:1234", 4, 3, "arguments"))
  env = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234",
         "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
  assert distributed.resolve_layout(environ=env) == (
      distributed.ProcessLayout("10.0.0.1:1234", 2, 1, "environment"))
  # An argument wins over its variable.
  assert distributed.resolve_layout(process_id=0, environ=env).process_id == 0


def test_slurm_gives_the_count_and_id_and_jax_the_coordinator():
  env = {"SLURM_JOB_ID": "77", "SLURM_NTASKS": "8", "SLURM_PROCID": "5",
         "SLURM_STEP_NODELIST": "node[1-2]"}
  assert distributed.resolve_layout(environ=env) == (
      distributed.ProcessLayout(None, 8, 5, "slurm"))


@pytest.mark.parametrize("kwargs, env, words", [
    (dict(coordinator_address="127.0.0.1:1234", num_processes=2,
          process_id=2), {}, "process_id=2 is out of range"),
    (dict(coordinator_address="127.0.0.1:1234", num_processes=2,
          process_id=-1), {}, "process_id=-1 is out of range"),
    (dict(num_processes=2, process_id=1), {}, "coordinator_address is "
     "missing"),
    (dict(coordinator_address="127.0.0.1:1234", num_processes=2), {},
     "process_id is missing"),
    (dict(coordinator_address="127.0.0.1:1234", process_id=0), {},
     "num_processes is missing"),
    (dict(num_processes=0, process_id=0), {}, "at least 1"),
    (dict(coordinator_address="127.0.0.1", num_processes=2, process_id=0),
     {}, "is not host:port"),
    (dict(coordinator_address="host:99999", num_processes=2, process_id=0),
     {}, "1..65535"),
    ({}, {"JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"},
     "$JAX_NUM_PROCESSES: num_processes='two' is not an integer"),
    (dict(num_processes=2.5, process_id=0), {}, "must be an integer"),
])
def test_bad_layouts_are_refused_with_the_fix(kwargs, env, words):
  with pytest.raises(DistributedError) as err:
    distributed.initialize(**kwargs, environ=env)
  assert words in str(err.value)
  assert isinstance(err.value, GplaceError)


def test_one_process_shares_without_collectives():
  tree = {"a": np.arange(3)}
  assert distributed.broadcast(tree) is tree
  assert distributed.agree(True) is True
  assert distributed.first_on_primary(lambda: 5) == 5
  assert distributed.is_primary() and not distributed.is_distributed()
  assert len(distributed.parallel_devices(2)) == 2
  assert distributed.local_share(2) == 2


def test_what_cannot_split_over_processes_is_refused(monkeypatch):
  monkeypatch.setattr(distributed, "is_distributed", lambda: True)
  with pytest.raises(ConfigError, match="--config.pmap=True"):
    checks.check_processes(settings.TrainSettings().replace(
        rl=dict(reward="simulator_dynamic"), pmap=False))
  with pytest.raises(ConfigError, match="simulator_host"):
    checks.check_processes(settings.TrainSettings().replace(
        rl=dict(reward="executor")))
  # Host-simulated rewards (the default) split their scoring.
  checks.check_processes(settings.TrainSettings())
  checks.check_processes(settings.TrainSettings().replace(pmap=False))
  checks.check_processes(settings.TrainSettings().replace(
      rl=dict(reward="simulator_dynamic")))


def test_each_process_scores_a_run_of_the_samples():
  assert scoring.sample_shares(8, 2) == [slice(0, 4), slice(4, 8)]
  assert scoring.sample_shares(7, 3) == [slice(0, 3), slice(3, 5),
                                         slice(5, 7)]
  assert scoring.sample_shares(1, 2) == [slice(0, 1), slice(1, 1)]


def test_a_lost_peer_is_told_from_other_errors(monkeypatch):
  gloo = ValueError("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/"
                    "transport/tcp/pair.cc:547] Connection closed by peer "
                    "[127.0.0.1]:44693")
  assert not processes.is_peer_loss(gloo)  # one process: nothing to lose
  monkeypatch.setattr(processes, "is_distributed", lambda: True)
  monkeypatch.setattr(processes, "process_count", lambda: 2)
  monkeypatch.setattr(processes, "process_index", lambda: 1)
  assert processes.is_peer_loss(gloo)
  assert not processes.is_peer_loss(ValueError("shapes do not match"))
  assert processes.lost_peer_message(gloo, "nothing saved") == (
      "gplace: process 0 of 2 (the coordinator) stopped responding (killed "
      "or crashed); nothing saved; restart all 2 processes with the same "
      "command to resume.")
  # Other errors pass through unchanged.
  with pytest.raises(ValueError, match="shapes"):
    with processes.exit_when_a_peer_is_lost(lambda: "unused"):
      raise ValueError("shapes do not match")


def test_run_py_reports_a_bad_process_id_in_one_line(tmp_path):
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, "experiments", "run.py"),
       "--config", os.path.join(ROOT, "experiments/configs/quickstart.py"),
       f"--workdir={tmp_path}", "--coordinator_address=127.0.0.1:1234",
       "--num_processes=2", "--process_id=2"],
      env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
      timeout=120, check=False)
  assert result.returncode == 1, result.stderr[-2000:]
  assert result.stderr.strip().splitlines()[-1].startswith(
      "DistributedError: process_id=2 is out of range for num_processes=2")


def test_a_failure_on_process_0_stops_every_process_at_once(tmp_path):
  # A workdir process 0 cannot write: it says why, the other says who
  # failed, both within seconds (before any compile), neither hangs.
  blocker = tmp_path / "a_file"
  blocker.write_text("")
  results = finish(launch(str(blocker / "run")), timeout_s=120)
  (code_0, _, err_0), (code_1, _, err_1) = results
  assert code_0 == code_1 == 1
  assert err_0.strip().splitlines()[-1].startswith(
      "ConfigError: Cannot write to workdir")
  assert err_1.strip().splitlines()[-1].startswith(
      "DistributedError: process 0 of this run stopped with an error")


# -- two processes against one ------------------------------------------------


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("two"))
  results = finish(launch(workdir))
  for returncode, _, stderr in results:
    assert returncode == 0, stderr[-3000:]
  return workdir, results


@slow
def test_two_processes_train_as_one_process_of_as_many_devices(
    two_processes, tmp_path):
  workdir, results = two_processes
  assert jax.device_count() == 4  # tests/conftest.py
  one = str(tmp_path / "one")
  run_script.run(small_config(), one, log=lambda _: None)
  assert [s for s, _ in losses(workdir)] == list(range(1, TOTAL_STEPS + 1))
  np.testing.assert_allclose([l for _, l in losses(workdir)],
                             [l for _, l in losses(one)], atol=1e-5)
  assert_states_close(saved_state(workdir, TOTAL_STEPS),
                      saved_state(one, TOTAL_STEPS))
  # Process 0 alone wrote and printed; the other said nothing (gloo's
  # own connection lines aside).
  assert "best_placement.json" in results[0][1]
  assert not [line for line in results[1][1].splitlines()
              if not line.startswith("[Gloo]")]
  assert checkpoint.saved_steps(os.path.join(workdir, "checkpoints")) == [
      10, 20]


@slow
def test_the_quickstart_trains_across_processes_as_in_one(tmp_path):
  # The quickstart config as it is (host-simulated rewards, each process
  # scoring its half of every step's samples), 20 RL steps. The reference
  # is one process of as many devices per process: XLA:CPU sizes its
  # thread pool by the forced devices where they outnumber the cores, and
  # the dots of the update split by it (a jitted gradient differs in its
  # last bits between 2 and 4 forced devices on this 2-core machine), so
  # one process of 4 devices here would drift by rounding, not by layout.
  changes = {"train.num_steps": 20}
  two, one = str(tmp_path / "two"), str(tmp_path / "one")
  results = finish(launch(two, overrides={}, heartbeat_s=100, **changes))
  results += finish(launch(one, num_processes=1, overrides={}, **changes))
  for code, _, err in results:
    assert code == 0, err[-3000:]
  assert [s for s, _ in losses(two)] == list(range(1, 21))
  np.testing.assert_allclose([l for _, l in losses(two)],
                             [l for _, l in losses(one)], atol=1e-5)
  assert_states_close(saved_state(two, 20), saved_state(one, 20))


def kill_at_first_checkpoint(workdir, victim):
  """Starts a long run into ``workdir``, SIGKILLs process ``victim`` once
  the checkpoint at step 10 is written, and returns how the other process
  ended ``(returncode, stderr, seconds after the kill)``."""
  processes = launch(workdir, **{"train.num_steps": 1000})
  first = os.path.join(workdir, "checkpoints", "10")
  deadline = time.time() + 240
  while not os.path.isdir(first):
    if time.time() > deadline or any(p.poll() is not None
                                     for p in processes):
      finish(processes, timeout_s=1)
      raise AssertionError("the run did not reach its first checkpoint: " +
                           processes[0].stderr.read()[-3000:])
    time.sleep(0.2)
  processes[victim].send_signal(signal.SIGKILL)
  start = time.time()
  survivor = processes[1 - victim]
  returncode, _, stderr = finish([survivor], timeout_s=90)[0]
  processes[victim].wait()
  return returncode, stderr, time.time() - start


def assert_resumes_as_uninterrupted(workdir, uninterrupted):
  """The intact checkpoint at step 10 resumes, for 20 steps in all, into
  the uninterrupted run's state and losses."""
  assert checkpoint.saved_steps(os.path.join(workdir, "checkpoints")) == [10]
  assert int(saved_state(workdir, 10)["step"]) == 10
  results = finish(launch(workdir))
  for code, _, err in results:
    assert code == 0, err[-3000:]
  assert "resumed from step 10" in results[0][1]
  assert_states_close(saved_state(workdir, TOTAL_STEPS),
                      saved_state(uninterrupted, TOTAL_STEPS), atol=0)
  assert losses(workdir)[-10:] == losses(uninterrupted)[-10:]


@slow
def test_a_killed_process_stops_the_other_with_one_line_and_the_run_resumes(
    two_processes, tmp_path):
  workdir = str(tmp_path / "killed_1")
  returncode, stderr, seconds = kill_at_first_checkpoint(workdir, victim=1)
  # Process 0's next collective fails: it says so in one line and exits
  # with its own status, before JAX's heartbeat (5 s) would abort it.
  assert returncode == distributed.PEER_LOST_STATUS, stderr[-3000:]
  assert seconds < 60
  assert (f"ProcessLostError: gplace: process 1 of 2 stopped responding "
          f"(killed or crashed); the last checkpoint, step 10 in {workdir}, "
          "is intact (a restart resumes from it); restart all 2 processes "
          "with the same command to resume.") in stderr, stderr[-3000:]
  assert "Traceback" not in stderr
  assert_resumes_as_uninterrupted(workdir, two_processes[0])


@slow
def test_a_killed_coordinator_stops_the_other_with_one_line_and_resumes(
    two_processes, tmp_path):
  workdir = str(tmp_path / "killed_0")
  returncode, stderr, seconds = kill_at_first_checkpoint(workdir, victim=0)
  assert returncode == distributed.PEER_LOST_STATUS, stderr[-3000:]
  assert seconds < 60
  assert ("ProcessLostError: gplace: process 0 of 2 (the coordinator) "
          "stopped responding (killed or crashed); process 0 keeps the "
          f"checkpoints in {workdir} (a restart resumes from its newest "
          "intact one); restart all 2 processes with the same command to "
          "resume.") in stderr, stderr[-3000:]
  assert_resumes_as_uninterrupted(workdir, two_processes[0])
