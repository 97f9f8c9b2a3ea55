"""What "the same outputs" means for a placed program (README, issue 46):
the forward values and the loss equal jax.jit's to float rounding; after
an adam(w) update, a parameter whose gradient rounds differently can move
by up to twice the learning rate (Adam divides each gradient by its own
magnitude); and a placed program gives the same bits on every call."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import gplace
from experiments import programs

LEARNING_RATE = 1e-3


class _TinyLM(nn.Module):
  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(64, 32)(tokens)
    x = x + nn.SelfAttention(num_heads=2)(
        nn.LayerNorm()(x), mask=nn.make_causal_mask(tokens))
    x = x + nn.Dense(32)(nn.gelu(nn.Dense(64)(nn.LayerNorm()(x))))
    return nn.Dense(64)(x)


def _adamw_step():
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, 64, (4, 16)))
  return programs.lm_step(_TinyLM(), tokens, LEARNING_RATE)


def test_an_adamw_step_placed_on_four_devices_matches_jit_within_its_bound():
  assert jax.device_count() >= 4
  step, args = _adamw_step()
  graph = gplace.capture(step, *args)
  want = jax.jit(step)(*args)
  # One random device per op: the most clusters and transfers there are
  # (every cluster compiles, so one placement is what the suite affords).
  placement = np.random.default_rng(1).integers(
      0, 4, graph.n_nodes).astype(np.int32)
  placed = gplace.place(step, graph, placement)
  got = placed(*args)
  np.testing.assert_allclose(float(got[2]), float(want[2]), rtol=1e-6)
  for a, b in zip(jax.tree.leaves(got[0]), jax.tree.leaves(want[0])):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0,
                               atol=2 * LEARNING_RATE + 1e-6)
  again = placed(*args)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(again)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
