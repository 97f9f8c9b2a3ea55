"""The RL and warm-start updates, written once for one device or many.

:func:`rl_step` (sample, score, PPO / REINFORCE), :func:`supervised_step`,
:func:`scan_chunk`; with an ``axis_name`` samples split over the axis and
gradients are averaged over it (in device order, :func:`_pmean`). Pure.
Shapes ``[B, K, N]``; ``N`` counts groups with ``batch.group_of``.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax

from gplace.errors import PolicyError, RewardError
from gplace.rl.grouping import expand_to_nodes, group_placement
from gplace.rl.losses import (ppo_objective, reinforce_objective,
                              sequential_supervised_loss, supervised_loss)
from gplace.rl.policy_fns import PolicyFns, policy_fns
from gplace.rl.rewards import effective_runtime
from gplace.rl.settings import RLSettings
from gplace.rl.state import TrainState
from gplace.rl.types import ApplyFn, Batch, Rollout, SimulateFn



def _pmean(x, axis_name):
  """The mean of ``x`` (a pytree) over ``axis_name``, summed in device
  order: gathered, then reduced alike on every device. ``lax.pmean``'s
  order is the transport's (gloo's between processes, another inside one),
  and Adam turns its last-bit differences on near-zero gradients into
  ``learning_rate``-sized steps; this mean is the same whether the devices
  are in one process or several. The gather moves each device's value to
  all (``A - 1`` copies instead of about 2): a policy's gradients are small.
  """
  if axis_name is None:
    return x
  return jax.tree.map(
      lambda v: jnp.mean(jax.lax.all_gather(v, axis_name), axis=0), x)


def _axis_size_and_index(axis_name):
  if axis_name is None:
    return 1, 0
  return jax.lax.axis_size(axis_name), jax.lax.axis_index(axis_name)


def _fns(apply_fn, hparams: Optional[RLSettings] = None) -> PolicyFns:
  """The policy (module, bound ``apply`` or :class:`PolicyFns`) as
  :class:`PolicyFns`."""
  eps = hparams.explore_epsilon if hparams is not None else 0.0
  return policy_fns(apply_fn, eps)


def sample_rollout(state: TrainState, batch: Batch, *, apply_fn: ApplyFn,
                   hparams: RLSettings,
                   axis_name: Optional[str] = None):
  """Samples this device's share of ``K`` placements per graph.

  ``apply_fn``: the policy (a one-shot ``apply``, a policy module, or
  :class:`~gplace.rl.policy_fns.PolicyFns`; sequential policies decode
  inside this function).

  Returns:
    ``(state with the next rng, Rollout)``; ``runtime_s`` / ``failed`` of the
    rollout are placeholders until scored.
  """
  fns = _fns(apply_fn, hparams)
  axis_size, axis_index = _axis_size_and_index(axis_name)
  local = hparams.num_samples // axis_size
  rng, step_rng = jax.random.split(state.rng)
  num_graphs = batch.failing_runtime_s.shape[0]
  num_groups = batch.graphs.nodes["mask"].shape[1]
  num_devices = batch.device_mask.shape[-1]
  params = state.params

  def one_graph(graph, device_mask, graph_rng, best):
    keys = jax.random.split(graph_rng, hparams.num_samples)
    keys = jax.lax.dynamic_slice_in_dim(keys, axis_index * local, local)
    placements, actions = fns.sample(params, graph, device_mask, keys)
    if hparams.mutate_best:  # validated: only where actions = placements
      def keep(key):
        return jax.random.uniform(jax.random.fold_in(key, 1),
                                  best.shape) >= hparams.mutate_best
      placements = jnp.where(jax.vmap(keep)(keys), best[None], placements)
      actions = placements
    scores = fns.score(params, graph, device_mask, actions)
    return placements, actions, scores.log_probs

  placements, actions, log_probs = jax.vmap(one_graph)(
      batch.graphs, batch.device_mask,
      jax.random.split(step_rng, num_graphs),
      group_placement(state.best_placement, batch.group_of, num_groups,
                      num_devices))
  zeros = jnp.zeros(placements.shape[:2], jnp.float32)
  priority = None
  if fns.schedule is not None:  # a policy that schedules: its own schedule
    priority = fns.schedule(actions, batch.group_of, batch.critical_path)
  fusion = None
  if fns.fusion is not None:    # a policy that fuses: scored on the host
    if batch.group_of is not None:
      raise PolicyError(
          "A policy with a fusion head decides per op, but this batch has "
          "group-level actions; set groups.max_groups=0 (or a larger "
          "groups.min_nodes) so that the policy places ops.")
    fusion = fns.fusion(actions)
  rollout = Rollout(placements, jax.lax.stop_gradient(log_probs), zeros,
                    zeros.astype(bool),
                    actions=None if fns.placement_actions and not
                    fns.sequential else actions,
                    priority=priority, fusion=fusion)
  return state.replace(rng=rng), rollout


def update_from_rollout(state: TrainState, batch: Batch, rollout: Rollout, *,
                        apply_fn: ApplyFn,
                        optimizer: optax.GradientTransformation,
                        hparams: RLSettings,
                        axis_name: Optional[str] = None):
  """Baseline, advantages, policy update and best placement from a scored
  rollout; the same on every device of ``axis_name``.

  Returns:
    ``(new state, metrics)``; metrics are means over the batch and all
    samples: ``mean_runtime_s``, ``best_runtime_s`` (per graph ``[B]``),
    ``fail_fraction``, ``entropy``, ``loss``, ...
  """
  runtime = effective_runtime(rollout.runtime_s, rollout.failed,
                              batch.failing_runtime_s[:, None])  # [B, Kl]
  rewards = -jnp.sqrt(runtime)
  batch_mean = _pmean(rewards.mean(1), axis_name)  # [B]
  baseline = jnp.where(state.baseline_ready, state.baseline, batch_mean)
  deviation_sq = _pmean(jnp.mean((rewards - baseline[:, None])**2, 1),
                        axis_name)
  reward_var = jnp.where(state.baseline_ready, state.reward_var, deviation_sq)
  if hparams.advantage == "batch":
    # Relative to this step's samples: half the samples are pushed up, half
    # down, whatever the EMA says (a lagging baseline gives all K samples
    # one sign and acts as an entropy knob).
    batch_var = _pmean(jnp.mean((rewards - batch_mean[:, None])**2, 1),
                       axis_name)
    advantages = rewards - batch_mean[:, None]
    if hparams.normalize_rewards:
      # The floor (0.1% of the mean reward) keeps differences that small
      # (a near-deterministic policy whose samples barely differ) from
      # being blown up to unit advantages.
      floor = (1e-3 * batch_mean)**2 + 1e-12
      advantages = advantages / jnp.sqrt(batch_var[:, None] + floor[:, None])
  else:
    advantages = rewards - baseline[:, None]
    if hparams.normalize_rewards:
      advantages = advantages / jnp.sqrt(reward_var[:, None] + 1e-8)
  decay = hparams.baseline_decay
  new_baseline = decay * baseline + (1 - decay) * batch_mean
  new_reward_var = decay * reward_var + (1 - decay) * deviation_sq

  fns = _fns(apply_fn, hparams)
  actions = rollout.placements if rollout.actions is None else rollout.actions

  def loss_fn(params):
    scores = jax.vmap(lambda g, m, a: fns.score(params, g, m, a))(
        batch.graphs, batch.device_mask, actions)
    if hparams.loss == "ppo":
      per_graph = functools.partial(ppo_objective, clip=hparams.ppo_clip,
                                    **_entropy_args(hparams))
      losses, metrics = jax.vmap(per_graph)(
          scores.log_probs, rollout.node_log_probs, scores.entropy,
          advantages, scores.mask)
    else:
      per_graph = functools.partial(reinforce_objective,
                                    **_entropy_args(hparams))
      losses, metrics = jax.vmap(per_graph)(scores.log_probs, scores.entropy,
                                            advantages, scores.mask)
    return losses.mean(), jax.tree.map(jnp.mean, metrics)

  def gradient_step(carry, _):
    params, opt_state = carry
    (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    grads = _pmean(grads, axis_name)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return (params, opt_state), dict(metrics, loss=loss)

  epochs = hparams.ppo_epochs if hparams.loss == "ppo" else 1
  (params, opt_state), metrics = jax.lax.scan(
      gradient_step, (state.params, state.opt_state), None, length=epochs)
  # Report the first epoch (the loss of the sampling policy), except the
  # PPO ratio's clipped fraction, which is 0 there by construction: the
  # last epoch's, after epochs - 1 updates on these samples.
  metrics = {k: _pmean(v[-1] if k == "clipped_fraction" else v[0], axis_name)
             for k, v in metrics.items()}

  best_runtime, best_placement, best_priority, best_fusion = _best_of(
      rollout._replace(placements=expand_to_nodes(rollout.placements,
                                                  batch.group_of)),
      runtime, axis_name)
  improved = best_runtime < state.best_runtime_s
  if state.best_priority is not None and best_priority is not None:
    state = state.replace(best_priority=jnp.where(
        improved[:, None], best_priority, state.best_priority))
  if state.best_fusion is not None and best_fusion is not None:
    state = state.replace(best_fusion=jnp.where(
        improved[:, None], best_fusion.astype(jnp.int32), state.best_fusion))
  failed = rollout.failed | ~jnp.isfinite(rollout.runtime_s)
  new_state = state.replace(
      step=state.step + 1, params=params, opt_state=opt_state,
      baseline=new_baseline, reward_var=new_reward_var,
      baseline_ready=jnp.ones((), bool),
      best_runtime_s=jnp.where(improved, best_runtime, state.best_runtime_s),
      best_placement=jnp.where(improved[:, None], best_placement,
                               state.best_placement))
  metrics.update(
      mean_runtime_s=_pmean(runtime.mean(), axis_name),
      fail_fraction=_pmean(failed.astype(jnp.float32).mean(), axis_name),
      mean_reward=batch_mean.mean(),
      best_runtime_s=new_state.best_runtime_s)
  return new_state, metrics


def _entropy_args(hparams: RLSettings) -> dict:
  return dict(entropy_weight=hparams.entropy_weight,
              entropy_floor=hparams.entropy_floor,
              floor_weight=hparams.entropy_floor_weight)


def _best_of(rollout: Rollout, runtime, axis_name):
  """Best successful sample per graph over all devices: ``([B], [B, N],
  [B, N] priority or None, [B, N] fusion choices or None)``."""
  failed = rollout.failed | ~jnp.isfinite(rollout.runtime_s)
  candidate = jnp.where(failed, jnp.inf, runtime)  # [B, Kl]
  index = jnp.argmin(candidate, axis=1)
  best = jnp.take_along_axis(candidate, index[:, None], 1)[:, 0]

  def pick(per_sample):  # [B, Kl, N] -> [B, N]
    return jnp.take_along_axis(per_sample, index[:, None, None], 1)[:, 0]

  rows = [pick(rollout.placements)]
  optional = [rollout.priority, rollout.fusion]
  rows += [pick(row) for row in optional if row is not None]
  if axis_name is not None:
    all_best = jax.lax.all_gather(best, axis_name)  # [A, B]
    winner = jnp.argmin(all_best, axis=0)  # first device wins ties
    best = jnp.take_along_axis(all_best, winner[None], 0)[0]
    rows = [jnp.take_along_axis(jax.lax.all_gather(row, axis_name),
                                winner[None, :, None], 0)[0] for row in rows]
  picked = iter(rows[1:])
  return (best, rows[0], *[None if row is None else next(picked)
                           for row in optional])


def rl_step(state: TrainState, batch: Batch, *, apply_fn: ApplyFn,
            optimizer: optax.GradientTransformation, hparams: RLSettings,
            simulate_fn: SimulateFn, axis_name: Optional[str] = None):
  """One whole RL step with simulated rewards: sample, simulate, update.

  Pure and jittable; ``simulate_fn(problem, placements [K, N]) ->
  (runtime_s [K], failed [K])`` is vmapped over the batch's graphs (an
  ordering policy's rollouts pass their ``priority [K, N]`` too).

  Returns:
    ``(new state, metrics)``.
  """
  state, rollout = sample_rollout(state, batch, apply_fn=apply_fn,
                                  hparams=hparams, axis_name=axis_name)
  if rollout.fusion is not None:
    raise RewardError(
        "The policy decides the fusion too, which the jitted simulator "
        "reward cannot run (fusion contracts the graph on the host); use "
        "rl.reward='simulator_host'.")
  placements = expand_to_nodes(rollout.placements, batch.group_of)
  # One graph after another (lax.map), each graph's K placements batched:
  # vmapping the dynamic list scheduler over graphs as well made every
  # step of its loop carry all B graphs' state (15x slower for B = 4 on
  # CPU); the static scan is as fast either way.
  if rollout.priority is None:
    runtime_s, failed = jax.lax.map(lambda args: simulate_fn(*args),
                                    (batch.problems, placements))
  else:  # an ordering policy: each placement in its own schedule
    runtime_s, failed = jax.lax.map(
        lambda args: simulate_fn(*args),
        (batch.problems, placements, rollout.priority))
  rollout = rollout._replace(runtime_s=runtime_s.astype(jnp.float32),
                             failed=failed.astype(bool))
  return update_from_rollout(state, batch, rollout, apply_fn=apply_fn,
                             optimizer=optimizer, hparams=hparams,
                             axis_name=axis_name)


def supervised_step(state: TrainState, batch: Batch, target: jax.Array, *,
                    apply_fn: ApplyFn, optimizer: optax.GradientTransformation,
                    label_smoothing: float = 0.0,
                    axis_name: Optional[str] = None):
  """One warm-start step: cross-entropy to ``target int32 [B, N]``.

  Returns:
    ``(new state, metrics)`` with ``supervised_loss``, ``accuracy``,
    ``loss``.
  """
  fns = _fns(apply_fn)
  loss_one = functools.partial(supervised_loss,
                               label_smoothing=label_smoothing)

  def loss_fn(params):
    if fns.sequential:  # teacher-forced on the target (actions = placements)
      scores = jax.vmap(lambda g, m, t: fns.score(params, g, m, t[None]))(
          batch.graphs, batch.device_mask, target)
      losses, metrics = jax.vmap(sequential_supervised_loss)(
          scores.log_probs[:, 0], scores.mask)
    else:
      logits = jax.vmap(lambda g, m: fns.logits(params, g, m))(
          batch.graphs, batch.device_mask)
      losses, metrics = jax.vmap(loss_one)(logits, target,
                                           batch.graphs.nodes["mask"])
    return losses.mean(), jax.tree.map(jnp.mean, metrics)

  (loss, metrics), grads = jax.value_and_grad(loss_fn,
                                              has_aux=True)(state.params)
  grads = _pmean(grads, axis_name)
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = dict(metrics, loss=loss)
  return state.replace(step=state.step + 1, params=params,
                       opt_state=opt_state), metrics


def scan_chunk(step_fn: Callable, state: TrainState, *args,
               num_steps: int):
  """Runs ``step_fn(state, *args) -> (state, metrics)`` ``num_steps`` times in
  one ``lax.scan``; metrics come back stacked ``[num_steps, ...]``."""

  def body(state, _):
    return step_fn(state, *args)

  return jax.lax.scan(body, state, None, length=num_steps)
