"""The training state, RL settings, and their construction from a config.

Where this sits: :mod:`gplace.rl.train` (and
``experiments/bench_train_step.py``) call :func:`create_policy`,
:func:`create_optimizer`, :func:`create_hparams` and
:func:`create_train_state`, the only place where ``config.policy``,
``config.optimizer`` and ``config.rl`` are read; :mod:`gplace.rl.update`
evolves a :class:`TrainState` under the static :class:`RLHyperparams`.

Baseline (ColocRL; decay 0.9 as HDP): an exponential moving average of the
mean reward per graph, initialised by the first batch; advantages are divided
by the EMA of their standard deviation (reward normalisation), so one
learning rate serves graphs whose runtimes differ by orders of magnitude.
Both EMAs are part of the state.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import flax
import jax
import jax.numpy as jnp
import optax

from gplace import policies
from gplace.rl.grouping import num_simulated_nodes
from gplace.rl.policy_fns import policy_fns
from gplace.rl.types import Batch


class RLHyperparams(NamedTuple):
  """Static RL settings (hashable, closed over by the jitted step).

  Attributes:
    num_samples: ``K``, placements sampled per graph per step (over all
      devices of the axis).
    loss: ``"ppo"`` or ``"reinforce"``.
    advantage: ``"ema"``: reward minus the EMA baseline, divided by the EMA
      reward std (with ``normalize_rewards``); ``"batch"``: reward minus the
      mean of this step's ``K`` samples, divided by their std.
    ppo_epochs: gradient steps on the same samples (PPO; REINFORCE uses 1).
    ppo_clip: ratio clip ``epsilon``.
    entropy_weight: weight of the mean per-node entropy bonus.
    entropy_floor: nats; each node (group) whose entropy is under it is
      penalised by ``entropy_floor_weight`` times the shortfall
      (:func:`gplace.rl.losses.entropy_terms`): no decision becomes certain,
      so samples keep trying each one. 0 (default): off.
    entropy_floor_weight: weight of that penalty.
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
  advantage: str = "ema"
  loss: str = "ppo"
  ppo_epochs: int = 4
  ppo_clip: float = 0.2
  entropy_weight: float = 0.01
  entropy_floor: float = 0.0
  entropy_floor_weight: float = 1.0
  baseline_decay: float = 0.9
  normalize_rewards: bool = True
  explore_epsilon: float = 0.0
  mutate_best: float = 0.0


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
    best_priority: ``f32 [B, N]``, its schedule (the dynamic schedule's
      priority) for ordering policies (DOPPLER); None for the others, whose
      placements run with the default, critical-path priority.
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
  best_priority: Any = None


def init_train_state(rng: jax.Array, params: Any,
                     optimizer: optax.GradientTransformation,
                     batch: Batch, ordered: bool = False) -> TrainState:
  """A fresh state for ``batch`` (``B`` graphs of ``N`` padded nodes; with
  groups, ``best_placement`` is per node of the simulated graphs);
  ``ordered``: keep the best placement's schedule (``best_priority``)."""
  num_graphs = batch.graphs.nodes["mask"].shape[0]
  num_nodes = num_simulated_nodes(batch)
  return TrainState(
      step=jnp.zeros((), jnp.int32), params=params,
      opt_state=optimizer.init(params), rng=jnp.asarray(rng),
      baseline=jnp.zeros((num_graphs,), jnp.float32),
      reward_var=jnp.ones((num_graphs,), jnp.float32),
      baseline_ready=jnp.zeros((), bool),
      best_runtime_s=jnp.full((num_graphs,), jnp.inf, jnp.float32),
      best_placement=jnp.zeros((num_graphs, num_nodes), jnp.int32),
      best_priority=(jnp.zeros((num_graphs, num_nodes), jnp.float32)
                     if ordered else None))


# -- config -> objects ---------------------------------------------------------


def create_policy(config, num_devices: int) -> policies.Policy:
  """``config.policy`` (``name`` and the family's hyperparameters) onto
  :func:`gplace.policies.create_policy`."""
  hparams = dict(config.policy.items())
  name = hparams.pop("name", "go")
  return policies.create_policy(name, num_devices, **hparams)


