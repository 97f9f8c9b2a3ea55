"""Host-side set-up of training problems: graphs, baselines, rewards, batches.

Captures (or loads) the workloads a config names, scores every baseline under
the simulator, builds the padded GraphsTuples and simulator problems of one
budget (a batch of ``B`` graphs), and provides the host reward functions
(simulator or real executor). Used by :mod:`gplace.train`; numpy on the host,
nothing here is traced.
"""

from __future__ import annotations

import math
import os
import re
import time
from typing import Any, NamedTuple, Sequence

import jax
import numpy as np

from gplace import baselines
from gplace.sim import bounds
from gplace.graphs import features as features_lib
from gplace.rl import core as rl
from gplace.sim import simulator
from gplace import workloads
from gplace.graphs.capture import capture
from gplace.errors import ConfigError, PlacementError
from gplace.graphs.graph import Graph, random_dag
from gplace.sim import topology as topology_lib

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
  """

  name: str
  graph: Graph
  fn: Any
  args: Any
  baselines: dict
  baseline_runtime_s: dict
  lower_bound_s: float
  failing_runtime_s: float


def load_graph(name: str, config) -> tuple[Graph, Any, Any]:
  """``(graph, fn, args)`` of a workload name or ``random_dag:N[:seed]``."""
  match = RANDOM_DAG.match(name)
  if match:
    seed = int(match.group(2) or config.seed)
    return random_dag(int(match.group(1)), seed=seed, name=name), None, None
  abstract = config.rl.reward != "executor"
  cache_dir = str(config.get("graph_cache", "") or "")
  cache_path = (os.path.join(cache_dir, f"{name}_{config.workload_size}_"
                             f"{config.workload_step}.npz")
                if cache_dir and abstract else None)
  if cache_path and os.path.exists(cache_path):
    # Simulated rewards need only the graph (as experiments/baselines.py
    # caches it), not the runnable function.
    return Graph.load(cache_path).replace(name=name), None, None
  fn, args = workloads.get(name, config.workload_size, config.workload_step,
                           abstract=abstract, seed=config.seed)
  graph = capture(fn, *args).replace(name=name)
  if cache_path:
    os.makedirs(cache_dir, exist_ok=True)
    graph.save(cache_path)
  return graph, fn, args


def _simulate_host(graph, placements, topology) -> tuple[np.ndarray,
                                                         np.ndarray]:
  result = simulator.simulate(graph, np.asarray(placements, np.int32),
                              topology)
  return np.asarray(result.runtime_s, np.float64), np.asarray(result.oom)


class Scorer:
  """Scores placements of one graph on the host: simulated or measured."""

  def __init__(self, setup_graph, fn, args, topology, config, devices=None):
    self.graph, self.fn, self.args = setup_graph, fn, args
    self.topology = topology
    self.executor = config.rl.reward == "executor"
    self.devices = devices
    self.repeats = config.executor.repeats
    self.warmup = config.executor.warmup

  def __call__(self, placements: np.ndarray) -> np.ndarray:
    """``[K, N]`` -> ``[K]`` seconds, inf where OOM / failed."""
    placements = np.asarray(placements, np.int32)
    if self.executor:
      from gplace.execution import timing  # pylint: disable=g-import-not-at-top
      return timing.measure_placements(
          self.fn, self.graph, placements, self.args, devices=self.devices,
          repeats=self.repeats, warmup=self.warmup, penalty_s=math.inf)
    runtime, oom = _simulate_host(self.graph, placements, self.topology)
    return np.where(oom, np.inf, runtime)


def _placement_devices():
  """Local devices a placement indexes: CPUs first, then accelerators, as the
  executor orders them (so CPU+GPU is the heterogeneous case where a GPU
  exists)."""
  from gplace.execution import executor  # pylint: disable=g-import-not-at-top
  return executor.default_devices()


def _make_topology(config):
  if config.topology == "local":
    return topology_lib.local(_placement_devices())
  return topology_lib.preset(config.topology)


def setup_graphs(config, topology, names: Sequence[str], log=print):
  """Captures the graphs, scores the baselines, picks failure penalties."""
  out = []
  for name in names:
    t0 = time.time()
    graph, fn, args = load_graph(name, config)
    scorer = Scorer(graph, fn, args, topology, config,
                    devices=_placement_devices() if config.topology == "local"
                    else None)
    only = None if config.baselines == "all" else [
        b.strip() for b in config.baselines.split(",")]
    placements = baselines.run_all(graph, topology, seed=config.seed,
                                   only=only)
    names_b = list(placements)
    runtimes = scorer(np.stack([placements[b] for b in names_b]))
    single = scorer(np.tile(np.arange(topology.n_devices)[:, None],
                            (1, graph.n_nodes)))
    finite = single[np.isfinite(single)]
    reference = finite.min() if finite.size else np.nanmax(
        np.where(np.isfinite(runtimes), runtimes, np.nan))
    if not np.isfinite(reference):
      runtime_any, _ = _simulate_host(graph, np.zeros((1, graph.n_nodes)),
                                      topology)
      reference = float(runtime_any[0])
    out.append(GraphSetup(
        name=name, graph=graph, fn=fn, args=args,
        baselines=placements,
        baseline_runtime_s=dict(zip(names_b, map(float, runtimes))),
        # A simulated bound says nothing about measured runtimes.
        lower_bound_s=(float("nan") if scorer.executor
                       else bounds.lower_bound(graph, topology)),
        failing_runtime_s=float(config.rl.oom_penalty_factor * reference)))
    log(f"[gplace] {name}: {graph.n_nodes} nodes, {graph.n_edges} edges, "
        f"baselines scored in {time.time() - t0:.1f}s")
  return out


def warm_start_target(setup: GraphSetup, which: str):
  """``(name, placement [N], runtime_s)`` of the warm-start baseline."""
  if which == "best":
    name = min(setup.baseline_runtime_s, key=setup.baseline_runtime_s.get)
  else:
    name = which
  return name, setup.baselines[name], setup.baseline_runtime_s[name]


def make_batch(setups: Sequence[GraphSetup], topology, *,
               with_problems: bool = True) -> rl.Batch:
  """Pads every graph to one budget and stacks them into a :class:`rl.Batch`
  (host-side numpy)."""
  graphs = [s.graph for s in setups]
  budgets = [features_lib.budget_for(g) for g in graphs]
  budget = features_lib.Budget(max(b.n_nodes for b in budgets),
                               max(b.n_edges for b in budgets),
                               max(b.n_graphs for b in budgets))
  tuples = [features_lib.to_graphs_tuple(g, budget) for g in graphs]
  graphs_tuple = features_lib.stack_graphs_tuples(tuples)
  problems = None
  if with_problems:
    problems = _stacked_problems(graphs, topology, budget.n_nodes)
  return rl.Batch(
      graphs=graphs_tuple, problems=problems,
      failing_runtime_s=np.asarray([s.failing_runtime_s for s in setups],
                                   np.float32),
      device_mask=np.ones((len(setups), topology.n_devices), bool))


def _stacked_problems(graphs, topology, n_nodes: int):
  """Simulator problems of one budget for all graphs, stacked ``[B, ...]``."""
  n_steps = n_nodes
  for _ in range(4):
    try:
      problems = [simulator.make_problem(g, topology, n_nodes=n_nodes,
                                         n_steps=n_steps) for g in graphs]
      break
    except PlacementError:
      # High-degree nodes take several simulator steps: a larger budget.
      n_steps *= 2
  else:
    raise ConfigError("The graphs need more simulator steps than 8x their "
                      "node budget (nodes of very high degree).")
  return jax.tree.map(lambda *xs: np.stack(xs), *problems)


def simulator_reward(problem, placements):
  """``rl.SimulateFn`` over ``gplace.simulator.simulate_problem``."""
  result = simulator.simulate_problem(problem, placements)
  return result.runtime_s, result.oom
