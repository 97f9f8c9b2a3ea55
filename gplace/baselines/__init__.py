"""Non-learned placement baselines: what a learned placer has to beat.

Each is ``fn(graph, topology, *, costs=None, seed=0) -> int32 [N]``:
``single_device``, ``round_robin``, ``random``, ``expert``, ``metis``,
Baechi's ``m_topo`` / ``m_etf`` / ``m_sct`` (Jeon et al., SoCC 2020),
``heft``, ``ordered_eft``; :func:`plan` also returns a list scheduler's
order. They share the simulator's model and run out of memory only where
no device holds the graph and no repaired plan fits (``docs/design.md``,
section 4). Host-side.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from gplace.baselines.common import (Baseline, LAYER_PATTERN, resident_bytes,
                                     simulated_peak_bytes,
                                     single_device_peak_bytes)
from gplace.baselines.list_scheduling import (heft, m_etf, m_topo,
                                         ordered_eft, plan_heft, plan_m_etf,
                                         plan_ordered_eft)
from gplace.baselines.sct import m_sct, plan_m_sct
from gplace.baselines.simple import (expert, layer_index, metis, random,
                                     round_robin, single_device)
from gplace.errors import BaselineError, check_seed
from gplace.graphs import constraints
from gplace.graphs.graph import Graph
from gplace.sim.list_scheduler import Plan, gpu_devices, prepare
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

_BASELINES: dict[str, Baseline] = {
    "single_device": single_device,
    "round_robin": round_robin,
    "random": random,
    "expert": expert,
    "metis": metis,
    "m_topo": m_topo,
    "m_etf": m_etf,
    "m_sct": m_sct,
    "heft": heft,
    "ordered_eft": ordered_eft,
}


_PLANNERS = {"m_etf": plan_m_etf, "m_sct": plan_m_sct, "heft": plan_heft,
             "ordered_eft": plan_ordered_eft}


def names() -> list[str]:
  """Names of all baselines, in a fixed order (trivial ones first)."""
  return list(_BASELINES)


def get(name: str) -> Baseline:
  """The baseline called ``name``.

  The searches (``local_search``, ``annealing``, ``genetic``) and the exact
  solver have the same interface but spend a budget; :mod:`gplace.placers`
  finds every placer by name.

  Raises:
    BaselineError: unknown name; the message lists the known ones.
  """
  if not isinstance(name, str):
    raise BaselineError(f"A baseline name must be a str, got "
                        f"{type(name).__name__} {name!r}; choose one of "
                        f"{names()}.")
  if name in _BASELINES:
    return _BASELINES[name]
  raise BaselineError(f"Unknown baseline {name!r}; choose one of {names()} "
                      "(searches and the exact solver: gplace.placers.get).")


def schedulers() -> list[str]:
  """Baselines that plan an op order as well as a placement (see plan)."""
  return list(_PLANNERS)


def plan(name: str, graph: Graph, topology: Topology, *, costs=None,
         seed: int = 0) -> Plan:
  """The placement of baseline ``name`` with its planned op order.

  List schedulers (:func:`schedulers`) order ops by their planned start,
  which is what Baechi and HEFT assume the runtime does (run ops as they
  become ready); ``gplace.simulate`` by default picks its own order (its
  dynamic schedule), so pass ``order=plan.order`` to simulate the plan as
  made. Other baselines get the id order and a NaN makespan.

  Raises:
    BaselineError: unknown name.
  """
  if isinstance(name, str) and name in _PLANNERS:
    check_seed(seed, "gplace.baselines.plan", BaselineError)
    problem = prepare(graph, topology, costs)
    result = _PLANNERS[name](problem)
    if constraints.has_constraints(graph):
      # The planned times are for the plan; the placement keeps the
      # graph's device constraints (see respecting_constraints).
      result = result._replace(placement=constraints.repair(
          graph, result.placement, problem.costs))
    return result
  placement = get(name)(graph, topology, costs=costs, seed=seed)
  n = graph.n_nodes
  return Plan(placement, np.arange(n, dtype=np.int32), np.zeros(n),
              np.zeros(n), float("nan"),
              np.full(topology.n_devices, float("nan")))


def _chosen(only, caller: str) -> list[str]:
  """The baseline names ``only`` asks for: every baseline for None, one for
  a str, else each name of a list or tuple; every name checked (:func:`get`)
  before any baseline runs."""
  if only is None:
    return names()
  if isinstance(only, str):
    chosen = [only]
  elif isinstance(only, (list, tuple)):
    chosen = list(only)
  else:
    raise BaselineError(
        f"{caller}: only must be a baseline name or a list of them, got "
        f"{type(only).__name__} {only!r}; e.g. only='heft' or "
        "only=['m_etf', 'heft'].")
  if not chosen:
    raise BaselineError(f"{caller}: only is empty; name at least one "
                        f"baseline of {names()}, or pass only=None for all.")
  for name in chosen:
    get(name)
  return chosen


def run_all(graph: Graph, topology: Topology, costs=None, *, seed: int = 0,
            only=None) -> dict[str, np.ndarray]:
  """``{name: [N] int32 placement}`` for all baselines, or those ``only``
  names (one name, or a list of them).

  Raises:
    BaselineError: an unknown name in ``only``, an empty ``only``.
  """
  return {name: get(name)(graph, topology, costs=costs, seed=seed)
          for name in _chosen(only, "gplace.baselines.run_all")}


# -- the fastest baseline ---------------------------------------------------

#: :attr:`Choice.schedule` of a placement in the simulator's default schedule,
#: and of a list scheduler's placement in its own planned op order.
DEFAULT_SCHEDULE = "default"
OWN_PLAN = "own plan"


class Choice(NamedTuple):
  """One baseline's placement in one schedule.

  Attributes:
    name: the baseline (:func:`names`).
    schedule: :data:`DEFAULT_SCHEDULE` or :data:`OWN_PLAN`.
    runtime_s: simulated seconds (``inf`` when every baseline runs out of
      memory).
    placement: ``[N]`` int32 device per node.
    order: ``[N]`` int32 the planned op order it was simulated in
      (``gplace.simulate(..., order=order)``), or None: the default schedule.
  """

  name: str
  schedule: str
  runtime_s: float
  placement: np.ndarray
  order: Optional[np.ndarray]

  @property
  def label(self) -> str:
    """``"heft (own plan)"``, ``"m_sct (default)"``."""
    return f"{self.name} ({self.schedule})"


class Best(NamedTuple):
  """The fastest baselines of one graph (see :func:`best`).

  Attributes:
    default: the fastest in the simulator's default schedule.
    any: the fastest in any schedule: the default, or a list scheduler's own
      planned op order where that is faster.
  """

  default: Choice
  any: Choice


def best(graph: Graph, topology: Topology, *, costs=None, seed: int = 0,
         only=None) -> Best:
  """The fastest baseline that fits in memory, in the default schedule and
  in any schedule.

  Every baseline (or those in ``only``) is planned once (:func:`plan`); all
  placements are simulated in the default schedule, and each list
  scheduler's (:func:`schedulers`) also in its own planned order. Ties go
  to the earlier baseline in :func:`names` order, and to the default
  schedule. A placement that runs out of memory never wins, unless all do
  (then ``default`` is the first baseline, at ``inf``).

  Raises:
    BaselineError: an unknown name in ``only`` (one name, or a list of
      them), an empty ``only``.
  """
  chosen = _chosen(only, "gplace.baselines.best")
  plans = [plan(name, graph, topology, costs=costs, seed=seed)
           for name in chosen]
  result = simulate(graph, np.stack([p.placement for p in plans]), topology,
                    costs)
  runtime = np.where(np.asarray(result.oom), np.inf,
                     np.asarray(result.runtime_s, np.float64))
  k = int(np.argmin(runtime))
  default = Choice(chosen[k], DEFAULT_SCHEDULE, float(runtime[k]),
                   np.asarray(plans[k].placement, np.int32), None)
  fastest = default
  for name, planned in zip(chosen, plans):
    if name not in _PLANNERS:
      continue
    own = simulate(graph, planned.placement, topology, costs,
                   order=planned.order)
    if not bool(own.oom) and float(own.runtime_s) < fastest.runtime_s:
      fastest = Choice(name, OWN_PLAN, float(own.runtime_s),
                       np.asarray(planned.placement, np.int32),
                       np.asarray(planned.order, np.int32))
  return Best(default, fastest)


__all__ = [
    "Best", "Choice", "DEFAULT_SCHEDULE", "OWN_PLAN", "best",
    "LAYER_PATTERN", "Plan", "expert", "get",
    "gpu_devices", "heft", "layer_index", "m_etf", "m_sct", "m_topo", "metis",
    "names", "ordered_eft", "plan", "random", "resident_bytes",
    "round_robin", "run_all", "schedulers", "simulated_peak_bytes",
    "single_device", "single_device_peak_bytes",
]
