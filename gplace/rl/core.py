"""Reinforcement learning of placements: sampling, rewards, losses, updates.

Where this sits: a policy (``gplace.policies``) maps padded graphs to device
logits; this module samples ``K`` placements per graph from them, scores them
(with the simulator inside the same jitted step, or with real measurements on
the host in between), and updates the policy by REINFORCE or PPO.
``gplace.train`` drives it in jitted ``lax.scan`` chunks.

Decisions, all following ColocRL / HDP / GO:

* One-shot sampling: every node's device is an independent categorical given
  the graph (GO). Each of the ``K`` samples draws from its own key
  ``split(rng, K)[k]``, so splitting the ``K`` samples over devices draws the
  very same placements as one device drawing all of them.
* Reward ``-sqrt(runtime_s)`` (ColocRL, HDP). A failed placement (out of
  memory, or a measurement that failed) counts as running for
  ``failing_runtime_s``, a per-graph constant: HDP uses a fixed 100 s, which
  would swamp the microsecond runtimes of small graphs, so gplace uses
  ``oom_penalty_factor`` (default 10) times the graph's best single-device
  runtime (``gplace.train`` computes it; any value works here).
* Baseline: an exponential moving average of the mean reward per graph
  (ColocRL; decay 0.9 as HDP), initialised by the first batch; advantages are
  divided by the EMA of their standard deviation (reward normalisation), so
  one learning rate serves graphs whose runtimes differ by orders of
  magnitude.
* Losses are normalised per node: the policy-gradient term uses the mean log
  probability of a placement's nodes, PPO clips per-node ratios (a ratio of
  80k-node joint probabilities would always be clipped), and the entropy is the
  mean per-node entropy.
* The update is written once, with an ``axis_name``: samples are split over the
  axis, gradients and reward statistics ``lax.pmean``-ed, the best placement
  gathered; with ``axis_name=None`` the same code runs on one device.

Shapes: ``B`` graphs per batch, ``K`` samples per graph (``K_local = K /
axis size`` on each device), ``N`` padded nodes, ``D`` devices.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional

import flax
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import optax

from gplace.errors import ConfigError

# apply_fn(params, graphs, device_mask) -> logits [N, D]
ApplyFn = Callable[[Any, jraph.GraphsTuple, jax.Array], jax.Array]
# simulate_fn(problem, placements [K, N]) -> (runtime_s [K], failed [K])
SimulateFn = Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]


class RLHyperparams(NamedTuple):
  """Static RL settings (hashable, closed over by the jitted step).

  Attributes:
    num_samples: ``K``, placements sampled per graph per step (over all
      devices of the axis).
    loss: ``"ppo"`` or ``"reinforce"``.
    ppo_epochs: gradient steps on the same samples (PPO; REINFORCE uses 1).
    ppo_clip: ratio clip ``epsilon``.
    entropy_weight: weight of the mean per-node entropy bonus.
    baseline_decay: EMA decay of the reward baseline.
    normalize_rewards: divide advantages by the EMA reward std.
    explore_epsilon: ``eps``, per-node uniform exploration: the policy that
      samples *and* is trained is the mixture ``(1 - eps) softmax(logits) +
      eps / D`` of every node (``eps * N`` nodes of a sample re-drawn
      uniformly on average). Its log-probabilities are exact, so PPO ratios,
      the REINFORCE term and the entropy all use the same mixture. A
      warm-started policy (entropy ~0) otherwise samples only its baseline;
      with ``eps > 0`` it samples placements around it. 0 (default) is the
      plain softmax policy.
    mutate_best: ``m``, search around the best placement (a heuristic, not
      from the papers): each sampled node keeps its policy draw with
      probability ``m`` and otherwise takes its device in
      ``state.best_placement`` (the warm-start baseline until something
      beats it), so the ``K`` samples are mutations of the best placement
      found so far (hill climbing that the best-ever tracking accumulates).
      The update treats them as if the policy had drawn them (log-probs under
      the policy of the devices taken: off-policy and biased). 0 (default):
      plain policy samples.
  """

  num_samples: int = 16
  loss: str = "ppo"
  ppo_epochs: int = 4
  ppo_clip: float = 0.2
  entropy_weight: float = 0.01
  baseline_decay: float = 0.9
  normalize_rewards: bool = True
  explore_epsilon: float = 0.0
  mutate_best: float = 0.0


class Batch(NamedTuple):
  """``B`` graphs to place, every leaf with a leading ``[B]`` axis.

  Attributes:
    graphs: stacked same-budget ``GraphsTuple`` s (``N_pad`` nodes each).
    problems: stacked simulator problems (``gplace.simulator.SimProblem``)
      whose node order is the graphs' node order, or ``None`` with host
      rewards.
    failing_runtime_s: ``f32 [B]``, runtime charged to failed placements.
    device_mask: ``bool [B, D]`` or ``[B, N_pad, D]``, allowed devices.
  """

  graphs: jraph.GraphsTuple
  problems: Any
  failing_runtime_s: jax.Array
  device_mask: jax.Array


class Rollout(NamedTuple):
  """Sampled placements of one step, on one device of the axis.

  Attributes:
    placements: ``int32 [B, K_local, N]``.
    node_log_probs: ``f32 [B, K_local, N]`` under the sampling policy (zero on
      padding nodes).
    runtime_s: ``f32 [B, K_local]`` (filled after scoring).
    failed: ``bool [B, K_local]``.
  """

  placements: jax.Array
  node_log_probs: jax.Array
  runtime_s: jax.Array
  failed: jax.Array


@flax.struct.dataclass
class TrainState:
  """Everything a run needs to continue bit-for-bit after a restart.

  Attributes:
    step: ``int32 []``, train steps taken (supervised and RL).
    params: policy parameters.
    opt_state: optax state.
    rng: ``uint32 [2]`` key, split once per step.
    baseline: ``f32 [B]`` EMA of the mean reward.
    reward_var: ``f32 [B]`` EMA of the squared advantage.
    baseline_ready: ``bool []``, the EMAs hold data.
    best_runtime_s: ``f32 [B]``, best runtime of any placement seen (inf
      until one succeeds).
    best_placement: ``int32 [B, N]``, that placement.
  """

  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array
  baseline: jax.Array
  reward_var: jax.Array
  baseline_ready: jax.Array
  best_runtime_s: jax.Array
  best_placement: jax.Array


# -- distributions -------------------------------------------------------------


def sample_placements(logits: jax.Array, rng: jax.Array,
                      num_samples: int) -> jax.Array:
  """Draws ``num_samples`` one-shot placements.

  Args:
    logits: ``[N, D]``.
    rng: a PRNG key; sample ``k`` uses ``split(rng, num_samples)[k]``.
    num_samples: ``K``.

  Returns:
    ``int32 [K, N]``.
  """
  keys = jax.random.split(rng, num_samples)
  return _sample_with_keys(logits, keys)


def _sample_with_keys(logits, keys):
  draw = lambda key: jax.random.categorical(key, logits, axis=-1)
  return jax.vmap(draw)(keys).astype(jnp.int32)


def node_log_probs(logits: jax.Array, placements: jax.Array,
                   node_mask: Optional[jax.Array] = None) -> jax.Array:
  """Per-node log-probabilities of placements.

  Args:
    logits: ``[N, D]`` (one-shot) or ``[K, N, D]`` (teacher-forced).
    placements: ``int [K, N]``.
    node_mask: ``bool [N]``; padding nodes get 0.

  Returns:
    ``f32 [K, N]``.
  """
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  log_p = jnp.broadcast_to(log_p, placements.shape + log_p.shape[-1:])
  taken = jnp.take_along_axis(log_p, placements[..., None], axis=-1)[..., 0]
  if node_mask is not None:
    taken = jnp.where(node_mask, taken, 0.0)
  return taken


def log_prob(logits: jax.Array, placements: jax.Array,
             node_mask: Optional[jax.Array] = None) -> jax.Array:
  """``f32 [K]``: log-probability of each placement (sum over real nodes)."""
  return node_log_probs(logits, placements, node_mask).sum(-1)


def entropy(logits: jax.Array, node_mask: Optional[jax.Array] = None):
  """``f32 []``: mean over real nodes of the per-node entropy (nats)."""
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  per_node = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
  if node_mask is None:
    return per_node.mean()
  weight = node_mask.astype(jnp.float32)
  return jnp.sum(per_node * weight) / jnp.maximum(weight.sum(), 1.0)


# -- rewards ------------------------------------------------------------------


def effective_runtime(runtime_s: jax.Array, failed: jax.Array,
                      failing_runtime_s: jax.Array) -> jax.Array:
  """Runtime with failed (or non-finite) placements charged
  ``failing_runtime_s``; same shape as ``runtime_s``."""
  failed = failed | ~jnp.isfinite(runtime_s)
  return jnp.where(failed, failing_runtime_s, runtime_s)


def reward(runtime_s: jax.Array, failed: jax.Array,
           failing_runtime_s: jax.Array) -> jax.Array:
  """``-sqrt(runtime)`` of ColocRL/HDP, with the failure penalty."""
  return -jnp.sqrt(effective_runtime(runtime_s, failed, failing_runtime_s))


# -- losses (one graph each; vmap over graphs) -------------------------------


def _masked_node_mean(values, node_mask):
  """Mean over real nodes of ``values [..., N]`` -> ``[...]``."""
  weight = node_mask.astype(jnp.float32)
  return jnp.sum(values * weight, -1) / jnp.maximum(weight.sum(), 1.0)


def reinforce_loss(logits: jax.Array, placements: jax.Array,
                   advantages: jax.Array, node_mask: jax.Array,
                   entropy_weight: float):
  """REINFORCE with a baseline, for one graph.

  ``-mean_k A_k * mean_n log p(a_kn) - entropy_weight * H``.

  Args:
    logits: ``[N, D]`` of the current parameters.
    placements: ``int [K, N]``.
    advantages: ``f32 [K]`` (treated as constants).
    node_mask: ``bool [N]``.
    entropy_weight: weight of the entropy bonus.

  Returns:
    ``(loss [], metrics dict)``.
  """
  taken = node_log_probs(logits, placements, node_mask)
  advantages = jax.lax.stop_gradient(advantages)
  policy_loss = -jnp.mean(advantages * _masked_node_mean(taken, node_mask))
  ent = entropy(logits, node_mask)
  loss = policy_loss - entropy_weight * ent
  return loss, {"policy_loss": policy_loss, "entropy": ent}


def ppo_loss(logits: jax.Array, placements: jax.Array,
             old_node_log_probs: jax.Array, advantages: jax.Array,
             node_mask: jax.Array, clip: float, entropy_weight: float):
  """PPO's clipped surrogate with per-node ratios, for one graph.

  ``-mean_k mean_n min(r_kn A_k, clip(r_kn, 1 -+ eps) A_k) - w H`` with
  ``r_kn = p(a_kn) / p_old(a_kn)``.

  Args:
    logits: ``[N, D]`` of the current parameters.
    placements: ``int [K, N]``.
    old_node_log_probs: ``f32 [K, N]`` of the sampling parameters.
    advantages: ``f32 [K]``.
    node_mask: ``bool [N]``.
    clip: ``eps``.
    entropy_weight: weight of the entropy bonus.

  Returns:
    ``(loss [], metrics dict)`` with the clipped fraction.
  """
  taken = node_log_probs(logits, placements, node_mask)
  ratio = jnp.exp(taken - jax.lax.stop_gradient(old_node_log_probs))
  adv = jax.lax.stop_gradient(advantages)[:, None]
  surrogate = jnp.minimum(ratio * adv,
                          jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * adv)
  policy_loss = -jnp.mean(_masked_node_mean(surrogate, node_mask))
  clipped = _masked_node_mean(
      (jnp.abs(ratio - 1.0) > clip).astype(jnp.float32), node_mask).mean()
  ent = entropy(logits, node_mask)
  loss = policy_loss - entropy_weight * ent
  return loss, {"policy_loss": policy_loss, "entropy": ent,
                "clipped_fraction": clipped}


def supervised_loss(logits: jax.Array, target: jax.Array,
                    node_mask: jax.Array, label_smoothing: float = 0.0):
  """Cross-entropy to a target placement ``int [N]`` (warm start), one graph.

  ``label_smoothing`` moves that much target mass to the uniform
  distribution, so the warm-started policy keeps some entropy for RL to
  explore with (a fully fitted one-shot policy samples only its target).

  Returns ``(loss [], metrics)`` with the accuracy over real nodes.
  """
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  num_devices = logits.shape[-1]
  soft = (1.0 - label_smoothing) * jax.nn.one_hot(target, num_devices) + (
      label_smoothing / num_devices)
  loss = -_masked_node_mean(jnp.sum(soft * log_p, -1), node_mask)
  accuracy = _masked_node_mean(
      (jnp.argmax(logits, -1) == target).astype(jnp.float32), node_mask)
  return loss, {"supervised_loss": loss, "accuracy": accuracy}


# -- the per-device update, written once --------------------------------------


def _pmean(x, axis_name):
  return x if axis_name is None else jax.lax.pmean(x, axis_name)


def _axis_size_and_index(axis_name):
  if axis_name is None:
    return 1, 0
  return jax.lax.axis_size(axis_name), jax.lax.axis_index(axis_name)


def _all_logits(params, batch: Batch, apply_fn: ApplyFn):
  """``[B, N, D]``: the policy on every graph of the batch."""
  return jax.vmap(lambda g, m: apply_fn(params, g, m))(batch.graphs,
                                                       batch.device_mask)


def exploration_logits(logits: jax.Array, explore_epsilon: float,
                       device_mask: Optional[jax.Array] = None) -> jax.Array:
  """Logits of the ``eps``-uniform mixture ``(1 - eps) softmax + eps / D``.

  Returned as normalised log-probabilities (valid logits for sampling,
  :func:`node_log_probs` and :func:`entropy`); ``logits`` unchanged for
  ``eps == 0``. ``device_mask`` (``[..., D]`` broadcastable) restricts the
  uniform part to allowed devices.
  """
  if not explore_epsilon:
    return logits
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  if device_mask is None:
    allowed = jnp.ones(logits.shape[-1:], jnp.float32)
  else:
    allowed = jnp.broadcast_to(device_mask, logits.shape).astype(jnp.float32)
  uniform = allowed / jnp.maximum(allowed.sum(-1, keepdims=True), 1.0)
  log_uniform = jnp.where(allowed > 0, jnp.log(jnp.maximum(uniform, 1e-30)),
                          -jnp.inf)
  return jnp.logaddexp(jnp.log1p(-explore_epsilon) + log_p,
                       jnp.log(explore_epsilon) + log_uniform)


def _policy_logits(params, batch: Batch, apply_fn: ApplyFn,
                   hparams: RLHyperparams):
  """``[B, N, D]`` logits of the policy RL samples from and trains."""
  logits = _all_logits(params, batch, apply_fn)
  if not hparams.explore_epsilon:
    return logits
  mask = batch.device_mask
  mask = mask[:, None, :] if mask.ndim == 2 else mask
  return exploration_logits(logits, hparams.explore_epsilon, mask)


def init_train_state(rng: jax.Array, params: Any,
                     optimizer: optax.GradientTransformation,
                     batch: Batch) -> TrainState:
  """A fresh state for ``batch`` (``B`` graphs of ``N`` padded nodes)."""
  num_graphs, num_nodes = batch.graphs.nodes["mask"].shape
  return TrainState(
      step=jnp.zeros((), jnp.int32), params=params,
      opt_state=optimizer.init(params), rng=jnp.asarray(rng),
      baseline=jnp.zeros((num_graphs,), jnp.float32),
      reward_var=jnp.ones((num_graphs,), jnp.float32),
      baseline_ready=jnp.zeros((), bool),
      best_runtime_s=jnp.full((num_graphs,), jnp.inf, jnp.float32),
      best_placement=jnp.zeros((num_graphs, num_nodes), jnp.int32))


def sample_rollout(state: TrainState, batch: Batch, *, apply_fn: ApplyFn,
                   hparams: RLHyperparams,
                   axis_name: Optional[str] = None):
  """Samples this device's share of ``K`` placements per graph.

  Returns:
    ``(state with the next rng, Rollout)``; ``runtime_s`` / ``failed`` of the
    rollout are placeholders until scored.
  """
  axis_size, axis_index = _axis_size_and_index(axis_name)
  local = hparams.num_samples // axis_size
  rng, step_rng = jax.random.split(state.rng)
  num_graphs = batch.failing_runtime_s.shape[0]
  logits = _policy_logits(state.params, batch, apply_fn, hparams)

  def one_graph(logits, graph_rng, mask, best):
    keys = jax.random.split(graph_rng, hparams.num_samples)
    keys = jax.lax.dynamic_slice_in_dim(keys, axis_index * local, local)
    placements = _sample_with_keys(logits, keys)
    if hparams.mutate_best:
      def keep(key):
        return jax.random.uniform(jax.random.fold_in(key, 1),
                                  best.shape) >= hparams.mutate_best
      placements = jnp.where(jax.vmap(keep)(keys), best[None], placements)
    return placements, node_log_probs(logits, placements, mask)

  placements, log_probs = jax.vmap(one_graph)(
      logits, jax.random.split(step_rng, num_graphs),
      batch.graphs.nodes["mask"], state.best_placement)
  zeros = jnp.zeros(placements.shape[:2], jnp.float32)
  rollout = Rollout(placements, jax.lax.stop_gradient(log_probs), zeros,
                    zeros.astype(bool))
  return state.replace(rng=rng), rollout


def update_from_rollout(state: TrainState, batch: Batch, rollout: Rollout, *,
                        apply_fn: ApplyFn,
                        optimizer: optax.GradientTransformation,
                        hparams: RLHyperparams,
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
  advantages = rewards - baseline[:, None]
  if hparams.normalize_rewards:
    advantages = advantages / jnp.sqrt(reward_var[:, None] + 1e-8)
  decay = hparams.baseline_decay
  new_baseline = decay * baseline + (1 - decay) * batch_mean
  new_reward_var = decay * reward_var + (1 - decay) * deviation_sq

  node_mask = batch.graphs.nodes["mask"]

  def loss_fn(params):
    logits = _policy_logits(params, batch, apply_fn, hparams)
    if hparams.loss == "ppo":
      per_graph = functools.partial(ppo_loss, clip=hparams.ppo_clip,
                                    entropy_weight=hparams.entropy_weight)
      losses, metrics = jax.vmap(per_graph)(
          logits, rollout.placements, rollout.node_log_probs, advantages,
          node_mask)
    else:
      per_graph = functools.partial(reinforce_loss,
                                    entropy_weight=hparams.entropy_weight)
      losses, metrics = jax.vmap(per_graph)(logits, rollout.placements,
                                            advantages, node_mask)
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
  # Report the first epoch: the loss of the sampling policy.
  metrics = jax.tree.map(lambda m: _pmean(m[0], axis_name), metrics)

  best_runtime, best_placement = _best_of(rollout, runtime, axis_name)
  improved = best_runtime < state.best_runtime_s
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


def _best_of(rollout: Rollout, runtime, axis_name):
  """Best successful sample per graph over all devices: ``([B], [B, N])``."""
  failed = rollout.failed | ~jnp.isfinite(rollout.runtime_s)
  candidate = jnp.where(failed, jnp.inf, runtime)  # [B, Kl]
  index = jnp.argmin(candidate, axis=1)
  best = jnp.take_along_axis(candidate, index[:, None], 1)[:, 0]
  placement = jnp.take_along_axis(rollout.placements, index[:, None, None],
                                  1)[:, 0]
  if axis_name is not None:
    all_best = jax.lax.all_gather(best, axis_name)  # [A, B]
    all_placement = jax.lax.all_gather(placement, axis_name)  # [A, B, N]
    winner = jnp.argmin(all_best, axis=0)  # first device wins ties
    best = jnp.take_along_axis(all_best, winner[None], 0)[0]
    placement = jnp.take_along_axis(all_placement, winner[None, :, None],
                                    0)[0]
  return best, placement


def rl_step(state: TrainState, batch: Batch, *, apply_fn: ApplyFn,
            optimizer: optax.GradientTransformation, hparams: RLHyperparams,
            simulate_fn: SimulateFn, axis_name: Optional[str] = None):
  """One whole RL step with simulated rewards: sample, simulate, update.

  Pure and jittable; ``simulate_fn(problem, placements [K, N]) ->
  (runtime_s [K], failed [K])`` is vmapped over the batch's graphs.

  Returns:
    ``(new state, metrics)``.
  """
  state, rollout = sample_rollout(state, batch, apply_fn=apply_fn,
                                  hparams=hparams, axis_name=axis_name)
  runtime_s, failed = jax.vmap(simulate_fn)(batch.problems,
                                            rollout.placements)
  rollout = rollout._replace(runtime_s=runtime_s.astype(jnp.float32),
                             failed=failed.astype(bool))
  return update_from_rollout(state, batch, rollout, apply_fn=apply_fn,
                             optimizer=optimizer, hparams=hparams,
                             axis_name=axis_name)


def supervised_step(state: TrainState, batch: Batch, target: jax.Array, *,
                    apply_fn: ApplyFn, optimizer: optax.GradientTransformation,
                    label_smoothing: float = 0.0,
                    axis_name: Optional[str] = None):
  """One warm-start step: cross-entropy to ``target int32 [B, N]``."""
  loss_one = functools.partial(supervised_loss,
                               label_smoothing=label_smoothing)

  def loss_fn(params):
    logits = _all_logits(params, batch, apply_fn)
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


# -- host rewards (real measurements) ----------------------------------------

# reward_fn(placements_np int32 [K, N_graph]) -> runtime_s float64 [K];
# a failed run reports inf or NaN.
RewardFn = Callable[[np.ndarray], np.ndarray]


def host_scored_rollout(rollout: Rollout, reward_fns, num_nodes) -> Rollout:
  """Scores a rollout on the host: ``reward_fns[b]`` measures graph ``b``.

  Args:
    rollout: from :func:`sample_rollout` (``axis_name=None``).
    reward_fns: one :data:`RewardFn` per graph of the batch; it receives the
      placements cut to the graph's real ``num_nodes[b]`` nodes.
    num_nodes: ``[B]`` real node counts.

  Returns:
    The rollout with ``runtime_s`` and ``failed`` filled in.
  """
  placements = np.asarray(rollout.placements)
  runtimes = []
  for b, fn in enumerate(reward_fns):
    runtime = np.asarray(fn(placements[b, :, :int(num_nodes[b])]),
                         np.float64).reshape(-1)
    if runtime.shape[0] != placements.shape[1]:
      raise ConfigError(f"reward_fn for graph {b} returned {runtime.shape[0]} "
                        f"runtimes for {placements.shape[1]} placements.")
    runtimes.append(runtime)
  runtime = np.stack(runtimes).astype(np.float32)
  return rollout._replace(runtime_s=jnp.asarray(runtime),
                          failed=jnp.asarray(~np.isfinite(runtime)))
