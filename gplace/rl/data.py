"""Graphs -> padded batches: the input pipeline of training (host-side).

:func:`setup_graphs` scores every baseline and coarsens each graph into a
:class:`~gplace.rl.types.GraphSetup`; :func:`make_batch` pads and stacks them
into a :class:`~gplace.rl.types.Batch`; :func:`hint_placements` fills the
hint input.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from gplace import baselines
from gplace import workloads as workloads_lib
from gplace.errors import ConfigError, WorkloadError
from gplace.graphs import constraints
from gplace.graphs import features as features_lib
from gplace.graphs.graph import Graph
from gplace.sim import topology_json
from gplace.rl import grouping
from gplace.rl.scoring import (critical_paths, make_scorer,
                               placement_devices, simulate_host,
                               stacked_dispatch_problems, stacked_problems)
from gplace.rl.settings import Experiment, TrainSettings
from gplace.rl.workdir import write_probe
from gplace.rl.types import Batch, GraphSetup
from gplace.rl.warm_start import warm_start_target
from gplace.sim import bounds
from gplace.sim import simulator
from gplace.sim import presets
from gplace.sim import topology as topology_lib
from gplace.workloads import Workload

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


#: The topology name that takes the devices from the workloads' graph files
#: (:mod:`gplace.sim.graph_files`: a graph file with its ``topology``).
FILE_TOPOLOGY = "file"


def experiment_topology(name: str, loaded: Sequence[Workload]
                        ) -> topology_lib.Topology:
  """The topology ``name`` names: a preset, ``"local"`` for this machine's
  devices, or ``"file"`` for the one the graph files of ``loaded`` give
  (every one the same).

  Raises:
    WorkloadError: ``"file"`` with a workload that is not a graph file with
      a topology, or files whose topologies differ.
  """
  if name == "local":
    return presets.local(placement_devices())
  if name != FILE_TOPOLOGY:
    return presets.preset(name)
  for workload in loaded:
    if workload.topology is None:
      raise WorkloadError(
          f"config.topology='file' takes the devices from the workload's "
          f"graph file, but {workload.name!r} is not a graph file with a "
          "'topology' (see gplace.graphs.json_format); name a preset or "
          "'local' instead.")
  as_dict = topology_json.topology_to_dict
  first = loaded[0].topology
  if any(as_dict(w.topology) != as_dict(first) for w in loaded[1:]):
    raise WorkloadError(
        "config.topology='file', but the workloads' graph files describe "
        "different topologies; train graphs of one topology together.")
  return first


def load_experiment(experiment: Experiment,
                    log: Callable[[str], None] = print
                    ) -> tuple[list[Workload], topology_lib.Topology]:
  """The workloads and topology an :class:`~gplace.rl.settings.Experiment`
  names (captured, or read from its graph cache; runnable for measured
  rewards).

  Raises:
    ConfigError: the graph cache lacks a graph and cannot be written.
    WorkloadError: a workload or graph file that cannot be loaded.
  """
  check_experiment(experiment)
  settings = experiment.settings
  runnable = settings.rl.reward == "executor"
  cache = experiment.graph_cache if not runnable else ""
  if cache:
    _check_graph_cache(cache, [
        workloads_lib.cache_path(cache, name, experiment.workload_size,
                                 experiment.workload_step)
        for name in experiment.workloads
        if not workloads_lib.is_random_dag(name)
        and not workloads_lib.resolve.is_reference(name)])
  loaded = [workloads_lib.load(name, experiment.workload_size,
                               experiment.workload_step, runnable=runnable,
                               cache_dir=cache or None, seed=settings.seed)
            for name in experiment.workloads]
  topology = experiment_topology(experiment.topology, loaded)
  for workload in loaded:
    if workload.topology is not None and experiment.topology != FILE_TOPOLOGY:
      log(f"[gplace] {workload.name}: the file's own topology "
          f"({workload.topology.name!r}) is not used; config.topology="
          f"{experiment.topology!r} is (--config.topology=file uses the "
          "file's).")
  return loaded, topology


def check_experiment(experiment: Experiment) -> None:
  """The names an :class:`~gplace.rl.settings.Experiment` gives: known
  workloads (or graph files, ``module:function``, ``random_dag:N``),
  sizes, steps and topology, and runnable ones for measured rewards.

  Raises:
    ConfigError: naming the field and the choices.
  """
  if not experiment.workloads:
    raise ConfigError("config.workload is empty; name a workload, e.g. "
                      "'rnnlm2', or 'random_dag:1000'.")
  executor = experiment.settings.rl.reward == "executor"
  for name in experiment.workloads:
    problem = workloads_lib.resolve.random_dag_problem(name)
    if problem:
      raise ConfigError(f"config.workload: {problem}")
    match = workloads_lib.RANDOM_DAG.match(name)
    if match and int(match.group(1)) < 2:
      raise ConfigError(f"config.workload={name!r}: a random_dag needs at "
                        "least 2 nodes; use e.g. 'random_dag:100'.")
    if workloads_lib.resolve.is_reference(name):
      if executor and workloads_lib.is_graph_file(name):
        raise ConfigError(
            f"config.workload={name!r} is a saved graph, which cannot be "
            "run: use a simulated reward (config.rl.reward='simulator'), "
            "or name a module:function that returns (fn, args).")
    elif not match and name not in workloads_lib.names():
      raise ConfigError(
          f"Unknown workload {name!r} in config.workload; choose from "
          f"{', '.join(workloads_lib.names())}, 'random_dag:N[:seed]', a "
          "graph file (.npz / .json) or module:function.")
    if match and executor:
      raise ConfigError("Executor rewards need a runnable workload, not a "
                        "random_dag.")
  if experiment.workload_size not in workloads_lib.SIZES:
    raise ConfigError(
        f"Unknown config.workload_size {experiment.workload_size!r}; choose "
        f"from {', '.join(workloads_lib.SIZES)}.")
  if experiment.workload_step not in workloads_lib.STEPS:
    raise ConfigError(
        f"Unknown config.workload_step {experiment.workload_step!r}; choose "
        f"from {', '.join(workloads_lib.STEPS)}.")
  if experiment.topology not in ("local", FILE_TOPOLOGY) + tuple(
      presets.preset_names()):
    raise ConfigError(
        f"Unknown topology {experiment.topology!r}; choose from "
        f"{', '.join(presets.preset_names())}, 'local' or 'file' (the "
        "workload's graph file gives the devices).")


def _check_graph_cache(cache_dir: str, paths: Sequence[str]) -> None:
  """The graph cache must hold ``paths`` or be writable.

  Raises:
    ConfigError: graphs are missing and the directory cannot be written.
  """
  missing = [os.path.basename(p) for p in paths if not os.path.isfile(p)]
  if not missing:
    return
  err = write_probe(cache_dir)
  if err is not None:
    raise ConfigError(
        f"config.graph_cache={cache_dir!r} lacks {', '.join(missing)} and "
        f"cannot be written ({err}); pass a writable directory, or "
        "--config.graph_cache='' to capture every time.") from err


def check_costs(workload: Workload, topology) -> Optional[np.ndarray]:
  """The measured ``[N, D]`` costs a graph file gives, if any.

  Raises:
    WorkloadError: they are for another device count than ``topology``.
  """
  costs = workload.costs
  if costs is not None and costs.shape[1] != topology.n_devices:
    raise WorkloadError(
        f"{workload.name}: the file's measured costs are for "
        f"{costs.shape[1]} devices, but the topology has "
        f"{topology.n_devices}; use the file's topology "
        "(--config.topology=file) or a file for these devices.")
  return costs


def setup_graphs(loaded: Sequence[Workload], topology,
                 settings: TrainSettings,
                 log: Callable[[str], None] = print) -> list[GraphSetup]:
  """Scores the baselines of each workload (with ``settings.seed``, under
  ``settings.rl``'s reward), picks failure penalties, and coarsens each
  graph for the policy (``settings.groups``)."""
  out = []
  groups = settings.groups
  for workload in loaded:
    t0 = time.time()
    graph, fn, args = workload.graph, workload.fn, workload.args
    costs = check_costs(workload, topology)
    scorer = make_scorer(graph, fn, args, topology, settings, costs=costs)
    # Each baseline's plan: its placement and, for a list scheduler, the op
    # order it planned (no second planning run for the own-plan rows).
    names = (settings.baselines if settings.baselines is not None
             else baselines.names())
    plans = {b: baselines.plan(b, graph, topology, costs=costs,
                               seed=settings.seed) for b in names}
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
        name=workload.name, graph=graph, fn=fn, args=args,
        baselines=placements,
        baseline_runtime_s=dict(zip(names_b, map(float, runtimes))),
        # A simulated bound says nothing about measured runtimes.
        lower_bound_s=(float("nan") if scorer.executor
                       else bounds.lower_bound(graph, topology, costs)),
        failing_runtime_s=float(settings.rl.oom_penalty_factor * reference),
        coarsening=grouping.coarsen_for_policy(
            graph, max_groups=groups.max_groups, rule=groups.rule,
            min_nodes=groups.min_nodes),
        costs=costs,
        planned_runtime_s=(None if scorer.executor else
                           planned_runtimes(graph, plans, topology, costs)),
        planned_orders=(None if scorer.executor else
                        {b: np.asarray(plans[b].order, np.int32)
                         for b in baselines.schedulers() if b in plans})))
    grouped = out[-1].coarsening is not None
    log(f"[gplace] {workload.name}: {graph.n_nodes} nodes, {graph.n_edges} "
        f"edges, baselines scored in {time.time() - t0:.1f}s" + (
            f"; the policy places {out[-1].coarsening.n_groups} groups"
            if grouped else ""))
  return out


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
      one compiled step (:mod:`gplace.rl.pretraining` switches between them);
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
