"""Convolutional workloads with batch norm: ResNet-50 (HDP, HSDAG; 224x224,
batch 64, SGD with momentum) and Inception-V3 (ColocRL, HDP, GO, HSDAG;
299x299, batch 32, RMSProp) at paper size; smaller sizes keep the structure.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from gplace.workloads.common import BatchField, WorkloadSpec, cross_entropy

RESNET_SIZES = {
    "tiny": dict(blocks=(1, 1, 1, 1), width=4, image=32, batch=2, classes=10),
    "small": dict(blocks=(3, 4, 6, 3), width=8, image=64, batch=2,
                  classes=100),
    "paper": dict(blocks=(3, 4, 6, 3), width=64, image=224, batch=64,
                  classes=1000),
}
# blocks: number of Inception-A, -C and -E blocks (3, 4, 2 in the paper).
INCEPTION_SIZES = {
    "tiny": dict(blocks=(1, 1, 1), multiplier=1 / 16, image=75, batch=2,
                 classes=10),
    "small": dict(blocks=(3, 4, 2), multiplier=1 / 8, image=75, batch=2,
                  classes=100),
    "paper": dict(blocks=(3, 4, 2), multiplier=1.0, image=299, batch=32,
                  classes=1000),
}


class ConvBN(nn.Module):
  """``[B, H, W, C] -> [B, H', W', features]``: conv, batch norm, ReLU."""
  features: int
  kernel: Sequence[int] = (3, 3)
  strides: int = 1
  padding: str = "SAME"
  relu: bool = True

  @nn.compact
  def __call__(self, x, train: bool):
    x = nn.Conv(self.features, tuple(self.kernel), (self.strides,) * 2,
                padding=self.padding, use_bias=False, name="conv")(x)
    x = nn.BatchNorm(use_running_average=not train, momentum=0.9,
                     name="batch_norm")(x)
    return jax.nn.relu(x) if self.relu else x


class Bottleneck(nn.Module):
  """ResNet bottleneck block: 1x1, 3x3 (strided), 1x1 to ``4 * width``."""
  width: int
  strides: int = 1

  @nn.compact
  def __call__(self, x, train: bool):
    out = 4 * self.width
    h = ConvBN(self.width, (1, 1), name="conv_1")(x, train)
    h = ConvBN(self.width, (3, 3), self.strides, name="conv_2")(h, train)
    h = ConvBN(out, (1, 1), relu=False, name="conv_3")(h, train)
    if x.shape[-1] != out or self.strides != 1:
      x = ConvBN(out, (1, 1), self.strides, relu=False,
                 name="projection")(x, train)
    return jax.nn.relu(h + x)


class ResNetStage(nn.Module):
  blocks: int
  width: int
  strides: int

  @nn.compact
  def __call__(self, x, train: bool):
    for b in range(self.blocks):
      x = Bottleneck(self.width, self.strides if b == 0 else 1,
                     name=f"block_{b}")(x, train)
    return x


class ResNet50(nn.Module):
  """``images [B, H, W, 3] -> logits [B, classes]``."""
  blocks: Sequence[int]
  width: int
  classes: int

  @nn.compact
  def __call__(self, images, train: bool):
    x = ConvBN(self.width, (7, 7), 2, name="stem")(images, train)
    x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
    for s, blocks in enumerate(self.blocks):
      x = ResNetStage(blocks, self.width * 2 ** s, 1 if s == 0 else 2,
                      name=f"stage_{s + 1}")(x, train)
    return nn.Dense(self.classes, name="classifier")(jnp.mean(x, (1, 2)))


class Branch(nn.Module):
  """A chain of ConvBNs; ``layers`` holds ``(features, kernel, strides,
  padding)``. ``pool`` first applies a 3x3 average pool (stride 1)."""
  layers: Sequence[tuple[int, tuple[int, int], int, str]]
  pool: bool = False

  @nn.compact
  def __call__(self, x, train: bool):
    if self.pool:
      x = nn.avg_pool(x, (3, 3), (1, 1), padding="SAME")
    for k, (features, kernel, strides, padding) in enumerate(self.layers):
      x = ConvBN(features, kernel, strides, padding, name=f"conv_{k}")(x, train)
    return x


def _c(features: int, kernel=(1, 1), strides: int = 1, padding: str = "SAME"):
  return (features, kernel, strides, padding)


class InceptionBlock(nn.Module):
  """Parallel branches concatenated on channels. ``branches`` maps a branch
  name to ``(layers, pool)`` as in :class:`Branch`; ``reduction`` adds a
  3x3 / 2 max-pool branch (the grid-size reductions Mixed_6a and Mixed_7a)."""
  branches: dict
  reduction: bool = False

  @nn.compact
  def __call__(self, x, train: bool):
    outs = [Branch(layers, pool=pool, name=branch)(x, train)
            for branch, (layers, pool) in self.branches.items()]
    if self.reduction:
      outs.append(nn.max_pool(x, (3, 3), (2, 2), padding="VALID"))
    return jnp.concatenate(outs, axis=-1)


class InceptionV3(nn.Module):
  """``images [B, H, W, 3] -> logits [B, classes]`` (H = W >= 75)."""
  blocks: Sequence[int]
  multiplier: float
  classes: int

  def _f(self, features: int) -> int:
    return max(2, int(features * self.multiplier))

  @nn.compact
  def __call__(self, images, train: bool):
    f = self._f
    stem = [_c(f(32), (3, 3), 2, "VALID"), _c(f(32), (3, 3), 1, "VALID"),
            _c(f(64), (3, 3))]
    x = Branch(stem, name="stem_1")(images, train)
    x = nn.max_pool(x, (3, 3), (2, 2), padding="VALID")
    x = Branch([_c(f(80), padding="VALID"), _c(f(192), (3, 3), 1, "VALID")],
               name="stem_2")(x, train)
    x = nn.max_pool(x, (3, 3), (2, 2), padding="VALID")
    n_a, n_c, n_e = self.blocks
    for i in range(n_a):  # Inception-A, 35x35 in the paper
      x = InceptionBlock({
          "branch_1x1": ([_c(f(64))], False),
          "branch_5x5": ([_c(f(48)), _c(f(64), (5, 5))], False),
          "branch_3x3dbl": ([_c(f(64)), _c(f(96), (3, 3)),
                             _c(f(96), (3, 3))], False),
          "branch_pool": ([_c(f((32, 64, 64)[i]))], True)},
          name=f"Mixed_5{'bcd'[i]}")(x, train)
    x = InceptionBlock({  # reduction to 17x17
        "branch_3x3": ([_c(f(384), (3, 3), 2, "VALID")], False),
        "branch_3x3dbl": ([_c(f(64)), _c(f(96), (3, 3)),
                           _c(f(96), (3, 3), 2, "VALID")], False)},
        reduction=True, name="Mixed_6a")(x, train)
    for i in range(n_c):  # Inception-C, factorized 7x7
      c7 = f((128, 160, 160, 192)[i])
      x = InceptionBlock({
          "branch_1x1": ([_c(f(192))], False),
          "branch_7x7": ([_c(c7), _c(c7, (1, 7)), _c(f(192), (7, 1))], False),
          "branch_7x7dbl": ([_c(c7), _c(c7, (7, 1)), _c(c7, (1, 7)),
                             _c(c7, (7, 1)), _c(f(192), (1, 7))], False),
          "branch_pool": ([_c(f(192))], True)},
          name=f"Mixed_6{'bcde'[i]}")(x, train)
    x = InceptionBlock({  # reduction to 8x8
        "branch_3x3": ([_c(f(192)), _c(f(320), (3, 3), 2, "VALID")], False),
        "branch_7x7x3": ([_c(f(192)), _c(f(192), (1, 7)), _c(f(192), (7, 1)),
                          _c(f(192), (3, 3), 2, "VALID")], False)},
        reduction=True, name="Mixed_7a")(x, train)
    for i in range(n_e):  # Inception-E, expanded filter banks
      x = InceptionE(self.multiplier, name=f"Mixed_7{'bc'[i]}")(x, train)
    return nn.Dense(self.classes, name="classifier")(jnp.mean(x, (1, 2)))


class InceptionE(nn.Module):
  """The 8x8 block whose 3x3 branches split into parallel 1x3 and 3x1."""
  multiplier: float

  @nn.compact
  def __call__(self, x, train: bool):
    f = lambda n: max(2, int(n * self.multiplier))
    b1 = ConvBN(f(320), (1, 1), name="branch_1x1")(x, train)
    b3 = ConvBN(f(384), (1, 1), name="branch_3x3")(x, train)
    b3 = jnp.concatenate([
        ConvBN(f(384), (1, 3), name="branch_3x3_a")(b3, train),
        ConvBN(f(384), (3, 1), name="branch_3x3_b")(b3, train)], -1)
    bd = Branch([_c(f(448)), _c(f(384), (3, 3))],
                name="branch_3x3dbl")(x, train)
    bd = jnp.concatenate([
        ConvBN(f(384), (1, 3), name="branch_3x3dbl_a")(bd, train),
        ConvBN(f(384), (3, 1), name="branch_3x3dbl_b")(bd, train)], -1)
    pool = Branch([_c(f(192))], pool=True, name="branch_pool")(x, train)
    return jnp.concatenate([b1, b3, bd, pool], -1)


def image_spec(model, cfg, optimizer) -> WorkloadSpec:
  b, s, classes = cfg["batch"], cfg["image"], cfg["classes"]
  return WorkloadSpec(
      model=model,
      batch={"images": BatchField((b, s, s, 3), jnp.float32),
             "labels": BatchField((b,), jnp.int32, classes)},
      model_inputs=lambda batch: (batch["images"],),
      loss=lambda logits, batch: cross_entropy(logits, batch["labels"]),
      optimizer=optimizer, train_flag=True, mutable=("batch_stats",))


def resnet50_spec(size: str) -> WorkloadSpec:
  cfg = RESNET_SIZES[size]
  model = ResNet50(cfg["blocks"], cfg["width"], cfg["classes"],
                   name="ResNet50")
  return image_spec(model, cfg, optax.sgd(0.1, momentum=0.9))


def inception_v3_spec(size: str) -> WorkloadSpec:
  cfg = INCEPTION_SIZES[size]
  model = InceptionV3(cfg["blocks"], cfg["multiplier"], cfg["classes"],
                      name="InceptionV3")
  return image_spec(model, cfg, optax.rmsprop(0.045, decay=0.9, eps=1.0))
