"""Rewards, and scoring inside the jitted step (pure).

:func:`reward` is ``-sqrt(runtime_s)``, a failed placement counting as
``failing_runtime_s``; :func:`simulator_reward` and :func:`dispatch_reward`
are in-step :data:`~gplace.rl.types.SimulateFn` s.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gplace.errors import RewardError
from gplace.sim import simulator
from gplace.sim.dispatch import BUFFER_WIDTH, PAD_PRIORITY, dispatch_problem


def effective_runtime(runtime_s: jax.Array, failed: jax.Array,
                      failing_runtime_s: jax.Array) -> jax.Array:
  """Runtime with failed (or non-finite) placements charged
  ``failing_runtime_s``; same shape as ``runtime_s``."""
  failed = failed | ~jnp.isfinite(runtime_s)
  return jnp.where(failed, failing_runtime_s, runtime_s)


def reward(runtime_s: jax.Array, failed: jax.Array,
           failing_runtime_s: jax.Array) -> jax.Array:
  """``-sqrt(runtime)`` of ColocRL/HDP, with the failure penalty; same shape
  as ``runtime_s``."""
  return -jnp.sqrt(effective_runtime(runtime_s, failed, failing_runtime_s))


def simulator_reward(problem: Any, placements: jax.Array, priority=None):
  """A :data:`~gplace.rl.types.SimulateFn` over
  :func:`gplace.sim.simulator.simulate_problem`: ``placements int32 [K, N]``
  -> ``(runtime_s [K], out_of_memory [K])``, in node-id order. Jittable.

  Raises:
    RewardError: a ``priority`` (this reward has one shared order; an
      ordering policy needs :func:`dispatch_reward`).
  """
  if priority is not None:
    raise RewardError(
        "The node-id-order reward (rl.reward='simulator') cannot run a "
        "policy's own schedule; use rl.reward='simulator_dynamic' or "
        "'simulator_host' with an ordering policy.")
  result = simulator.simulate_problem(problem, placements)
  return result.runtime_s, result.oom


class ScheduledProblem(NamedTuple):
  """A graph for :func:`dispatch_reward`: the list scheduler's arrays and
  the critical-path priority of its nodes (``[n]``; padding lowest)."""
  dispatch: Any
  priority: Any


def dispatch_reward(problem: ScheduledProblem, placements: jax.Array,
                    priority=None, *, width: int = BUFFER_WIDTH):
  """A :data:`~gplace.rl.types.SimulateFn` under ``gplace.simulate``'s
  dynamic schedule (:func:`gplace.sim.dispatch.dispatch_problem`,
  each placement list-scheduled on the critical path): ``placements int32
  [K, N]`` -> ``(runtime_s [K], out_of_memory [K])``. With ``priority f32
  [K, N]`` (an ordering policy's schedule), the same dynamic rule ranks
  arrived ops by that priority instead of the critical path. ``width``:
  the scheduler's candidate buffer (static; a graph whose ready ops overflow
  it is scheduled again exactly, which is slow on wide graphs). Jittable."""
  if priority is None:
    priority = problem.priority
  else:  # padding nodes keep the problem's lowest priority
    priority = jnp.where(problem.priority[None] <= PAD_PRIORITY,
                         PAD_PRIORITY, priority)
  result = dispatch_problem(problem.dispatch, placements, priority,
                            dynamic=True, width=width)
  return result.runtime_s, result.oom
