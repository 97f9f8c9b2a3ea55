"""Tests of gplace.policies.layers on tiny padded graphs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace._testing import chain, make_graphs_tuple
from gplace.errors import PolicyError
from gplace.policies import layers

DIAMOND = (4, [(0, 1), (0, 2), (1, 3), (2, 3)])


def _states(n, h, seed=0):
  return jnp.asarray(np.random.default_rng(seed).normal(size=(n, h)),
                     jnp.float32)


@pytest.mark.parametrize("aggregator", ["mean", "max"])
def test_graph_sage_matches_loop_reference(aggregator):
  graphs = make_graphs_tuple([DIAMOND], n_pad=8, e_pad=12)
  x = _states(8, 5)
  layer = layers.GraphSAGE(6, aggregator)
  params = jax.jit(layer.init)(jax.random.PRNGKey(0), x, graphs)
  out = np.asarray(jax.jit(layer.apply)(params, x, graphs))
  assert out.shape == (8, 6)
  p = jax.tree.map(np.asarray, params["params"])
  msg = lambda name: np.maximum(x @ p[name]["kernel"] + p[name]["bias"], 0)
  pred_msg, succ_msg = msg("predecessor_message"), msg("successor_message")
  reduce = np.mean if aggregator == "mean" else lambda a, axis: a.max(axis)
  n, edges = DIAMOND
  for v in range(n):
    preds = [s for s, t in edges if t == v]
    succs = [t for s, t in edges if s == v]
    agg = lambda m, nb: reduce(m[nb], axis=0) if nb else np.zeros(6)
    full = np.concatenate([x[v], agg(pred_msg, preds), agg(succ_msg, succs)])
    want = np.maximum(full @ p["update"]["kernel"] + p["update"]["bias"], 0)
    np.testing.assert_allclose(out[v], want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(out[n:], 0.0)


def test_graph_sage_ignores_padding():
  small = make_graphs_tuple([DIAMOND], n_pad=8, e_pad=12)
  large = make_graphs_tuple([DIAMOND], n_pad=16, e_pad=32)
  layer = layers.GraphSAGE(4)
  x_large = _states(16, 3)
  params = jax.jit(layer.init)(jax.random.PRNGKey(1), x_large, large)
  np.testing.assert_allclose(
      layer.apply(params, x_large[:8], small)[:4],
      layer.apply(params, x_large, large)[:4], rtol=1e-6)


@pytest.mark.parametrize("mode", ["film", "gate"])
def test_feature_modulation_is_per_graph(mode):
  graphs = make_graphs_tuple([chain(3), chain(2)], n_pad=8, e_pad=8)
  x = _states(8, 4) * graphs.nodes["mask"][:, None]
  cond = layers.graph_embedding(x, graphs)
  assert cond.shape == (3, 4)
  np.testing.assert_allclose(cond[0], x[:3].mean(0), rtol=1e-6)
  module = layers.FeatureModulation(mode)
  params = jax.jit(module.init)(jax.random.PRNGKey(0), x, cond, graphs)
  # Zero-initialised: the identity on real nodes.
  np.testing.assert_allclose(module.apply(params, x, cond, graphs), x,
                             rtol=1e-6)
  params = jax.tree.map(lambda p: p + 0.3, params)
  out = module.apply(params, x, cond, graphs)
  if mode == "film":
    scale_shift = module.apply(params, jnp.ones_like(x), cond, graphs)
    # Nodes of the same graph get the same modulation, other graphs differ.
    np.testing.assert_allclose(scale_shift[0], scale_shift[2], rtol=1e-6)
    assert not np.allclose(scale_shift[0], scale_shift[3])
  assert not np.allclose(out[:5], x[:5])
  np.testing.assert_array_equal(out[5:], 0.0)


def test_segment_attention_masks_graphs_and_reaches_previous_segment():
  # Graph A: 10 nodes, graph B: 5 nodes, segments of 4 nodes.
  graphs = make_graphs_tuple([chain(10), chain(5)], n_pad=18, e_pad=32)
  layer = layers.SegmentRecurrentAttention(num_heads=2, segment_length=4)
  x = _states(18, 8)
  params = jax.jit(layer.init)(jax.random.PRNGKey(0), x, graphs)
  params = jax.tree.map(lambda p: p + 0.05, params)  # non-zero rel. bias
  apply = jax.jit(lambda x: layer.apply(params, x, graphs))
  base = apply(x)
  assert base.shape == (18, 8) and np.all(np.isfinite(base))
  np.testing.assert_array_equal(base[15:], 0.0)
  # Changing graph B's nodes leaves graph A alone.
  changed = apply(x.at[12].set(_states(1, 8, seed=5)[0]))
  np.testing.assert_allclose(changed[:10], base[:10], rtol=1e-6)
  assert not np.allclose(changed[10:15], base[10:15])
  # Node 0 (segment 0) reaches segment 1 (nodes 4..7) but not segment 2.
  # (A random new state: a constant shift would vanish in the LayerNorm.)
  changed = apply(x.at[0].set(_states(1, 8, seed=6)[0]))
  assert not np.allclose(changed[4:8], base[4:8])
  np.testing.assert_allclose(changed[8:10], base[8:10], rtol=1e-6)
  # The memory is stop-gradient: no gradient from segment 1 to segment 0.
  grad = jax.grad(lambda x: apply(x)[4:8].sum())(x)
  np.testing.assert_array_equal(grad[:4], 0.0)
  assert np.any(grad[4:8] != 0)


def test_segment_attention_pads_to_whole_segments():
  graphs = make_graphs_tuple([chain(6)], n_pad=7, e_pad=12)
  layer = layers.SegmentRecurrentAttention(num_heads=1, segment_length=4)
  x = _states(7, 4)
  params = jax.jit(layer.init)(jax.random.PRNGKey(0), x, graphs)
  out = jax.jit(layer.apply)(params, x, graphs)
  assert out.shape == (7, 4) and np.all(np.isfinite(out))


def test_placement_head_device_masks():
  head = layers.PlacementHead(num_devices=3, hidden_size=8)
  x = _states(5, 4)
  params = head.init(jax.random.PRNGKey(0), x)
  assert head.apply(params, x).shape == (5, 3)
  logits = head.apply(params, x, jnp.array([True, False, True]))
  assert np.all(logits[:, 1] <= layers.NEG_INF)
  per_node = np.ones((5, 3), bool)
  per_node[2, 0] = False
  logits = head.apply(params, x, per_node)
  assert logits[2, 0] <= layers.NEG_INF and logits[1, 0] > layers.NEG_INF


def test_bad_layer_settings_raise_policy_error():
  graphs = make_graphs_tuple([DIAMOND], n_pad=8, e_pad=12)
  x = _states(8, 6)
  bad = [layers.GraphSAGE(6, "median"),
         layers.SegmentRecurrentAttention(num_heads=4, segment_length=4)]
  for layer in bad:
    with pytest.raises(PolicyError):
      layer.init(jax.random.PRNGKey(0), x, graphs)
