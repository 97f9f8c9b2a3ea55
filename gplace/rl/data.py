"""Graphs -> padded batches: the input pipeline of training.

Where this sits: :mod:`gplace.rl.train` calls, in order,
:func:`make_topology`, :func:`setup_graphs` (capture or load each workload,
score every baseline under the simulator, pick the failure penalty),
:func:`gplace.rl.warm_start.warm_start_targets`, :func:`make_batch` (pad
every graph to one budget, stack graphs and simulator problems into a
:class:`~gplace.rl.types.Batch`) and, for measured rewards,
:func:`gplace.rl.reward_setup.host_reward_fns`. This module holds the
workloads and topology a config names, each graph's set-up
(:class:`GraphSetup`) and the padded batch; the simulator problems stacked
into a batch and the host scorers are in :mod:`gplace.rl.reward_setup`, the
warm-start targets in :mod:`gplace.rl.warm_start`. Host-side numpy; nothing
here is traced.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from gplace import baselines
from gplace import workloads
from gplace.errors import WorkloadError
from gplace.graphs import constraints
from gplace.graphs import features as features_lib
from gplace.sim import topology_json as json_format
from gplace.graphs.capture import capture
from gplace.graphs.graph import Graph, random_dag
from gplace.rl import grouping
from gplace.rl.reward_setup import (critical_paths, make_scorer,
                                    placement_devices,
                                    stacked_dispatch_problems,
                                    stacked_problems)
from gplace.rl.rewards import simulate_host
from gplace.rl.types import Batch
from gplace.rl.warm_start import warm_start_target
from gplace.sim import bounds
from gplace.sim import simulator
from gplace.sim import topology as topology_lib
from gplace.workloads import resolve

# A graph name of the form "random_dag:N[:seed]" (tests and benchmarks).
RANDOM_DAG = re.compile(r"^random_dag:(\d+)(?::(\d+))?$")


class GraphSetup(NamedTuple):
  """Everything host-side about one graph of the batch.

  Attributes:
    name: workload name.
    graph: the op graph.
    fn, args: the runnable workload (None for random DAGs).
    baselines: ``{name: [N] int32}`` placements.
    baseline_runtime_s: ``{name: float}`` (simulated or measured; inf = OOM /
      failed).
    lower_bound_s: a lower bound on the runtime.
    failing_runtime_s: the runtime charged to failed placements.
    coarsening: the groups the policy places
      (:func:`gplace.rl.grouping.coarsen_for_policy`), or None: it places
      ops.
    costs: ``[N, D]`` float64 measured seconds per node and device (a graph
      file's ``cost_s``), or None: the topology's roofline.
    planned_runtime_s: ``{name: float}`` for each list scheduler among
      ``baselines`` (``gplace.baselines.schedulers()``): its placement
      simulated in its own planned op order (inf = OOM), the runtime it was
      planned for; None where not scored (measured rewards: the executor
      runs its own dispatch order). ``baseline_runtime_s`` stays the default
      schedule's, which warm starts and pretraining read; reports compare
      with the best of both (``gplace.rl.reports.classical_runtimes``).
  """

  name: str
  graph: Graph
  fn: Any
  args: Any
  baselines: dict
  baseline_runtime_s: dict
  lower_bound_s: float
  failing_runtime_s: float
  coarsening: Any = None
  costs: Optional[np.ndarray] = None
  planned_runtime_s: Optional[dict] = None


def planned_runtimes(graph: Graph, plans: Mapping, topology, costs=None
                     ) -> dict[str, float]:
  """``{name: runtime_s}`` of each list scheduler's plan among ``plans``
  (``{name: gplace.baselines.Plan}``) simulated in its own planned op order
  (inf where it runs out of memory)."""
  out = {}
  for name in baselines.schedulers():
    if name not in plans:
      continue
    result = simulator.simulate(graph, plans[name].placement, topology, costs,
                                order=np.asarray(plans[name].order, np.int32))
    out[name] = (float("inf") if bool(np.asarray(result.oom).any())
                 else float(np.asarray(result.runtime_s)))
  return out


def selected_baselines(config) -> Optional[list[str]]:
  """The names in ``config.baselines`` (comma-separated, blanks skipped);
  None for ``"all"``."""
  if config.baselines == "all":
    return None
  return [b.strip() for b in str(config.baselines).split(",") if b.strip()]


def workload_names(config) -> list[str]:
  """The graphs of the batch: ``config.workload`` split at commas."""
  return [w.strip() for w in str(config.workload).split(",") if w.strip()]


def is_random_dag(name: str) -> bool:
  """Whether ``name`` is of the form ``random_dag:N[:seed]``."""
  return RANDOM_DAG.match(name) is not None


#: ``config.topology`` value that takes the devices from the workload's
#: graph file (:mod:`gplace.graphs.json_format`'s ``topology``).
FILE_TOPOLOGY = "file"


def make_topology(config) -> topology_lib.Topology:
  """``config.topology``: a preset name, ``"local"`` for this machine's
  devices, or ``"file"`` for the topology the workloads' graph files give
  (every one the same).

  Raises:
    WorkloadError: ``"file"`` with a workload that is not a graph file with
      a topology, or files whose topologies differ.
  """
  if config.topology == "local":
    return topology_lib.local(placement_devices())
  if config.topology != FILE_TOPOLOGY:
    return topology_lib.preset(config.topology)
  found = []
  for name in workload_names(config):
    loaded = (resolve.load_reference(name) if resolve.is_reference(name)
              else None)
    if loaded is None or loaded.topology is None:
      raise WorkloadError(
          f"config.topology='file' takes the devices from the workload's "
          f"graph file, but {name!r} is not a graph file with a 'topology' "
          "(see gplace.graphs.json_format); name a preset or 'local' "
          "instead.")
    found.append(loaded.topology)
  as_dict = json_format.topology_to_dict
  if any(as_dict(t) != as_dict(found[0]) for t in found[1:]):
    raise WorkloadError(
        "config.topology='file', but the workloads' graph files describe "
        "different topologies; train graphs of one topology together.")
  return found[0]


class Workload(NamedTuple):
  """A loaded workload: its graph, the runnable function and arguments (or
  None), and a graph file's own topology and measured ``[N, D]`` costs (or
  None)."""
  graph: Graph
  fn: Any = None
  args: Any = None
  topology: Any = None
  costs: Optional[np.ndarray] = None


def load_graph(name: str, config) -> Workload:
  """The :class:`Workload` of a workload name, ``random_dag:N[:seed]``, a
  graph file (``.npz`` / ``.json``) or ``module:function``
  (:mod:`gplace.workloads.resolve`; ``fn`` and ``args`` are None unless it
  gives a function to capture).

  Raises:
    WorkloadError: an unknown workload, size or step, or a function
      reference that cannot be imported or called.
    GraphError: a graph file that is missing or malformed.
  """
  match = RANDOM_DAG.match(name)
  if match:
    seed = int(match.group(2) or config.seed)
    return Workload(random_dag(int(match.group(1)), seed=seed, name=name))
  if resolve.is_reference(name):       # a graph file or module:function
    found = resolve.load_reference(name)
    return Workload(found.graph, found.fn, found.args, found.topology,
                    found.costs)
  abstract = config.rl.reward != "executor"
  cache_dir = str(config.get("graph_cache", "") or "")
  cache_path = (os.path.join(cache_dir, f"{name}_{config.workload_size}_"
                             f"{config.workload_step}.npz")
                if cache_dir and abstract else None)
  if cache_path and os.path.exists(cache_path):
    # Simulated rewards need only the graph (as experiments/baselines.py
    # caches it), not the runnable function.
    return Workload(Graph.load(cache_path).replace(name=name))
  fn, args = workloads.get(name, config.workload_size, config.workload_step,
                           abstract=abstract, seed=config.seed)
  graph = capture(fn, *args).replace(name=name)
  if cache_path:
    os.makedirs(cache_dir, exist_ok=True)
    graph.save(cache_path)
  return Workload(graph, fn, args)


def workload_costs(name: str, workload: Workload, topology, config,
                   log: Callable[[str], None]) -> Optional[np.ndarray]:
  """The measured costs a graph file gives, if they fit ``topology``; says
  so when the file's own topology is not the one used.

  Raises:
    WorkloadError: the file's costs have another device count than
      ``topology``.
  """
  if workload.topology is not None and config.topology != FILE_TOPOLOGY:
    log(f"[gplace] {name}: the file's own topology "
        f"({workload.topology.name!r}) is not used; config.topology="
        f"{config.topology!r} is (--config.topology=file uses the file's).")
  costs = workload.costs
  if costs is not None and costs.shape[1] != topology.n_devices:
    raise WorkloadError(
        f"{name}: the file's measured costs are for {costs.shape[1]} "
        f"devices, but the topology has {topology.n_devices}; use the "
        "file's topology (--config.topology=file) or a file for these "
        "devices.")
  return costs


def setup_graphs(config, topology, names: Sequence[str],
                 log: Callable[[str], None] = print) -> list[GraphSetup]:
  """Captures the graphs, scores the baselines, picks failure penalties."""
  out = []
  max_groups, rule, min_nodes = group_settings(config)
  for name in names:
    t0 = time.time()
    workload = load_graph(name, config)
    graph, fn, args = workload.graph, workload.fn, workload.args
    costs = workload_costs(name, workload, topology, config, log)
    scorer = make_scorer(graph, fn, args, topology, config,
                         devices=placement_devices()
                         if config.topology == "local" else None,
                         costs=costs)
    # Each baseline's plan: its placement and, for a list scheduler, the op
    # order it planned (no second planning run for the own-plan rows).
    only = selected_baselines(config)
    plans = {b: baselines.plan(b, graph, topology, costs=costs,
                               seed=config.seed)
             for b in (only if only is not None else baselines.names())}
    placements = {b: np.asarray(p.placement, np.int32)
                  for b, p in plans.items()}
    names_b = list(placements)
    runtimes = scorer(np.stack([placements[b] for b in names_b]))
    single = scorer(np.tile(np.arange(topology.n_devices)[:, None],
                            (1, graph.n_nodes)))
    finite = single[np.isfinite(single)]
    ok = runtimes[np.isfinite(runtimes)]
    reference = finite.min() if finite.size else (
        ok.max() if ok.size else np.nan)
    if not np.isfinite(reference):
      runtime_any, _ = simulate_host(graph, np.zeros((1, graph.n_nodes)),
                                     topology, costs=costs)
      reference = float(runtime_any[0])
    out.append(GraphSetup(
        name=name, graph=graph, fn=fn, args=args,
        baselines=placements,
        baseline_runtime_s=dict(zip(names_b, map(float, runtimes))),
        # A simulated bound says nothing about measured runtimes.
        lower_bound_s=(float("nan") if scorer.executor
                       else bounds.lower_bound(graph, topology, costs)),
        failing_runtime_s=float(config.rl.oom_penalty_factor * reference),
        coarsening=grouping.coarsen_for_policy(graph, max_groups=max_groups,
                                               rule=rule,
                                               min_nodes=min_nodes),
        costs=costs,
        planned_runtime_s=(None if scorer.executor else
                           planned_runtimes(graph, plans, topology, costs))))
    grouped = out[-1].coarsening is not None
    log(f"[gplace] {name}: {graph.n_nodes} nodes, {graph.n_edges} edges, "
        f"baselines scored in {time.time() - t0:.1f}s" + (
            f"; the policy places {out[-1].coarsening.n_groups} groups"
            if grouped else ""))
  return out


def group_settings(config) -> tuple[int, str, int]:
  """``(max_groups, rule, min_nodes)`` of ``config.groups`` (grouping off
  for a config without it)."""
  groups = config.get("groups", None)
  if groups is None:
    return 0, "colocation", 0
  return (int(groups.max_groups), str(groups.rule), int(groups.min_nodes))


def make_batch(setups: Sequence[GraphSetup], topology, *,
               with_problems: bool = True,
               schedule: str = "static",
               pad_like: Optional[Sequence[GraphSetup]] = None) -> Batch:
  """Pads every graph to one budget and stacks them into a
  :class:`~gplace.rl.types.Batch` (host-side numpy).

  Args:
    setups: ``B`` graphs (``graph`` and ``failing_runtime_s`` are read, and
      ``baselines`` and ``baseline_runtime_s`` where a setup has them).
    topology: the devices (``D``).
    with_problems: also build the stacked simulator problems (simulated
      rewards inside the jitted step).
    schedule: ``"static"`` or ``"dynamic"``: which simulator's problems.
    pad_like: pad to the budget of these graphs (a superset of
      ``setups``), so that batches drawn from one set share every shape and
      one compiled step (:mod:`gplace.rl.pretrain` switches between them);
      default ``setups``.

  Returns:
    A batch of ``B`` graphs of one node budget ``N_pad``, all devices
    allowed (``device_mask`` ``bool [B, D]``), each graph's best baseline
    as the ``"hint"`` node input (:func:`hint_placements`). If any setup has a
    ``coarsening``, the policy's graphs are the coarse ones (the others
    have a group per op), the problems the original ones, and the batch
    has ``group_of`` (:mod:`gplace.rl.grouping`).
  """
  graphs, policy_graphs = _batch_graphs(setups)
  all_graphs, all_policy_graphs = _batch_graphs(
      setups if pad_like is None else pad_like)
  grouped = any(getattr(s, "coarsening", None) is not None
                for s in (setups if pad_like is None else pad_like))
  coarsenings = [getattr(s, "coarsening", None) for s in setups]
  budget = _joint_budget(all_policy_graphs)
  tuples = [features_lib.to_graphs_tuple(g, budget) for g in policy_graphs]
  graphs_tuple = features_lib.stack_graphs_tuples(tuples)
  node_budget = (_joint_budget(all_graphs).n_nodes if grouped
                 else budget.n_nodes)
  problems = None
  costs = [getattr(s, "costs", None) for s in setups]
  critical_path = critical_paths(graphs, topology, node_budget, costs)
  if with_problems:
    problems = (stacked_dispatch_problems(
        graphs, topology, node_budget,
        n_edges=max(max(g.n_edges for g in all_graphs), 1), costs=costs,
        critical_path=critical_path)
                if schedule == "dynamic"
                else stacked_problems(graphs, topology, node_budget,
                                      costs=costs))
  group_of = None
  if grouped:
    group_of = grouping.group_index(coarsenings, [g.n_nodes for g in graphs],
                                    node_budget, budget.n_nodes)
  graphs_tuple.nodes["hint"] = hint_placements(
      setups, node_budget, group_of, graphs_tuple.nodes["mask"],
      topology.n_devices)
  return Batch(
      graphs=graphs_tuple, problems=problems,
      failing_runtime_s=np.asarray([s.failing_runtime_s for s in setups],
                                   np.float32),
      device_mask=_device_masks(all_policy_graphs, policy_graphs,
                                topology.n_devices, budget.n_nodes),
      group_of=group_of, critical_path=critical_path)


def hint_placements(setups: Sequence[GraphSetup], num_simulated: int,
                    group_of: Optional[np.ndarray], node_mask: np.ndarray,
                    n_devices: int) -> np.ndarray:
  """The ``"hint"`` node input of a batch: each graph's best baseline
  (:func:`~gplace.rl.warm_start.warm_start_target` ``"best"``: the fastest
  under the training reward, the default schedule for simulated rewards),
  with groups each group's majority device.

  Args:
    setups: ``B`` graphs; one without baselines gets no hint.
    num_simulated: ``N_sim``, the simulated node budget.
    group_of: ``int32 [B, N_sim]`` or None (the policy places nodes).
    node_mask: ``bool [B, N_pad]``, the policy's real nodes (or groups).
    n_devices: ``D``.

  Returns:
    ``int32 [B, N_pad]``: a device per node (group), ``-1`` on padding and
    for graphs without baselines.
  """
  has_hint = np.asarray([bool(getattr(s, "baselines", None))
                         for s in setups])
  placements = np.zeros((len(setups), num_simulated), np.int32)
  for b, setup in enumerate(setups):
    if has_hint[b]:
      _, placement, _ = warm_start_target(setup, "best")
      placements[b, :setup.graph.n_nodes] = placement
  hints = np.asarray(grouping.group_placement(
      placements, group_of, node_mask.shape[1], n_devices)
                     if group_of is not None else placements)
  return np.where(node_mask & has_hint[:, None], hints, -1).astype(np.int32)


def _device_masks(all_graphs: Sequence[Graph], graphs: Sequence[Graph],
                  n_devices: int, n_padded_nodes: int) -> np.ndarray:
  """The batch's ``device_mask``: ``bool [B, D]``, every device allowed,
  unless a graph of the set has device constraints
  (``Graph.allowed_devices``): then ``[B, N_pad, D]``, each node's (or
  group's: the devices all its ops allow) allowed devices, so the policies
  never sample a device an op cannot run on."""
  if not any(g.allowed_devices is not None for g in all_graphs):
    return np.ones((len(graphs), n_devices), bool)
  return np.stack([constraints.device_mask(g, n_devices, n_padded_nodes)
                   for g in graphs])


def _batch_graphs(setups: Sequence[GraphSetup]
                  ) -> tuple[list[Graph], list[Graph]]:
  """``(graphs, policy graphs)``: the simulated graphs, and what the policy
  sees (the coarse graph where a setup has a coarsening)."""
  graphs = [s.graph for s in setups]
  coarse = [getattr(s, "coarsening", None) for s in setups]
  return graphs, [g if c is None else c.graph for g, c in zip(graphs, coarse)]


def _joint_budget(graphs: Sequence[Graph]) -> features_lib.Budget:
  """One padding budget that fits every graph."""
  budgets = [features_lib.budget_for(g) for g in graphs]
  return features_lib.Budget(max(b.n_nodes for b in budgets),
                             max(b.n_edges for b in budgets),
                             max(b.n_graphs for b in budgets))
