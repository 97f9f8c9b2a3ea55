"""Tests of gplace.rl.pretrain and gplace.rl.policy_file: one policy over
switched batches of graphs, written to a policy file that fine-tuning and
gplace.optimize read."""

import importlib
import json
import os

import jax
import numpy as np
import pytest

from experiments.configs import pretrain as pretrain_config
from experiments.run import run
from gplace import workloads
from gplace.errors import ConfigError, PolicyError
from gplace.rl import data, policy_file, pretraining
from gplace.rl import settings as settings_lib
from gplace.sim import presets

GRAPHS = "random_dag:30:1,random_dag:90:2,random_dag:40:3"


def small_config():
  """The pretraining config, shrunk: three small DAGs, two per batch."""
  config = pretrain_config.get_config()
  config.workload = GRAPHS
  config.topology = "1cpu+2gpu"
  config.baselines = "single_device,round_robin,m_etf"
  config.progress_bar = False
  config.policy.update(hidden_size=8, num_sage_layers=1,
                       num_attention_layers=1, num_heads=2, segment_length=16,
                       op_embedding_size=4, head_hidden_size=8)
  config.rl.num_samples = 4
  config.pretrain.graphs_per_batch = 2
  config.warm_start.steps = 4
  config.train.update(num_steps=4, chunk_steps=2, checkpoint_every=4)
  return config


def family_policy(name):
  """``config.policy`` of another family's experiment config."""
  module = importlib.import_module(f"experiments.configs.{name}")
  return module.get_config().policy


def test_batches_have_one_size_and_take_turns():
  assert pretraining.batch_members(5, 2) == [[0, 1], [2, 3], [4, 0]]
  assert pretraining.batch_members(2, 4) == [[0, 1]]
  assert [pretraining.batch_at(s, 10, 3) for s in (0, 9, 10, 25, 30)] == [
      0, 0, 1, 2, 0]


def test_batches_padded_like_the_whole_set_share_every_shape():
  experiment = settings_lib.from_config(small_config())
  topology = presets.preset(experiment.topology)
  setups = data.setup_graphs(
      [workloads.load(name) for name in experiment.workloads], topology,
      experiment.settings, log=lambda line: None)
  batches = [data.make_batch([setups[i] for i in m], topology,
                             schedule="dynamic", pad_like=setups)
             for m in pretraining.batch_members(3, 2)]
  shapes = [jax.tree.map(np.shape, b) for b in batches]
  assert shapes[0] == shapes[1]
  alone = data.make_batch([setups[2], setups[0]], topology,
                          schedule="dynamic")
  assert jax.tree.map(np.shape, alone) != shapes[0]  # no 90-node DAG


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("pretrain"))
  lines = []
  result = run(small_config(), workdir, log=lines.append)
  return workdir, result, lines


def test_pretraining_switches_batches_and_writes_a_policy_file(pretrained):
  workdir, result, lines = pretrained
  with open(os.path.join(workdir, pretraining.METRICS_FILE)) as f:
    records = [json.loads(line) for line in f]
  assert [r["step"] for r in records] == [2, 4, 6, 8]
  assert [r["batch"] for r in records] == [0, 1, 0, 1]
  assert [r["phase"] for r in records] == ["warm_start"] * 2 + ["rl"] * 2
  assert all(r["samples_vs_baselines"] > 0 for r in records[2:])
  assert result.step == 8 and result.path.endswith(pretraining.POLICY_FILE)
  assert set(result.greedy_vs_best_baseline) == set(GRAPHS.split(","))
  assert all(np.isfinite(r) and r > 0
             for r in result.greedy_vs_best_baseline.values())
  loaded = policy_file.load_policy(result.path)
  assert loaded.n_devices == 3 and loaded.topology == "1cpu+2gpu"
  assert loaded.meta["trained_on"] == GRAPHS.split(",")
  assert loaded.policy["free_logits"] == 0
  np.testing.assert_equal(jax.tree.map(np.asarray, result.params),
                          loaded.params)
  assert any("wrote the pretrained policy" in line for line in lines)


def test_a_stopped_pretraining_resumes(tmp_path):
  config = small_config()
  first = run(config, str(tmp_path), log=lambda line: None,
                            stop_after_step=4)
  assert first.step == 4 and first.path == ""
  assert not os.path.exists(tmp_path / pretraining.POLICY_FILE)
  metrics = tmp_path / pretraining.METRICS_FILE
  # Killed after writing step 6's line, before its checkpoint (step 8).
  with open(metrics, "a") as f:
    f.write(json.dumps({"step": 6, "phase": "rl", "batch": 0}) + "\n")
  lines = []
  second = run(config, str(tmp_path), log=lines.append)
  assert any("resumed from step 4" in line for line in lines)
  assert second.step == 8 and os.path.exists(second.path)
  # Each chunk's line once (step 6 was written twice).
  steps = [json.loads(line)["step"] for line in open(metrics)]
  assert steps == sorted(set(steps)) and steps[-1] == 8, steps


