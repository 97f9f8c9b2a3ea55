"""gplace.rl.train and gplace.rl.pretrain refuse an argument of the wrong
type first thing (gplace.rl.checks.check_arguments), with a GplaceError
that names the argument, what was passed and what to pass (issue 47)."""

import os

import numpy as np
import pytest

import gplace
from gplace.errors import ConfigError, TopologyError
from gplace.graphs.graph import random_dag
from gplace.rl import checks
from gplace.sim import presets

GRAPH = random_dag(12, seed=0, name="tiny")
TOPOLOGY = presets.preset("1cpu+2gpu")


def arguments(**changes):
  """Valid arguments of train (a tiny run), with ``changes``."""
  out = dict(graphs=[GRAPH], topology=TOPOLOGY,
             policy=gplace.rl.PolicySettings(),
             settings=gplace.rl.TrainSettings(), workdir=None,
             log=lambda _: None, progress=None, stop_after_step=None)
  out.update(changes)
  return out


def refused(error, **changes):
  """The message of ``error`` that train refuses ``changes`` with."""
  kwargs = arguments(**changes)
  with pytest.raises(error) as info:
    gplace.rl.train(kwargs.pop("graphs"), kwargs.pop("topology"), **kwargs)
  return str(info.value)


@pytest.mark.parametrize("graphs", [None, 3, True, object(), "random_dag:40",
                                    {"a": GRAPH}])
def test_graphs_that_are_no_sequence_of_graphs_are_refused(graphs):
  message = refused(ConfigError, graphs=graphs)
  assert "graphs must be a gplace.Graph, a gplace.workloads.Workload" in message
  assert type(graphs).__name__ in message or "None" in message
  if isinstance(graphs, str):
    assert "gplace.workloads.load(name)" in message


@pytest.mark.parametrize("topology", [None, 3, "1cpu+2gpu", {}, [],
                                      np.zeros(3), object(), True])
def test_a_topology_that_is_no_topology_is_refused(topology):
  message = refused(TopologyError, topology=topology)
  assert "gplace.rl.train needs topology to be a gplace.Topology" in message
  assert "preset(" in message


@pytest.mark.parametrize("policy, how", [
    ("go", "PolicySettings(name='go')"), (3, "PolicySettings(name='go')"),
    ({"name": "go"}, "PolicySettings.from_record")])
def test_a_policy_that_is_no_policy_settings_is_refused(policy, how):
  message = refused(ConfigError, policy=policy)
  assert "policy must be a gplace.rl.PolicySettings" in message
  assert how in message


@pytest.mark.parametrize("settings, how", [
    ("fast", "gplace.rl.TrainSettings()"),
    ({"seed": 1}, "gplace.rl.TrainSettings(seed=1"),
    (gplace.rl.RLSettings(), "wrap it: gplace.rl.TrainSettings(rl=...)"),
    (gplace.rl.LoopSettings(), "wrap it: gplace.rl.TrainSettings(train=...)")])
def test_settings_that_are_no_train_settings_are_refused(settings, how):
  message = refused(ConfigError, settings=settings)
  assert (f"settings must be a gplace.rl.TrainSettings, got "
          f"{type(settings).__name__}") in message
  assert how in message


@pytest.mark.parametrize("changes, named", [
    (dict(workdir=3), "workdir must be a folder path"),
    (dict(workdir=b"runs"), "workdir must be a folder path"),
    (dict(progress=3), "progress must be None or a callable"),
    (dict(log=3), "log must be a callable"),
    (dict(log=None), "log must be a callable"),
    (dict(stop_after_step=-1), "stop_after_step must be None or a positive"),
    (dict(stop_after_step=0), "stop_after_step must be None or a positive"),
    (dict(stop_after_step=1.5), "stop_after_step must be None or a positive"),
    (dict(stop_after_step="3"), "stop_after_step must be None or a positive"),
    (dict(stop_after_step=True), "stop_after_step must be None or a positive"),
])
def test_bad_keyword_arguments_are_refused(changes, named):
  message = refused(ConfigError, **changes)
  assert named in message and "got " in message and "pass e.g." in message


def test_nothing_runs_before_the_arguments_are_checked(tmp_path):
  workdir = tmp_path / "run"
  refused(ConfigError, workdir=str(workdir), stop_after_step=-1)
  assert not os.path.exists(workdir)  # no lock, no config.json


def test_valid_arguments_pass_the_check(tmp_path):
  checks.check_arguments(
      "gplace.rl.train", GRAPH, TOPOLOGY, gplace.rl.PolicySettings(),
      gplace.rl.TrainSettings(), workdir=tmp_path, log=print,
      progress=lambda step, metrics: None, stop_after_step=np.int64(4))
  checks.check_arguments(
      "gplace.rl.train", (GRAPH, GRAPH), TOPOLOGY,
      gplace.rl.PolicySettings(), gplace.rl.TrainSettings(), workdir=None,
      log=print)


@pytest.mark.parametrize("changes, error, named", [
    (dict(workdir=None), ConfigError, "workdir must be a folder path"),
    (dict(settings=gplace.rl.PretrainSettings()), ConfigError,
     "wrap it: gplace.rl.TrainSettings(pretrain=...)"),
    (dict(topology="1cpu+2gpu"), TopologyError,
     "gplace.rl.pretrain needs topology"),
    (dict(stop_after_step=2.5), ConfigError, "stop_after_step must be None"),
])
def test_pretrain_checks_its_arguments_too(tmp_path, changes, error, named):
  kwargs = dict(graphs=[GRAPH], topology=TOPOLOGY,
                policy=gplace.rl.PolicySettings(),
                settings=gplace.rl.TrainSettings(), workdir=str(tmp_path),
                log=lambda _: None)
  kwargs.update(changes)
  with pytest.raises(error, match=None) as info:
    gplace.rl.pretrain(kwargs.pop("graphs"), kwargs.pop("topology"),
                       **kwargs)
  assert named in str(info.value)
