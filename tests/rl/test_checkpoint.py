"""Tests of gplace.rl.checkpoint: the orbax wrapper."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace.errors import CheckpointError
from gplace.rl.checkpoint import Checkpointer, discard, saved_steps


def _state(scale=1.0):
  return {"step": jnp.asarray(3, jnp.int32),
          "params": {"w": scale * jnp.arange(6.0).reshape(2, 3)},
          "rng": jax.random.PRNGKey(7),
          "best": jnp.full((2,), jnp.inf, jnp.float32)}


def test_save_restore_round_trip_and_latest_step(tmp_path):
  checkpointer = Checkpointer(tmp_path / "ckpt", max_to_keep=2)
  assert checkpointer.directory == str((tmp_path / "ckpt").resolve())
  assert checkpointer.latest_step() is None
  for step in (1, 2, 3):
    checkpointer.save(step, _state(scale=step))
  checkpointer.wait_until_finished()
  assert checkpointer.latest_step() == 3
  restored = checkpointer.restore(_state(scale=0.0))
  jax.tree.map(np.testing.assert_array_equal, restored, _state(scale=3.0))
  older = checkpointer.restore(_state(scale=0.0), step=2)
  np.testing.assert_array_equal(older["params"]["w"],
                                _state(scale=2.0)["params"]["w"])
  checkpointer.close()
  # Only max_to_keep checkpoints are kept; a new manager sees them.
  reopened = Checkpointer(tmp_path / "ckpt", max_to_keep=2)
  assert reopened.latest_step() == 3
  reopened.close()
  assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()
                if p.name.isdigit()) == ["2", "3"]


def test_restore_into_an_abstract_target(tmp_path):
  checkpointer = Checkpointer(tmp_path)
  checkpointer.save(5, _state(scale=2.0))
  checkpointer.wait_until_finished()
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                          _state())
  restored = checkpointer.restore(abstract)
  assert restored["step"].dtype == jnp.int32
  jax.tree.map(np.testing.assert_array_equal, restored, _state(scale=2.0))
  checkpointer.close()


def test_restore_errors_say_what_to_do(tmp_path):
  checkpointer = Checkpointer(tmp_path)
  with pytest.raises(CheckpointError, match="No checkpoint"):
    checkpointer.restore(_state())
  checkpointer.save(1, _state())
  checkpointer.wait_until_finished()
  wrong = {"something": jnp.zeros(3)}
  with pytest.raises(CheckpointError, match="fresh workdir"):
    checkpointer.restore(wrong)
  checkpointer.close()


def test_unusable_directory_is_a_checkpoint_error(tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  with pytest.raises(CheckpointError, match="Cannot use checkpoint"):
    Checkpointer(blocker / "sub")


def _truncate(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def _largest_array_file(step_dir):
  """The file holding the arrays' bytes (the largest data file)."""
  files = [p for p in step_dir.rglob("*")
           if p.is_file() and p.parent.name == "d"]
  return max(files, key=lambda p: p.stat().st_size)


def _big_state(scale):
  return {"w": scale * jnp.arange(4096.0).reshape(64, 64),
          "step": jnp.asarray(int(scale), jnp.int32)}


def _two_steps(directory):
  checkpointer = Checkpointer(directory, max_to_keep=2)
  for step in (16, 20):
    checkpointer.save(step, _big_state(float(step)))
  checkpointer.close()


@pytest.mark.parametrize("damage", ["array data", "_METADATA"])
def test_corrupted_newest_step_falls_back_to_the_newest_intact(tmp_path,
                                                               damage):
  _two_steps(tmp_path / "ckpt")
  step_dir = tmp_path / "ckpt" / "20"
  _truncate(_largest_array_file(step_dir) if damage == "array data"
            else step_dir / "default" / "_METADATA")
  checkpointer = Checkpointer(tmp_path / "ckpt", max_to_keep=2)
  with pytest.raises(CheckpointError, match="corrupted") as info:
    checkpointer.restore(_big_state(0.0), step=20)
  assert "another config" not in str(info.value)
  lines = []
  restored = checkpointer.restore_latest(_big_state(0.0), log=lines.append)
  jax.tree.map(np.testing.assert_array_equal, restored, _big_state(16.0))
  assert len(lines) == 1 and "skipped checkpoint step 20" in lines[0]
  assert checkpointer.all_steps() == [16]
  assert (tmp_path / "ckpt.corrupted" / "20").is_dir()
  # The run goes on and saves step 20 again.
  checkpointer.save(20, _big_state(20.0))
  checkpointer.close()
  again = Checkpointer(tmp_path / "ckpt", max_to_keep=2)
  assert again.restore_latest(_big_state(0.0), log=lines.append)["step"] == 20
  again.close()


def test_no_intact_step_is_a_checkpoint_error_that_says_how_to_start_over(
    tmp_path):
  _two_steps(tmp_path / "ckpt")
  for step in ("16", "20"):
    _truncate(_largest_array_file(tmp_path / "ckpt" / step))
  checkpointer = Checkpointer(tmp_path / "ckpt")
  with pytest.raises(CheckpointError) as info:
    checkpointer.restore_latest(_big_state(0.0), log=lambda _: None)
  message = str(info.value)
  assert "No intact checkpoint" in message and "step 20:" in message
  assert "step 16:" in message and "resume=False" in message
  assert "\n" not in message  # not orbax's traceback
  checkpointer.close()


def test_another_configs_state_is_not_called_corrupted(tmp_path):
  _two_steps(tmp_path / "ckpt")
  checkpointer = Checkpointer(tmp_path / "ckpt")
  wider = {"w": jnp.zeros((64, 128)), "step": jnp.asarray(0, jnp.int32)}
  with pytest.raises(CheckpointError, match=r"w is float32\[64, 64\] there, "
                     r"float32\[64, 128\] here.*another config"):
    checkpointer.restore_latest(wider, log=lambda _: None)
  assert checkpointer.all_steps() == [16, 20]  # nothing moved
  checkpointer.close()


def test_saved_steps_and_discard(tmp_path):
  assert saved_steps(tmp_path / "missing") == []
  _two_steps(tmp_path / "ckpt")
  (tmp_path / "ckpt" / "7.orbax-checkpoint-tmp-1").mkdir()  # half-written
  assert saved_steps(tmp_path / "ckpt") == [16, 20]
  discard(tmp_path / "ckpt")
  assert saved_steps(tmp_path / "ckpt") == []
