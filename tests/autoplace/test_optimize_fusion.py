"""``gplace.optimize(..., fusion=True)`` (issue 49, item 3): a legal fusion
decision for the winner that ``result.place(fn)`` runs with outputs equal
to ``jax.jit``'s, the table says which decision, and a bad flag raises."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import errors
from gplace.graphs.fusion import fuse
from gplace.graphs.fusion_decisions import is_legal


def mlp(params, x):
  left = jnp.tanh(x @ params["left"]) * 2.0 + 1.0
  right = jax.nn.relu(x @ params["right"]) - 0.5
  return ((left + right) @ params["out"]).sum(axis=0)


@pytest.fixture(scope="module")
def program():
  keys = jax.random.split(jax.random.PRNGKey(0), 4)
  params = {name: jax.random.normal(key, (32, 32)) / 8
            for name, key in zip(("left", "right", "out"), keys)}
  return mlp, (params, jax.random.normal(keys[3], (32, 32)))


@pytest.fixture(scope="module")
def result(program, two_device_topology):
  fn, args = program
  return gplace.optimize(fn, *args, topology=two_device_topology,
                         method="search",
                         max_evaluations=64, budget_s=60.0, progress=False,
                         fusion=True)


def test_optimize_returns_a_legal_fusion_no_slower_than_none(result):
  assert result.fusion is not None
  assert result.fusion.shape == (result.graph.n_nodes,)
  assert is_legal(result.graph, result.fusion, result.placement)
  assert result.runtime_s < result.fusion_runtimes["XLA clusters (no decision)"]
  assert result.runtime_s <= result.fusion_runtimes["no fusion"] * (1 + 1e-6)
  assert result.runtime_s == pytest.approx(
      result.fusion_runtimes["searched"], rel=1e-6)
  assert "fusion: searched" in result.table()


def test_place_runs_the_fused_result_like_jit(program, result, two_devices):
  fn, args = program
  expected = jax.jit(fn)(*args)
  for placed in (result.place(fn, devices=two_devices),
                 gplace.place(fn, result, devices=two_devices)):
    np.testing.assert_allclose(placed(*args), expected, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(placed.fusion, result.fusion)
  fused = fuse(result.graph, result.fusion)
  if fused.n_members.max() > 1:   # each group one cluster
    for cluster in placed.clusters:
      assert len(set(fused.group_of[list(cluster.nodes)].tolist())) == 1


def test_without_fusion_nothing_changes(program, two_device_topology):
  fn, args = program
  plain = gplace.optimize(fn, *args, topology=two_device_topology,
                          method="m_topo", budget_s=30.0, progress=False)
  assert plain.fusion is None and plain.fusion_runtimes == {}
  assert "fusion: none" in plain.table()


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_bad_fusion_flag_raises(program, two_device_topology, value):
  fn, args = program
  with pytest.raises(errors.SearchError, match="fusion must be True or "
                     "False"):
    gplace.optimize(fn, *args, topology=two_device_topology,
                    method="m_topo", progress=False, fusion=value)


def test_a_decision_that_does_not_pay_is_not_used():
  # Chains of matmuls: a kernel holds at most one, so nothing can fuse.
  graph = gplace.Graph.build(
      names=["x", "m1", "m2", "out"],
      op_type=["input", "dot_general", "dot_general", "output"],
      kind=[gplace.NODE_INPUT, gplace.NODE_OP, gplace.NODE_OP,
            gplace.NODE_OUTPUT], out_shapes=[(256,)] * 4,
      out_dtype=["float32"] * 4, out_bytes=[1024] * 4,
      flops=[0, 1e9, 1e9, 0], bytes_accessed=[0, 2048, 2048, 0],
      edges=[(0, 1, 1024), (1, 2, 1024), (2, 3, 1024)], name="matmuls")
  result = gplace.optimize(graph, topology="1cpu+2gpu", method="m_topo",
                           budget_s=10.0, progress=False, fusion=True,
                           max_evaluations=16)
  assert result.fusion is None
  assert set(result.fusion_runtimes) >= {"no fusion", "searched"}
  assert "fusion: none used (searched" in result.table()
