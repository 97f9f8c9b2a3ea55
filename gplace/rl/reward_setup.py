"""What the rewards of a batch need, built on the host.

Where this sits: beside :mod:`gplace.rl.data`, which stacks these problems
into every :class:`~gplace.rl.types.Batch` and scores the baselines with
:func:`make_scorer`. Rewards inside the jitted step read a batch's stacked
simulator problems (:func:`stacked_problems`, or with their critical-path
priorities :func:`stacked_dispatch_problems` for the dynamic schedule);
host rewards (measured on :func:`placement_devices`, or simulated in the
schedule :func:`reward_schedule` picks) call one
:class:`~gplace.rl.rewards.Scorer` per graph, which
:func:`host_reward_fns` builds for :mod:`gplace.rl.training`. Host-side numpy;
nothing here is traced.
"""

from __future__ import annotations

from typing import Optional, Sequence

import jax
import numpy as np

from gplace.errors import BudgetError, PlacementError
from gplace.execution import executor
from gplace.graphs.graph import Graph
from gplace.rl.rewards import ScheduledProblem, Scorer
from gplace.rl.settings import RLSettings, TrainSettings
from gplace.rl.types import GraphSetup
from gplace.sim import simulator
from gplace.sim.simulator import DEFAULT_SCHEDULE
from gplace.sim.dispatch import PAD_PRIORITY, make_dispatch_problem
from gplace.sim.priority import bottom_level


def placement_devices() -> list:
  """Local devices a placement indexes: CPUs first, then accelerators, as the
  executor orders them (so CPU+GPU is the heterogeneous case where a GPU
  exists)."""
  return executor.default_devices()


def make_scorer(graph: Graph, fn, args, topology, settings: TrainSettings,
                devices: Optional[Sequence] = None, costs=None,
                schedule: str = DEFAULT_SCHEDULE) -> Scorer:
  """The host :class:`~gplace.rl.rewards.Scorer` of ``settings.rl.reward``:
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
  :func:`gplace.rl.rewards.host_scored_rollout`."""
  return [make_scorer(s.graph, s.fn, s.args, topology, settings,
                      devices=placement_devices(), costs=s.costs,
                      schedule=reward_schedule(settings.rl, s.graph.n_nodes))
          for s in setups]
