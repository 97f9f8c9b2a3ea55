"""Calibration: measure the local devices so the simulator predicts the
executor.

:func:`profile` ``(fn, *args) -> Profile``: op times, fusion factors, bare
copies, and calibration placements run by the executor (each scored by its
fastest call), fitted by :mod:`gplace.execution.fitting`
(``docs/design.md#calibration-making-the-simulator-predict-the-executor``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from typing import Any, Callable

import numpy as np

from gplace.errors import ExecutionError, check_seed
from gplace.execution import cache as cluster_cache
from gplace.execution import calibration
from gplace.execution import effects
from gplace.execution import executor
from gplace.execution import fitting
from gplace.execution import inputs
from gplace.execution import op_timing
from gplace.execution import partition
from gplace.execution import profile_cache
from gplace.execution import timing
from gplace.execution.calibration import calibration_blocks
from gplace.execution.profile_file import Profile
from gplace.graphs.capture import Program
from gplace.sim import simulator
from gplace.sim.presets import local

# Within ``profile(time_s=T)``: op timing gets at most this share of T ...
OPS_SHARE = 0.3
# ... the fit of the calibration runs is left this share at the end ...
FIT_SHARE = 0.1
# ... and calls per op, copy size and calibration round are at most this.
BUDGET_REPEATS = 3
# Calibration placements within a budget have at most this many blocks
# (each cluster costs a compile: ~0.1-0.3 s on a CPU).
BUDGET_MAX_BLOCKS = 32
# Within a budget, calibration rounds stop once a round made no run's
# fastest call this much faster (a relative gain).
EARLY_STOP_GAIN = 0.02
# Within a budget, fewer calibration placements than this are fitted with
# one factor for links, launches and copies (calibrate_links(joint=True)):
# on a 1,600-op LM step, free factors fitted to two runs missed the other
# placements by 2x (one factor: 1.25x at worst).
MIN_FREE_FIT = 3
# The clock (tests drive it).
_now = time.perf_counter


def _check_time(time_s: Any) -> float | None:
  if time_s is None:
    return None
  if (isinstance(time_s, bool) or not isinstance(time_s, numbers.Real)
      or not math.isfinite(time_s) or time_s <= 0):
    raise ExecutionError(
        f"gplace.profile: time_s must be a positive, finite number of "
        f"seconds or None (no budget), got {time_s!r}; pass e.g. "
        "time_s=30.0.")
  return float(time_s)


class _Clock:
  """Seconds spent, per phase, against an optional budget (``_now`` is
  the clock, so tests can drive it)."""

  def __init__(self, time_s: float | None):
    self.time_s = time_s
    self.start = self._mark = _now()
    self.phases: dict[str, float] = {}

  @staticmethod
  def now() -> float:
    return _now()

  def elapsed(self) -> float:
    return _now() - self.start

  def mark(self, phase: str) -> None:
    """Books the seconds since the last mark to ``phase``."""
    now = _now()
    self.phases[phase] = self.phases.get(phase, 0.0) + now - self._mark
    self._mark = now


def _by_kind(count: int) -> list[int]:
  """Indices of :func:`calibration_blocks`' ``count`` placements in the
  order a budget builds them: the kinds in turn (cut once, few blocks, many
  blocks), so that three of them already span all three."""
  cuts = count // 4
  few = (count - cuts) - (count - cuts) // 2
  groups = [list(range(count - cuts, count)), list(range(few)),
            list(range(few, count - cuts))]
  order = []
  for i in range(max(map(len, groups), default=0)):
    order.extend(g[i] for g in groups if i < len(g))
  return order


def _compile_until(program: Program, placement: np.ndarray,
                   schedule: np.ndarray, devices, clock: _Clock,
                   end_s: float) -> bool:
  """Compiles the clusters the executor will run for ``placement`` in
  ``schedule`` (into the shared cache, where its build finds them), one at
  a time while the clock is before ``end_s``; False if it stopped short."""
  graph = program.graph
  _, order = partition.dispatch_order(
      graph, placement, schedule, devices,
      after=effects.effect_edges(program))
  effectful = set(effects.effectful_nodes(program))
  signatures: dict[int, str] = {}
  for cluster in partition.partition(program, placement, "cluster", order):
    if not cluster.out_vars and effectful.isdisjoint(cluster.nodes):
      continue                       # the executor does not run it either
    if clock.elapsed() > end_s:
      return False
    for node in cluster.nodes:
      signatures.setdefault(node, partition.op_signature(program.nodes[node]))
    cluster_cache.get_or_compile(program, signatures, cluster,
                         devices[cluster.device_index])
  return True


def _calibration_runs(fn, args, kwargs, program: Program, devices, runs,
                      n_singles: int, rounds_asked: int, repeats: int, rng,
                      clock: _Clock, end_s: float | None
                      ) -> tuple[np.ndarray, int, int, bool]:
  """``([R, K] fastest call of each run in each round, runs used, rounds
  used, whether the rounds stopped early)``: each run is built and timed
  once, in ``runs`` order, then timed in interleaved rounds (``repeats``
  calls after one warm-up call each).

  With a budget (``end_s``: seconds since the start), the single-device
  runs (the first ``n_singles``) always run; a placement's clusters are
  compiled one by one while that leaves time to time it and to run one
  more round of everything built before ``end_s`` (a placement cut short
  is dropped, and no later one is tried); rounds go on while one fits,
  and stop early once no run's fastest call improved by
  ``EARLY_STOP_GAIN``.
  """
  graph = program.graph
  placed, first = [], []
  call_s = []                      # one round's seconds per run
  for i, (placement, order) in enumerate(runs):
    if end_s is not None and i >= n_singles:
      one_round = sum(call_s) + max(call_s)
      if not _compile_until(program, placement, order, devices, clock,
                            end_s - 2 * one_round):
        break
    function = executor.place(fn, graph, placement, devices, schedule=order)
    try:
      function.build(*args, **kwargs)
    except Exception:  # pylint: disable=broad-except  (measure reports it)
      pass
    result = timing.measure(function, *args, repeats=repeats, warmup=1,
                            **kwargs)
    placed.append(function)
    first.append(result.min_s)
    call_s.append((repeats + 1) * (result.runtime_s if np.isfinite(
        result.runtime_s) else 0.0))
  clock.mark("calibration_build")
  rounds = [np.array(first)]
  converged = False
  while len(rounds) < rounds_asked and not converged:
    if end_s is not None and clock.elapsed() + sum(call_s) > end_s:
      break
    row = np.full(len(placed), np.nan)
    for i in rng.permutation(len(placed)):
      row[i] = timing.measure(placed[i], *args, repeats=repeats, warmup=1,
                              **kwargs).min_s
    best_before = np.min(rounds, axis=0)
    rounds.append(row)
    if end_s is not None:
      gain = np.where(np.isfinite(best_before) & np.isfinite(row)
                      & (row > 0), best_before / np.where(row > 0, row, 1),
                      1.0)
      converged = np.max(gain, initial=1.0) < 1.0 + EARLY_STOP_GAIN
  clock.mark("calibration_runs")
  return np.stack(rounds), len(placed), len(rounds), converged


def profile(fn: Callable, *args, devices=None, repeats: int = 5,
            transfer_repeats: int = 5, calibration_placements: int = 16,
            calibration_rounds: int = 7, seed: int = 12345,
            time_s: float | None = None, cache: Any = False,
            **kwargs) -> Profile:
  """Calibrates the local devices against one program.

  It compiles and runs the program many times: each distinct op alone on
  each kind of device, then the whole program on each, then
  ``calibration_placements`` placements of it, each timed in
  ``calibration_rounds`` rounds, and fits the executor's costs to those runs.
  Unbounded, that takes seconds for small programs and minutes for a train
  step (a 1,600-op Transformer LM step with adamw on 4 forced CPU devices:
  about 3 minutes on 2 shared cores, 60% of it compiling the placements'
  clusters, 25% timing them, 10% the fit). ``time_s`` bounds it (30 s
  predicts that LM's 16 calibration runs to a median 5% against 1% for the
  full profile's own fit); ``cache=True`` makes it once per program and
  device set.

  Args:
    fn: a jittable function.
    *args, **kwargs: real arguments (arrays; the program is run).
    devices: ``jax.Device`` s, in placement-index order (default: all local
      devices, CPU first, as :func:`gplace.place` uses).
    repeats: timed calls per op and per placed run.
    transfer_repeats: timed copies per transfer size.
    calibration_placements: random placements (:func:`calibration_blocks`)
      that are run with the executor to fit the link and launch factors
      (see :func:`~gplace.execution.calibration.calibrate_links`); 0
      keeps the microbenchmark fit.
    calibration_rounds: interleaved rounds those (and the single-device
      runs) are timed in.
    seed: seed of those placements.
    time_s: a budget in seconds (None: none; every count is done in full).
      Within it: op timing gets at most :data:`OPS_SHARE` of it (3 calls
      per op; the costliest signatures by roofline first, the rest not
      compiled and costed at their roofline times the median ratio of
      measured to roofline), transfers one pair per pair of timing
      classes, the fit :data:`FIT_SHARE` (a coarse grid and descent where
      the whole grid would not fit). The calibration gets what is left:
      the whole program on each kind of device always (so the fit has at
      least those), then placements of at most :data:`BUDGET_MAX_BLOCKS`
      blocks, the three kinds in turn, their clusters compiled one by one
      while time for timing them is left, then rounds of 3 calls until the
      time is up, ``calibration_rounds`` are done, or a round speeds no
      run up by :data:`EARLY_STOP_GAIN`. Fewer than :data:`MIN_FREE_FIT`
      placements are fitted with one factor for links, launches and copies.
      Tracing and the whole-program runs may overrun a tiny budget.
      ``profile.meta`` says what was done and how long each phase took.
    cache: False (default); True: reuse or keep the profile in
      ``$GPLACE_CACHE_DIR`` or ``~/.cache/gplace/profiles``; or that
      directory. A saved profile is reused for the same program (its ops
      and argument shapes and dtypes, not their values), devices, jax
      version and settings, if it was complete or made with at least this
      ``time_s`` (:mod:`gplace.execution.profile_cache`); a reuse is
      logged, and ``profile.meta["cache"]["hit"]`` is True.

  Returns:
    A :class:`Profile`: ``gplace.simulate(profile.graph, placements,
    profile.topology, costs=profile.costs)`` predicts what
    ``gplace.measure(gplace.place(fn, graph, placement))`` measures.

  Raises:
    ExecutionError: a count below its minimum (``repeats``,
      ``transfer_repeats`` and ``calibration_rounds`` >= 1,
      ``calibration_placements`` >= 0), a bad ``seed``, ``time_s``,
      ``cache`` or ``devices``, a cache directory that cannot be written,
      or an argument that is a ``jax.ShapeDtypeStruct`` (profiling runs
      the program: it needs real arrays).
    CaptureError: ``fn`` cannot be traced with these arguments.
  """
  clock = _Clock(None)
  repeats = inputs.check_count(repeats, "gplace.profile: repeats", 1)
  transfer_repeats = inputs.check_count(
      transfer_repeats, "gplace.profile: transfer_repeats", 1)
  calibration_placements = inputs.check_count(
      calibration_placements, "gplace.profile: calibration_placements", 0)
  calibration_rounds = inputs.check_count(
      calibration_rounds, "gplace.profile: calibration_rounds", 1)
  seed = check_seed(seed, "gplace.profile", ExecutionError)
  inputs.check_concrete(args, kwargs, "gplace.profile")
  time_s = clock.time_s = _check_time(time_s)
  directory = profile_cache.cache_dir(cache)
  devices = (inputs.check_devices(devices, "gplace.profile")
             if devices is not None else executor.default_devices())
  # The executor's own trace (cached), so that the ops and clusters compiled
  # here are the ones its placements find in the cache.
  program = cluster_cache.traced_program(fn, args, kwargs)
  graph = program.graph
  clock.mark("trace")
  settings = dict(repeats=repeats, transfer_repeats=transfer_repeats,
                  calibration_placements=calibration_placements,
                  calibration_rounds=calibration_rounds, seed=seed)
  key = None
  if directory is not None:
    key = profile_cache.profile_key(program, devices, settings)
    saved = profile_cache.load(directory, key, time_s)
    if saved is not None:
      return dataclasses.replace(saved, meta={
          **saved.meta, "cache": {"key": key, "hit": True,
                                  "path": profile_cache.entry_path(
                                      directory, key)}})
  budgeted = time_s is not None
  d = len(devices)
  timing_class = op_timing.timing_classes(devices)

  dispatch = np.zeros(d)
  for j, dev in enumerate(devices):
    rep = timing_class[j]
    dispatch[j] = (dispatch[rep] if rep != j
                   else op_timing.dispatch_overhead(dev))
  clock.mark("dispatch")

  op_repeats = min(repeats, BUDGET_REPEATS) if budgeted else repeats
  op_time, n_signatures, n_timed = op_timing.time_ops(
      program, args, kwargs, devices, op_repeats, timing_class, clock,
      time_s=OPS_SHARE * time_s if budgeted else None,
      roofline=local(devices).op_costs(graph) if budgeted else None,
      dispatch=dispatch)
  compute = fitting.compute_times(graph, op_time, dispatch)
  clock.mark("ops")

  latency = np.zeros((d, d))
  bandwidth = np.full((d, d), np.inf)
  copies = min(transfer_repeats, BUDGET_REPEATS) if budgeted else (
      transfer_repeats)
  fitted_links: dict[tuple[int, int], tuple[float, float]] = {}
  for i, src in enumerate(devices):
    for j, dst in enumerate(devices):
      if i == j:
        continue
      # Within a budget, one pair per pair of timing classes (forced CPU
      # devices: one copy between two of them stands for all).
      pair = (timing_class[i], timing_class[j]) if budgeted else (i, j)
      if pair not in fitted_links:
        fitted_links[pair] = op_timing.fit_transfer(src, dst, copies)
      latency[i, j], bandwidth[i, j] = fitted_links[pair]
  clock.mark("transfers")

  # The executor's own costs: the whole program on each device (one
  # cluster), and random placements with long same-device runs that the link
  # calibration fits, each run in the simulator's default schedule on the
  # uncalibrated topology and compute times. Placed programs are timed in
  # interleaved rounds (the fastest call of all rounds), so a burst
  # of load on a shared machine hits all of them alike instead of one.
  singles = [j for j in range(d) if timing_class[j] == j]
  rng = np.random.default_rng(seed)
  blocks = (calibration_blocks(
      graph.n_nodes, d, calibration_placements, rng,
      max_blocks=BUDGET_MAX_BLOCKS if budgeted else 64)
            if d > 1 else np.zeros((0, graph.n_nodes), np.int32))
  if budgeted:
    blocks = blocks[_by_kind(len(blocks))]
  uncalibrated = fitting.measured_topology(local(devices), dispatch,
                                           latency, bandwidth, 1.0)
  began = clock.now()
  schedules = (partition.schedule_orders(simulator.simulate(
      graph, blocks, uncalibrated, costs=compute, return_schedule=True))
               if len(blocks) else np.zeros((0, graph.n_nodes), np.int64))
  simulate_s = (clock.now() - began) / max(len(blocks), 1)  # per placement
  runs = [(np.full(graph.n_nodes, j, np.int32), np.arange(graph.n_nodes))
          for j in singles] + list(zip(blocks, schedules))
  rounds, n_runs, n_rounds, converged = _calibration_runs(
      fn, args, kwargs, program, devices, runs, len(singles),
      calibration_rounds,
      min(max(repeats, 3), BUDGET_REPEATS) if budgeted else max(repeats, 3),
      rng, clock, (1.0 - FIT_SHARE) * time_s if budgeted else None)
  n_placements = n_runs - len(singles)
  blocks, schedules = blocks[:n_placements], schedules[:n_placements]
  executor_s = rounds.min(axis=0)       # NaN (a failed run) stays NaN
  whole = np.zeros(d)
  for i, j in enumerate(singles):
    whole[j] = executor_s[i]

  max_trials = None
  if budgeted:
    per_trial = max(simulate_s * n_placements, 1e-4)
    max_trials = int(max(time_s - clock.elapsed(), 0.0) / per_trial)
  fine_grid = calibration.fine_grid_trials(uncalibrated) <= min(
      calibration.FULL_GRID_TRIALS,
      calibration.FULL_GRID_TRIALS if max_trials is None else max_trials)
  # One or two runs cannot tell links, launches and copies apart.
  joint = budgeted and n_placements < MIN_FREE_FIT
  meta = {
      "time_s": time_s,
      "complete": bool(n_timed == n_signatures
                       and n_placements == len(runs) - len(singles)
                       and (n_rounds == calibration_rounds
                            or converged)),
      "op_signatures": n_signatures, "op_signatures_timed": n_timed,
      "repeats": op_repeats,
      "calibration_placements": n_placements,
      "calibration_placements_asked": calibration_placements,
      "calibration_rounds": n_rounds,
      "calibration_rounds_asked": calibration_rounds,
      "fit_grid": ("none" if not n_placements else "joint" if joint else
                   "full" if fine_grid else "coarse"),
  }
  prof = fitting.fitted_profile(
      graph, local(devices), op_time, dispatch, latency, bandwidth,
      whole[timing_class], blocks, schedules, executor_s[len(singles):],
      clock.elapsed(), meta=meta, max_trials=max_trials, joint=joint)
  clock.mark("fit")
  prof = dataclasses.replace(prof, profile_s=clock.elapsed(), meta={
      **meta, "phases_s": {k: round(v, 3) for k, v in clock.phases.items()}})
  if directory is not None:
    path = profile_cache.store(directory, key, prof)
    prof = dataclasses.replace(prof, meta={
        **prof.meta, "cache": {"key": key, "hit": False, "path": path}})
  return prof
