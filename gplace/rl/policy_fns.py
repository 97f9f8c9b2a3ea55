"""One set of functions for every kind of policy: sample, score, greedy.

:func:`policy_fns` -> :class:`PolicyFns`: ``sample(params, graphs, mask,
keys [K, 2]) -> (placements [K, N], actions [K, A])``, ``score(...,
actions) -> ActionScores``, ``greedy(...) -> [N]``. Pure and jittable.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gplace.policies.base import ActionScores, is_sequential
from gplace.rl.distributions import (exploration_logits, node_entropy,
                                     node_log_probs, sample_with_keys)
from gplace.rl.grouping import level_priority, order_priority


class PolicyFns(NamedTuple):
  """A policy seen by the RL loop (see the module docstring).

  Attributes:
    sample: ``(params, graphs, device_mask, keys [K, 2]) -> (placements
      int32 [K, N], actions int32 [K, A])``.
    score: ``(params, graphs, device_mask, actions [K, A]) ->``
      :class:`~gplace.policies.base.ActionScores`.
    greedy: ``(params, graphs, device_mask) -> int32 [N]``.
    logits: one-shot policies only: ``(params, graphs, device_mask) -> [N,
      D]`` (the warm start's cross-entropy; None for sequential ones).
    sequential: whether the policy decodes step by step.
    placement_actions: whether actions are the placements (a warm start can
      teacher-force a baseline, a search can mutate them).
    order: ordering policies only (``orders = True``): ``actions [..., A] ->
      int32 [..., N]``, the nodes in the order the policy scheduled them;
      None for the others (they are scored in the default schedule).
    plan_actions: ordering policies only: the policy's
      ``plan_actions(placement, order, senders, receivers, num_padded)``
      (teacher actions of a plan, for the warm start), or None.
    greedy_decode: ``(params, graphs, device_mask) -> (placement int32
      [N], actions int32 [A])``, one greedy decoding (``greedy`` is its
      placement); None where the actions are the placements.
    schedule: policies that choose the schedule too: ``(actions [B, ...,
      A], group_of [B, N_sim] or None, critical_path f32 [B, N_sim]) -> f32
      [B, ..., N_sim]``, each placement's priority in the dynamic schedule
      (an ordering policy's :func:`gplace.rl.grouping.order_priority`,
      priority levels' :func:`gplace.rl.grouping.level_priority`); None:
      they are scored in the default schedule.
    fusion: policies that choose the fusion too (:class:`gplace.policies.
      GOPolicy` ``fusion_head``): ``actions [..., A] -> int32 [..., A]``,
      1 where a node fuses into its consumer
      (:func:`gplace.graphs.fusion_decisions.decision_labels`); None: no
      fusion decision.
  """

  sample: Callable
  score: Callable
  greedy: Callable
  logits: Any
  sequential: bool
  placement_actions: bool
  order: Any = None
  plan_actions: Any = None
  greedy_decode: Any = None
  schedule: Any = None
  fusion: Any = None


def _one_shot(apply_fn: Callable, explore_epsilon: float,
              levels: int = 0, fusion: bool = False) -> PolicyFns:
  """A one-shot policy: logits ``[N, D]``, one device per node (group).

  ``levels`` >= 2 (:class:`gplace.policies.GOPolicy` ``priority_levels``):
  every node also takes a priority level, the logits are joint ``[N, D *
  levels]`` (action ``device * levels + level``), the placement is ``action
  // levels`` and the loop runs it in the schedule of
  :func:`gplace.rl.grouping.level_priority`. ``fusion``
  (``GOPolicy.fusion_head``): every node also decides whether to fuse,
  the logits are ``[N, D * max(levels, 1) * 2]`` (action ``(device *
  max(levels, 1) + level) * 2 + fuse``).
  """
  choices = 2 if fusion else 1             # fusion decisions per level
  per_device = max(levels, 1) * choices

  def logits(params, graphs, device_mask):
    return exploration_logits(
        apply_fn(params, graphs, device_mask), explore_epsilon,
        jnp.repeat(device_mask, per_device, axis=-1))

  def sample(params, graphs, device_mask, keys):
    actions = sample_with_keys(logits(params, graphs, device_mask), keys)
    return actions // per_device, actions

  def score(params, graphs, device_mask, actions):
    out = logits(params, graphs, device_mask)
    node_mask = graphs.nodes["mask"]
    entropy = jnp.where(node_mask, node_entropy(out), 0.0)
    return ActionScores(node_log_probs(out, actions, node_mask),
                        jnp.broadcast_to(entropy, actions.shape), node_mask)

  def greedy_decode(params, graphs, device_mask):
    # The policy's own argmax (never the exploration mixture).
    actions = jnp.argmax(apply_fn(params, graphs, device_mask),
                         -1).astype(jnp.int32)
    return actions // per_device, actions

  def greedy(params, graphs, device_mask):
    return greedy_decode(params, graphs, device_mask)[0]

  def device_logits(params, graphs, device_mask):
    # The placement's marginal (a warm start fits devices only).
    out = apply_fn(params, graphs, device_mask)
    if per_device == 1:
      return out
    return jax.nn.logsumexp(
        out.reshape(out.shape[:-1] + (-1, per_device)), -1)

  def schedule(actions, group_of, critical_path):
    return level_priority((actions // choices) % levels, group_of,
                          critical_path)

  def fuse(actions):
    return (actions % choices).astype(jnp.int32)

  if per_device == 1:
    return PolicyFns(sample, score, greedy, device_logits, sequential=False,
                     placement_actions=True)
  return PolicyFns(sample, score, greedy, device_logits, sequential=False,
                   placement_actions=False, greedy_decode=greedy_decode,
                   schedule=schedule if levels else None,
                   fusion=fuse if fusion else None)


def _sequential(module) -> PolicyFns:

  def sample(params, graphs, device_mask, keys):
    return module.apply(params, graphs, device_mask, keys,
                        method=type(module).sample)

  def score(params, graphs, device_mask, actions):
    return module.apply(params, graphs, device_mask, actions)

  def greedy_decode(params, graphs, device_mask):
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    placements, actions = module.apply(params, graphs, device_mask, keys,
                                       greedy=True, method=type(module).sample)
    return placements[0], actions[0]

  def greedy(params, graphs, device_mask):
    return greedy_decode(params, graphs, device_mask)[0]

  cls = type(module)
  orders = bool(getattr(cls, "orders", False))

  def schedule(actions, group_of, critical_path):
    del critical_path
    return order_priority(cls.order_of(actions), group_of)

  return PolicyFns(
      sample, score, greedy, None, sequential=True,
      placement_actions=bool(getattr(cls, "placement_actions", False)),
      order=cls.order_of if orders else None,
      plan_actions=getattr(cls, "plan_actions", None) if orders else None,
      greedy_decode=greedy_decode, schedule=schedule if orders else None)


@functools.lru_cache(maxsize=32)
def policy_fns(policy: Any, explore_epsilon: float = 0.0) -> PolicyFns:
  """The :class:`PolicyFns` of ``policy``.

  Args:
    policy: a policy module, its bound ``apply``, a plain one-shot apply
      function ``(params, graphs, device_mask) -> logits [N, D]``, or
      already a :class:`PolicyFns` (returned as it is).
    explore_epsilon: one-shot policies sample and score the ``eps``-uniform
      mixture (0: the plain softmax).

  The same arguments return the same object (functions jitted over it are
  reused).
  """
  if isinstance(policy, PolicyFns):
    return policy
  module = getattr(policy, "__self__", policy)
  if is_sequential(module):
    return _sequential(module)
  apply_fn = getattr(module, "apply", policy) if hasattr(
      module, "init") else policy
  return _one_shot(apply_fn, float(explore_epsilon),
                   int(getattr(module, "priority_levels", 0) or 0),
                   bool(getattr(module, "fusion_head", False)))
