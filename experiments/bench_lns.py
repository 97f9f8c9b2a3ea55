"""Benchmark: LNS windows per second, and where a window's time goes.

Runs ``gplace.solvers.lns`` from HEFT's placement in one thread for a fixed
number of windows (``max_iterations``: reproducible for a seed, so two
versions of the code that build the same models end at the same runtime)
on benchmark instances (``gplace.workloads.benchmark``), and prints per
graph: windows per second, the share of the wall time CP-SAT's solve calls
took (the rest builds the windows' models and scores their candidates), the
windows whose answer the simulator found out of memory, and the runtime
reached (simulated). Whole-process timings of two versions, paired run by
run, give the speed-up; this script's own figures say where it comes from.

  python experiments/bench_lns.py --classes paper --graphs "bert|gnmt4" \
      --windows 300 --graph_cache experiments/cache
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

import numpy as np
from ortools.sat.python import cp_model

from gplace import baselines
from gplace.errors import or_exit
from gplace.workloads import benchmark

# gplace.solvers.lns is the function; the module holds the search.
lns_module = importlib.import_module("gplace.solvers.lns")


class Probe:
  """Adds up CP-SAT's solve time and the candidates scored out of memory
  (:meth:`install` once; :meth:`reset` before each run)."""

  def __init__(self):
    self.reset()

  def reset(self) -> None:
    self.solve_s, self.oom, self.scored = 0.0, 0, 0

  def install(self) -> None:
    solve, score = cp_model.CpSolver.solve, lns_module.score
    probe = self

    def timed_solve(solver, *args, **kwargs):
      began = time.perf_counter()
      try:
        return solve(solver, *args, **kwargs)
      finally:
        probe.solve_s += time.perf_counter() - began

    def counted_score(*args, **kwargs):
      scored = score(*args, **kwargs)
      probe.scored += 1
      probe.oom += bool(scored.oom)
      return scored

    cp_model.CpSolver.solve = timed_solve
    lns_module.score = counted_score


def run(instance, windows: int, seed: int, probe: Probe) -> dict:
  """One reproducible LNS run from HEFT: its figures."""
  start = np.asarray(baselines.get("heft")(
      instance.graph, instance.topology, costs=instance.costs, seed=seed),
                     np.int32)
  probe.reset()
  began = time.perf_counter()
  result = lns_module.lns(instance.graph, instance.topology,
                          costs=instance.costs, start=start,
                          time_limit_s=3600.0, seed=seed,
                          max_iterations=windows)
  wall = time.perf_counter() - began
  return dict(windows_per_s=result.iterations / wall,
              solve_share=probe.solve_s / wall,
              oom=probe.oom, scored=probe.scored,
              runtime_ms=result.runtime_s * 1e3,
              start_ms=result.start_runtime_s * 1e3, wall_s=wall)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--classes", default="paper",
                      help="benchmark classes, comma-separated (memory, "
                      "homogeneous, paper)")
  parser.add_argument("--graphs", default="bert",
                      help="parts of instance names, '|'-separated")
  parser.add_argument("--windows", type=int, default=300,
                      help="windows per run (LNS's max_iterations)")
  parser.add_argument("--seed", type=int, default=0,
                      help="seeds HEFT, the windows and CP-SAT")
  parser.add_argument("--graph_cache", default=None,
                      help="folder to read / write captured zoo graphs")
  args = parser.parse_args(argv)
  if args.windows < 1:
    raise SystemExit("--windows must be at least 1.")
  specs = or_exit(benchmark.select, args.graphs, args.classes,
                  cache_dir=args.graph_cache)
  print(f"load average {os.getloadavg()[0]:.2f}; {args.windows} windows, "
        f"one thread, seed {args.seed}; runtimes simulated")
  probe = Probe()
  probe.install()
  for spec in specs:
    instance = spec.build()
    figures = run(instance, args.windows, args.seed, probe)
    print(f"{instance.name}: {figures['windows_per_s']:.1f} windows/s, "
          f"CP-SAT {figures['solve_share']:.0%} of the wall time, "
          f"{figures['oom']} of {figures['scored']} candidates out of "
          f"memory, {figures['start_ms']:.4g} -> "
          f"{figures['runtime_ms']:.6g} ms in {figures['wall_s']:.1f} s")
  print(f"load average {os.getloadavg()[0]:.2f}")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