@pytest.mark.parametrize("change, message", [
    (lambda c: c.policy.update(free_logits=16), "free_logits=16.*does not "
     "transfer"),
    (lambda c: c.rl.update(reward="simulator_host"), "inside the jitted step"),
    (lambda c: c.pretrain.update(graphs_per_batch=0), "graphs_per_batch=0"),
    (lambda c: c.__delitem__("pretrain"), None),
    (lambda c: c.pretrain.update(dispatch_width=0), "dispatch_width=0"),
    (lambda c: setattr(c, "policy", family_policy("placeto")),
     "one-shot policy"),
])
def test_bad_pretraining_configs_are_refused(change, message, tmp_path):
  config = small_config()
  change(config)
  if message is None:  # no pretrain section: a training run, not refused
    settings = settings_lib.from_config(config).settings
    assert settings.pretrain is None
    with pytest.raises(ConfigError, match="settings.pretrain"):
      pretraining.check_pretrain(settings_lib.DEFAULT_POLICY, settings)
    return
  with pytest.raises(ConfigError, match=message):
    run(config, str(tmp_path))


def test_fine_tuning_starts_from_the_policy_file(pretrained, tmp_path):
  _, result, _ = pretrained
  config = small_config()
  del config["pretrain"]
  config.workload = "random_dag:35:9"  # a graph it never saw
  config.policy_init = result.path
  config.warm_start.baseline = "none"
  config.train.update(num_steps=2, chunk_steps=2, checkpoint_every=2)
  config.print_table = False
  lines = []
  tuned = run(config, str(tmp_path), log=lines.append)
  assert any(f"policy initialised from {result.path}" in line
             for line in lines)
  assert int(tuned.state.step) == 2
  moved = jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - b).max()),
                       tuned.state.params, result.params)
  assert 0 < max(jax.tree.leaves(moved)) < 1.0  # trained from there


def test_a_policy_file_for_other_settings_is_refused(pretrained, tmp_path):
  _, result, _ = pretrained
  config = small_config()
  del config["pretrain"]
  config.policy_init = result.path
  config.policy.hidden_size = 16
  with pytest.raises(ConfigError, match="policy.hidden_size: 8 .file. vs 16"):
    run(config, str(tmp_path / "a"))
  config = small_config()
  del config["pretrain"]
  config.policy_init = result.path
  config.topology = "1cpu+4gpu"
  with pytest.raises(ConfigError, match="devices: 3 .file, 1cpu.2gpu. vs 5"):
    run(config, str(tmp_path / "b"))
  config.policy_init = str(tmp_path / "missing.npz")
  with pytest.raises(ConfigError, match="no policy file"):
    run(config, str(tmp_path / "c"))


def test_policy_files_round_trip_and_bad_files_are_clear(pretrained,
                                                         tmp_path):
  _, result, _ = pretrained
  loaded = policy_file.load_policy(result.path)
  again = policy_file.save_policy(
      str(tmp_path / "copy.npz"), loaded.params,
      settings_lib.PolicySettings.from_record(loaded.policy),
      settings_lib.from_record(loaded.config),
      presets.preset("1cpu+2gpu"), steps=8)
  copy = policy_file.load_policy(again)
  np.testing.assert_equal(copy.params, loaded.params)
  assert copy.policy == loaded.policy and copy.meta["steps"] == 8
  assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
  truncated = tmp_path / "truncated.npz"
  with open(result.path, "rb") as f:
    truncated.write_bytes(f.read()[:300])
  with pytest.raises(PolicyError, match="cannot read the policy file"):
    policy_file.load_policy(str(truncated))
  foreign = tmp_path / "foreign.npz"
  np.savez(foreign, w=np.ones(3))
  with pytest.raises(PolicyError, match="not a gplace policy file"):
    policy_file.load_policy(str(foreign))
  shapes = jax.tree.map(np.asarray, loaded.params)
  shapes["params"] = dict(shapes["params"], extra=np.ones(2))
  with pytest.raises(ConfigError, match="extra: missing"):
    policy_file.params_like(loaded, shapes)


@pytest.mark.parametrize("path", [None, 3])
def test_load_policy_needs_a_path(path):
  with pytest.raises(PolicyError, match="needs the path of a policy file"):
    policy_file.load_policy(path)                   # TypeError before


def test_the_shipped_policy_loads_and_transfers():
  path = policy_file.shipped_policy_path("1cpu+4gpu")
  assert path is not None and "1cpu+4gpu" in policy_file.shipped_topologies()
  loaded = policy_file.load_policy(path)
  assert loaded.n_devices == 5 and loaded.policy["free_logits"] == 0
  assert loaded.policy["modulation"] == "film"
  assert os.path.getsize(path) < 4 * 2**20
  families = {name.rstrip("0123456789") for name in pretrain_config.HELD_OUT}
  assert families == {"wavenet", "gnmt", "bert"}
  assert not [n for n in loaded.meta["trained_on"]
              if n.rstrip("0123456789") in families]


def test_a_setting_the_file_predates_compares_as_its_default():
  # The shipped file was written before GOPolicy.priority_levels existed: a
  # config that leaves it off (0) fine-tunes it; one that turns it on is
  # refused with the field named.
  loaded = policy_file.load_policy(policy_file.shipped_policy_path(
      "1cpu+4gpu"))
  assert "priority_levels" not in loaded.policy
  policy = settings_lib.PolicySettings.from_record
  same = policy(dict(loaded.policy, priority_levels=0))
  assert policy_file.policy_differences(loaded, same, 5) == []
  levels = policy(dict(loaded.policy, priority_levels=2))
  assert policy_file.policy_differences(loaded, levels, 5) == [
      "policy.priority_levels: 0 (file) vs 2"]
  hint = policy(dict(loaded.policy, hint_init=4.0))
  assert policy_file.policy_differences(loaded, hint, 5) == [
      "policy.hint_init: 5.0 (file) vs 4.0"]
