"""The training state and the optimizer.

:class:`TrainState` (parameters, optimizer state, RNG, reward baselines, best
placements) continues a run bit for bit; :func:`create_optimizer` and
:func:`create_train_state` build them from ``TrainSettings``.
"""

from __future__ import annotations

import functools
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax

from gplace import policies
from gplace.rl.grouping import num_simulated_nodes
from gplace.rl.policy_fns import policy_fns
from gplace.rl.settings import TrainSettings
from gplace.rl.types import Batch


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
    best_fusion: ``int32 [B, N]``, its fusion choices (1 where a node fuses
      into its consumer, :func:`gplace.graphs.fusion_decisions.
      decision_labels`) for policies with a fusion head; None for the
      others.
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
  best_fusion: Any = None


def init_train_state(rng: jax.Array, params: Any,
                     optimizer: optax.GradientTransformation,
                     batch: Batch, ordered: bool = False,
                     fused: bool = False) -> TrainState:
  """A fresh state for ``batch`` (``B`` graphs of ``N`` padded nodes; with
  groups, ``best_placement`` is per node of the simulated graphs);
  ``ordered``: keep the best placement's schedule (``best_priority``);
  ``fused``: keep its fusion choices (``best_fusion``, none fused)."""
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
                     if ordered else None),
      best_fusion=(jnp.zeros((num_graphs, num_nodes), jnp.int32)
                   if fused else None))


# -- settings -> objects -------------------------------------------------------


def create_optimizer(settings: TrainSettings) -> optax.GradientTransformation:
  """Adam with global-norm clipping (HDP clips at 1.0): the warm start's
  learning rate for its updates, then RL's, decayed along a half cosine
  over the run's RL updates with ``optimizer.decay="cosine"``. The same
  settings return the same object, so jitted functions that close over it
  are reused."""
  opt = settings.optimizer
  decay_updates = 0
  if opt.decay == "cosine":
    per_step = settings.rl.ppo_epochs if settings.rl.loss == "ppo" else 1
    decay_updates = max(1, settings.train.num_steps * per_step)
  return _optimizer(float(opt.learning_rate),
                    float(settings.warm_start.learning_rate),
                    settings.warm_steps, float(opt.grad_clip), decay_updates,
                    float(opt.final_fraction))


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


def create_train_state(seed: int, batch: Batch, policy: policies.Policy,
                       optimizer: optax.GradientTransformation
                       ) -> TrainState:
  """A fresh state: ``policy`` initialised from ``seed`` on the first graph
  of ``batch``, ``optimizer`` state, the RNG and empty statistics."""
  init_rng, state_rng = jax.random.split(jax.random.PRNGKey(seed))
  first_graph = jax.tree.map(lambda x: x[0], batch.graphs)
  params = _jitted_init(policy)(init_rng, first_graph)
  fns = policy_fns(policy)
  return init_train_state(state_rng, params, optimizer, batch,
                          ordered=fns.schedule is not None,
                          fused=fns.fusion is not None)


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
