"""Host-side scoring for training, and the problems in-step rewards read.

:class:`Scorer` is a :data:`~gplace.rl.types.RewardFn` (simulated or
measured); :func:`host_reward_fns`, :func:`host_scored_rollout` (and
:func:`shared_scored_rollout` across processes);
:func:`stacked_problems` and :func:`stacked_dispatch_problems` for
:mod:`gplace.rl.rewards`.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace import processes
from gplace.errors import BudgetError, PlacementError, RewardError
from gplace.execution import executor
from gplace.execution import timing
from gplace.graphs.fusion_decisions import decision_labels
from gplace.graphs.graph import Graph
from gplace.rl.rewards import ScheduledProblem
from gplace.rl.types import RewardFn, Rollout
from gplace.rl.settings import RLSettings, TrainSettings
from gplace.rl.types import GraphSetup
from gplace.sim import simulator
from gplace.sim.simulator import DEFAULT_SCHEDULE
from gplace.sim.dispatch import PAD_PRIORITY, make_dispatch_problem
from gplace.sim.priority import bottom_level
from gplace.sim.topology import Topology


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
               priority: Optional[np.ndarray] = None,
               fusion: Optional[np.ndarray] = None) -> np.ndarray:
    """``int [K, N]`` -> ``float64 [K]`` seconds, inf where OOM / failed;
    with ``priority f32 [K, N]`` (simulated only) the dynamic schedule ranks
    each placement's arrived ops by it; with ``fusion int [K, N]``
    (simulated only; 1 where a node fuses into its consumer) each placement
    runs with the legal labels of
    :func:`gplace.graphs.fusion_decisions.decision_labels`.

    Raises:
      RewardError: a ``priority`` or ``fusion`` for measured scores (the
        executor runs its own dispatch order and XLA's own fusion).
    """
    placements = np.asarray(placements, np.int32)
    if self.executor and fusion is not None:
      raise RewardError(
          "Measured rewards cannot run a policy's own fusion decision (the "
          "executor runs XLA's own fusion); use rl.reward='simulator_host' "
          "with a fusion head.")
    if fusion is not None:
      return self.fused_runtimes(placements, fusion, priority)
    if self.executor and priority is not None:
      raise RewardError(
          "Measured rewards cannot run a policy's own schedule yet (the "
          "executor dispatches clusters in its own order); use a simulated "
          "reward with an ordering policy.")
    if self.executor:
      return timing.measure_placements(
          self.fn, self.graph, placements, self.args, devices=self.devices,
          repeats=self.repeats, warmup=self.warmup, penalty_s=math.inf)
    runtime, oom = simulate_host(self.graph, placements, self.topology,
                                 priority, self.costs, self.schedule)
    return np.where(oom, np.inf, runtime)

  def fusion_labels(self, placements: np.ndarray,
                    fusion: np.ndarray) -> np.ndarray:
    """``int [K, N]`` placements and fusion choices -> ``int64 [K, N]``
    legal labels (:func:`gplace.graphs.fusion_decisions.decision_labels`)."""
    return np.stack([decision_labels(self.graph, p, f)
                     for p, f in zip(np.asarray(placements),
                                     np.asarray(fusion))])

  def fused_runtimes(self, placements: np.ndarray, fusion: np.ndarray,
                     priority: Optional[np.ndarray] = None) -> np.ndarray:
    """:meth:`__call__` with ``fusion``: one simulation per placement, each
    with its own labels (``gplace.simulate`` takes one fusion per call)."""
    labels = self.fusion_labels(placements, fusion)
    out = np.empty(len(placements), np.float64)
    for k in range(len(placements)):
      result = simulator.simulate(
          self.graph, placements[k:k + 1], self.topology, self.costs,
          priority=(None if priority is None else
                    np.asarray(priority[k:k + 1], np.float32)),
          schedule=self.schedule, fusion=labels[k])
      out[k] = np.inf if np.asarray(result.oom)[0] else float(
          np.asarray(result.runtime_s)[0])
    return out


def host_scored_rollout(rollout: Rollout, reward_fns: Sequence[RewardFn],
                        num_nodes: Sequence[int]) -> Rollout:
  """Scores a rollout on the host: ``reward_fns[b]`` measures graph ``b``.

  Args:
    rollout: from :func:`gplace.rl.update.sample_rollout`
      (``axis_name=None``); with a ``priority`` or ``fusion``, each reward
      function is called with it too.
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
  fusion = None if rollout.fusion is None else np.asarray(rollout.fusion)
  runtimes = []
  for b, fn in enumerate(reward_fns):
    n = int(num_nodes[b])
    extra = {}
    if priority is not None:
      extra["priority"] = priority[b, :, :n]
    if fusion is not None:
      extra["fusion"] = fusion[b, :, :n]
    runtime = fn(placements[b, :, :n], **extra)
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


def sample_shares(num_samples: int, num_processes: int) -> list[slice]:
  """Which of ``num_samples`` samples per graph each process scores:
  consecutive runs, the first ``num_samples % num_processes`` processes one
  more (``np.array_split``'s split)."""
  sizes = [len(a) for a in np.array_split(np.arange(num_samples),
                                          num_processes)]
  starts = np.cumsum([0] + sizes)
  return [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def shared_scored_rollout(rollout: Rollout, reward_fns: Sequence[RewardFn],
                          num_nodes: Sequence[int]) -> Rollout:
  """:func:`host_scored_rollout`, the scoring split over the processes of a
  multi-process run: each process scores its share of the ``K`` samples
  (:func:`sample_shares`) on its own host, and the runtimes are gathered in
  sample order, so every process holds the ``[B, K]`` runtimes one process
  would have scored alone (a sample's score does not depend on the others).
  For one process, :func:`host_scored_rollout`.

  Every process must call it with the same rollout (the same state and
  batch: sampling is replicated, only the scoring splits).
  """
  if not processes.is_distributed():
    return host_scored_rollout(rollout, reward_fns, num_nodes)
  num_samples = np.shape(rollout.placements)[1]
  shares = sample_shares(num_samples, processes.process_count())
  mine = shares[processes.process_index()]
  cut = lambda x: None if x is None else np.asarray(x)[:, mine]
  scored = host_scored_rollout(
      rollout._replace(placements=cut(rollout.placements),
                       priority=cut(rollout.priority),
                       fusion=cut(rollout.fusion)), reward_fns, num_nodes)
  width = max(s.stop - s.start for s in shares)
  runtime = np.full((len(reward_fns), width), np.nan, np.float32)
  runtime[:, :mine.stop - mine.start] = np.asarray(scored.runtime_s)
  gathered = processes.allgather(runtime)  # [P, B, width]
  runtime = np.concatenate([gathered[p, :, :s.stop - s.start]
                            for p, s in enumerate(shares)], axis=1)
  return rollout._replace(runtime_s=jnp.asarray(runtime),
                          failed=jnp.asarray(~np.isfinite(runtime)))


def placement_devices() -> list:
  """Local devices a placement indexes: CPUs first, then accelerators, as the
  executor orders them (so CPU+GPU is the heterogeneous case where a GPU
  exists)."""
  return executor.default_devices()


def make_scorer(graph: Graph, fn, args, topology, settings: TrainSettings,
                devices: Optional[Sequence] = None, costs=None,
                schedule: str = DEFAULT_SCHEDULE) -> Scorer:
  """The host :class:`~gplace.rl.scoring.Scorer` of ``settings.rl.reward``:
  measured with ``settings.executor`` for ``"executor"``, else simulated in
  ``schedule`` with ``costs`` (``[N, D]`` measured seconds) if given."""
  return Scorer(graph, topology, fn=fn, args=args,
                executor=settings.rl.reward == "executor", devices=devices,
                repeats=settings.executor.repeats,
                warmup=settings.executor.warmup, costs=costs,
                schedule=schedule)


#: ``rl.reward_schedule="auto"`` scores RL's samples of graphs of
#: more ops than this in the dynamic schedule: there the planned half of the
#: default schedule is two thirds of a train step (paper gnmt4, 30,079
#: ops: 0.98 s of simulation per 64 samples in "best", 0.31 s in "dynamic").
AUTO_DYNAMIC_NODES = 10_000


def reward_schedule(rl: RLSettings, n_nodes: int) -> str:
  """The schedule RL's samples of a graph of ``n_nodes`` ops are simulated
  in on the host: ``rl.reward_schedule``, with ``"auto"`` the dynamic one
  above :data:`AUTO_DYNAMIC_NODES` ops and the default below; rewards other
  than ``"simulator_host"`` score in their own way (``"best"`` here)."""
  if rl.reward != "simulator_host":
    return DEFAULT_SCHEDULE
  if rl.reward_schedule == "auto":
    return "dynamic" if n_nodes > AUTO_DYNAMIC_NODES else DEFAULT_SCHEDULE
  return rl.reward_schedule


#: :func:`sample_schedule` of measured rewards.
MEASURED = "measured"


def sample_schedule(rl: RLSettings, n_nodes: int) -> str:
  """The schedule RL's sample runtimes of a graph of ``n_nodes`` ops (and so
  the run's best found) are in: ``"static"`` (node-id order) for
  ``rl.reward="simulator"``, ``"dynamic"`` for ``"simulator_dynamic"``,
  :data:`MEASURED` for ``"executor"``, else :func:`reward_schedule`."""
  if rl.reward == "simulator":
    return "static"
  if rl.reward == "simulator_dynamic":
    return "dynamic"
  if rl.reward == "executor":
    return MEASURED
  return reward_schedule(rl, n_nodes)


def stacked_problems(graphs: Sequence[Graph], topology, n_nodes: int,
                     costs: Optional[Sequence] = None):
  """Simulator problems of one budget for all graphs, stacked ``[B, ...]``
  (``costs``: per graph ``[N, D]`` measured seconds or None).

  Raises:
    BudgetError: the graphs need more simulator steps than 8x the node
      budget.
  """
  n_steps = n_nodes
  costs = costs if costs is not None else [None] * len(graphs)
  for _ in range(4):
    try:
      problems = [simulator.make_problem(g, topology, costs=c,
                                         n_nodes=n_nodes, n_steps=n_steps)
                  for g, c in zip(graphs, costs)]
      break
    except (PlacementError, BudgetError):
      # High-degree nodes take several simulator steps: a larger budget.
      n_steps *= 2
  else:
    raise BudgetError("The graphs need more simulator steps than 8x their "
                      "node budget (nodes of very high degree); split or "
                      "coarsen them (gplace.coarsen) first.")
  return jax.tree.map(lambda *xs: np.stack(xs), *problems)


def critical_paths(graphs: Sequence[Graph], topology, n_nodes: int,
                   costs: Optional[Sequence] = None) -> np.ndarray:
  """Each graph's critical-path priority
  (:func:`gplace.sim.priority.bottom_level`, with its ``[N, D]`` measured
  ``costs`` if given), padded with 0 to ``n_nodes``: ``float32 [B,
  n_nodes]``."""
  costs = costs if costs is not None else [None] * len(graphs)
  out = np.zeros((len(graphs), n_nodes), np.float32)
  for b, (g, c) in enumerate(zip(graphs, costs)):
    out[b, :g.n_nodes] = bottom_level(g, topology, c)
  return out


def stacked_dispatch_problems(graphs: Sequence[Graph], topology,
                              n_nodes: int, n_edges: Optional[int] = None,
                              costs: Optional[Sequence] = None,
                              critical_path: Optional[np.ndarray] = None
                              ) -> ScheduledProblem:
  """List-scheduler problems (:func:`gplace.rl.rewards.dispatch_reward`) of
  one budget for all graphs, with their critical-path priorities, stacked
  ``[B, ...]``; padding nodes get the lowest priority. ``n_edges``: the edge
  budget (default: the largest graph's); ``costs``: per graph ``[N, D]``
  measured seconds or None; ``critical_path``: :func:`critical_paths` of
  the same arguments, if already computed."""
  if n_edges is None:
    n_edges = max(max(g.n_edges for g in graphs), 1)
  costs = costs if costs is not None else [None] * len(graphs)
  if critical_path is None:
    critical_path = critical_paths(graphs, topology, n_nodes, costs)
  problems = [make_dispatch_problem(g, topology, costs=c, n_nodes=n_nodes,
                                    n_edges=n_edges)
              for g, c in zip(graphs, costs)]
  is_node = np.arange(n_nodes)[None, :] < np.array(
      [g.n_nodes for g in graphs])[:, None]
  stacked = jax.tree.map(lambda *xs: np.stack(xs), *problems)
  return ScheduledProblem(stacked, np.where(is_node, critical_path,
                                            PAD_PRIORITY).astype(np.float32))


def host_reward_fns(setups: Sequence[GraphSetup], topology,
                    settings: TrainSettings) -> list[Scorer]:
  """One measured (or simulated) reward function per graph, for
  :func:`gplace.rl.scoring.host_scored_rollout`."""
  return [make_scorer(s.graph, s.fn, s.args, topology, settings,
                      devices=placement_devices(), costs=s.costs,
                      schedule=reward_schedule(settings.rl, s.graph.n_nodes))
          for s in setups]
