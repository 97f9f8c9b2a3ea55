"""Tests of gplace.solvers.lns: large-neighbourhood search never loses its
start, reaches the exact solver's optimum on small graphs, keeps memory
caps, is reproducible for a seed in iterations, refuses bad settings with
GplaceErrors, and runs from gplace.optimize (method "lns", and "auto" by
evidence)."""

import math

import numpy as np
import pytest

import gplace
from experiments import lns_window
from gplace import placers, solvers
from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace import phases
from gplace.errors import PlacementError, ScheduleError, SearchError
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset
from gplace.solvers import lns_model, lns_windows
from gplace.solvers.lns_model import (Context, WindowSolution, make_static,
                                      solve_window)
from gplace.sim.topology import (Device, Topology, cost_table,
                                 uniform_links)

FAST = dict(time_limit_s=120.0, solve_time_s=0.5)
LABEL = "lns (CP-SAT windows) from "


def gpus(n=2, memory=12e9, flops=(3e12,)):
  """``n`` GPUs (``flops`` cycled) on fast links, each its own group."""
  devices = tuple(
      Device(f"gpu:{i}", "gpu", peak_flops=flops[i % len(flops)],
             mem_bandwidth=240e9, memory_bytes=memory, launch_overhead_s=1e-6)
      for i in range(n))
  bandwidth, latency = uniform_links(n, 50e9, 1e-6)
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(n),
                  name="gpus")


def test_never_worse_than_its_start_and_reproduced_by_the_simulator():
  graph, topology = random_dag(60, seed=4), preset("1cpu+4gpu")
  start = np.zeros(graph.n_nodes, np.int32)          # all on the CPU
  result = solvers.lns(graph, topology, start=start, max_iterations=6,
                       seed=0, **FAST)
  assert result.runtime_s < result.start_runtime_s
  simulated = gplace.simulate(graph, result.placement, topology,
                              order=result.order)
  assert float(simulated.runtime_s) == pytest.approx(result.runtime_s,
                                                     rel=1e-6)
  assert not result.oom and not bool(simulated.oom)
  assert result.bound_s == pytest.approx(gplace.lower_bound(graph, topology))
  assert result.gap == pytest.approx(result.runtime_s / result.bound_s - 1)
  assert result.iterations == 6 and result.improved >= 1
  assert result.history.shape == (7, 2)
  assert np.all(np.diff(result.history[:, 1]) <= 0)
  assert result.history[-1, 1] == result.runtime_s


def test_a_start_order_is_kept_as_the_floor():
  graph, topology = random_dag(40, seed=2), preset("1cpu+2gpu")
  start = np.asarray(gplace.baselines.get("heft")(graph, topology), np.int32)
  order = gplace.simulate(graph, start, topology,
                          return_schedule=True).order
  in_order = float(gplace.simulate(graph, start, topology,
                                   order=order).runtime_s)
  result = solvers.lns(graph, topology, start=start, start_order=order,
                       max_iterations=3, bound_s=1e-9, **FAST)
  assert result.start_runtime_s == pytest.approx(in_order)
  assert result.runtime_s <= in_order
  assert result.bound_s == pytest.approx(gplace.lower_bound(graph, topology))


@pytest.mark.parametrize("seed", [0, 2])
@pytest.mark.parametrize("lean", [True, False])
def test_reaches_the_exact_optimum_from_a_bad_start(seed, lean, monkeypatch):
  if not lean:    # probing, symmetry and inprocessing at CP-SAT's defaults
    monkeypatch.setattr(lns_model, "WINDOW_PARAMETERS",
                        lns_window.PARAMETER_SETS["full"])
  graph, topology = random_dag(10, seed=seed), gpus(3, flops=(3e12, 1e12))
  exact = solvers.solve(graph, topology, time_limit_s=20.0)
  assert exact.status == "OPTIMAL"
  start = np.ones(graph.n_nodes, np.int32)           # all on a slow GPU
  result = solvers.lns(graph, topology, start=start, window_size=10,
                       max_iterations=4, seed=0, time_limit_s=120.0,
                       solve_time_s=2.0)
  assert result.start_runtime_s > exact.runtime_s * 1.1
  assert result.runtime_s <= exact.runtime_s * (1 + 1e-6)


