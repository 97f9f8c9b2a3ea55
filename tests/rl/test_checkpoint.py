"""Tests of gplace.rl.checkpoint: the orbax wrapper."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace.errors import CheckpointError
from gplace.rl.checkpoint import Checkpointer


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
