"""The placements :func:`gplace.optimize` weighs: every baseline in its best
schedule, a search from the best of them, the exact solver, large-
neighbourhood search with it. Each :class:`Candidate` is scored as
reported (infeasible: ``inf``), ``BATCH`` at a time through one compiled
simulator."""

from __future__ import annotations

import concurrent.futures
import math
import time
from typing import NamedTuple, Optional, Sequence

import numpy as np

from gplace import baselines, processes, search, solvers
from gplace.baselines import critical_chain
from gplace.errors import GplaceError
from gplace.autoplace.inputs import Problem
from gplace.graphs import constraints
from gplace.graphs.coarsening import coarsen
from gplace.search import rounds
from gplace.search.joint import joint_annealing
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology, cost_table

# Placements per simulator call in the default schedule (the searches'
# default batch_size, so their evaluator reuses this compilation).
BATCH = 64
# The joint placement + schedule search, and its rows' label.
JOINT = "joint_annealing"
JOINT_LABEL = "joint annealing (placement + schedule)"
# A search whose moves keep op chains together says so in its label.
OVER_CHAINS = "over op chains"
# Searches that stop early when they stall (``stall_s``).
STALLING = ("annealing", JOINT)
DEFAULT_SCHEDULE, OWN_PLAN = "default", "own plan"  # a baseline's schedule
# gplace's critical-chain plan (not a classical baseline).
CHAIN = "critical chain"


class Candidate(NamedTuple):
  """One placement that was tried.

  Attributes:
    label: what produced it, e.g. ``"heft (own plan)"`` or ``"annealing from
      heft"``.
    placement: ``[N]`` int32 device per node.
    order: ``[N]`` int32 topological op order it was scored in
      (``gplace.simulate(..., order=order)``), or None: the simulator's
      default schedule (``"best"``).
    runtime_s: simulated seconds, ``inf`` when it runs out of memory or
      breaks the graph's device constraints.
  """

  label: str
  placement: np.ndarray
  order: Optional[np.ndarray]
  runtime_s: float


class Scores(NamedTuple):
  """Simulated outcome of ``K`` placements.

  Attributes:
    runtime_s: ``[K]`` float64 seconds, ``inf`` where infeasible.
    peak_bytes: ``[K, D]`` float64 peak live bytes per device.
  """

  runtime_s: np.ndarray
  peak_bytes: np.ndarray


def score(problem: Problem, placements: np.ndarray,
          order: Optional[np.ndarray] = None) -> Scores:
  """Simulated runtimes and peaks of ``[K, N]`` placements.

  Without ``order``: the default schedule, ``BATCH`` rows per call (the last
  call padded with copies of its first row). With an ``[N]`` order: that
  shared order (``K`` is then usually 1).
  """
  placements = np.asarray(placements, np.int32)
  if order is not None:
    result = simulate(problem.graph, placements, problem.topology,
                      problem.costs, order=order)
    return _scores(result)
  runtime, peak = [], []
  for lo in range(0, placements.shape[0], BATCH):
    batch = placements[lo:lo + BATCH]
    size = batch.shape[0]
    padded = np.concatenate(
        [batch, np.repeat(batch[:1], BATCH - size, axis=0)])
    scores = _scores(simulate(problem.graph, padded, problem.topology,
                              problem.costs))
    runtime.append(scores.runtime_s[:size])
    peak.append(scores.peak_bytes[:size])
  return Scores(np.concatenate(runtime), np.concatenate(peak))


def _scores(result) -> Scores:
  runtime = np.asarray(result.runtime_s, np.float64)
  infeasible = np.asarray(result.oom) | ~np.isfinite(runtime)
  return Scores(np.where(infeasible, np.inf, runtime),
                np.asarray(result.peak_bytes, np.float64))


def best_of(candidates: Sequence[Candidate]) -> Optional[Candidate]:
  """The fastest feasible candidate (the first on ties), or None."""
  best = None
  for candidate in candidates:
    if math.isfinite(candidate.runtime_s) and (
        best is None or candidate.runtime_s < best.runtime_s):
      best = candidate
  return best


