"""The jitted chunks of a training run, and the steps each one covers.

:func:`make_step_fns` compiles chunks (a ``lax.scan`` of steps) under
``jax.pmap``; :func:`run_chunk` interleaves host rewards; :func:`run_loop`
loops in Python; :func:`chunk_schedule` depends only on the step, so a
resumed run replays the uninterrupted one.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplace.rl import distributed
from gplace.rl import run_outputs
from gplace.rl.checkpoint import Checkpointer
from gplace.rl.grouping import expand_on_host
from gplace.rl.rewards import simulator_reward
from gplace.rl.scoring import shared_scored_rollout
from gplace.rl.settings import TrainSettings
from gplace.rl.state import fresh_adam_moments
from gplace.rl.update import (rl_step, sample_rollout, scan_chunk,
                              supervised_step, update_from_rollout)

AXIS = "devices"

# Called after every chunk with the step and its last metrics; returning True
# ends the run there (it is then evaluated and reported as finished).
ProgressFn = Callable[[int, dict], Optional[bool]]


class StepFns(NamedTuple):
  """The compiled pieces of a run (``num_steps`` is a static argument)."""
  supervised_chunk: Callable  # (state, batch, target, num_steps)
  rl_chunk: Optional[Callable]  # (state, batch, num_steps), simulator
  sample: Callable  # (state, batch) -> (state, rollout), host rewards
  update: Callable  # (state, batch, rollout) -> (state, metrics)
  optimizer: optax.GradientTransformation


def make_step_fns(policy, optimizer, hparams, *, parallel: int,
                  label_smoothing: float = 0.0,
                  simulate_fn=simulator_reward) -> StepFns:
  """Builds the jitted / pmapped chunk functions.

  With ``parallel > 1`` the chunks run under ``jax.pmap`` over that many
  devices (:func:`gplace.rl.distributed.parallel_devices`: the local ones,
  or every device of every process) with a replicated state (leading device
  axis, each process passing its share) and a broadcast batch.
  """
  apply_fn = policy.apply

  def supervised_chunk(state, batch, target, num_steps, axis_name=None):
    step = functools.partial(supervised_step, apply_fn=apply_fn,
                             optimizer=optimizer,
                             label_smoothing=label_smoothing,
                             axis_name=axis_name)
    return scan_chunk(step, state, batch, target, num_steps=num_steps)

  def rl_chunk(state, batch, num_steps, axis_name=None):
    step = functools.partial(rl_step, apply_fn=apply_fn, optimizer=optimizer,
                             hparams=hparams, simulate_fn=simulate_fn,
                             axis_name=axis_name)
    return scan_chunk(step, state, batch, num_steps=num_steps)

  sample = jax.jit(functools.partial(sample_rollout, apply_fn=apply_fn,
                                     hparams=hparams))
  update = jax.jit(functools.partial(update_from_rollout, apply_fn=apply_fn,
                                     optimizer=optimizer, hparams=hparams))
  if parallel > 1:
    devices = distributed.parallel_devices(parallel)
    sup = jax.pmap(functools.partial(supervised_chunk, axis_name=AXIS),
                   axis_name=AXIS, in_axes=(0, None, None),
                   static_broadcasted_argnums=(3,), devices=devices)
    rlc = jax.pmap(functools.partial(rl_chunk, axis_name=AXIS),
                   axis_name=AXIS, in_axes=(0, None),
                   static_broadcasted_argnums=(2,), devices=devices)
  else:
    sup = jax.jit(supervised_chunk, static_argnums=(3,))
    rlc = jax.jit(rl_chunk, static_argnums=(2,))
  return StepFns(sup, rlc, sample, update, optimizer)


@functools.lru_cache(maxsize=8)
def cached_step_fns(policy, hparams, optimizer, parallel, label_smoothing,
                     simulate_fn=simulator_reward):
  """Same model, optimizer and settings -> the same compiled functions (a run
  resumed in the same process does not compile again)."""
  return make_step_fns(policy, optimizer, hparams, parallel=parallel,
                       label_smoothing=label_smoothing,
                       simulate_fn=simulate_fn)


def replicate(tree, n: int):
  """A leading device axis of size ``n`` (for pmap), on the first ``n``
  local devices (in a multi-process run: this process's share of all
  ``n`` devices); identity for 1.

  The copies are laid out as a pmap lays out its outputs, so the chunk that
  starts a run (or a resumed one) hits the compile of the chunks that
  follow; host arrays would compile every chunk function once more.
  """
  if n == 1:
    return tree
  share = distributed.local_share(n)
  host = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x),
                                                (share,) + np.shape(x)), tree)
  return _device_identity(n)(host)


@functools.lru_cache(maxsize=8)
def _device_identity(n: int) -> Callable:
  # Same axis name as the chunks: it names the mesh of their outputs.
  return jax.pmap(lambda x: x, axis_name=AXIS,
                  devices=distributed.parallel_devices(n))


def unreplicate(tree, n: int):
  """The first copy of a replicated tree, as numpy arrays; identity for 1
  (numpy arrays too in a multi-process run: orbax saves no process-local
  jax.Array there). (Reads this process's first shard: indexing ``x[0]``
  dispatches one gather per leaf, seconds for a whole train state.)"""
  if n == 1:
    return (jax.tree.map(np.asarray, tree) if distributed.is_distributed()
            else tree)
  return jax.tree.map(lambda x: np.asarray(
      x.addressable_data(0) if isinstance(x, jax.Array) else x)[0], tree)


def chunk_schedule(step: int, *, warm_steps: int, total_steps: int,
                   chunk_steps: int, checkpoint_every: int,
                   greedy_every: int = 0) -> int:
  """Steps in the next chunk: up to ``chunk_steps``, never across the end of
  the warm start, a checkpoint step, a greedy-scoring step (every
  ``greedy_every`` RL steps; 0: none) or the end. Depends only on ``step``,
  so a resumed run replays the uninterrupted schedule."""
  bounds = [total_steps, (step // checkpoint_every + 1) * checkpoint_every]
  if step < warm_steps:
    bounds.append(warm_steps)
  elif greedy_every > 0:
    bounds.append(warm_steps + ((step - warm_steps) // greedy_every + 1)
                  * greedy_every)
  return max(1, min([chunk_steps] + [b - step for b in bounds]))


class Schedule(NamedTuple):
  """Which steps are warm-start steps, where chunks end, when to save."""
  warm_steps: int
  total_steps: int
  chunk_steps: int
  checkpoint_every: int
  greedy_every: int = 0

  @classmethod
  def from_settings(cls, settings: TrainSettings,
                    warm_start: bool) -> "Schedule":
    """The schedule of ``settings.train``; ``warm_start``: whether the run
    starts with ``settings.warm_start.steps`` supervised steps."""
    warm_steps = settings.warm_start.steps if warm_start else 0
    loop = settings.train
    return cls(warm_steps, warm_steps + loop.num_steps, loop.chunk_steps,
               loop.checkpoint_every, loop.greedy_every)

  def phase(self, step: int) -> str:
    """``"warm_start"`` or ``"rl"``: the phase of the step after ``step``."""
    return "warm_start" if step < self.warm_steps else "rl"

  def next_chunk(self, step: int) -> int:
    """:func:`chunk_schedule` at ``step``."""
    return chunk_schedule(step, warm_steps=self.warm_steps,
                          total_steps=self.total_steps,
                          chunk_steps=self.chunk_steps,
                          checkpoint_every=self.checkpoint_every,
                          greedy_every=self.greedy_every)

  def checkpoint_due(self, step: int) -> bool:
    return step % self.checkpoint_every == 0 or step == self.total_steps

  def greedy_due(self, step: int) -> bool:
    """Whether the policy's greedy placement is scored after ``step``:
    every ``greedy_every`` RL steps and after the last (never when 0)."""
    if self.greedy_every <= 0 or step <= self.warm_steps:
      return False
    return ((step - self.warm_steps) % self.greedy_every == 0
            or step == self.total_steps)


class HostRewards(NamedTuple):
  """Measured rewards: one reward function per graph, real node counts."""
  reward_fns: list
  num_nodes: np.ndarray


def run_chunk(fns: StepFns, state, batch, target, length: int, *,
              warm_start: bool, host_rewards: Optional[HostRewards] = None):
  """``length`` warm-start or RL steps; returns ``(state, metrics [L, ...])``
  (replicated over the device axis under pmap)."""
  if warm_start:
    return fns.supervised_chunk(state, batch, target, length)
  if host_rewards is None:
    return fns.rl_chunk(state, batch, length)
  all_metrics = []
  # One device per process: measure between sample and update. Across
  # processes every one samples and updates alike and scores its share.
  for _ in range(length):
    state, rollout = fns.sample(state, batch)
    scored = shared_scored_rollout(rollout._replace(
        placements=expand_on_host(rollout.placements, batch.group_of)),
                                 *host_rewards)
    rollout = rollout._replace(runtime_s=scored.runtime_s,
                               failed=scored.failed)
    state, metrics = fns.update(state, batch, rollout)
    all_metrics.append(metrics)
  return state, jax.tree.map(lambda *xs: jnp.stack(xs), *all_metrics)


# -- the loop -----------------------------------------------------------------


class LoopResult(NamedTuple):
  """Where :func:`run_loop` stopped: the (unreplicated) state, its step, and
  the RL steps per second of the last chunk."""
  state: Any
  step: int
  steps_per_second: float


def run_loop(fns: StepFns, state, batch, target, schedule: Schedule,
             outputs: run_outputs.RunOutputs,
             checkpointer: Optional[Checkpointer], *,
             parallel: int, host_rewards: Optional[HostRewards],
             progress_fn: Optional[ProgressFn],
             stop_after_step: Optional[int], run_start: float,
             fresh_optimizer: bool = False,
             greedy_fn: Optional[Callable[[Any], Sequence[float]]] = None
             ) -> LoopResult:
  """Chunks from ``state.step`` to ``schedule.total_steps`` (or
  ``stop_after_step``); after each the outputs, the ``progress_fn`` hook, and
  at checkpoint steps a checkpoint, ``results.json`` and the curve. With
  ``fresh_optimizer``, Adam's moments are reset when RL starts after a warm
  start (:func:`~gplace.rl.state.fresh_adam_moments`). With ``greedy_fn``
  (``state -> [B]`` runtimes of the policy's greedy placements), it is
  called at the steps :meth:`Schedule.greedy_due` names, and its runtimes
  go to ``metrics.jsonl``; those scorings are not train samples."""
  state_dev = replicate(state, parallel)
  batch_dev = jax.tree.map(jnp.asarray, batch)
  step, steps_per_second = int(state.step), 0.0
  while step < schedule.total_steps:
    length, phase = schedule.next_chunk(step), schedule.phase(step)
    if fresh_optimizer and step == schedule.warm_steps > 0:
      # Depends only on the step: a run resumed here resets as well.
      state = unreplicate(state_dev, parallel)
      state_dev = replicate(state.replace(
          opt_state=fresh_adam_moments(state.opt_state)), parallel)
    t0 = time.time()
    state_dev, metrics = run_chunk(fns, state_dev, batch_dev, target, length,
                                   warm_start=phase == "warm_start",
                                   host_rewards=host_rewards)
    metrics = jax.tree.map(np.asarray, unreplicate(metrics, parallel))
    jax.block_until_ready(state_dev)
    elapsed = time.time() - t0
    if phase == "rl":
      steps_per_second = length / max(elapsed, 1e-9)
    state = unreplicate(state_dev, parallel)
    last = outputs.after_chunk(step, phase, metrics, state,
                               start_s=t0 - run_start, elapsed_s=elapsed)
    step += length
    if greedy_fn is not None and schedule.greedy_due(step):
      outputs.after_greedy(step, greedy_fn(state),
                           start_s=time.time() - run_start)
    # Every process calls progress_fn; process 0's answer decides for all.
    stop = progress_fn is not None and distributed.agree(
        bool(progress_fn(step, last)))
    if schedule.checkpoint_due(step) and checkpointer is not None:
      checkpointer.save(step, state)
      outputs.at_checkpoint(step, state)
    if stop or (stop_after_step is not None and step >= stop_after_step):
      break
  return LoopResult(state, step, steps_per_second)
