"""WaveNet (GO: 2 and 4 stacks): dilated causal convolutions with gated
activations. Paper size (WaveNet paper; GO gives none): 10 layers per stack,
residual channels 64, skip 256, batch 4 of 8192 samples, Adam.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from gplace.workloads.common import BatchField, WorkloadSpec, cross_entropy

WAVENET_SIZES = {
    "tiny": dict(layers_per_stack=2, residual=8, skip=8, levels=16, batch=2,
                 samples=32),
    "small": dict(layers_per_stack=6, residual=16, skip=32, levels=256,
                  batch=2, samples=512),
    "paper": dict(layers_per_stack=10, residual=64, skip=256, levels=256,
                  batch=4, samples=8192),
}


class CausalConv(nn.Module):
  """``[B, T, C] -> [B, T, features]``; output ``t`` sees inputs ``<= t``."""
  features: int
  dilation: int = 1
  kernel: int = 2

  @nn.compact
  def __call__(self, x):
    return nn.Conv(self.features, (self.kernel,),
                   kernel_dilation=(self.dilation,),
                   padding=[(self.dilation * (self.kernel - 1), 0)],
                   name="conv")(x)


class ResidualLayer(nn.Module):
  """One gated layer: ``x [B, T, R] -> (x' [B, T, R], skip [B, T, S])``."""
  residual: int
  skip: int
  dilation: int

  @nn.compact
  def __call__(self, x):
    h = CausalConv(2 * self.residual, self.dilation, name="dilated")(x)
    filt, gate = jnp.split(h, 2, axis=-1)
    h = jnp.tanh(filt) * jax.nn.sigmoid(gate)
    skip = nn.Conv(self.skip, (1,), name="skip")(h)
    return x + nn.Conv(self.residual, (1,), name="residual")(h), skip


class Stack(nn.Module):
  """``layers`` residual layers with dilations ``1 .. 2**(layers-1)``:
  ``x [B, T, R] -> (x' [B, T, R], summed skips [B, T, S])``."""
  layers: int
  residual: int
  skip: int

  @nn.compact
  def __call__(self, x):
    skips = 0.0
    for i in range(self.layers):
      x, skip = ResidualLayer(self.residual, self.skip, 2 ** i,
                              name=f"layer_{i}")(x)
      skips = skips + skip
    return x, skips


class WaveNet(nn.Module):
  """``samples [B, T]`` int (quantized audio) -> logits ``[B, T, levels]``;
  position ``t`` predicts sample ``t + 1``."""
  stacks: int
  layers_per_stack: int
  residual: int
  skip: int
  levels: int

  @nn.compact
  def __call__(self, samples):
    x = jax.nn.one_hot(samples, self.levels)
    x = CausalConv(self.residual, name="input_conv")(x)
    skips = 0.0
    for s in range(self.stacks):
      x, skip = Stack(self.layers_per_stack, self.residual, self.skip,
                      name=f"stack_{s}")(x)
      skips = skips + skip
    h = nn.Conv(self.skip, (1,), name="output_1")(jax.nn.relu(skips))
    return nn.Conv(self.levels, (1,), name="output_2")(jax.nn.relu(h))


def wavenet_spec(stacks: int, size: str) -> WorkloadSpec:
  cfg = WAVENET_SIZES[size]
  b, t, levels = cfg["batch"], cfg["samples"], cfg["levels"]
  model = WaveNet(stacks, cfg["layers_per_stack"], cfg["residual"],
                  cfg["skip"], levels, name="WaveNet")
  return WorkloadSpec(
      model=model,
      batch={"samples": BatchField((b, t), jnp.int32, levels)},
      model_inputs=lambda batch: (batch["samples"],),
      loss=lambda logits, batch: cross_entropy(
          logits[:, :-1], batch["samples"][:, 1:]),
      optimizer=optax.adam(1e-3))
