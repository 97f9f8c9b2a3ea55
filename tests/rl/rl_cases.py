"""Shared steps of the RL tests (tests/rl) on gplace._testing's toy
problem: jitted chunks of RL steps and of warm-start steps."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplace._testing import toy_batch, toy_simulate, toy_train_state
from gplace.rl import update


def toy_train(policy, optimizer, hparams, state, batch, num_steps):
  """``num_steps`` jitted RL steps on the toy problem: ``(state, metrics)``."""
  step = functools.partial(update.rl_step, apply_fn=policy.apply,
                           optimizer=optimizer, hparams=hparams,
                           simulate_fn=toy_simulate)
  return jax.jit(functools.partial(update.scan_chunk, step,
                                   num_steps=num_steps))(state, batch)


def fit_toy_target(policy):
  """80 warm-start steps (Adam, 3e-2) of ``policy`` on the two-graph toy
  batch towards one random device per position (the tabular policies are
  shared by position): ``(batch, state, target [2, 12])``, the last step's
  accuracy above 0.95."""
  batch = toy_batch()
  optimizer = optax.adam(3e-2)
  state = toy_train_state(policy, batch, optimizer)
  target = jnp.asarray(np.random.default_rng(3).integers(0, 3, (1, 12)),
                       jnp.int32).repeat(2, 0)
  step = functools.partial(update.supervised_step, apply_fn=policy.apply,
                           optimizer=optimizer)
  chunk = jax.jit(functools.partial(update.scan_chunk, step, num_steps=80))
  state, metrics = chunk(state, batch, target)
  assert metrics["accuracy"][-1] > 0.95, metrics["accuracy"]
  return batch, state, target
