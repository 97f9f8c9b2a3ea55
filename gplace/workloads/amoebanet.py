"""AmoebaNet-A (GO): three stacks of ``N`` normal cells with reduction cells
between, a wide graph. Genotypes from DARTS' ``genotypes.py`` (not re-checked
against the paper); paper size (GO gives none): ``N = 6``, ``F = 190``,
224x224, batch 32, RMSProp.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from gplace.errors import WorkloadError
from gplace.workloads.cnn import image_spec

# (op, input state) pairs, two per node; states 0 and 1 are the cell inputs,
# state i + 2 is node i.
NORMAL_CELL = (
    ("avg_pool_3x3", 0), ("max_pool_3x3", 1), ("sep_conv_3x3", 0),
    ("sep_conv_5x5", 2), ("sep_conv_3x3", 0), ("avg_pool_3x3", 3),
    ("sep_conv_3x3", 1), ("skip_connect", 1), ("skip_connect", 0),
    ("avg_pool_3x3", 1))
NORMAL_OUTPUTS = (4, 5, 6)
REDUCTION_CELL = (
    ("avg_pool_3x3", 0), ("sep_conv_3x3", 1), ("max_pool_3x3", 0),
    ("sep_conv_7x7", 2), ("sep_conv_7x7", 0), ("avg_pool_3x3", 1),
    ("max_pool_3x3", 0), ("max_pool_3x3", 1), ("conv_7x1_1x7", 0),
    ("sep_conv_3x3", 5))
REDUCTION_OUTPUTS = (3, 4, 6)

AMOEBANET_SIZES = {
    "tiny": dict(stacks=2, cells_per_stack=1, features=4, image=32, batch=2,
                 classes=10),
    "small": dict(stacks=3, cells_per_stack=2, features=8, image=64, batch=2,
                  classes=100),
    "paper": dict(stacks=3, cells_per_stack=6, features=190, image=224,
                  batch=32, classes=1000),
}


def _batch_norm(train: bool, name: str = "batch_norm"):
  return nn.BatchNorm(use_running_average=not train, momentum=0.9, name=name)


class ReluConvBN(nn.Module):
  """``[B, H, W, C] -> [B, H/s, W/s, features]``: ReLU, conv, batch norm."""
  features: int
  kernel: Sequence[int] = (1, 1)
  strides: Sequence[int] = (1, 1)

  @nn.compact
  def __call__(self, x, train: bool):
    x = nn.Conv(self.features, tuple(self.kernel), tuple(self.strides),
                use_bias=False, name="conv")(jax.nn.relu(x))
    return _batch_norm(train)(x)


class FactorizedReduce(nn.Module):
  """Halves height and width with two offset 1x1 stride-2 convolutions."""
  features: int

  @nn.compact
  def __call__(self, x, train: bool):
    x = jax.nn.relu(x)
    shifted = jnp.pad(x[:, 1:, 1:], ((0, 0), (0, 1), (0, 1), (0, 0)))
    half = self.features // 2
    a = nn.Conv(half, (1, 1), (2, 2), use_bias=False, name="conv_a")(x)
    b = nn.Conv(self.features - half, (1, 1), (2, 2), use_bias=False,
                name="conv_b")(shifted)
    return _batch_norm(train)(jnp.concatenate([a, b], -1))


class SepConv(nn.Module):
  """Two rounds of ReLU, depthwise ``kernel`` conv, pointwise conv, BN."""
  features: int
  kernel: int
  strides: int = 1

  @nn.compact
  def __call__(self, x, train: bool):
    for k in range(2):
      strides = (self.strides,) * 2 if k == 0 else (1, 1)
      x = nn.Conv(x.shape[-1], (self.kernel,) * 2, strides,
                  feature_group_count=x.shape[-1], use_bias=False,
                  name=f"depthwise_{k}")(jax.nn.relu(x))
      x = nn.Conv(self.features, (1, 1), use_bias=False,
                  name=f"pointwise_{k}")(x)
      x = _batch_norm(train, f"batch_norm_{k}")(x)
    return x


class CellOp(nn.Module):
  """One of the genotype's ops, by name, at the given stride."""
  op: str
  features: int
  strides: int = 1

  @nn.compact
  def __call__(self, x, train: bool):
    s = self.strides
    if self.op.startswith("sep_conv_"):
      return SepConv(self.features, int(self.op[-1]), s, name="sep_conv")(
          x, train)
    if self.op == "avg_pool_3x3":
      return nn.avg_pool(x, (3, 3), (s, s), padding="SAME")
    if self.op == "max_pool_3x3":
      return nn.max_pool(x, (3, 3), (s, s), padding="SAME")
    if self.op == "skip_connect":
      return x if s == 1 else FactorizedReduce(self.features,
                                               name="reduce")(x, train)
    if self.op == "conv_7x1_1x7":
      x = ReluConvBN(self.features, (1, 7), (1, s), name="conv_1x7")(x, train)
      return ReluConvBN(self.features, (7, 1), (s, 1), name="conv_7x1")(
          x, train)
    raise WorkloadError(f"Unknown AmoebaNet cell op {self.op!r}; the cell "
                        f"genotype names an op this module does not build.")


