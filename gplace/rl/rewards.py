"""Rewards: what a placement's runtime is worth, and how runtimes are measured.

Where this sits: :mod:`gplace.rl.update` turns scored rollouts into rewards
with :func:`effective_runtime` / :func:`reward`; :func:`simulator_reward`
scores placements inside the jitted step, :class:`Scorer` on the host
(simulated or measured on real devices, used by :mod:`gplace.rl.data` for the
baselines and by :mod:`gplace.rl.training` for executor rewards), and
:func:`host_scored_rollout` fills a rollout from host scores.

Reward ``-sqrt(runtime_s)`` (ColocRL, HDP). A failed placement (out of
memory, or a measurement that failed) counts as running for
``failing_runtime_s``, a per-graph constant: HDP uses a fixed 100 s, which
would swamp the microsecond runtimes of small graphs, so gplace uses
``oom_penalty_factor`` (default 10) times the graph's best single-device
runtime (:func:`gplace.rl.data.setup_graphs` computes it; any value works
here).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import RewardError
from gplace.graphs.graph import Graph
from gplace.rl.types import RewardFn, Rollout
from gplace.sim import simulator
from gplace.sim.dispatch import BUFFER_WIDTH, PAD_PRIORITY, dispatch_problem
from gplace.sim.topology import Topology


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


def simulate_host(graph: Graph, placements: np.ndarray, topology: Topology,
                  priority: Optional[np.ndarray] = None, costs=None,
                  schedule: str = simulator.DEFAULT_SCHEDULE
                  ) -> tuple[np.ndarray, np.ndarray]:
  """Simulates ``placements int [K, N]`` of ``graph`` on the host in
  ``schedule``, by default ``gplace.simulate``'s (``"best"``: per placement
  the faster of the dynamic and planned schedules), steered by
  ``priority [K, N]`` if given (else the critical path), with ``costs``
  (``[N, D]`` measured seconds) if given:
  ``(runtime_s float64 [K], out_of_memory bool [K])``."""
  if priority is not None:
    priority = np.asarray(priority, np.float32)
  result = simulator.simulate(graph, np.asarray(placements, np.int32),
                              topology, costs, priority=priority,
                              schedule=schedule)
  return np.asarray(result.runtime_s, np.float64), np.asarray(result.oom)


class Scorer:
  """Scores placements of one graph on the host, simulated or measured: a
  :data:`~gplace.rl.types.RewardFn`.

  Args:
    graph: the op graph.
    topology: the devices (simulated scores).
    fn, args: the runnable workload (measured scores only).
    executor: measure on real devices with ``gplace.execution.timing``
      instead of simulating.
    devices: the local devices a placement indexes (measured scores).
    repeats, warmup: timed and untimed runs per measured placement.
    costs: ``[N, D]`` measured seconds per node and device for simulated
      scores (default: the topology's roofline).
    schedule: the schedule of simulated scores (``gplace.simulate``'s
      ``schedule``; default its default, ``"best"``).
  """

  def __init__(self, graph: Graph, topology: Topology, *, fn=None, args=None,
               executor: bool = False, devices: Optional[Sequence] = None,
               repeats: int = 5, warmup: int = 1, costs=None,
               schedule: str = simulator.DEFAULT_SCHEDULE):
    self.graph, self.fn, self.args = graph, fn, args
    self.costs = costs
    self.schedule = schedule
    self.topology = topology
    self.executor = executor
    self.devices = devices
    self.repeats = repeats
    self.warmup = warmup

  def __call__(self, placements: np.ndarray,
               priority: Optional[np.ndarray] = None) -> np.ndarray:
    """``int [K, N]`` -> ``float64 [K]`` seconds, inf where OOM / failed;
    with ``priority f32 [K, N]`` (simulated only) the dynamic schedule ranks
    each placement's arrived ops by it.

    Raises:
      RewardError: a ``priority`` for measured scores (the executor runs
        its own dispatch order).
    """
    placements = np.asarray(placements, np.int32)
    if self.executor and priority is not None:
      raise RewardError(
          "Measured rewards cannot run a policy's own schedule yet (the "
          "executor dispatches clusters in its own order); use a simulated "
          "reward with an ordering policy.")
    if self.executor:
      from gplace.execution import timing  # pylint: disable=g-import-not-at-top
      return timing.measure_placements(
          self.fn, self.graph, placements, self.args, devices=self.devices,
          repeats=self.repeats, warmup=self.warmup, penalty_s=math.inf)
    runtime, oom = simulate_host(self.graph, placements, self.topology,
                                 priority, self.costs, self.schedule)
    return np.where(oom, np.inf, runtime)


def host_scored_rollout(rollout: Rollout, reward_fns: Sequence[RewardFn],
                        num_nodes: Sequence[int]) -> Rollout:
  """Scores a rollout on the host: ``reward_fns[b]`` measures graph ``b``.

  Args:
    rollout: from :func:`gplace.rl.update.sample_rollout`
      (``axis_name=None``); with a ``priority``, each reward function is
      called with it too.
    reward_fns: one :data:`~gplace.rl.types.RewardFn` per graph of the
      batch; it receives the placements cut to the graph's real
      ``num_nodes[b]`` nodes.
    num_nodes: ``[B]`` real node counts.

  Returns:
    The rollout with ``runtime_s`` and ``failed`` filled in.

  Raises:
    RewardError: a reward function returned the wrong number of runtimes.
  """
  placements = np.asarray(rollout.placements)
  priority = (None if rollout.priority is None
              else np.asarray(rollout.priority))
  runtimes = []
  for b, fn in enumerate(reward_fns):
    n = int(num_nodes[b])
    if priority is None:
      runtime = fn(placements[b, :, :n])
    else:
      runtime = fn(placements[b, :, :n], priority=priority[b, :, :n])
    runtime = np.asarray(runtime, np.float64).reshape(-1)
    if runtime.shape[0] != placements.shape[1]:
      raise RewardError(
          f"reward_fn for graph {b} returned {runtime.shape[0]} runtimes for "
          f"{placements.shape[1]} placements; it must return one runtime (s) "
          "per placement, inf or NaN for a failed one.")
    runtimes.append(runtime)
  runtime = np.stack(runtimes).astype(np.float32)
  return rollout._replace(runtime_s=jnp.asarray(runtime),
                          failed=jnp.asarray(~np.isfinite(runtime)))
