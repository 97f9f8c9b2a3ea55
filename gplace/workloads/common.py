"""Shared plumbing of the zoo: :func:`make_step` turns a
:class:`WorkloadSpec` (model, batch shapes, loss, optimizer) into ``(fn,
args)`` without running the model; ``abstract=True`` gives
``jax.ShapeDtypeStruct`` arguments (capturable, not runnable).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

SIZES = ("tiny", "small", "paper")
STEPS = ("train", "infer")


@dataclasses.dataclass(frozen=True)
class BatchField:
  """One array of a batch: its shape, dtype and, for integer tokens or
  labels, the exclusive upper bound of its values."""
  shape: tuple[int, ...]
  dtype: Any = jnp.float32
  max_value: int | None = None


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
  """One workload at one size, before any array exists.

  Attributes:
    model: the flax linen module; its ``apply`` is what gets traced.
    batch: field name -> :class:`BatchField`; the batch is a dict of these.
    model_inputs: batch -> positional arguments of ``model.__call__``.
    loss: ``(model outputs, batch) -> scalar`` training loss.
    optimizer: the optax transformation of the train step.
    train_flag: if true, ``model.__call__`` takes a keyword ``train``
      (batch norm in the CNNs).
    mutable: variable collections the train step updates (``batch_stats``).
  """
  model: nn.Module
  batch: dict[str, BatchField]
  model_inputs: Callable[[dict], tuple]
  loss: Callable[[Any, dict], jax.Array]
  optimizer: optax.GradientTransformation
  train_flag: bool = False
  mutable: tuple[str, ...] = ()


def cross_entropy(logits: jax.Array, labels: jax.Array,
                  weights: jax.Array | None = None) -> jax.Array:
  """Mean softmax cross entropy; ``logits [..., V]``, ``labels [...]`` int."""
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
  picked = jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
  if weights is None:
    return -jnp.mean(picked)
  return -jnp.sum(picked * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def _abstract_batch(spec: WorkloadSpec) -> dict:
  return {k: jax.ShapeDtypeStruct(f.shape, f.dtype)
          for k, f in spec.batch.items()}


def _real_batch(spec: WorkloadSpec, rng: np.random.Generator) -> dict:
  batch = {}
  for key, field in spec.batch.items():
    if field.max_value is not None:
      value = rng.integers(0, field.max_value, size=field.shape)
    elif jnp.issubdtype(field.dtype, jnp.integer):
      value = np.ones(field.shape)
    else:
      value = rng.standard_normal(field.shape)
    batch[key] = jnp.asarray(value, dtype=field.dtype)
  return batch


def _leaf_value(path, leaf: jax.ShapeDtypeStruct,
                rng: np.random.Generator) -> jax.Array:
  """A sensible initial value for one parameter, chosen by its name."""
  name = str(getattr(path[-1], "key", path[-1]))
  shape = leaf.shape
  if name in ("bias", "mean") or name.endswith("_bias"):
    value = np.zeros(shape)
  elif name in ("scale", "var"):
    value = np.ones(shape)
  elif name == "embedding":
    value = rng.standard_normal(shape) / math.sqrt(shape[-1])
  else:  # kernels: fan-in scaled normal (LeCun), fan-in = all but last dim
    fan_in = max(1, int(np.prod(shape[:-1]))) if len(shape) > 1 else 1
    value = rng.standard_normal(shape) / math.sqrt(fan_in)
  return jnp.asarray(value, dtype=leaf.dtype)


def _materialize(tree, rng: np.random.Generator):
  return jax.tree_util.tree_map_with_path(
      lambda path, leaf: _leaf_value(path, leaf, rng), tree)


def make_step(spec: WorkloadSpec, step: str, *, abstract: bool = False,
              seed: int = 0) -> tuple[Callable, tuple]:
  """Builds the ``(fn, args)`` pair of a workload.

  Args:
    spec: the workload at one size.
    step: ``"train"``: ``fn(variables, opt_state, batch) -> (new_variables,
      new_opt_state, loss)``, a forward pass, the loss, its gradient and an
      optax update; ``"infer"``: ``fn(variables, batch) -> outputs``.
    abstract: return ``jax.ShapeDtypeStruct`` leaves instead of arrays.
    seed: numpy seed of the parameter and batch values.

  Returns:
    ``(fn, args)``; ``variables`` is the flax variable dict (``params`` and,
    for the CNNs, ``batch_stats``).
  """
  model = spec.model
  abstract_batch = _abstract_batch(spec)
  init_kwargs = {"train": False} if spec.train_flag else {}
  abstract_variables = jax.eval_shape(
      functools.partial(model.init, **init_kwargs), jax.random.key(0),
      *spec.model_inputs(abstract_batch))
  abstract_variables = dict(abstract_variables)
  if abstract:
    variables, batch = abstract_variables, abstract_batch
  else:
    rng = np.random.default_rng(seed)
    variables = _materialize(abstract_variables, rng)
    batch = _real_batch(spec, rng)

  if step == "infer":
    infer_kwargs = {"train": False} if spec.train_flag else {}

    def infer_step(variables, batch):
      return model.apply(variables, *spec.model_inputs(batch), **infer_kwargs)

    return infer_step, (variables, batch)

  optimizer = spec.optimizer
  if abstract:
    opt_state = jax.eval_shape(optimizer.init, variables["params"])
  else:
    opt_state = optimizer.init(variables["params"])
  train_kwargs = {"train": True} if spec.train_flag else {}

  def train_step(variables, opt_state, batch):
    params = variables["params"]
    state = {k: v for k, v in variables.items() if k != "params"}

    def loss_of(params):
      inputs = spec.model_inputs(batch)
      if spec.mutable:
        outputs, new_state = model.apply(
            {"params": params, **state}, *inputs, mutable=list(spec.mutable),
            **train_kwargs)
      else:
        outputs, new_state = model.apply(
            {"params": params, **state}, *inputs, **train_kwargs), {}
      return spec.loss(outputs, batch), new_state

    (loss, new_state), grads = jax.value_and_grad(loss_of, has_aux=True)(
        params)
    updates, new_opt_state = optimizer.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    return {**state, **new_state, "params": new_params}, new_opt_state, loss

  return train_step, (variables, opt_state, batch)
