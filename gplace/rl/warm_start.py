"""Warm-start targets: the baseline placements a policy imitates first.

:func:`warm_start_targets` (nodes or groups) and
:func:`ordered_warm_start_targets` (an ordering policy, in the plan's best
schedule); :func:`warm_start_target` picks a graph's baseline. Host-side.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from gplace import baselines
from gplace.graphs.graph import Graph
from gplace.rl import grouping
from gplace.rl.scoring import simulate_host
from gplace.rl.types import Batch, GraphSetup
from gplace.sim import simulator
from gplace.sim.dispatch import PAD_PRIORITY



class WarmStart(NamedTuple):
  """The supervised targets of the warm start, one per graph.

  Attributes:
    baseline_names: the baseline each graph imitates.
    placements: ``int32 [B, N_sim]`` per node (0 on padding nodes).
    runtime_s: ``f32 [B]``, the baselines' runtimes.
    targets: ``int32 [B, N_pad]``, what the policy is fit to: ``placements``
      itself, or with groups the majority device of each group; for an
      ordering policy ``[B, A]``, the teacher actions of the plan (order and
      devices, :func:`ordered_warm_start_targets`).
    priority: ordering policies only: ``f32 [B, N_sim]``, the schedule the
      baselines run in (``runtime_s`` is measured in it); else None.
    target_runtime_s: ordering policies only: ``f32 [B]``, the runtime of
      ``targets`` themselves as the loop scores the policy's actions (with
      groups: each group's majority device, in the groups' order), which
      the warm start can reach at best; else None.
  """

  baseline_names: list
  placements: np.ndarray
  runtime_s: np.ndarray
  targets: np.ndarray
  priority: Optional[np.ndarray] = None
  target_runtime_s: Optional[np.ndarray] = None


def warm_start_target(setup: GraphSetup, which: str):
  """``(name, placement [N], runtime_s)`` of the warm-start baseline
  (``which``: a baseline name, or ``"best"``)."""
  if which == "best":
    name = min(setup.baseline_runtime_s, key=setup.baseline_runtime_s.get)
  else:
    name = which
  return name, setup.baselines[name], setup.baseline_runtime_s[name]


def warm_start_targets(setups: Sequence[GraphSetup], which: str,
                       num_padded_nodes: int,
                       batch: Optional[Batch] = None) -> WarmStart:
  """:func:`warm_start_target` of every graph, padded to ``N_sim`` nodes;
  with a ``batch`` of groups, the policy's targets are each group's majority
  device (:func:`gplace.rl.grouping.group_placement`)."""
  names = []
  placements = np.zeros((len(setups), num_padded_nodes), np.int32)
  runtime_s = np.full(len(setups), np.inf, np.float32)
  for b, setup in enumerate(setups):
    name, placement, runtime = warm_start_target(setup, which)
    names.append(name)
    placements[b, :setup.graph.n_nodes] = placement
    runtime_s[b] = runtime
  targets = placements
  if batch is not None and batch.group_of is not None:
    targets = np.asarray(grouping.group_placement(
        placements, batch.group_of, batch.graphs.nodes["mask"].shape[1],
        batch.device_mask.shape[-1]))
  return WarmStart(names, placements, runtime_s, targets)


def best_schedule(setup: GraphSetup, name: str, placement: np.ndarray,
                  topology) -> tuple[np.ndarray, float]:
  """``(order int [N], runtime_s)``: the faster of two schedules for a
  baseline's placement, both run as a static order: the baseline's own
  plan (list schedulers, :func:`gplace.baselines.plan`) and the order of
  ``gplace.simulate``'s default schedule (the faster of the dynamic and
  planned ones)."""
  graph = setup.graph

  def score(result):
    runtime = float(np.asarray(result.runtime_s).reshape(-1)[0])
    oom = bool(np.asarray(result.oom).reshape(-1)[0])
    return np.inf if oom else runtime

  # The default schedule's order replays to its own result (tested), so it
  # is scored as simulated.
  default = simulator.simulate(graph, placement, topology,
                               return_schedule=True)
  scored = [(score(default),
             np.asarray(default.order).reshape(-1, graph.n_nodes)[0])]
  if name in baselines.schedulers():
    order = np.asarray(baselines.plan(name, graph, topology).order)
    scored.append((score(simulator.simulate(graph, placement, topology,
                                            order=order)), order))
  runtime, order = min(scored, key=lambda pair: pair[0])
  return np.asarray(order, np.int64), runtime


def ordered_warm_start_targets(setups: Sequence[GraphSetup], which: str,
                               batch: Batch, topology,
                               plan_actions: Callable) -> WarmStart:
  """The warm start of an ordering policy (DOPPLER): each graph's baseline
  placement in its best order (:func:`best_schedule`), as the
  teacher actions ``plan_actions(placement, order, senders, receivers,
  num_padded)`` of the policy (with groups: each group's majority device,
  groups ordered by their first node in the schedule)."""
  num_sim = grouping.num_simulated_nodes(batch)
  num_padded = batch.graphs.nodes["mask"].shape[1]
  names, targets, target_runtime_s = [], [], []
  placements = np.zeros((len(setups), num_sim), np.int32)
  priority = np.full((len(setups), num_sim), PAD_PRIORITY, np.float32)
  runtime_s = np.full(len(setups), np.inf, np.float32)
  for b, setup in enumerate(setups):
    name, placement, _ = warm_start_target(setup, which)
    order, runtime = best_schedule(setup, name, placement, topology)
    n = setup.graph.n_nodes
    names.append(name)
    placements[b, :n] = placement
    priority[b, order] = -np.arange(n, dtype=np.float32)
    runtime_s[b] = runtime
    coarse = getattr(setup, "coarsening", None)
    if coarse is None:
      targets.append(plan_actions(placement, order, setup.graph.edge_src,
                                  setup.graph.edge_dst, num_padded))
      target_runtime_s.append(runtime)
      continue
    group_of = np.asarray(coarse.group_of)
    votes = np.zeros((coarse.n_groups, topology.n_devices), np.int64)
    np.add.at(votes, (group_of, placement), 1)
    first = np.full(coarse.n_groups, n, np.int64)
    np.minimum.at(first, group_of[order], np.arange(n))
    actions = plan_actions(votes.argmax(1), np.argsort(first, kind="stable"),
                           coarse.graph.edge_src, coarse.graph.edge_dst,
                           num_padded)
    targets.append(actions)
    target_runtime_s.append(_runtime_of_group_actions(
        setup.graph, group_of, actions, topology))
  return WarmStart(names, placements, runtime_s,
                   np.stack(targets).astype(np.int32), priority,
                   np.asarray(target_runtime_s, np.float32))


def _runtime_of_group_actions(graph: Graph, group_of: np.ndarray,
                              actions: np.ndarray, topology) -> float:
  """The runtime of an ordering policy's group actions (order, then a
  device per step), scored as the loop scores them."""
  steps = actions.shape[0] // 2
  order, devices = actions[:steps], actions[steps:]
  group_device = np.zeros(steps, np.int32)
  group_device[order] = devices
  priority = np.asarray(grouping.order_priority(
      order[None, None], group_of[None]))[0, 0]
  runtime, oom = simulate_host(graph, group_device[group_of][None],
                               topology, priority[None])
  return float(np.inf if oom[0] else runtime[0])