def test_memory_caps_bind_and_are_kept():
  graph = random_dag(40, seed=2)
  roomy = gpus(2, flops=(3e12, 1e12))
  everything_fast = np.zeros(graph.n_nodes, np.int32)
  peak = float(np.max(gplace.simulate(graph, everything_fast,
                                      roomy).peak_bytes))
  tight = gpus(2, memory=0.6 * peak, flops=(3e12, 1e12))
  # The caps bind: the fast GPU alone cannot hold the graph.
  assert bool(gplace.simulate(graph, everything_fast, tight).oom)
  start = np.asarray(gplace.baselines.get("m_topo")(graph, tight), np.int32)
  assert not bool(gplace.simulate(graph, start, tight).oom)
  result = solvers.lns(graph, tight, start=start, max_iterations=8, seed=1,
                       **FAST)
  simulated = gplace.simulate(graph, result.placement, tight,
                              order=result.order)
  assert not result.oom and not bool(simulated.oom)
  assert np.all(np.asarray(simulated.peak_bytes) <= 0.6 * peak)
  assert result.runtime_s <= result.start_runtime_s


def test_device_constraints_are_kept():
  graph = random_dag(40, seed=5)
  allowed = np.ones((graph.n_nodes, 3), bool)
  allowed[::2, 0] = False                          # even ids off gpu:0
  colocated = np.full(graph.n_nodes, -1, np.int32)
  colocated[[5, 17, 29]] = 0
  graph = graph.replace(allowed_devices=allowed, colocation=colocated)
  topology = gpus(3, flops=(3e12, 1e12, 1e12))
  start = np.ones(graph.n_nodes, np.int32)         # keeps both constraints
  result = solvers.lns(graph, topology, start=start, max_iterations=9,
                       seed=0, **FAST)
  assert result.runtime_s < result.start_runtime_s
  assert np.all(allowed[np.arange(graph.n_nodes), result.placement])
  assert len(set(result.placement[[5, 17, 29]])) == 1
  assert not gplace.simulate(graph, result.placement, topology,
                             order=result.order).constraint_violated


def test_reproducible_for_a_seed_in_iterations():
  graph, topology = random_dag(80, seed=7), preset("1cpu+4gpu")
  runs = [solvers.lns(graph, topology, max_iterations=5, seed=3, **FAST)
          for _ in range(2)]
  np.testing.assert_array_equal(runs[0].placement, runs[1].placement)
  np.testing.assert_array_equal(runs[0].order, runs[1].order)
  np.testing.assert_array_equal(runs[0].history[:, 1], runs[1].history[:, 1])
  assert runs[0].window_size == runs[1].window_size
  assert runs[0].accepted == runs[1].accepted
  assert runs[0].neighbourhoods == runs[1].neighbourhoods


def test_windows_in_parallel_keep_the_start_as_the_floor():
  graph, topology = random_dag(80, seed=7), preset("1cpu+4gpu")
  start = np.zeros(graph.n_nodes, np.int32)          # all on the CPU
  result = solvers.lns(graph, topology, start=start, max_iterations=12,
                       workers=2, seed=1, **FAST)
  assert result.iterations == 12 and result.improved >= 1
  by_kind = result.neighbourhoods
  assert set(by_kind) == set(lns_windows.NEIGHBOURHOODS)
  assert sum(w for w, _, _ in by_kind.values()) == result.iterations
  assert sum(i for _, i, _ in by_kind.values()) == result.improved
  assert sum(s for _, _, s in by_kind.values()) == pytest.approx(
      result.start_runtime_s - result.runtime_s, rel=1e-9)
  assert result.runtime_s < result.start_runtime_s
  simulated = gplace.simulate(graph, result.placement, topology,
                              order=result.order)
  assert float(simulated.runtime_s) == pytest.approx(result.runtime_s,
                                                     rel=1e-6)
  assert np.all(np.diff(result.history[:, 1]) <= 0)


def test_neighbourhoods_are_drawn_by_their_recent_gains():
  rng = np.random.default_rng(0)
  k, draws = len(lns_windows.NEIGHBOURHOODS), 20_000
  explore = 0.3
  even = np.bincount([lns_windows.choose_neighbourhood(rng, np.zeros(k))
                      for _ in range(draws)], minlength=k) / draws
  np.testing.assert_allclose(even, 1.0 / k, atol=0.015)
  gains = np.array([0.0, 0.0, 0.004])
  uniform = np.bincount([lns_windows.choose_neighbourhood(rng, gains, 1.0)
                         for _ in range(draws)], minlength=k) / draws
  np.testing.assert_allclose(uniform, 1.0 / k, atol=0.015)
  skewed = np.bincount([lns_windows.choose_neighbourhood(rng, gains, explore)
                        for _ in range(draws)], minlength=k) / draws
  want = np.full(k, explore / k)
  want[-1] += 1.0 - explore
  np.testing.assert_allclose(skewed, want, atol=0.015)