def search_starts(default: Sequence[Candidate],
                  tried: Sequence[Candidate]) -> list[Candidate]:
  """Where ``optimize``'s placement search starts: the fastest placement in
  the default schedule among ``default`` (the baselines) and ``tried``;
  where that is a learned one (``"pretrained ..."``), the fastest baseline
  too, each searched for half. A policy's placement can be a hair faster
  than the plan it was given yet a worse start (on gnmt4 a search from it
  ended 3.6% behind one from HEFT: ``experiments/learning_in_optimize.py``).

  Returns:
    One or two candidates (``default[0]`` when none is feasible).
  """
  start = best_of(list(default) + [c for c in tried if c.order is None])
  if start is None:
    return [default[0]]
  plan = best_of(default)
  if start.label.startswith("pretrained") and plan is not None:
    return [start, plan]
  return [start]


# -- baselines -------------------------------------------------------------------


class BaselineRuns(NamedTuple):
  """The baselines of one graph.

  Attributes:
    default: every baseline that could place the graph, in the simulator's
      default schedule, in the order of ``gplace.baselines.names()``.
    best: each of them in its best schedule, fastest first (infeasible
      ones last).
  """

  default: list
  best: list


def fast_islands(topology: Topology) -> list[np.ndarray]:
  """The devices joined by the topology's fastest links: connected groups
  of devices whose links all run at the largest off-diagonal bandwidth
  (e.g. the hosts of ``2x8h100``), largest first; one group of every
  device where all links are as fast."""
  d = topology.n_devices
  bandwidth = np.asarray(topology.link_bandwidth, np.float64)
  off = ~np.eye(d, dtype=bool)
  if d < 2 or not off.any():
    return [np.arange(d)]
  fastest = bandwidth[off].max()
  joined = (bandwidth >= fastest) & (bandwidth.T >= fastest)
  label = np.full(d, -1)
  for first in range(d):
    if label[first] >= 0:
      continue
    stack, label[first] = [first], first
    while stack:
      device = stack.pop()
      for other in np.flatnonzero(joined[device] & (label < 0)).tolist():
        label[other] = first
        stack.append(other)
  islands = [np.flatnonzero(label == g) for g in np.unique(label)]
  return sorted(islands, key=lambda ix: (-len(ix), int(ix[0])))


def island_problem(problem: Problem, island: np.ndarray) -> Problem:
  """``problem`` on the devices ``island`` only (their links, compute
  groups and cost columns)."""
  topology = problem.topology
  ix = np.asarray(island)
  pipelined = topology.pipelined_links
  sub = topology.replace(
      devices=tuple(topology.devices[i] for i in ix),
      link_bandwidth=np.asarray(topology.link_bandwidth)[np.ix_(ix, ix)],
      link_latency=np.asarray(topology.link_latency)[np.ix_(ix, ix)],
      compute_group=np.unique(np.asarray(topology.compute_group)[ix],
                              return_inverse=True)[1],
      pipelined_links=(pipelined if isinstance(pipelined, bool)
                       else np.asarray(pipelined)[np.ix_(ix, ix)]),
      name=f"{topology.name}[{int(ix[0])}:{int(ix[-1]) + 1}]")
  costs = (None if problem.costs is None
           else np.asarray(problem.costs)[:, ix])
  return problem._replace(topology=sub, costs=costs)


def baseline_runs(problem: Problem, *, seed: int = 0,
                  names: Optional[Sequence[str]] = None) -> BaselineRuns:
  """Every baseline (or those in ``names``), in the default schedule and in
  its best one.

  A baseline's best schedule is the simulator's default, or, for a list
  scheduler (``gplace.baselines.schedulers()``), its own planned op order
  when that is faster and fits in memory. A baseline that cannot place this
  graph (it raises a :class:`~gplace.errors.GplaceError`) is left out.
  Candidates are labelled ``"<name> (default)"`` or ``"<name> (own
  plan)"``.
  """
  graph, topology, costs = problem.graph, problem.topology, problem.costs
  # One planning run per baseline: its placement and, for a list
  # scheduler, the op order it planned.
  placed, orders = {}, {}
  for name in (names if names is not None else baselines.names()):
    try:
      plan = baselines.plan(name, graph, topology, costs=costs, seed=seed)
    except GplaceError:
      continue  # a baseline that cannot place this graph is no candidate.
    placed[name] = np.asarray(plan.placement, np.int32)
    if name in baselines.schedulers():
      orders[name] = np.asarray(plan.order, np.int32)
  # Where slow links join islands of devices (hosts), the baselines also
  # plan on the largest island alone: crossing a slow network rarely pays,
  # and planners that see every device cross it anyway.
  islands = fast_islands(topology)
  if names is None and len(islands) > 1 and graph.allowed_devices is None:
    island = islands[0]
    sub = island_problem(problem, island)
    for name in baselines.names():
      try:
        plan = baselines.plan(name, graph, sub.topology, costs=sub.costs,
                              seed=seed)
      except GplaceError:
        continue
      label = f"{name} on {len(island)} fast-linked devices"
      placed[label] = island[np.asarray(plan.placement, np.int32)].astype(
          np.int32)
      if name in baselines.schedulers():
        orders[label] = np.asarray(plan.order, np.int32)
  if not placed:
    return BaselineRuns([], [])
  runtime = score(problem, np.stack(list(placed.values()))).runtime_s
  default = [Candidate(f"{name} ({DEFAULT_SCHEDULE})", placement, None,
                       float(r))
             for (name, placement), r in zip(placed.items(), runtime)]
  best = dict(zip(placed, default))
  for name, order in orders.items():
    own = float(score(problem, placed[name][None], order).runtime_s[0])
    if own < best[name].runtime_s:
      best[name] = Candidate(f"{name} ({OWN_PLAN})", placed[name], order,
                             own)
  return BaselineRuns(default,
                      sorted(best.values(), key=lambda c: c.runtime_s))