def create_optimizer(config) -> optax.GradientTransformation:
  """Adam with global-norm clipping (HDP clips at 1.0); the warm start's
  learning rate for its ``warm_start.steps`` updates, then RL's.

  ``config.optimizer.decay`` (optional, default ``"none"``): ``"cosine"``
  decays RL's rate along a half cosine to ``final_fraction`` of it over the
  run's RL updates (``train.num_steps`` times ``rl.ppo_epochs`` for PPO),
  so that a converged policy stops taking full-size Adam steps on
  normalised advantages that are mostly noise. It is off by default: on
  paper-size WaveNet it avoided a late collapse of the constant rate but
  plateaued earlier (experiments/RESULTS.md, "More groups, more
  evaluations, and a late collapse"). A run resumed with another
  ``train.num_steps`` decays over the new count.

  The same settings return the same object, so jitted functions that close
  over it are reused (a run resumed in the same process does not compile
  again)."""
  warm_steps = (0 if config.warm_start.baseline == "none"
                else int(config.warm_start.steps))
  decay = str(config.optimizer.get("decay", "none"))
  decay_updates = 0
  if decay == "cosine":
    per_step = int(config.rl.ppo_epochs) if config.rl.loss == "ppo" else 1
    decay_updates = max(1, int(config.train.num_steps) * per_step)
  return _optimizer(float(config.optimizer.learning_rate),
                    float(config.warm_start.learning_rate), warm_steps,
                    float(config.optimizer.grad_clip), decay_updates,
                    float(config.optimizer.get("final_fraction", 0.1)))


@functools.lru_cache(maxsize=8)
def _optimizer(rl_rate, warm_rate, warm_steps, grad_clip, decay_updates=0,
               final_fraction=0.0):
  # Without a decay the schedules (and so the optimizer state, which
  # checkpoints hold) are as they were before decays existed.
  if decay_updates:
    rl_schedule = optax.cosine_decay_schedule(rl_rate, decay_updates,
                                              alpha=final_fraction)
    # Supervised steps make one update each, so the boundary is exact.
    schedule = (optax.join_schedules(
        [optax.constant_schedule(warm_rate), rl_schedule], [warm_steps])
                if warm_steps else rl_schedule)
  else:
    schedule = optax.piecewise_constant_schedule(
        warm_rate, {warm_steps: rl_rate / warm_rate}) if warm_steps else rl_rate
  return optax.chain(optax.clip_by_global_norm(grad_clip),
                     optax.adam(schedule))


def create_hparams(config) -> RLHyperparams:
  """``config.rl`` onto :class:`RLHyperparams`."""
  r = config.rl
  return RLHyperparams(
      num_samples=r.num_samples, advantage=str(r.get("advantage", "ema")),
      loss=r.loss, ppo_epochs=r.ppo_epochs,
      ppo_clip=r.ppo_clip, entropy_weight=r.entropy_weight,
      entropy_floor=float(r.get("entropy_floor", 0.0)),
      entropy_floor_weight=float(r.get("entropy_floor_weight", 1.0)),
      baseline_decay=r.baseline_decay, normalize_rewards=r.normalize_rewards,
      explore_epsilon=float(r.get("explore_epsilon", 0.0)),
      mutate_best=float(r.get("mutate_best", 0.0)))


def create_train_state(config, batch: Batch, policy: policies.Policy,
                       optimizer: optax.GradientTransformation
                       ) -> TrainState:
  """A fresh state: ``policy`` initialised from ``config.seed`` on the first
  graph of ``batch``, ``optimizer`` state, the RNG and empty statistics."""
  init_rng, state_rng = jax.random.split(jax.random.PRNGKey(config.seed))
  first_graph = jax.tree.map(lambda x: x[0], batch.graphs)
  params = _jitted_init(policy)(init_rng, first_graph)
  return init_train_state(state_rng, params, optimizer, batch,
                          ordered=policy_fns(policy).schedule is not None)


@functools.lru_cache(maxsize=8)
def _jitted_init(policy):
  return jax.jit(policy.init)


def fresh_adam_moments(opt_state: Any) -> Any:
  """``opt_state`` with Adam's moments and step count reset (the learning
  rate schedule's count is kept): RL starts with a fresh optimizer after the
  warm start, whose moments would otherwise damp its first updates (the
  supervised gradients are much larger than RL's: on paper-size rnnlm2 the
  first RL update was 4x smaller)."""
  def reset(leaf):
    if isinstance(leaf, optax.ScaleByAdamState):
      return optax.ScaleByAdamState(
          count=jnp.zeros_like(leaf.count),
          mu=jax.tree.map(jnp.zeros_like, leaf.mu),
          nu=jax.tree.map(jnp.zeros_like, leaf.nu))
    return leaf
  return jax.tree.map(reset, opt_state,
                      is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
