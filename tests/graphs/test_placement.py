"""Tests of the one placement validator (gplace.graphs.placement)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace.errors import GraphError, PlacementError
from gplace.graphs.graph import random_dag
from gplace.graphs.placement import check_placements


def test_accepts_one_or_k_placements_and_integer_floats():
  graph = random_dag(10, seed=0)
  one = check_placements(np.arange(10) % 3, graph, 3)
  assert one.shape == (1, 10) and one.dtype == np.int32
  many = check_placements(np.zeros((4, 10)), graph, 3)
  assert many.shape == (4, 10) and not many.any()
  flat = check_placements([2] * 10, graph, 3, batched=False)
  assert flat.shape == (10,) and flat.dtype == np.int32


@pytest.mark.parametrize("placements,batched,match", [
    (np.zeros(9, int), True, "length 9 .* 10 nodes"),
    (np.zeros((2, 2, 10), int), True, r"\[n_nodes\] or \[K, n_nodes\]"),
    (np.zeros((2, 10), int), False, r"must be \[n_nodes\]"),
    (np.full(10, 0.5), True, "non-integer"),
    (np.full(10, np.nan), True, "non-integer"),
    (np.array(["a"] * 10), True, "integer device indices"),
    (np.full(10, 3), True, "device 3, but only devices 0..2"),
    (np.full(10, -1), True, "device -1"),
    # Booleans read as devices 0 and 1 before (issue 47).
    (np.ones(10, bool), True, "got booleans"),
    ([True] * 10, False, "got booleans"),
])
def test_bad_placements_say_what_is_wrong(placements, batched, match):
  graph = random_dag(10, seed=0)
  with pytest.raises(PlacementError, match=match):
    check_placements(placements, graph, 3, batched=batched)


def test_error_names_the_node_the_row_and_the_devices():
  graph = random_dag(10, seed=0)
  placements = np.zeros((3, 10), int)
  placements[2, 7] = 5
  with pytest.raises(PlacementError) as info:
    check_placements(placements, graph, 2, device_names=["cpu", "gpu"])
  message = str(info.value)
  assert "Placement 2" in message and f"node 7 ({graph.names[7]})" in message
  assert "(cpu, gpu)" in message


def test_traced_and_unreadable_placements_are_placement_errors():
  graph = random_dag(10, seed=0)
  with pytest.raises(PlacementError, match="traced"):
    jax.jit(lambda p: check_placements(p, graph, 3))(jnp.zeros(10, jnp.int32))
  with pytest.raises(PlacementError, match="numpy cannot read"):
    check_placements([[0] * 10, [0] * 9], graph, 3)
  with pytest.raises(PlacementError, match=r"device 1000000000000000019884"):
    check_placements(np.full(10, 1e30), graph, 3)  # not wrapped around
  with pytest.raises(GraphError, match="graph to be a gplace.Graph"):
    check_placements(np.zeros(10, int), {"n_nodes": 10}, 3)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
def test_the_cast_checks_every_value_before_it_narrows(dtype):
  graph = random_dag(50, seed=0)
  rows = np.random.default_rng(0).integers(0, 3, (4, 50)).astype(dtype)
  out = check_placements(rows, graph, 3)
  assert out.dtype == np.int32
  np.testing.assert_array_equal(out, rows)
  # 2**32 + 1 would wrap to device 1 in int32: it must be refused first.
  big = 2**32 + 1 if dtype != np.int32 else -1
  rows[2, 7] = big
  with pytest.raises(PlacementError, match="Placement 2 puts node 7"):
    check_placements(rows, graph, 3)
