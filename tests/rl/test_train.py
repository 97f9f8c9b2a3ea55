"""End-to-end tests of gplace.rl.train on a tiny config: outputs, resume,
errors, and the module layering of gplace.rl."""

import ast
import json
import os

import jax
import numpy as np
import pytest

from experiments.configs import quickstart
from gplace.errors import ConfigError
from gplace.rl import train


def tiny_config():
  config = quickstart.get_config()
  # Two graphs in one batch; a cheap subset of baselines.
  config.workload = "random_dag:40:1,random_dag:40:2"
  config.topology = "1cpu+2gpu"
  config.baselines = "single_device,round_robin,m_etf"
  config.progress_bar = False
  config.print_table = True
  config.policy.update(hidden_size=8, num_sage_layers=1,
                       num_attention_layers=1, num_heads=2, segment_length=16,
                       op_embedding_size=4, head_hidden_size=8)
  config.rl.num_samples = 4
  config.rl.ppo_epochs = 2
  config.warm_start.steps = 2
  config.train.update(num_steps=6, chunk_steps=2, checkpoint_every=4)
  return config


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("full"))
  calls = []
  lines = []
  result = train.train_and_evaluate(
      tiny_config(), workdir, log=lines.append,
      progress_fn=lambda step, metrics: calls.append((step, metrics)))
  return workdir, result, calls, lines


def test_end_to_end_outputs(uninterrupted):
  workdir, result, calls, lines = uninterrupted
  assert [step for step, _ in calls] == [2, 4, 6, 8]
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    records = [json.loads(line) for line in f]
  assert [r["step"] for r in records] == list(range(1, 9))
  assert [r["phase"] for r in records] == ["warm_start"] * 2 + ["rl"] * 6
  assert all(np.isfinite(r["mean_runtime_s"]) for r in records[2:])
  with open(os.path.join(workdir, "best_placement.json")) as f:
    best = json.load(f)
  assert best["device_names"] == ["cpu:0", "gpu:0", "gpu:1"]
  graph0 = best["graphs"][0]
  assert len(graph0["placement"]) == 40
  assert graph0["placement"][3]["name"] == "random_dag:40:1/n3"
  assert graph0["placement"][3]["device"] in best["device_names"]
  assert os.path.exists(os.path.join(workdir, "learning_curve.png"))
  assert int(result.state.step) == 8
  # Warm start + best-ever: never worse than the best baseline.
  for table, runtime in zip(result.table, result.best_runtime_s):
    baselines = [v for k, v in table.items()
                 if k not in ("gplace", "lower_bound")]
    assert runtime <= min(baselines) + 1e-9
    assert runtime >= table["lower_bound"] * (1 - 1e-6)
  assert any("lower bound" in line for line in lines)
  assert [len(p) for p in result.best_placements] == [40, 40]


def test_resume_matches_uninterrupted_run(uninterrupted, tmp_path):
  _, full, _, _ = uninterrupted
  workdir = str(tmp_path)
  config = tiny_config()
  config.print_table = False
  stopped = train.train_and_evaluate(config, workdir, stop_after_step=4,
                                     log=lambda _: None)
  assert int(stopped.state.step) == 4
  resumed = train.train_and_evaluate(config, workdir, log=lambda _: None)
  assert int(resumed.state.step) == 8
  np.testing.assert_array_equal(resumed.state.rng, full.state.rng)
  np.testing.assert_array_equal(resumed.state.best_placement,
                                full.state.best_placement)
  np.testing.assert_array_equal(resumed.state.best_runtime_s,
                                full.state.best_runtime_s)
  jax.tree.map(np.testing.assert_array_equal, resumed.state.params,
               full.state.params)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    assert [json.loads(l)["step"] for l in f] == list(range(1, 9))


def test_unwritable_workdir_fails_at_start(tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  with pytest.raises(ConfigError, match="Cannot write to workdir"):
    train.train_and_evaluate(tiny_config(), str(blocker / "sub"))


def test_chunks_never_cross_the_warm_start_a_checkpoint_or_the_end():
  schedule = train.Schedule(warm_steps=3, total_steps=12, chunk_steps=5,
                            checkpoint_every=4)
  step, lengths = 0, []
  while step < schedule.total_steps:
    lengths.append(schedule.next_chunk(step))
    step += lengths[-1]
  assert lengths == [3, 1, 4, 4]
  assert schedule.phase(2) == "warm_start" and schedule.phase(3) == "rl"
  assert schedule.checkpoint_due(8) and schedule.checkpoint_due(12)
  assert not schedule.checkpoint_due(7)


def test_replicate_round_trip():
  tree = {"a": np.arange(3), "b": np.float32(2.0)}
  replicated = train.replicate(tree, 4)
  assert replicated["a"].shape == (4, 3)
  jax.tree.map(np.testing.assert_array_equal,
               train.unreplicate(replicated, 4), tree)
  assert train.replicate(tree, 1) is tree


# The order a training run reads gplace.rl in; a module may import only
# modules after it (``update`` names the state's types in annotations only).
LAYERS = ("train", "validation", "data", "state", "update", "losses",
          "distributions", "rewards", "types", "checkpoint", "reports")


def _rl_imports(module):
  path = os.path.join(os.path.dirname(train.__file__), f"{module}.py")
  with open(path) as f:
    tree = ast.parse(f.read())
  names = set()
  for node in tree.body:  # module level: TYPE_CHECKING blocks are skipped
    if isinstance(node, ast.ImportFrom) and node.module:
      if node.module.startswith("gplace.rl."):
        names.add(node.module.split(".")[2])
      elif node.module == "gplace.rl":
        names.update(alias.name for alias in node.names)
  return names


def test_gplace_rl_modules_import_only_downwards():
  modules = {f[:-3] for f in os.listdir(os.path.dirname(train.__file__))
             if f.endswith(".py") and f != "__init__.py"}
  assert modules == set(LAYERS)
  for rank, module in enumerate(LAYERS):
    for imported in _rl_imports(module):
      assert LAYERS.index(imported) > rank, (module, imported)
