"""Large-neighbourhood search at several CP-SAT limits per window.

    python experiments/lns_window.py --graphs "gnmt2 small infer, 1cpu+4acc" \
        --graph_cache experiments/cache [--workers 1,2] [--explore 1,0.3] \
        [--kick_after 300,none] [--start_s 60] [--window_params lean,full] \
        [--constants "defaults;CONTEXT_FACTOR=6;FAST_SHARE=1,SHRINK=0.85"] \
        [--memory_scale 1,1.15,100] \
        --out experiments/results/lns_window/<run>

For each benchmark graph (``gplace.workloads.benchmark``, chosen by name
like ``experiments/optimality.py --graphs``) and each per-window limit of
``--solve_s`` (and each number of worker threads of ``--workers``, and each
share of windows whose neighbourhood is drawn evenly of ``--explore``: 1
ignores what each neighbourhood gained; and each ``--kick_after``, windows
between checks for a memory kick, ``none``: no kicks; and each set of
CP-SAT parameters per window of ``--window_params``; and each group of
``--constants``, constants of ``gplace.solvers.lns_windows`` such as the
window's adaptation, set for its runs and restored after; and each factor
of ``--memory_scale`` on the memory of every device but the CPUs: what
the memory caps cost the search),
``gplace.solvers.lns`` runs for ``--time_s`` wall seconds from its default
start (the best of ``gplace.solvers.HINT_BASELINES`` in
the default schedule), or with ``--start_s`` from ``gplace.optimize``'s
answer in that many seconds (one per seed, shared by every setting), once
per seed. A row gives the windows solved, the
candidates that improved, the change against the start (simulated, in
each answer's own order) and per neighbourhood the windows, those that
improved and what they saved; the
last row per setting is the mean over
seeds. Every setting runs the same seeds from the same start, so the rows
differ by the setting alone; wall seconds follow this machine's load (printed).
"""

import argparse
import contextlib
import dataclasses
import itertools
import os
import sys
from typing import Optional, Sequence

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import gplace
from gplace import report, solvers
from gplace.errors import or_exit
from gplace.solvers import lns_model, lns_windows
from gplace.solvers.lns import KICK_AFTER
from gplace.solvers.lns_windows import EXPLORE
from gplace.workloads import benchmark

from experiments import optimality
# pylint: enable=g-import-not-at-top,wrong-import-position

