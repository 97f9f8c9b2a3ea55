""":func:`optimize`: one call from a program or a graph to a placement.

Resolves the inputs, collects candidates by method, and returns the fastest
that fits in memory and keeps the device constraints as a
:class:`~gplace.autoplace.result.PlacementResult`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Optional

import numpy as np

from gplace import processes
from gplace.search import rounds
from gplace.errors import PlacementError, SearchError, TopologyError
from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace import measured as measured_lib
from gplace.autoplace import outcome as outcome_lib
from gplace.autoplace import phases
from gplace.autoplace import policy as learned
from gplace.autoplace.candidates import Candidate, best_of
from gplace.autoplace.inputs import (LOCAL, Problem,
                                     check_budget, check_max_evaluations,
                                     check_method, check_seed,
                                     check_topology_spec, load_source,
                                     profiled_source, resolve_problem)
from gplace.autoplace.progress import Progress
from gplace.autoplace.result import PlacementResult
from gplace.rl.policy_file import shipped_topologies
from gplace.sim.bounds import lower_bound


class UncalibratedWarning(UserWarning):
  """gplace.optimize placed on the local devices with uncalibrated costs."""


def _check_flag(value: Any, name: str) -> bool:
  if not isinstance(value, (bool, np.bool_)):
    raise SearchError(f"gplace.optimize: {name} must be True or False, got "
                      f"{value!r}.")
  return bool(value)


def optimize(fn_or_graph: Any, *args: Any, topology: Any = None,
             costs: Any = None, method: str = "auto", budget_s: float = 30.0,
             seed: int = 0, progress: bool = True, profile: bool = False,
             max_evaluations: Optional[int] = None,
             policy: Any = None, fusion: bool = False) -> PlacementResult:
  """The fastest placement gplace finds for a program or a graph.

  Captures ``fn_or_graph(*args)`` if it is a function (or loads the graph),
  then places it with ``method`` and returns the fastest placement that fits
  in every device's memory and keeps the graph's device constraints
  (``Graph.allowed_devices``, ``Graph.colocation``), scored by
  ``gplace.simulate``. Every method except a named baseline returns the
  best of everything it tried, the baselines included, so the result is
  never slower than the best baseline; ``result.method`` says which won and
  ``result.candidates`` lists them all. The budget's shares and limits
  (``MEASURE_SHARE`` and the others below) are the constants of
  :mod:`gplace.autoplace.budget`.

  Methods:

  On this machine's devices (``topology="local"``) with a function, the
  top candidates are measured with the executor at the end of the budget
  (:func:`~gplace.autoplace.budget.measure_reserve_s`: a share of it, more
  where the one-device placement, built first, took long to build) and the
  measured fastest wins;
  everywhere a simpler plan (fewer devices, clusters, transfers) wins a tie
  within the noise (:mod:`gplace.autoplace.measured`). ``result.table()``
  says which times are simulated and which measured.

  * ``"auto"`` (default): every baseline in its best schedule (the
    simulator's default, or a list scheduler's own planned op order) and
    gplace's critical-chain plan (:mod:`gplace.baselines.critical_chain`:
    the longest path's ops on one device, HEFT for the rest); a
    pretrained policy zero-shot when ``policy=`` names one (not the shipped
    one by default: with it ``optimize`` was no better on held-out graphs,
    within the runs' spread at 10-60 s and 1.6-4.5% worse at 300 s,
    ``experiments/learning_in_optimize.py``); on graphs of at least
    :data:`AUTO_POLICY_MIN_NODES` ops with at least
    :data:`AUTO_POLICY_MIN_S` seconds, GO trained on the graph for
    :data:`AUTO_POLICY_SHARE` of the time the baselines leave (there a
    search over ops barely moves in minutes, a group-level policy does),
    stopped early when after :data:`AUTO_POLICY_PROBE_SHARE` of that time
    (at most :data:`AUTO_POLICY_PROBE_MAX_S` s) its best sample is not
    faster than the best so far; from :data:`LNS_LARGE_MIN_NODES` ops
    under memory pressure, when gplace's critical-chain plan beats the
    best classical plan, LNS from the latter for at most
    :data:`PLAN_PROBE_SHARE` of the time, until it beats the former (then
    no searches and no race follow: LNS goes on from it);
    simulated annealing over placements from
    the best so far (and, where that is the policy's, from the best
    baseline too, each for half; on graphs of at least
    :data:`CHAIN_SEARCH_MIN_NODES` ops moving whole op chains for
    :data:`CHAIN_SEARCH_SHARE` of it, then single ops), then over placement
    and schedule together
    (:mod:`gplace.search.joint`) from the best in its own order, for part
    of the budget; on graphs of at most
    :data:`AUTO_SOLVER_MAX_NODES` nodes (and up to :data:`SOLVER_MAX_NODES`
    under memory pressure or when the search leaves more than
    :data:`AUTO_SOLVER_GAP` to the lower bound, there first for
    :data:`SOLVER_PROBE_SHARE` of its time and the rest only when it beat
    the best so far) with at least
    :data:`MIN_SOLVER_S` seconds left, the exact solver; where the solver
    did not run or did not prove its answer optimal, with at least
    :data:`MIN_LNS_S` seconds left, large-neighbourhood search with CP-SAT
    windows (``gplace.solvers.lns``) from the best so far for the rest
    (from :data:`LNS_LARGE_MIN_NODES` ops without GO, racing a chain from
    the best classical plan, or that probe's, for :data:`LNS_RACE_SHARE` of
    it first), its
    last :data:`ORDER_SEARCH_SHARE` annealing over placements in the order
    LNS's answer runs in.
    It does not fine-tune (``"finetune"`` does): inside a 300 s budget
    fine-tuning never won and took the searches' time
    (``experiments/learning_in_optimize.py``). The searches get
    :data:`SEARCH_SHARE` of the time after the baselines when the solver
    follows, else all but LNS's (:func:`~gplace.autoplace.budget.lns_share`:
    more on larger graphs, most under memory pressure), and each phase
    before the last stops once it has not improved for :data:`STALL_SHARE`
    of the budget (the rest goes to the next).
  * ``"pretrained"``: the baselines, then the pretrained policy zero-shot
    (its greedy placement and the best of 16 samples; seconds).
  * ``"finetune"``: the baselines, the pretrained policy zero-shot, then
    fine-tuned on the graph for at most 50 RL steps or the rest of the
    budget (a minute or more on two CPU cores; not started when less is
    left than its first steps take, compiling included: see ``budget_s``).
  * ``"<baseline>"`` or ``"baseline:<baseline>"`` (``gplace.baselines.
    names()``): that baseline alone, in its best schedule.
  * ``"search"`` (annealing), ``"search:<name>"`` or the name
    (``"annealing"``, ``"local_search"``, ``"genetic"``, or
    ``"joint_annealing"``: placement and schedule together): the
    baselines, then that search from the best of them for the rest of the
    budget.
  * ``"solver"``: the baselines, then CP-SAT placement + scheduling
    (``gplace.solvers.solve``) from the best of them, on graphs of at most
    :data:`SOLVER_MAX_NODES` nodes; its proven bound tightens
    ``lower_bound_s``.
  * ``"lns"``: the baselines, then large-neighbourhood search with CP-SAT
    windows (``gplace.solvers.lns``) from the best of them in its
    schedule, for the rest of the budget; any graph size (the windows'
    models grow with the window, not the graph).
  * ``"policy"``: the baselines, then GO trained by RL on this graph for
    the rest of the budget (``experiments/configs/quickstart.py``; needs a
    gplace checkout with the dev extras).

  The training methods (``"finetune"``, ``"policy"``) train on exactly the
  problem placed here: any topology (a preset, ``"local"``, a custom
  :class:`~gplace.Topology`) and measured costs (``costs=``, a graph
  file's, ``profile=True``) included.

  Args:
    fn_or_graph: a jittable function (with ``*args``, its example
      arguments: arrays or ``jax.ShapeDtypeStruct`` s), a
      :class:`~gplace.Graph`, a ``networkx.DiGraph`` (node and edge
      attributes of the JSON format, :mod:`gplace.graphs.interchange`), or
      a path to a saved graph (``.npz``, ``.json``).
    *args: the function's example arguments; nothing for a graph.
    topology: a preset name (``gplace.topology.preset_names()``),
      ``"local"`` (this machine's devices, CPU first, as ``gplace.place``
      indexes them) or a :class:`~gplace.Topology`. Default: the topology
      a graph file carries, else ``"1cpu+4gpu"``.
    costs: ``[N, D]`` measured seconds per node and device. Default: what
      the graph file or networkx graph carries, else the topology's
      roofline (analytic) costs.
    method: see above.
    budget_s: wall-clock seconds for the whole call, compiling and
      ``profile=True``'s profiling included (the first call on a graph size
      compiles the simulator, and the training methods their training
      step: 20-40 s on two CPU cores). The baselines always run in full
      first (seconds even on 10k-node graphs); the search then gets the
      rest of the budget (half of it when the solver follows), but at least
      a tenth of the budget. The training methods (``"finetune"``,
      ``"policy"``) stop between chunks of 10 steps once the budget is
      spent or the next chunk would overrun it, and do not start when less
      is left than a first chunk takes (30 s until this process has timed
      one on the same graph); then the result has what was found before
      (the baselines, the zero-shot policy) and ``result.notes`` (printed
      with it) says what the budget cut short. Only the evaluation of a
      trained policy may run past it.
    seed: seeds the baselines, the search, the solver and the policy.
    progress: draw a progress bar (after two seconds) on stderr.
    profile: with ``topology="local"`` and a function: measure per-op costs
      and links on this machine first (``gplace.profile``; it compiles
      and runs the function many times) and place with them. It gets at
      most :data:`PROFILE_SHARE` (half) of ``budget_s``
      (``gplace.profile(..., time_s=budget_s / 2)``: the costliest ops and
      as many calibration runs as fit; an unbounded profile of a 1,600-op
      train step takes minutes) and is kept in the profile cache
      (``$GPLACE_CACHE_DIR``, default ``~/.cache/gplace/profiles``), so a
      later call on the same program (op graph, argument shapes and
      dtypes) and devices reuses it at next to no cost, when it was made
      with at least that budget. The methods and the measuring of the
      top candidates share what it leaves.
    max_evaluations: cap the search at this many simulator evaluations
      (default: as many as fit in the time). With it, a search that the
      time does not cut short is reproducible for a seed.
    policy: a policy file (``.npz`` written by ``experiments/run.py
      --config experiments/configs/pretrain.py``) for the pretrained
      methods; default: for ``"pretrained"`` and ``"finetune"`` the one
      gplace ships for the topology
      (``gplace.rl.policy_file.shipped_topologies()``), if any, for
      ``"auto"`` none; ``False``: none.
    fusion: after the placement (and order) are chosen, search fusion
      decisions for it (``gplace.search.fusion_annealing``, from the best
      of no fusion and XLA's default) in
      :data:`FUSION_SHARE` of ``budget_s``;
      ``result.fusion`` holds the decision and ``result.place(fn)`` runs
      it. Chosen by simulation: measured candidates are measured unfused.

  Returns:
    A :class:`~gplace.autoplace.result.PlacementResult`; ``print(result)``
    shows the comparison, ``result.place(fn)`` runs the placement (or
    ``gplace.place(fn, result.graph, result.placement,
    schedule=result.schedule())``).

  Raises:
    GraphError: ``fn_or_graph`` is none of the above, a missing or
      malformed graph file (the message names the field), or example
      arguments given with a graph.
    CaptureError: the function does not trace with ``args``.
    TopologyError: an unknown topology, or a bad cost table.
    SearchError: an unknown method, a budget that is not a positive number
      of seconds, ``fusion`` not True or False, ``method="solver"`` on a
      graph above :data:`SOLVER_MAX_NODES` nodes,
      ``"pretrained"`` or ``"finetune"`` without a policy for the
      topology's device count, or a ``policy`` that is not a path.
    PolicyError: a ``policy`` file that cannot be read.
    PlacementError: an empty graph, device constraints for another device
      count, or no candidate fits in memory and keeps the constraints.
    ConfigError: ``method="policy"`` outside a gplace checkout.
  """
  began = time.perf_counter()
  chosen = check_method(method)
  budget_s = check_budget(budget_s)
  # fusion=True: the fusion search gets its share of the budget at the end.
  fusion_s = (budget.fusion_budget_s(budget_s)
              if _check_flag(fusion, "fusion") else 0.0)
  budget_s -= fusion_s
  seed = check_seed(seed)
  max_evaluations = check_max_evaluations(max_evaluations)
  progress = _check_flag(progress, "progress")
  topology_spec = check_topology_spec(topology)
  profile = _check_flag(profile, "profile")
  if profile:
    if topology_spec not in (None, LOCAL) or costs is not None:
      raise TopologyError(
          "gplace.optimize: profile=True measures this machine's devices, "
          "so it takes topology='local' and no costs=; drop profile=True "
          "to place with the given topology or costs.")
    source, topology_spec = profiled_source(fn_or_graph, args,
                                            budget.PROFILE_SHARE * budget_s)
  else:
    source = load_source(fn_or_graph, args)
  problem = resolve_problem(source, topology_spec, costs, calibrated=profile)
  measuring = problem.local and problem.fn is not None
  if problem.local and not problem.calibrated:
    warnings.warn(UncalibratedWarning(
        "gplace.optimize: the local topology's costs are uncalibrated "
        "guesses (simulated times can be off by 2x or more); "
        + ("the top candidates are measured on this machine before one is "
           "chosen. " if measuring else "a graph cannot be run here, so the "
           "choice rests on them. ")
        + "profile=True (with the function) calibrates the simulator "
        "first, within half of budget_s (cached per program and devices)."),
        stacklevel=2)
  n = problem.graph.n_nodes
  if n == 0:
    raise PlacementError(f"graph {problem.graph.name!r} has no nodes; there "
                         "is nothing to place.")
  if chosen.kind == "solver" and n > budget.SOLVER_MAX_NODES:
    raise SearchError(
        f"gplace.optimize: method='solver' takes graphs of at most "
        f"{budget.SOLVER_MAX_NODES} nodes, and {problem.graph.name!r} has "
        f"{n}. Coarsen it first (gplace.coarsen(graph, 'size', "
        "max_groups=...), then place the groups), or use method='search' or "
        "'auto'.")
  loaded = None
  # "auto" applies a policy only when given one: the shipped policy did not
  # make it better (experiments/learning_in_optimize.py, docs/results.md).
  if chosen.kind in ("pretrained", "finetune") or (
      chosen.kind == "auto" and policy is not None):
    loaded = learned.resolve_policy_file(policy, problem.topology)
    if loaded is None and policy is False and chosen.kind != "auto":
      raise SearchError(
          f"gplace.optimize: method={chosen.kind!r} applies a pretrained "
          "policy and policy=False turns it off; drop policy=False, or use "
          "method='auto' (or a search) without learned candidates.")
    if loaded is None and chosen.kind != "auto":
      raise SearchError(
          f"gplace.optimize: method={chosen.kind!r} needs a pretrained "
          f"policy for {problem.topology.name!r} and gplace ships none for "
          f"it (shipped: {', '.join(shipped_topologies()) or 'none'}); pass "
          "policy='path/to/policy.npz' (experiments/configs/pretrain.py "
          "makes one) or use method='auto'.")
  elif policy is not None and policy is not False:
    raise SearchError(
        f"gplace.optimize: policy= is used by methods 'auto', 'pretrained' "
        f"and 'finetune', not {method!r}; drop it or change the method.")

  # Measuring on this machine gets its share of the budget at the end.
  measure_s = budget.measure_reserve_s(budget_s) if measuring else 0
  deadline = began + max(budget_s - measure_s, budget.SEARCH_FLOOR * budget_s)
  notes: list = []
  bound_s = lower_bound(problem.graph, problem.topology, problem.costs)
  with Progress(budget_s, progress) as bar:
    bar.stage("baselines")
    runs = candidates_lib.baseline_runs(
        problem, seed=seed,
        names=[chosen.name] if chosen.kind == "baseline" else None)
    tried = list(runs.best)
    lns_pressure = budget.memory_pressure(runs.best, budget.LNS_PRESSURE)
    if chosen.kind == "auto" and budget.CHAIN_PLAN and (
        budget.CHAIN_PLAN_UNDER_PRESSURE or not lns_pressure):
      # a start for the search
      tried.extend(candidates_lib.chain_candidates(problem))
    phases.show_best(bar, tried)
    single = [c for c in tried if c.label.startswith("single_device")
              and math.isfinite(c.runtime_s)]
    if measuring and single:
      # How slow builds are here sets what the measuring keeps at the end.
      bar.stage("building one placement")
      build_s = measured_lib.first_build_s(
          problem.fn, args, problem.graph, problem.topology, problem.costs,
          single[0])
      if math.isfinite(build_s):
        measure_s = budget.measure_reserve_s(budget_s, build_s)
        deadline = began + max(budget_s - measure_s,
                               budget.SEARCH_FLOOR * budget_s)
    if loaded is not None:
      bar.stage("pretrained policy")
      tried.extend(learned.zero_shot_candidates(
          problem, loaded, seed=seed,
          default_baselines=None if chosen.kind == "baseline"
          else runs.default))
      phases.show_best(bar, tried)
    # The solver where it pays: small graphs, and graphs up to the solver's
    # limit under memory pressure (where single moves stall), or (below)
    # far from the bound after the search.
    pressure = budget.memory_pressure(runs.best)
    blocks = (budget.BLOCK_SHARE_UNDER_PRESSURE if pressure
              else budget.BLOCK_SHARE)
    solver_next = chosen.kind == "solver" or (
        chosen.kind == "auto" and (n <= budget.AUTO_SOLVER_MAX_NODES or (
            n <= budget.SOLVER_MAX_NODES and pressure)))
    # Evidence for re-allocating "auto"'s budget: a phase that stalls.
    stall_s = (max(budget.STALL_SHARE * budget_s, budget.MIN_STALL_S)
               if chosen.kind == "auto" else None)
    trained = (chosen.kind == "auto" and n >= budget.AUTO_POLICY_MIN_NODES
               and budget_s >= budget.AUTO_POLICY_MIN_S)
    if trained:
      bar.stage("GO on this graph")
      policy_s = budget.AUTO_POLICY_SHARE * (deadline - time.perf_counter())
      tried.extend(learned.policy_candidates(
          problem, seed=seed, notes=notes, time_s=policy_s,
          give_up=learned.GiveUp(budget.policy_probe_s(policy_s),
                                 best_of(tried).runtime_s,
                                 budget.AUTO_POLICY_STALL_SHARE * policy_s,
                                 budget.AUTO_POLICY_MIN_GAIN)))
      phases.show_best(bar, tried)
    probed = (chosen.kind == "auto" and budget.PLAN_PROBE and not trained
              and max_evaluations is None and runs.default
              and n >= budget.LNS_LARGE_MIN_NODES
              and lns_pressure
              and phases.plan_probe(
                  problem, runs, tried, seed=seed, bound_s=bound_s, bar=bar,
                  probe_s=budget.PLAN_PROBE_SHARE * (
                      deadline - time.perf_counter())))
    if chosen.kind in ("auto", "search") and runs.default and not probed:
      left = deadline - time.perf_counter()
      share = (1.0 if chosen.kind != "auto" else
               budget.SEARCH_SHARE if solver_next else
               1.0 - budget.lns_share(n, lns_pressure))
      search_s = max(left * share,
                     budget.SEARCH_FLOOR * budget_s, budget.MIN_SEARCH_S)
      phases.search_phase(
          problem, runs, tried, kind=chosen.kind, name=chosen.name,
          search_s=search_s, seed=seed, max_evaluations=max_evaluations,
          stall_s=stall_s, blocks=blocks, bar=bar)
    solver_s = deadline - time.perf_counter()
    best = best_of(tried)
    if (chosen.kind == "auto" and not solver_next
        and n <= budget.SOLVER_MAX_NODES
        and best is not None and bound_s > 0
        and best.runtime_s > (1 + budget.AUTO_SOLVER_GAP) * bound_s):
      solver_next = True  # evidence: the search left a gap to the bound
    proven = False
    if chosen.kind == "solver" or (
        solver_next and solver_s >= budget.MIN_SOLVER_S):
      if (chosen.kind == "auto"
          and solver_s * (1 - budget.SOLVER_SHARE) >= budget.MIN_LNS_S):
        solver_s *= budget.SOLVER_SHARE   # LNS follows unless it proves
      solver_bound_s, proven = phases.solver_phase(
          problem, tried, solver_s=solver_s, seed=seed, bar=bar,
          probe=chosen.kind == "auto" and n > budget.AUTO_SOLVER_MAX_NODES)
      bound_s = max(bound_s, solver_bound_s)
    lns_s = deadline - time.perf_counter()
    incumbent = best_of(tried)
    at_bound = incumbent is not None and (
        incumbent.runtime_s <= bound_s * (1 + budget.AT_BOUND))
    if runs.default and (chosen.kind == "lns" or (
        chosen.kind == "auto" and not proven and not at_bound
        and lns_s >= budget.MIN_LNS_S)):
      phases.lns_phase(
          problem, runs, tried, lns_s=lns_s, seed=seed, bound_s=bound_s,
          max_evaluations=max_evaluations,
          hedge=chosen.kind == "auto" and not trained and not probed,
          bar=bar,
          order_search=chosen.kind == "auto", blocks=blocks)
    left = deadline - time.perf_counter()
    if chosen.kind == "finetune":
      bar.stage("fine-tuning")
      tried.extend(learned.finetune_candidates(
          problem, loaded, time_s=max(left, 0.0), seed=seed, notes=notes))
      phases.show_best(bar, tried)
    if chosen.kind == "policy":
      bar.stage("policy")
      told = len(notes)
      found = learned.policy_candidates(problem, time_s=max(left, 0.0),
                                        seed=seed, notes=notes)
      if not found and len(notes) == told:  # it trained; nothing fitted
        found = [Candidate(
            "GO trained on this graph: no placement fitted in memory",
            np.zeros(n, np.int32), None, math.inf)]
      tried.extend(found)
      phases.show_best(bar, tried)
    measurements = {}
    if measuring and len(tried) > 1:
      bar.stage("measuring")
      measurements = measured_lib.measure(
          problem.fn, args, problem.graph, problem.topology, problem.costs,
          measured_lib.candidates_to_measure(tried),
          time_s=max(began + budget_s - time.perf_counter(),
                     budget.MIN_MEASURE_S))
  if processes.is_distributed():  # every process returns process 0's
    with processes.exit_when_a_peer_is_lost(rounds.nothing_on_disk):
      tried, measurements, bound_s, notes = processes.broadcast_object(
          (tried, measurements, bound_s, notes))
  tie = (measured_lib.PRESET_TIE if not problem.local else
         measured_lib.CALIBRATED_TIE if problem.calibrated else
         measured_lib.UNCALIBRATED_TIE)
  result = outcome_lib.placement_result(problem, tried, bound_s, began,
                                        measurements, tie, notes)
  return _with_fusion(result, problem, fusion_s, seed, max_evaluations)


def _with_fusion(result: PlacementResult, problem: Problem, fusion_s: float,
                 seed: int, max_evaluations: Optional[int]
                 ) -> PlacementResult:
  """``result`` with a fusion decision searched in ``fusion_s`` seconds
  (:func:`gplace.autoplace.outcome.with_fusion`), or as it is when
  ``fusion_s`` is 0 (``fusion=False``)."""
  if not fusion_s:
    return result
  return outcome_lib.with_fusion(result, problem, time_s=fusion_s, seed=seed,
                                 max_evaluations=max_evaluations)