def test_a_windows_gain_is_its_share_of_runtime_or_excess_memory():
  def scored(runtime_s, excess_bytes=0.0):
    empty = np.zeros(0)
    return lns_windows.Scored(empty, empty, runtime_s, excess_bytes > 0,
                              excess_bytes, empty, empty)
  gain = lns_windows.relative_gain
  assert gain(scored(2.0), scored(1.5)) == pytest.approx(0.25)
  assert gain(scored(2.0), scored(2.5)) == 0.0
  assert gain(scored(2.0, 100.0), scored(3.0)) == 1.0     # fits now
  assert gain(scored(2.0, 100.0), scored(1.0, 40.0)) == pytest.approx(0.6)


def test_a_window_that_finishes_late_is_merged_into_the_incumbent():
  graph, topology = random_dag(30, seed=3), preset("1cpu+2gpu")
  table = cost_table(graph, topology)
  placement = np.asarray(gplace.baselines.get("heft")(graph, topology),
                         np.int32)
  order = np.asarray(gplace.simulate(graph, placement, topology,
                                     return_schedule=True).order, np.int32)
  scored = lns_windows.score(graph, topology, table, placement, order)
  static = make_static(graph, topology, table, scored.runtime_s)
  search = lns_windows.Search(
      static, lns_windows.Incumbent(static, scored),
      lambda p, o: lns_windows.score(graph, topology, table, p, o), seed=0,
      window=8, max_window=64, solve_time_s=0.1)
  # The incumbent moved on (one candidate accepted) after the window left
  # (none by then): it moved op order[2] to another device.
  best = scored._replace(placement=placement.copy())
  best.placement[order[2]] = 1 - min(best.placement[order[2]], 1)
  search.accepted = 1
  lo, hi = 10, 14
  free = order[lo:hi + 1][:2]
  moved = placement.copy()
  moved[free] = (placement[free] + 1) % topology.n_devices
  window_order = order.copy()
  window_order[lo:hi + 1] = order[lo:hi + 1][::-1]   # any permutation
  solution = WindowSolution("OPTIMAL", moved, window_order, 0.0, 0.0, 0.0)
  window = lns_windows.Window(lo, hi, free, accepted=0, kind=0)
  candidates = search._candidates(solution, window, best)
  expected = best.placement.copy()
  expected[free] = moved[free]
  merged_order = best.order.copy()
  merged_order[lo:hi + 1] = window_order[lo:hi + 1]
  assert len(candidates) == 2
  np.testing.assert_array_equal(candidates[0][0], expected)
  np.testing.assert_array_equal(candidates[0][1], merged_order)
  np.testing.assert_array_equal(candidates[1][0], expected)
  np.testing.assert_array_equal(candidates[1][1], best.order)
  # A span that no longer holds the same ops keeps the incumbent's order.
  shifted = window_order.copy()
  shifted[[lo, hi + 1]] = shifted[[hi + 1, lo]]
  candidates = search._candidates(solution._replace(order=shifted), window,
                                  best)
  assert len(candidates) == 1
  np.testing.assert_array_equal(candidates[0][1], best.order)


def random_incumbent(n, seed):
  """A random placement of a random DAG on 1cpu+4gpu, in its default
  schedule, as LNS's incumbent: ``(static, scored, incumbent)``."""
  graph, topology = random_dag(n, seed=seed), preset("1cpu+4gpu")
  table = cost_table(graph, topology)
  placement = np.random.default_rng(seed).integers(
      0, topology.n_devices, graph.n_nodes).astype(np.int32)
  order = np.asarray(gplace.simulate(graph, placement, topology,
                                     return_schedule=True).order, np.int32)
  scored = lns_windows.score(graph, topology, table, placement, order)
  static = make_static(graph, topology, table, scored.runtime_s)
  return static, scored, lns_windows.Incumbent(static, scored)


