"""Tests of gplace.execution.calibration's placements: every count gives a
``[count, n_nodes]`` array, and a profile calibrated on one placement works
(issue 47: one raised a raw numpy ValueError)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.execution import calibration


@pytest.mark.parametrize("count", [0, 1, 2, 3, 5, 16])
def test_calibration_blocks_have_one_row_per_placement(count):
  rng = np.random.default_rng(0)
  blocks = calibration.calibration_blocks(10, 2, count, rng)
  assert blocks.shape == (count, 10) and blocks.dtype == np.int32
  assert blocks.size == 0 or (blocks.min() >= 0 and blocks.max() < 2)


def test_no_block_placements_are_an_empty_table():
  rng = np.random.default_rng(0)
  assert calibration.block_placements(7, 3, 0, rng).shape == (0, 7)


def _dense(params, x):
  return jnp.tanh(params["w"] @ x + params["b"]).sum()


def test_a_profile_calibrated_on_one_placement():
  params = {"w": jnp.ones((4, 4)), "b": jnp.zeros(4)}
  x = jnp.arange(4.0)
  profile = gplace.profile(_dense, params, x, devices=jax.devices()[:2],
                           repeats=1, transfer_repeats=1,
                           calibration_placements=1, calibration_rounds=1)
  assert profile.calibration_placements.shape == (1, profile.graph.n_nodes)
  result = gplace.simulate(profile.graph, np.zeros(profile.graph.n_nodes,
                                                   int), profile.topology,
                           costs=profile.costs)
  assert np.isfinite(float(result.runtime_s))
