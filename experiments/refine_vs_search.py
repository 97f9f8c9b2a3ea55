"""Per-op refinement vs local search from the same placement, at equal
evaluations.

    python experiments/refine_vs_search.py --size paper \
        --workloads wavenet2,resnet50 --evaluations 3200 --seeds 3 \
        --runs_dir /tmp/gplace_runs --graph_cache experiments/cache \
        --out experiments/results/learning_vs_search/refine_vs_search

For each workload, the quickstart's pure-RL run (GO over op groups, no warm
start, no search; ``--rl_evaluations`` = steps x 64 samples) is trained in
``--runs_dir/<workload>`` (a finished run there is resumed, so its RL is paid
once), and its greedy placement is the start of the second stage. Then, for
each seed, with ``--evaluations`` each:

* **refined per op** (learned): :func:`gplace.rl.refine.refine_placement`,
  a per-op policy trained on single-op moves of its own greedy placement
  (per-move credit); its greedy placement and its best own sample;
* **local search over ops** (search): :func:`gplace.search.local_search`
  from the same placement, 64 candidates per step, each moving one op (its
  default), the best accepted if it is faster.

Runtimes are simulated ms under the default schedule; changes are against
the best classical plan in any schedule. Second-stage rows are means over
the seeds with [min, max]. The refined rows are the policy's own
placements; the local-search rows are search, never learned.
"""

import argparse
import os
import sys

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import report, search, workloads
from gplace.autoplace.candidates import baseline_rows
from gplace.errors import GplaceError
from gplace.rl import settings
from gplace.rl import training
from gplace.rl.refine import refine_placement
from gplace.rl.scoring import Scorer
from gplace.sim.presets import preset
from experiments.configs import quickstart
# pylint: enable=g-import-not-at-top,wrong-import-position

HEADER = ["| workload | ops | placement | kind | runtime ms | vs best classical "
          "[min, max] | evaluations | wall s |",
          "|---|---:|---|---|---:|---:|---:|---:|"]


def policy_greedy(args, workload: str):
  """The pure-RL run's ``(greedy placement [N], runtime_s, evaluations)``,
  trained (or resumed) in ``runs_dir/<workload>``."""
  config = quickstart.get_config()
  config.workload, config.workload_size = workload, args.size
  config.topology, config.seed = args.topology, 0
  config.graph_cache = args.graph_cache or ""
  config.progress_bar = config.print_table = False
  steps = args.rl_evaluations // config.rl.num_samples
  config.train.update(num_steps=steps, checkpoint_every=steps)
  result = training.train_experiment(
      settings.from_config(config),
      workdir=os.path.join(args.runs_dir, workload), log=lambda line: None)
  own = result.policy[0]
  return own.greedy_placement, own.greedy_runtime_s, steps * (
      config.rl.num_samples)


def workload_rows(args, workload: str, topology) -> list[str]:
  graph = workloads.load(workload, args.size, "train",
                         cache_dir=args.graph_cache).graph
  best_name, best_s = baseline_rows(graph, topology)[0]
  start, start_s, rl_evaluations = policy_greedy(args, workload)
  reward = Scorer(graph, topology)  # default schedule, inf for OOM
  arms = {}  # name -> (kind, runtimes, evaluations, walls)

  def add(name, kind, runtime_s, evaluations, wall_s):
    entry = arms.setdefault(name, (kind, [], [], []))
    for values, value in zip(entry[1:], (runtime_s, evaluations, wall_s)):
      values.append(value)

  for seed in range(args.seeds):
    res = refine_placement(reward, start, topology.n_devices,
                           evaluations=args.evaluations, seed=seed)
    add("refined per op: greedy", "learned", res.greedy_runtime_s,
        res.evaluations, res.wall_s)
    add("refined per op: best sample", "learned", res.best_sample_runtime_s,
        res.evaluations, res.wall_s)
    found = search.local_search(graph, topology, seed=seed,
                                budget=args.evaluations, init=start,
                                batch_size=64)
    add("local search over ops", "search", found.runtime_s,
        found.evaluations, found.wall_s)

  def row(name, kind, runtime, evaluations, wall):
    return (f"| {workload} | {graph.n_nodes} | {name} | {kind} | "
            f"{np.mean(runtime) * 1e3:.4f} | "
            f"{report.mean_change(runtime, best_s)} | {evaluations} | "
            f"{wall} |")

  rows = [row(f"best classical: {best_name}", "baseline", best_s, 1, "–"),
          row(f"policy greedy after {rl_evaluations} RL evaluations (the "
              "start)", "learned", start_s, rl_evaluations, "–")]
  for name, (kind, runtime, evaluations, wall) in arms.items():
    rows.append(row(name, kind, runtime, f"+{np.mean(evaluations):.0f}",
                    f"{np.mean(wall):.1f}"))
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="rnnlm2,wavenet2",
                      help="comma-separated workload names")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.topology preset name")
  parser.add_argument("--rl_evaluations", type=int, default=12800,
                      help="evaluations of the RL run (steps x 64 samples)")
  parser.add_argument("--evaluations", type=int, default=3200,
                      help="evaluations of each second-stage arm")
  parser.add_argument("--seeds", type=int, default=3,
                      help="second-stage seeds 0..n-1 (RL: seed 0)")
  parser.add_argument("--runs_dir", required=True,
                      help="where the RL runs live (resumed when finished)")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  if args.rl_evaluations < 64 or args.evaluations < 3 or args.seeds < 1:
    parser.error("--rl_evaluations must be >= 64, --evaluations >= 3 and "
                 "--seeds >= 1")
  study = report.Study.create(args.out, __file__, argv)
  topology = preset(args.topology)
  lines = [f"### Per-op refinement vs local search: {args.topology}, "
           f"size={args.size}, {args.evaluations} evaluations per arm after "
           f"{args.rl_evaluations} of RL, {args.seeds} seed(s)", ""] + HEADER
  print("\n".join(lines), flush=True)
  report.table_per_workload(args.workloads,
                            lambda w: workload_rows(args, w, topology), lines,
                            study, skip=(GplaceError,))
  return 0


if __name__ == "__main__":
  sys.exit(main())
