"""The search controls on the workload suite, next to the best baseline.

    python experiments/search_controls.py --topology 1cpu+4gpu --size paper \
        --budgets 1000,10000 --seeds 3 --graph_cache experiments/cache \
        --out experiments/results/learning_vs_search/search_controls_1cpu+4gpu

For each workload (default the suite: rnnlm2, transformer_xl4, wavenet2,
resnet50, inception_v3, bert, gnmt4; train step) it captures the graph (or
loads ``<graph_cache>/<name>_<size>_<step>.npz``, the same files
``experiments/baselines.py`` writes), runs every baseline of
``gplace.baselines`` and every search of ``gplace.search`` (local search,
simulated annealing, genetic) at each budget of simulator evaluations for
``--seeds`` seeds, and prints a markdown table: each search's simulated
runtime (mean over seeds, and the range), its change against the best
baseline under the simulator's default schedule, the evaluations it spent and
its wall time. The searches start from the best of the cheap baselines
(``gplace.search.INIT_BASELINES``, planned once per workload and passed as
``init``, so the wall time column leaves their planning out) and are scored
under the default schedule, as are the baselines; the best baseline in any
schedule (a list scheduler's own planned op order included) is listed too.
The first search run on a graph also pays the simulator's compilation.
"""

import argparse
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import baselines, report, search, workloads
from gplace.errors import GplaceError
from gplace.sim.presets import preset
from experiments.configs.suite import SUITE
# pylint: enable=g-import-not-at-top,wrong-import-position


def run_searches(graph, topology, searches, budgets, seeds, groups=None,
                 batch_size=64, init=None):
  """``{(search, budget): [SearchResult per seed]}``; ``init`` as in
  ``gplace.search`` (``[C, N]`` starting candidates, or None)."""
  results = {}
  for name in searches:
    kwargs = {"init": init} if groups is None else {"init": init,
                                                    "groups": groups}
    if name != "genetic":
      kwargs["batch_size"] = batch_size
    for budget in budgets:
      results[name, budget] = [
          search.SEARCHES[name](graph, topology, seed=seed, budget=budget,
                                **kwargs)
          for seed in range(seeds)]
  return results


def format_rows(workload, graph, best: baselines.Best,
                results) -> list[str]:
  """Markdown rows of one workload."""
  rows = []
  base_s = best.default.runtime_s
  for (name, budget), runs in results.items():
    runtime = np.array([r.runtime_s for r in runs])
    init_runtime = np.mean([r.init_runtime_s for r in runs])
    rows.append(
        f"| {workload} | {graph.n_nodes} | {best.default.name} {base_s:.4g} "
        f"| {best.any.label} {best.any.runtime_s:.4g} | {name} | "
        f"{budget:g} | {runtime.mean():.4g} | "
        f"{report.mean_change(runtime, base_s, always_range=True)} | "
        f"{report.percent_change(init_runtime, base_s)} | "
        f"{np.mean([r.evaluations for r in runs]):.0f} | "
        f"{np.mean([r.wall_s for r in runs]):.1f} |")
  return rows


HEADER = [
    "| workload | nodes | best baseline, default schedule (s) | best "
    "baseline, any schedule (s) | search | budget | runtime s (mean) | vs "
    "best default baseline: mean [min, max] | start vs best baseline | "
    "evaluations | wall s |",
    "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|"]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default=",".join(SUITE),
                      help="comma-separated workload names")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--step", default="train", help="train | infer")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.topology preset name")
  parser.add_argument("--budgets", default="1000,10000",
                      help="comma-separated simulator-evaluation budgets")
  parser.add_argument("--seeds", type=int, default=3,
                      help="seeds per search and budget (0..seeds-1)")
  parser.add_argument("--searches", default=",".join(search.SEARCHES),
                      help="comma-separated names from gplace.search.SEARCHES")
  parser.add_argument("--groups", default="none",
                      help="none (move nodes) or a coarsening rule whose "
                      "groups move whole (colocation, hsdag)")
  parser.add_argument("--batch_size", type=int, default=64,
                      help="candidates per simulator call (local search and "
                      "annealing; genetic uses its population)")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz); e.g. "
                      "experiments/cache, shared with experiments/baselines.py")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  study = report.Study.create(args.out, __file__, argv)

  topology = preset(args.topology)
  budgets = [int(float(b)) for b in args.budgets.split(",") if b]
  searches = [s for s in args.searches.split(",") if s]
  unknown = [s for s in searches if s not in search.SEARCHES]
  if unknown:
    parser.error(f"unknown searches {unknown}; choose from "
                 f"{list(search.SEARCHES)}")
  groups = None if args.groups == "none" else args.groups
  lines = [f"### Search controls: {args.topology}, size={args.size}, "
           f"{args.step} step, {args.seeds} seeds, moves of "
           f"{'nodes' if groups is None else groups + ' groups'}", "",
           "Simulated seconds per step under the simulator's default "
           "schedule; changes are against the best baseline under the same "
           "schedule (negative = faster). Searches start from the best cheap "
           "baseline (`gplace.search.INIT_BASELINES`).", ""] + HEADER
  print("\n".join(lines), flush=True)

  def rows_of(workload):
    start = time.perf_counter()
    graph = workloads.load(workload, args.size, args.step,
                           cache_dir=args.graph_cache).graph
    print(f"<!-- {workload}: {graph.n_nodes} nodes, graph in "
          f"{time.perf_counter() - start:.1f} s -->", file=sys.stderr,
          flush=True)
    best = baselines.best(graph, topology)
    start = time.perf_counter()
    init, _ = search.initial_placements(graph, topology)
    print(f"<!-- {workload}: starting baselines in "
          f"{time.perf_counter() - start:.1f} s (not in wall s) -->",
          file=sys.stderr, flush=True)
    results = run_searches(graph, topology, searches, budgets, args.seeds,
                           groups=groups, batch_size=args.batch_size,
                           init=init)
    return format_rows(workload, graph, best, results)

  report.table_per_workload(args.workloads, rows_of, lines, study,
                            skip=(GplaceError,))
  return 0


if __name__ == "__main__":
  sys.exit(main())