DEFAULT_GRAPHS = "gnmt2 small infer, 1cpu+4acc"
DEFAULT_LIMITS = "1,0.5,0.25,0.125,0.0625"
HEADER = [
    "| graph | ops | solve s per window | workers | explore | kick after | "
    "seed | windows | improved | start ms | lns ms | vs start | "
    "windows (improved, ms saved) by neighbourhood | kicks | "
    "window params | window constants | memory scale |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    "---|---|---:|"]
#: ``--window_params``: CP-SAT's parameters per window, gplace's
#: (``lns_model.WINDOW_PARAMETERS``), or those with probing, symmetry
#: detection and inprocessing at CP-SAT's defaults.
PARAMETER_SETS = {
    "lean": dict(lns_model.WINDOW_PARAMETERS),
    "full": dict(lns_model.WINDOW_PARAMETERS, cp_model_probing_level=2,
                 symmetry_level=2, use_sat_inprocessing=True),
}


@contextlib.contextmanager
def window_parameters(name: str):
  """Windows solved inside use :data:`PARAMETER_SETS` ``[name]``."""
  kept = lns_model.WINDOW_PARAMETERS
  lns_model.WINDOW_PARAMETERS = PARAMETER_SETS[name]
  try:
    yield
  finally:
    lns_model.WINDOW_PARAMETERS = kept


#: Constants of gplace.solvers.lns_windows that other modules bind at
#: import (setting them here would change nothing).
FIXED_CONSTANTS = ("EXPLORE", "MIN_WINDOW")


@contextlib.contextmanager
def window_constants(group: str):
  """Inside, the ``NAME=VALUE`` constants of ``group`` (comma-separated, or
  ``defaults``) are set in :mod:`gplace.solvers.lns_windows`; restored
  after. SystemExit on an unknown name or a bad value."""
  settings = [] if group == "defaults" else group.split(",")
  fixed = [s for s in settings if s.partition("=")[0] in FIXED_CONSTANTS]
  if fixed:
    raise SystemExit(f"--constants cannot set {fixed[0]!r}: gplace.solvers."
                     f"lns binds it at import, so setting it here would "
                     "change nothing (--explore sets the share of windows "
                     "drawn evenly).")
  kept = {name: getattr(lns_windows, name) for name in dir(lns_windows)
          if name.isupper()}
  try:
    optimality.apply_overrides(settings, module=lns_windows,
                               flag="--constants")
    yield
  finally:
    for name, value in kept.items():
      setattr(lns_windows, name, value)


def scaled_memory(topology: gplace.Topology,
                  scale: float) -> gplace.Topology:
  """``topology`` with the memory of every device but the CPUs times
  ``scale`` (the CPUs' is the host's)."""
  if scale == 1:
    return topology
  return dataclasses.replace(topology, devices=tuple(
      device if device.kind == "cpu" else dataclasses.replace(
          device, memory_bytes=device.memory_bytes * scale)
      for device in topology.devices))


def starts_for(instance: benchmark.Instance, seeds: int,
               start_s: float) -> list[dict]:
  """Per seed, ``lns``'s start arguments: its default (``start_s`` 0), or
  ``gplace.optimize``'s answer in ``start_s`` seconds and its order."""
  if not start_s > 0:
    return [{} for _ in range(seeds)]
  starts = []
  for seed in range(seeds):
    result = gplace.optimize(instance.graph, topology=instance.topology,
                             costs=instance.costs, budget_s=start_s,
                             seed=seed, progress=False)
    starts.append({"start": result.placement, "start_order": result.order})
  return starts


def rows_for(instance: benchmark.Instance, limits: list[float],
             seeds: int, time_s: float,
             workers: Sequence[Optional[int]] = (None,),
             explore: Sequence[float] = (EXPLORE,),
             kicks: Sequence[Optional[int]] = (KICK_AFTER,),
             start_s: float = 0.0,
             parameters: Sequence[str] = ("lean",),
             constants: Sequence[str] = ("defaults",),
             memory: Sequence[float] = (1.0,)) -> list[str]:
  """The table's rows for one graph: one per limit, number of worker
  threads (None: LNS's default), ``explore``, ``kick_after``, set of
  window parameters (:data:`PARAMETER_SETS`), group of window constants
  (:func:`window_constants`), memory scale (:func:`scaled_memory`) and
  seed, then the mean over seeds per setting."""
  graph, rows = instance.graph, []
  starts = starts_for(instance, seeds, start_s)
  for limit, threads, share, kick, params, group, scale in itertools.product(
      limits, workers, explore, kicks, parameters, constants, memory):
    topology = scaled_memory(instance.topology, scale)
    gains = []
    threads = solvers.lns_default_workers() if threads is None else threads
    for seed in range(seeds):
      with window_parameters(params), window_constants(group):
        result = solvers.lns(graph, topology, costs=instance.costs,
                             time_limit_s=time_s, solve_time_s=limit,
                             seed=seed, workers=threads, explore=share,
                             kick_after=kick, **starts[seed])
      gains.append(result.runtime_s / result.start_runtime_s - 1)
      by_kind = ", ".join(
          f"{name} {windows} ({improved}, {-1e3 * saved:+.4g} ms)"
          for name, (windows, improved, saved)
          in result.neighbourhoods.items())
      rows.append(
          f"| {instance.name} | {graph.n_nodes} | {limit:g} | {threads} | "
          f"{share:g} | {kick} | {seed} | "
          f"{result.iterations} | {result.improved} | "
          f"{1e3 * result.start_runtime_s:.4g} | "
          f"{1e3 * result.runtime_s:.4g} | "
          f"{report.percent_change(result.runtime_s, result.start_runtime_s)}"
          f" | {by_kind} | {result.kicks} | {params} | {group} | "
          f"{scale:g} |")
    if seeds > 1:
      rows.append(f"| {instance.name} | | {limit:g} | {threads} | "
                  f"{share:g} | {kick} | mean | | | | | "
                  f"{100 * np.mean(gains):+.1f}% | | | {params} | "
                  f"{group} | {scale:g} |")
  return rows


def _counts(text: str, flag: str, default: Optional[int],
            example: str, none_ok: bool = False) -> list[Optional[int]]:
  """Comma-separated integers >= 1 (and ``none`` where ``none_ok``);
  ``[default]`` (gplace.solvers.lns's) when empty."""
  if not text:
    return [default]
  words = [x.strip() for x in text.split(",") if x.strip()]
  if words and all((none_ok and x == "none") or (x.isdigit() and int(x) >= 1)
                   for x in words):
    return [None if x == "none" else int(x) for x in words]
  also = " or 'none'" if none_ok else ""
  raise SystemExit(f"{flag} must be comma-separated integers >= 1{also}, "
                   f"got {text!r}; pass e.g. {flag} {example}.")


def _parameter_sets(text: str) -> list[str]:
  names = [x.strip() for x in text.split(",") if x.strip()]
  if not names or not all(x in PARAMETER_SETS for x in names):
    raise SystemExit(f"--window_params must be comma-separated names of "
                     f"{sorted(PARAMETER_SETS)}, got {text!r}; pass e.g. "
                     "--window_params lean,full.")
  return names


def _constant_groups(text: str) -> list[str]:
  """``--constants``' groups, each checked (set and restored) up front."""
  groups = [x.strip() for x in text.split(";") if x.strip()]
  if not groups:
    raise SystemExit("--constants must name at least one group, e.g. "
                     "--constants 'defaults;CONTEXT_FACTOR=6'.")
  for group in groups:
    with window_constants(group):
      pass
  return groups


def _scales(text: str) -> list[float]:
  try:
    scales = [float(x) for x in text.split(",") if x.strip()]
  except ValueError:
    scales = []
  if not scales or not all(np.isfinite(x) and x > 0 for x in scales):
    raise SystemExit(f"--memory_scale must be comma-separated positive "
                     f"factors, got {text!r}; pass e.g. --memory_scale "
                     "1,1.15,100.")
  return scales


def _explore(text: str) -> list[float]:
  if not text:
    return [EXPLORE]                   # gplace.solvers.lns's default
  return report.parse_shares(text, "--explore", "1,0.3")


def _limits(text: str) -> list[float]:
  try:
    limits = [float(x) for x in text.split(",") if x]
  except ValueError:
    limits = []
  if not limits or not all(np.isfinite(x) and x > 0 for x in limits):
    raise SystemExit(f"--solve_s must be comma-separated positive seconds, "
                     f"got {text!r}; pass e.g. --solve_s {DEFAULT_LIMITS}.")
  return limits


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--graphs", default=DEFAULT_GRAPHS,
                      help="benchmark graphs whose name contains one of "
                      "these '|'-separated strings")
  parser.add_argument("--classes", default="memory",
                      help="comma-separated benchmark classes to choose from")
  parser.add_argument("--solve_s", default=DEFAULT_LIMITS,
                      help="comma-separated CP-SAT wall seconds per window")
  parser.add_argument("--workers", default="",
                      help="comma-separated LNS worker threads (default: "
                      "gplace.solvers.lns's)")
  parser.add_argument("--explore", default="",
                      help="comma-separated shares of windows whose "
                      "neighbourhood is drawn evenly (default: "
                      "gplace.solvers.lns's; 1: ignore their gains)")
  parser.add_argument("--kick_after", default="",
                      help="comma-separated windows between checks for a "
                      "memory kick, or 'none' (default: gplace.solvers."
                      "lns's)")
  parser.add_argument("--window_params", default="lean",
                      help="comma-separated CP-SAT parameter sets per "
                      "window: lean (gplace's) or full (probing, symmetry "
                      "and inprocessing at CP-SAT's defaults)")
  parser.add_argument("--constants", default="defaults",
                      help="';'-separated groups of comma-separated "
                      "NAME=VALUE constants of gplace.solvers.lns_windows "
                      "(e.g. CONTEXT_FACTOR=6), each group a setting; "
                      "'defaults': none changed")
  parser.add_argument("--memory_scale", default="1",
                      help="comma-separated factors on the memory of "
                      "every device but the CPUs, each a setting (1: the "
                      "graph's caps)")
  parser.add_argument("--start_s", type=float, default=0.0,
                      help="start from gplace.optimize's answer in this "
                      "many seconds (0: LNS's default start)")
  parser.add_argument("--time_s", type=float, default=30.0,
                      help="wall seconds of each LNS run")
  parser.add_argument("--seeds", type=int, default=3,
                      help="runs per graph and limit, seeds 0..seeds-1")
  parser.add_argument("--graph_cache", default=None,
                      help="folder of captured zoo graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  limits = _limits(args.solve_s)
  workers = _counts(args.workers, "--workers", None, "1,2")
  kicks = _counts(args.kick_after, "--kick_after", KICK_AFTER,
                  f"{KICK_AFTER},none", none_ok=True)
  explore = _explore(args.explore)
  parameters = _parameter_sets(args.window_params)
  constants = _constant_groups(args.constants)
  memory = _scales(args.memory_scale)
  if not args.time_s > 0 or args.seeds < 1 or not args.start_s >= 0:
    raise SystemExit("--time_s must be positive, --start_s at least 0 and "
                     "--seeds at least 1.")
  specs = or_exit(benchmark.select, args.graphs, args.classes,
                  args.graph_cache)
  study = report.Study.create(args.out, __file__, argv)
  lines = [f"### LNS at several CP-SAT limits per window: {args.time_s:g} s "
           f"per run, seeds 0-{args.seeds - 1}", "",
           "Simulated ms per step, each in its own order, from "
           + (f"gplace.optimize's answer in {args.start_s:g} s"
              if args.start_s > 0 else
              "the best of gplace.solvers.HINT_BASELINES")
           + ". Load average at the start: "
           f"{report.load_average()}.", ""] + HEADER
  print("\n".join(lines), flush=True)
  report.table_per_workload(
      specs, lambda spec: rows_for(spec.build(), limits, args.seeds,
                                   args.time_s, workers, explore, kicks,
                                   args.start_s, parameters, constants,
                                   memory),
      lines, study)
  report.finish(lines, study)
  return 0


if __name__ == "__main__":
  sys.exit(main())