def baseline_candidates(problem: Problem, *, seed: int = 0,
                        names: Optional[Sequence[str]] = None
                        ) -> list[Candidate]:
  """Every baseline (or those in ``names``) in its best schedule, fastest
  first (see :func:`baseline_runs`)."""
  return baseline_runs(problem, seed=seed, names=names).best


def baseline_rows(graph, topology, seed: int = 0,
                  costs=None) -> list[tuple[str, float]]:
  """``(label, runtime_s)`` of every baseline in its best schedule, fastest
  first (``inf``: out of memory or breaking device constraints); see
  :func:`baseline_candidates`."""
  problem = Problem(graph, topology, costs)
  return [(c.label, c.runtime_s)
          for c in baseline_candidates(problem, seed=seed)]


def chain_candidates(problem: Problem) -> list[Candidate]:
  """gplace's critical-chain plans (:mod:`gplace.baselines.critical_chain`,
  one per slack share): the fastest in the default schedule, and the
  fastest in its own planned order when that is faster still (labelled
  ``"critical chain (default)"`` / ``"... (own plan)"``). The graph's
  device constraints are kept as a baseline keeps them; none where the
  plans cannot be made."""
  graph = problem.graph
  try:
    made = list(critical_chain.plans(graph, problem.topology,
                                     costs=problem.costs).values())
  except GplaceError:
    return []
  placed = [np.asarray(plan.placement, np.int32) for plan in made]
  if constraints.has_constraints(graph):
    table = cost_table(graph, problem.topology, problem.costs)
    placed = [constraints.repair(graph, p, table) for p in placed]
  runtime = score(problem, np.stack(placed)).runtime_s
  first = int(np.argmin(runtime))
  out = [Candidate(f"{CHAIN} ({DEFAULT_SCHEDULE})", placed[first], None,
                   float(runtime[first]))]
  own = [float(score(problem, p[None], np.asarray(plan.order, np.int32))
               .runtime_s[0]) for p, plan in zip(placed, made)]
  fastest = int(np.argmin(own))
  if own[fastest] < out[0].runtime_s:
    out.append(Candidate(f"{CHAIN} ({OWN_PLAN})", placed[fastest],
                         np.asarray(made[fastest].order, np.int32),
                         own[fastest]))
  return [c for c in out if math.isfinite(c.runtime_s)]


# -- search ----------------------------------------------------------------------


