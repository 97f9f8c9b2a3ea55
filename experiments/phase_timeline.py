"""Where ``gplace.optimize``'s budget goes: its phases and what each gained.

Runs ``gplace.optimize`` (method ``"auto"``) on benchmark instances
(``gplace.workloads.benchmark``) and prints, per phase (the stages its
progress bar shows: baselines, GO on the graph, annealing, the joint
search, LNS, ...), when it started, how long it ran, the best runtime when
it ended and what it gained over the best before it (simulated).
Comparing phases' gains per second says where more time would pay.

  python experiments/phase_timeline.py --classes paper --graphs rnnlm2 \
      --budget_s 300 --graph_cache experiments/cache \
      [--set LNS_SHARE_LARGE=0.5]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import NamedTuple

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import gplace
from gplace.autoplace import progress
from gplace.errors import or_exit
from gplace.workloads import benchmark

from experiments import optimality
# pylint: enable=g-import-not-at-top,wrong-import-position


class Phase(NamedTuple):
  """One stage of a run: its name, start and length (wall seconds), and
  the best simulated runtime before and after it (``inf`` when none)."""
  name: str
  start_s: float
  seconds: float
  before_s: float
  after_s: float


class Recorder:
  """Records the stages and best runtimes ``optimize`` reports to its
  progress bar (:meth:`install` once; :meth:`reset` before each run)."""

  def __init__(self):
    self.reset()

  def reset(self) -> None:
    self.began = time.perf_counter()
    self.events = []              # (seconds, "stage" | "best", value)

  def install(self) -> None:
    stage, best = progress.Progress.stage, progress.Progress.best
    recorder = self

    def on_stage(bar, name):
      recorder.events.append((time.perf_counter() - recorder.began,
                              "stage", name))
      return stage(bar, name)

    def on_best(bar, runtime_s):
      recorder.events.append((time.perf_counter() - recorder.began,
                              "best", float(runtime_s)))
      return best(bar, runtime_s)

    progress.Progress.stage = on_stage
    progress.Progress.best = on_best

  def phases(self, end_s: float) -> list[Phase]:
    """The stages recorded, each ending where the next starts (the last
    at ``end_s``), with the best runtime reported before and during it."""
    out, best = [], math.inf
    stages = [(t, v) for t, kind, v in self.events if kind == "stage"]
    for i, (start, name) in enumerate(stages):
      stop = stages[i + 1][0] if i + 1 < len(stages) else end_s
      during = [v for t, kind, v in self.events
                if kind == "best" and start <= t <= stop]
      after = min([best] + during)
      out.append(Phase(name, start, stop - start, best, after))
      best = after
    return out


def line(phase: Phase) -> str:
  """One phase as a printed line (milliseconds, relative gain)."""
  if math.isfinite(phase.before_s) and math.isfinite(phase.after_s):
    gain = f"{phase.after_s / phase.before_s - 1:+.2%}"
  else:
    gain = "n/a"
  after = (f"{phase.after_s * 1e3:.6g} ms" if math.isfinite(phase.after_s)
           else "none")
  return (f"  {phase.start_s:7.1f} s  {phase.name:<20} {phase.seconds:6.1f} s"
          f"  best {after}  {gain}")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--classes", default="paper",
                      help="benchmark classes, comma-separated (memory, "
                      "homogeneous, paper)")
  parser.add_argument("--graphs", default="rnnlm2",
                      help="parts of instance names, '|'-separated")
  parser.add_argument("--budget_s", type=float, default=300.0,
                      help="gplace.optimize's budget per graph")
  parser.add_argument("--seed", type=int, default=0,
                      help="seeds gplace.optimize")
  parser.add_argument("--graph_cache", default=None,
                      help="folder to read / write captured zoo graphs")
  parser.add_argument("--set", action="append", default=[],
                      metavar="NAME=VALUE",
                      help="override a gplace.autoplace.budget constant "
                      "(repeatable), as experiments/optimality.py's --set")
  args = parser.parse_args(argv)
  if not args.budget_s > 0:
    raise SystemExit(f"--budget_s must be positive, got {args.budget_s}.")
  said = optimality.apply_overrides(args.set)
  specs = or_exit(benchmark.select, args.graphs, args.classes,
                  cache_dir=args.graph_cache)
  print(f"load average {os.getloadavg()[0]:.2f}; budget {args.budget_s:g} s,"
        f" seed {args.seed}{'; ' + said if said else ''}; runtimes "
        f"simulated")
  recorder = Recorder()
  recorder.install()
  for spec in specs:
    instance = spec.build()
    recorder.reset()
    result = gplace.optimize(instance.graph, topology=instance.topology,
                             costs=instance.costs, budget_s=args.budget_s,
                             seed=args.seed, progress=False)
    wall = time.perf_counter() - recorder.began
    print(f"{instance.name} ({instance.graph.n_nodes} ops): "
          f"{result.runtime_s * 1e3:.6g} ms in {wall:.1f} s, "
          f"{result.method}")
    for phase in recorder.phases(wall):
      print(line(phase))
  print(f"load average {os.getloadavg()[0]:.2f}")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
