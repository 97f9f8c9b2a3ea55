"""GO's learning curve inside ``gplace.optimize``: its best sample against time.

    python experiments/go_curve.py --workloads gnmt4,inception_v3 \
        --seconds 215 --graph_cache /tmp/gcache \
        --out experiments/results/optimality/go_curve_<date>

For each paper-size train step on ``1cpu+4gpu`` (the ``"paper"`` class of
``experiments/optimality.py``), GO is trained on the graph from scratch
as ``method="auto"`` trains it (``gplace.autoplace.policy.policy_candidates``,
chunks of ``CHUNK_STEPS`` steps) for ``--seconds``, with no rule that stops
it early; after every chunk the script records the seconds since training
began (compiling included) and the best placement sampled so far, as a
change against the best baseline in the default schedule. It then prints
that curve at fixed seconds and where the stall rule of
``gplace.autoplace.budget`` (``AUTO_POLICY_STALL_SHARE`` of the time,
``AUTO_POLICY_MIN_GAIN``) would have stopped it. Simulated times; wall
seconds on this machine's load (printed).
"""

import argparse
import math
import os
import sys

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import report
from gplace.autoplace import budget as budget_lib
from gplace.autoplace import policy as learned
from gplace.autoplace.candidates import baseline_runs, best_of
from gplace.autoplace.inputs import Problem
from gplace.workloads import benchmark
# pylint: enable=g-import-not-at-top,wrong-import-position

MARKS_S = (20, 30, 40, 50, 60, 80, 100, 120, 150, 180, 210)


def curve(instance: benchmark.Instance, seconds: float, seed: int
          ) -> tuple[float, list[tuple[float, float]]]:
  """The best baseline's runtime, and ``(seconds, best sampled runtime)``
  after each chunk of GO trained on ``instance`` for ``seconds``."""
  problem = Problem(instance.graph, instance.topology, instance.costs)
  base_s = best_of(baseline_runs(problem, seed=seed).default).runtime_s
  points = []
  plain = learned.stop_reason

  def recording(now, began, deadline, last_chunk_s, best_s, give_up,
                best_before_s=math.nan):
    points.append((now - began, best_s))
    return plain(now, began, deadline, last_chunk_s, best_s, give_up,
                 best_before_s)

  learned.stop_reason = recording
  try:
    learned.policy_candidates(problem, time_s=seconds, seed=seed)
  finally:
    learned.stop_reason = plain
  return base_s, points


def stall_stop(points, stall_s: float, min_gain: float):
  """``(seconds, best)`` where ``learned.stop_reason``'s stall rule stops,
  or None."""
  rule = learned.GiveUp(math.inf, math.inf, stall_s, min_gain)
  seen = []
  for at, best in points:
    before = learned.best_before(seen, at, stall_s)
    seen.append((at, best))
    if learned.stop_reason(at, 0.0, math.inf, 0.0, best, rule,
                           before) == "stalled":
      return at, best
  return None


def row(name: str, base_s: float, points, seconds: float) -> str:
  """One markdown row: the curve at :data:`MARKS_S` and the stall stop."""
  cells = []
  for mark in MARKS_S:
    seen = [best for at, best in points if at <= mark]
    cells.append(report.percent_change(seen[-1], base_s) if seen and
                 mark <= seconds else "")
  stop = stall_stop(points, budget_lib.AUTO_POLICY_STALL_SHARE * seconds,
                    budget_lib.AUTO_POLICY_MIN_GAIN)
  where = (f"{stop[0]:.0f} s, {report.percent_change(stop[1], base_s)}"
           if stop else "never")
  return (f"| {name} | {base_s * 1e3:.4g} | " + " | ".join(cells)
          + f" | {where} |")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--workloads",
                      default=",".join(benchmark.PAPER_WORKLOADS),
                      help="comma-separated paper-size zoo workloads")
  parser.add_argument("--seconds", type=float, default=215.0,
                      help="seconds of training per graph")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the baselines and of GO's training")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  names = [w for w in args.workloads.split(",") if w]
  unknown = sorted(set(names) - set(benchmark.PAPER_WORKLOADS))
  if unknown or not names or args.seconds <= 0:
    raise SystemExit(f"--workloads must name some of "
                     f"{', '.join(benchmark.PAPER_WORKLOADS)} (got "
                     f"{', '.join(unknown) or 'none'}), and --seconds must "
                     "be positive.")
  study = report.Study.create(args.out, __file__, argv)
  specs = {spec.name.split(" ")[0]: spec
           for spec in benchmark.paper_specs(args.graph_cache)}
  stall_share = budget_lib.AUTO_POLICY_STALL_SHARE
  lines = [f"### GO's best sample against time, {benchmark.PAPER_TOPOLOGY}, "
           f"paper-size train steps, seed {args.seed}", "",
           "Simulated; change of the best sampled placement so far against "
           "the best baseline in the default schedule, by wall seconds of "
           "training (compiling included). Stall stop: where the rule "
           f"(not {budget_lib.AUTO_POLICY_MIN_GAIN:.1%} faster than "
           f"{stall_share:g} x {args.seconds:g} s before) stops it. Load "
           f"average at the start: {report.load_average()}.", "",
           "| workload | best baseline ms | "
           + " | ".join(f"{m} s" for m in MARKS_S) + " | stall stop |",
           "|---|---:|" + "---:|" * len(MARKS_S) + "---|"]
  print("\n".join(lines), flush=True)
  for name in names:
    base_s, points = curve(specs[name].build(), args.seconds, args.seed)
    lines.append(row(name, base_s, points, args.seconds))
    print(lines[-1], flush=True)
  end = f"Load average at the end: {report.load_average()}."
  print(end)
  if study is not None:
    study.write(lines + ["", end])
  return 0


if __name__ == "__main__":
  sys.exit(main())