@pytest.mark.parametrize("seed", [0, 5])
def test_the_critical_path_steps_back_to_what_finished_last(seed):
  static, scored, incumbent = random_incumbent(80, seed)
  path = incumbent.critical()
  finish, start = scored.finish_s, scored.start_s
  assert finish[path[0]] == finish.max()
  for v, before in zip(path[:-1], path[1:]):
    # The producers and the device predecessor of v; the one that
    # finished last (the first of equals) is the next step.
    options = list(static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]])
    if incumbent.prev_same[v] >= 0:
      options.append(incumbent.prev_same[v])
    assert before == options[int(np.argmax(finish[options]))]
  end = path[-1]
  assert start[end] == 0 or (
      static.pred_ptr[end] == static.pred_ptr[end + 1]
      and incumbent.prev_same[end] < 0)


@pytest.mark.parametrize("seed", [1, 7])
def test_the_compiled_host_loops_agree_with_python(seed):
  """The numba kernels of the incumbent (tails after a position, the walk
  back along the critical path) give what the same code gives in Python,
  and link each op to its neighbours in its compute group's order."""
  static, scored, incumbent = random_incumbent(120, seed)
  placement, order, n = scored.placement, scored.order, scored.order.size
  compiled = incumbent.tails_after(-1).copy()
  python = np.zeros_like(compiled)
  lns_windows._tails(order, placement, python, incumbent.next_same,
                     static.succ_ptr, static.succ, static.executed,
                     static.transfer, static.duration, n, -1)
  np.testing.assert_array_equal(compiled, python)
  path = np.empty(n, np.int64)
  size = lns_windows._walk_back(
      int(np.argmax(scored.finish_s)), static.pred_ptr, static.pred,
      incumbent.prev_same, scored.finish_s, scored.start_s, path)
  np.testing.assert_array_equal(incumbent.critical(), path[:size])
  # next_same / prev_same: each op's neighbours in its group's order
  executed = order[static.executed[order]]
  group = static.device_group[placement[executed]]
  for g in np.unique(group):
    members = executed[group == g]
    np.testing.assert_array_equal(incumbent.next_same[members[:-1]],
                                  members[1:])
    np.testing.assert_array_equal(incumbent.prev_same[members[1:]],
                                  members[:-1])
    assert incumbent.prev_same[members[0]] == -1
    assert incumbent.next_same[members[-1]] == -1


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(time_limit_s=-1.0), SearchError, "time_limit_s"),
    (dict(time_limit_s="60"), SearchError, "time_limit_s"),
    (dict(window_size=1), SearchError, "window_size must be an integer >= 2"),
    (dict(window_size=2.5), SearchError, "window_size"),
    (dict(window_size=40, max_window_size=10), SearchError,
     "max_window_size must be an integer >= window_size"),
    (dict(solve_time_s=0.0), SearchError, "solve_time_s"),
    (dict(max_iterations=0), SearchError, "max_iterations"),
    (dict(bound_s=-1.0), SearchError, "bound_s"),
    (dict(stall_s=0.0), SearchError, "stall_s must be None or a positive"),
    (dict(target_s=0.0), SearchError, "target_s must be None or a positive"),
    (dict(target_s=True), SearchError, "target_s"),
    (dict(seed=-1), SearchError, "seed"),
    (dict(workers=0), SearchError, "workers must be None or an integer >= 1"),
    (dict(workers=2.0), SearchError, "workers"),
    (dict(explore=1.5), SearchError, r"explore must be a share in \[0, 1\]"),
    (dict(explore=True), SearchError, "explore"),
    (dict(start=np.zeros(3, np.int32)), PlacementError, None),
    (dict(start=np.full(12, 9, np.int32)), PlacementError, None),
    (dict(start=np.zeros(12, np.int32), start_order=np.arange(5)),
     ScheduleError, "start_order must be a permutation"),
    (dict(start=np.zeros(12, np.int32), start_order=np.arange(12),
          start_priority=np.ones(12)), ScheduleError, "not both"),
])
def test_bad_settings_are_refused(kwargs, error, match):
  graph = random_dag(12, seed=0)
  with pytest.raises(error, match=match):
    solvers.lns(graph, preset("1cpu+2gpu"), **kwargs)


def test_registered_as_a_solver_placer():
  assert placers.get("lns") is solvers.lns_placer
  graph, topology = random_dag(20, seed=1), preset("1cpu+2gpu")
  placement = placers.get("lns")(graph, topology, time_limit_s=2.0)
  assert placement.shape == (20,) and placement.dtype == np.int32