def search_candidate(problem: Problem, name: str, start: Candidate, *,
                     time_s: float, seed: int,
                     max_evaluations: Optional[int] = None,
                     stall_s: Optional[float] = None,
                     groups: Optional[np.ndarray] = None,
                     block_share: Optional[float] = None,
                     in_order: bool = False) -> Candidate:
  """A ``gplace.search`` run (``"annealing"``, ``"local_search"`` or
  ``"genetic"``) from ``start``'s placement, in the default schedule; or
  ``"joint_annealing"`` (:mod:`gplace.search.joint`): placement and
  schedule together, from ``start``'s placement in its order. With
  ``groups`` (``[N]`` int labels, e.g. :func:`chain_groups`), a move
  redraws whole groups, and the label says ``"over op chains"``.

  The evaluation budget is what the simulator scores in ``time_s`` at the
  rate of one timed batch (so annealing cools over the time it has), or
  ``max_evaluations`` when given (then the run is reproducible for a seed
  unless ``time_s``, kept as a wall-clock limit, cuts it short). With
  ``stall_s``, annealing and the joint search stop once their best has not
  improved for that many seconds. ``block_share``: the share of block moves
  of annealing and the joint search (None: their default). With
  ``in_order``, annealing scores every placement in ``start``'s order
  (which it must have), e.g. the order LNS found, and the candidate keeps
  that order (labelled ``"annealing in the order of <start>"``).

  Returns:
    The best placement seen, labelled ``"<name> from <start>"``.
  """
  if max_evaluations is None:
    rows, order = start.placement[None], None
    if in_order:      # a batch in the order: compiled first, then timed
      rows, order = np.repeat(rows, BATCH, axis=0), start.order
      score(problem, rows, order)
    began = time.perf_counter()
    score(problem, rows, order)      # compiled already: times a batch
    per_batch_s = max(time.perf_counter() - began, 1e-4)
    budget = max(BATCH, int(0.9 * time_s / per_batch_s) * BATCH)
    # Across processes, process 0's count is split over all of them.
    with processes.exit_when_a_peer_is_lost(rounds.nothing_on_disk):
      budget = int(processes.broadcast(np.asarray(budget, np.int32)))
  else:
    budget = max_evaluations
  origin = start.label.split(" (")[0]
  over = "" if groups is None else f" {OVER_CHAINS}"
  # Block moves: annealing and the joint search only.
  blocks = ({} if block_share is None or name not in ("annealing", JOINT)
            else {"block_share": block_share})
  if name == JOINT:  # the placement and its schedule, from start's order
    joint = joint_annealing(
        problem.graph, problem.topology, costs=problem.costs, seed=seed,
        budget=budget, init=start.placement, init_order=start.order,
        batch_size=BATCH, time_limit_s=max(time_s, 1e-3), stall_s=stall_s,
        groups=groups, **blocks)
    return Candidate(f"{JOINT_LABEL}{over} from {start.label}",
                     joint.placement, joint.order, float(joint.runtime_s))
  stall = {"stall_s": stall_s} if name in STALLING else {}
  kept = {"order": start.order} if in_order else {}
  result = search.SEARCHES[name](
      problem.graph, problem.topology, costs=problem.costs, seed=seed,
      budget=budget, init=start.placement, batch_size=BATCH,
      time_limit_s=max(time_s, 1e-3), groups=groups, **stall, **blocks,
      **kept)
  if in_order:
    return Candidate(f"{name}{over} in the order of {start.label}",
                     result.placement, start.order, float(result.runtime_s))
  return Candidate(f"{name}{over} from {origin}", result.placement, None,
                   float(result.runtime_s))


def chain_groups(problem: Problem, min_nodes: int,
                 max_share: float) -> Optional[np.ndarray]:
  """``[N]`` int32 op chains (``gplace.coarsen(graph, "colocation")``:
  an op with a single consumer joins it, ColocRL's rule) for a search whose
  moves keep each chain on one device, or None where that does not pay:
  a graph under ``min_nodes`` ops, or one whose chains are more than
  ``max_share`` of its ops (a move of a chain is then mostly a move of an
  op)."""
  graph = problem.graph
  if graph.n_nodes < min_nodes:
    return None
  labels = coarsen(graph, "colocation").group_of
  if int(labels.max(initial=-1)) + 1 > max_share * graph.n_nodes:
    return None
  return labels


# -- the exact solver ------------------------------------------------------------


class SolverOutcome(NamedTuple):
  """The solver's candidate, its proven bound (seconds) and status;
  ``"MODEL_OPTIMAL"``: the model's optimum (links uncontended) simulates
  more than :data:`SOLVER_AGREES` above the bound, so it proves nothing."""
  candidate: Candidate
  bound_s: float
  status: str = ""


SOLVER_AGREES = 1e-4   #: relative margin of a runtime at the bound