class Cell(nn.Module):
  """``(s0, s1) -> [B, H', W', features * len(outputs)]``."""
  genotype: Sequence[tuple[str, int]]
  outputs: Sequence[int]
  features: int
  reduction: bool
  previous_was_reduction: bool

  @nn.compact
  def __call__(self, s0, s1, train: bool):
    if self.previous_was_reduction:  # s0 is twice s1's height and width
      s0 = FactorizedReduce(self.features, name="preprocess_0")(s0, train)
    else:
      s0 = ReluConvBN(self.features, name="preprocess_0")(s0, train)
    states = [s0, ReluConvBN(self.features, name="preprocess_1")(s1, train)]
    for i in range(len(self.genotype) // 2):
      total = 0.0
      for side in range(2):
        op, source = self.genotype[2 * i + side]
        strides = 2 if self.reduction and source < 2 else 1
        total = total + CellOp(op, self.features, strides,
                               name=f"node_{i}_{'ab'[side]}")(
                                   states[source], train)
      states.append(total)
    return jnp.concatenate([states[j] for j in self.outputs], -1)


class AmoebaNet(nn.Module):
  """``images [B, H, W, 3] -> logits [B, classes]``; ``stacks`` stacks of
  ``cells_per_stack`` normal cells with a reduction cell between stacks."""
  stacks: int
  cells_per_stack: int
  features: int
  classes: int

  @nn.compact
  def __call__(self, images, train: bool):
    f = self.features
    x = nn.Conv(f // 2, (3, 3), (2, 2), use_bias=False, name="stem_0")(images)
    x = _batch_norm(train, "stem_0_batch_norm")(x)
    s0 = ReluConvBN(f, (3, 3), (2, 2), name="stem_1")(x, train)
    s1 = ReluConvBN(f, (3, 3), (2, 2), name="stem_2")(s0, train)
    previous_was_reduction, k = True, 0
    for stack in range(self.stacks):
      kinds = [False] * self.cells_per_stack + (
          [True] if stack < self.stacks - 1 else [])
      for reduction in kinds:
        features = f * 2 ** (stack + int(reduction))
        cell = Cell(REDUCTION_CELL if reduction else NORMAL_CELL,
                    REDUCTION_OUTPUTS if reduction else NORMAL_OUTPUTS,
                    features, reduction, previous_was_reduction,
                    name=f"cell_{k}")
        s0, s1 = s1, cell(s0, s1, train)
        previous_was_reduction, k = reduction, k + 1
    x = jnp.mean(jax.nn.relu(s1), (1, 2))
    return nn.Dense(self.classes, name="classifier")(x)


def amoebanet_spec(size: str):
  cfg = AMOEBANET_SIZES[size]
  model = AmoebaNet(cfg["stacks"], cfg["cells_per_stack"], cfg["features"],
                    cfg["classes"], name="AmoebaNet")
  return image_spec(model, cfg, optax.rmsprop(0.045, decay=0.9, eps=1.0))