def test_optimize_with_method_lns_states_the_bound_and_gap():
  graph = random_dag(30, seed=3)
  result = gplace.optimize(graph, topology=gpus(2, flops=(3e12, 1e12)),
                           method="lns", budget_s=6.0, progress=False)
  assert any(label.startswith(LABEL) for label in result.candidates)
  assert result.runtime_s == min(result.candidates.values())
  assert result.lower_bound_s == pytest.approx(
      gplace.lower_bound(graph, result.topology))
  assert math.isfinite(result.gap)
  assert "gap to the lower bound" in result.table()


def test_auto_runs_lns_above_the_solvers_size(monkeypatch):
  monkeypatch.setattr(budget, "AUTO_SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "MIN_LNS_S", 0.5)
  result = gplace.optimize(random_dag(30, seed=4),
                           topology=gpus(2, flops=(3e12, 1e12)),
                           budget_s=8.0, progress=False)
  labels = list(result.candidates)
  assert not any(label.startswith("solver") for label in labels)
  assert any(label.startswith(LABEL) for label in labels)


def test_auto_skips_lns_when_the_solver_proves_its_answer(monkeypatch):
  monkeypatch.setattr(budget, "MIN_LNS_S", 0.5)
  result = gplace.optimize(random_dag(8, seed=0),
                           topology=gpus(2, flops=(3e12, 1e12)),
                           budget_s=12.0, progress=False)
  labels = list(result.candidates)
  assert "solver (CP-SAT, optimal)" in labels
  assert not any(label.startswith(LABEL) for label in labels)


def test_larger_graphs_and_memory_pressure_give_lns_more(monkeypatch):
  assert budget.lns_share(budget.LNS_LARGE_MIN_NODES - 1) == budget.LNS_SHARE
  assert budget.lns_share(budget.LNS_LARGE_MIN_NODES) == \
      budget.LNS_SHARE_LARGE
  assert budget.lns_share(budget.LNS_LARGE_MIN_NODES, pressure=True) == \
      budget.LNS_SHARE_PRESSURE
  assert budget.lns_share(budget.LNS_LARGE_MIN_NODES - 1, pressure=True) \
      == budget.LNS_SHARE
  assert 0 < budget.LNS_SHARE < budget.LNS_SHARE_LARGE < \
      budget.LNS_SHARE_PRESSURE < 1
  asked = []
  share = budget.lns_share
  monkeypatch.setattr(budget, "lns_share",
                      lambda n, pressure: asked.append((n, pressure))
                      or share(n, pressure))
  monkeypatch.setattr(budget, "AUTO_SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "SOLVER_MAX_NODES", 0)
  gplace.optimize(random_dag(30, seed=4), topology=gpus(2),
                  budget_s=4.0, progress=False)
  monkeypatch.setattr(budget, "memory_pressure", lambda runs, share=None: True)
  gplace.optimize(random_dag(30, seed=4), topology=gpus(2),
                  budget_s=4.0, progress=False)
  assert asked == [(30, False), (30, True)]


def test_two_starts_race_then_the_fastest_goes_on():
  graph, topology = random_dag(40, seed=6), preset("1cpu+4gpu")
  problem = candidates_lib.Problem(graph, topology)
  starts = [candidates_lib.Candidate(
      f"{name} (default)", np.asarray(placers.get(name)(graph, topology),
                                      np.int32), None, math.inf)
            for name in ("heft", "m_topo")]
  found = candidates_lib.lns_candidates(
      problem, starts, time_s=60.0, seed=0, max_iterations=8,
      race_share=0.5)
  racing = candidates_lib.RACING
  assert [c.label for c in found[:2]] == [LABEL + "heft" + racing,
                                          LABEL + "m_topo" + racing]
  winner = min(found[:2], key=lambda c: c.runtime_s)
  assert len(found) == 3 and found[2].label + racing == winner.label
  assert found[2].runtime_s <= winner.runtime_s
  for c in found:           # each in its own order, as the simulator runs it
    assert c.runtime_s == pytest.approx(float(gplace.simulate(
        graph, c.placement, topology, order=c.order).runtime_s), rel=1e-6)
  alone = candidates_lib.lns_candidates(problem, starts[:1], time_s=60.0,
                                        seed=0, max_iterations=8)
  assert [c.label for c in alone] == [LABEL + "heft"]


def race_starts(monkeypatch, **settings):
  """``optimize`` on a 40-node graph with LNS after the searches and
  ``settings`` in ``budget``: the starts LNS raced, its keyword
  arguments, and the result."""
  monkeypatch.setattr(budget, "AUTO_SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "SOLVER_MAX_NODES", 0)
  monkeypatch.setattr(budget, "MIN_LNS_S", 0.5)
  for name, value in settings.items():
    monkeypatch.setattr(budget, name, value)
  called = []
  race = candidates_lib.lns_candidates
  monkeypatch.setattr(candidates_lib, "lns_candidates",
                      lambda problem, starts, **kw: called.append(
                          (starts, kw)) or race(problem, starts, **kw))
  graph = random_dag(40, seed=6)
  result = gplace.optimize(graph, topology="1cpu+4gpu", budget_s=8.0,
                           max_evaluations=2048, progress=False)
  (starts, kw), = called
  return starts, kw, result


@pytest.mark.parametrize("hedge", [True, False])
def test_auto_races_lns_from_the_classical_plan_too(monkeypatch, hedge):
  starts, kw, result = race_starts(monkeypatch, LNS_LARGE_MIN_NODES=10,
                                   LNS_FROM_PLAN_TOO=hedge)
  assert kw["race_share"] == budget.LNS_RACE_SHARE
  assert starts[0].runtime_s < starts[-1].runtime_s or len(starts) == 1
  if hedge:   # the searches' best, then the fastest classical plan
    assert len(starts) == 2 and " from " not in starts[1].label
    assert starts[1].runtime_s == min(   # not gplace's critical chain
        v for k, v in result.candidates.items()
        if " from " not in k and not k.startswith(candidates_lib.CHAIN))
  else:
    assert len(starts) == 1
  assert result.runtime_s == min(result.candidates.values())


@pytest.mark.parametrize("chain_too", [True, False])
def test_below_large_graphs_lns_races_from_the_fastest_plan(monkeypatch,
                                                            chain_too):
  # Below LNS_LARGE_MIN_NODES ops the race's plan is the fastest plan no
  # search made, gplace's critical-chain plans included.
  assert 40 < budget.LNS_LARGE_MIN_NODES
  starts, _, result = race_starts(monkeypatch, LNS_FROM_CHAIN_TOO=chain_too)
  plans = {k: v for k, v in result.candidates.items() if " from " not in k
           and not k.startswith("solver")}
  if chain_too:
    assert len(starts) == 2 and starts[1].runtime_s == min(plans.values())
    assert starts[0].runtime_s < starts[1].runtime_s
  else:
    assert len(starts) == 1


def test_race_plan_takes_the_fastest_plan_no_search_made():
  graph = random_dag(40, seed=6)
  problem = candidates_lib.Problem(graph, preset("1cpu+4gpu"))
  placement = np.zeros(graph.n_nodes, np.int32)
  plan = lambda label, ms: candidates_lib.Candidate(label, placement, None,
                                                    ms * 1e-3)
  runs = candidates_lib.BaselineRuns(
      default=[plan("heft (default)", 9.0)],
      best=[plan("heft (default)", 9.0), plan("m_topo (own plan)", 9.5)])
  tried = runs.default + [plan(candidates_lib.CHAIN + " (own plan)", 8.0),
                          plan("annealing from heft", 7.0),
                          plan("solver (CP-SAT, unknown)", 7.0)]
  assert phases.race_plan(problem, runs, tried).label == \
      candidates_lib.CHAIN + " (own plan)"
  tried[1] = plan(candidates_lib.CHAIN + " (own plan)", 9.9)
  assert phases.race_plan(problem, runs, tried).label == "heft (default)"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_window_without_links_is_a_looser_relaxation(seed):
  # Dropping the transfers' intervals on links only removes constraints:
  # proven optimal, its makespan is at most the model's with links, and
  # both at most the incumbent's (the hint).
  static, scored, incumbent = random_incumbent(12, seed)
  hi = scored.placement.size - 1
  ctx = Context(scored.placement, scored.order, incumbent.position,
                incumbent.finish, incumbent.tails_after(hi).copy(), 0, hi,
                np.flatnonzero(static.executed), None)
  solved = [solve_window(static, ctx, limit_s=30.0, deterministic_s=30.0,
                         seed=0, memory=False, links=links)
            for links in (True, False)]
  assert [s.status for s in solved] == ["OPTIMAL", "OPTIMAL"]
  assert solved[0].hint_ticks == solved[1].hint_ticks
  assert (solved[1].objective_ticks <= solved[0].objective_ticks
          <= solved[0].hint_ticks)