def solver_candidate(problem: Problem, hint: Optional[Candidate], *,
                     time_s: float, seed: int) -> SolverOutcome:
  """CP-SAT placement + order (``gplace.solvers.solve``) from ``hint``'s
  placement; never slower than the hint in the default schedule."""
  result = solvers.solve(
      problem.graph, problem.topology, problem.costs,
      time_limit_s=max(time_s, 0.5), num_workers=2, seed=seed,
      hint=None if hint is None else hint.placement)
  order = np.asarray(result.order, np.int32)   # the order it was scored in
  runtime = float(score(problem, result.placement[None], order).runtime_s[0])
  status, says = result.status, result.status.lower()
  if status == "OPTIMAL" and runtime > result.bound_s * (1 + SOLVER_AGREES):
    status, says = "MODEL_OPTIMAL", "optimal in its model"
  label = f"solver (CP-SAT, {says})"
  return SolverOutcome(Candidate(label, np.asarray(result.placement, np.int32),
                                 order, runtime), float(result.bound_s),
                       status)


LNS_LABEL = "lns (CP-SAT windows)"
#: Appended to the label of an LNS chain that raced another (its start's
#: continuation carries the plain label), and of ``phases.plan_probe``'s.
RACING, PROBE = ", racing", ", probe"


def lns_candidate(problem: Problem, start: Candidate, *, time_s: float,
                  seed: int, bound_s: Optional[float] = None,
                  max_iterations: Optional[int] = None,
                  stall_s: Optional[float] = None,
                  workers: Optional[int] = None,
                  target_s: Optional[float] = None) -> Candidate:
  """Large-neighbourhood search (``gplace.solvers.lns``) from ``start``'s
  placement in its order for ``time_s`` seconds (or ``max_iterations``
  windows; ``stall_s``, ``workers``, ``target_s``: as LNS's); never slower
  than the start in its order. Labelled ``"lns (CP-SAT windows) from
  <start>"`` (from an LNS candidate: its label, less :data:`PROBE`)."""
  result = solvers.lns(
      problem.graph, problem.topology, costs=problem.costs,
      start=start.placement, start_order=start.order,
      time_limit_s=max(time_s, 0.5), seed=seed, bound_s=bound_s,
      max_iterations=max_iterations, stall_s=stall_s, workers=workers,
      target_s=target_s)
  order = np.asarray(result.order, np.int32)
  runtime = float(score(problem, result.placement[None], order).runtime_s[0])
  label = (start.label.removesuffix(PROBE) if start.label.startswith(
      LNS_LABEL) else f"{LNS_LABEL} from {start.label.split(' (')[0]}")
  return Candidate(label, np.asarray(result.placement, np.int32), order,
                   runtime)


def lns_candidates(problem: Problem, starts: Sequence[Candidate], *,
                   time_s: float, seed: int, bound_s: Optional[float] = None,
                   max_iterations: Optional[int] = None,
                   race_share: float = 1.0) -> list[Candidate]:
  """:func:`lns_candidate` from each of ``starts`` at once for
  ``race_share`` of ``time_s`` (and of ``max_iterations``): one chain per
  start in its own thread, solving one window at a time (seeds ``seed``,
  ``seed + 1``, ...); then one chain with LNS's default threads from the
  fastest for the rest. From one start, one chain throughout.

  Returns:
    The racing chains' candidates (labels ending in :data:`RACING`), then
    the winner's continuation (``"lns (CP-SAT windows) from <start>"``).
  """
  if len(starts) == 1:
    return [lns_candidate(problem, starts[0], time_s=time_s, seed=seed,
                          bound_s=bound_s, max_iterations=max_iterations)]
  began = time.perf_counter()
  race = None if max_iterations is None else max(
      1, int(race_share * max_iterations))

  def chain(i: int) -> Candidate:
    return lns_candidate(problem, starts[i], time_s=race_share * time_s,
                         seed=seed + i, bound_s=bound_s,
                         max_iterations=race, workers=1)

  with concurrent.futures.ThreadPoolExecutor(len(starts)) as pool:
    raced = list(pool.map(chain, range(len(starts))))
  winner = best_of(raced) or raced[0]
  left = time_s - (time.perf_counter() - began)
  if left < 1.0 or race_share >= 1.0:
    return raced
  rest = lns_candidate(
      problem, winner, time_s=left, seed=seed, bound_s=bound_s,
      max_iterations=None if max_iterations is None else max(
          1, max_iterations - race))
  return ([c._replace(label=c.label + RACING) for c in raced]
          + [rest._replace(label=winner.label)])
