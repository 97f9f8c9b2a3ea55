"""Block moves in gplace's searches: with and without, from one start.

    python experiments/block_moves.py --classes paper --graphs "bert|resnet50" \
        --graph_cache experiments/cache --time_s 30 --shares 0,0.5 \
        --out experiments/results/block_moves/<run>

A block move (``gplace.search.moves.block``) sends a span of the schedule
from one device to another (all its ops there, or the first or last part of
them) or swaps two devices' ops in it. For each benchmark graph
(``gplace.workloads.benchmark``, chosen by name like
``experiments/optimality.py --graphs``), each search of ``--searches``
(``annealing``: over ops, scored in the default schedule; ``joint``:
``gplace.search.joint.joint_annealing``, placement and order together), each
share of moves that are blocks of ``--shares`` and each seed, the search
runs for ``--time_s`` wall seconds from the best baseline in the default
schedule (the joint search from its order). A row gives the evaluations,
the start, what the search found (simulated, the joint search's in its
own order) and the change; the last row per setting is the mean over seeds.
Every setting runs the same seeds from the same start, so the rows differ
by the share alone; evaluations follow this machine's load (printed).
"""

import argparse
import itertools
import os
import sys

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import baselines, report, search
from gplace.errors import or_exit
from gplace.search.joint import joint_annealing
from gplace.sim.simulator import simulate
from gplace.workloads import benchmark
# pylint: enable=g-import-not-at-top,wrong-import-position

SEARCHES = ("annealing", "joint")
HEADER = [
    "| graph | ops | search | block share | seed | evaluations | start ms | "
    "found ms | vs start |",
    "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
BATCH = 64


def run_search(name: str, instance: benchmark.Instance, start: np.ndarray,
               order: np.ndarray, *, share: float, seed: int,
               time_s: float) -> tuple[float, int]:
  """``(runtime_s found, evaluations)`` of one run of search ``name``."""
  common = dict(costs=instance.costs, seed=seed, budget=10**9,
                init=start, batch_size=BATCH, time_limit_s=time_s,
                block_share=share)
  if name == "joint":
    found = joint_annealing(instance.graph, instance.topology,
                            init_order=order, **common)
  else:
    found = search.annealing(instance.graph, instance.topology, **common)
  return float(found.runtime_s), int(found.evaluations)


def rows_for(instance: benchmark.Instance, searches, shares, seeds: int,
             time_s: float) -> list[str]:
  """The table's rows for one graph: one per search, share and seed, then
  the mean over seeds per setting."""
  graph, rows = instance.graph, []
  best = baselines.best(graph, instance.topology, costs=instance.costs)
  start = np.asarray(best.default.placement, np.int32)
  order = np.asarray(simulate(graph, start, instance.topology,
                              instance.costs, return_schedule=True).order)
  start_s = float(best.default.runtime_s)
  for name, share in itertools.product(searches, shares):
    changes = []
    for seed in range(seeds):
      found_s, evaluations = run_search(name, instance, start, order,
                                        share=share, seed=seed,
                                        time_s=time_s)
      changes.append(found_s / start_s - 1)
      rows.append(f"| {instance.name} | {graph.n_nodes} | {name} | "
                  f"{share:g} | {seed} | {evaluations} | "
                  f"{1e3 * start_s:.4g} | {1e3 * found_s:.4g} | "
                  f"{report.percent_change(found_s, start_s)} |")
    if seeds > 1:
      rows.append(f"| {instance.name} | | {name} | {share:g} | mean | | | | "
                  f"{100 * np.mean(changes):+.1f}% |")
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--graphs", default="bert|resnet50",
                      help="benchmark graphs whose name contains one of "
                      "these '|'-separated strings")
  parser.add_argument("--classes", default="paper",
                      help="comma-separated benchmark classes to choose from")
  parser.add_argument("--searches", default=",".join(SEARCHES),
                      help=f"comma-separated searches of {SEARCHES}")
  parser.add_argument("--shares", default="0,0.5",
                      help="comma-separated shares of moves that are blocks")
  parser.add_argument("--time_s", type=float, default=30.0,
                      help="wall seconds of each search")
  parser.add_argument("--seeds", type=int, default=1,
                      help="runs per setting, seeds 0..seeds-1")
  parser.add_argument("--graph_cache", default=None,
                      help="folder of captured zoo graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  shares = report.parse_shares(args.shares, "--shares", "0,0.5")
  searches = [s for s in args.searches.split(",") if s]
  if not searches or not set(searches) <= set(SEARCHES):
    raise SystemExit(f"--searches must be comma-separated names of "
                     f"{SEARCHES}, got {args.searches!r}.")
  if not args.time_s > 0 or args.seeds < 1:
    raise SystemExit("--time_s must be positive and --seeds at least 1.")
  specs = or_exit(benchmark.select, args.graphs, args.classes,
                  args.graph_cache)
  study = report.Study.create(args.out, __file__, argv)
  lines = [f"### Block moves: {args.time_s:g} s per search, seeds "
           f"0-{args.seeds - 1}", "",
           "Simulated ms per step from the best baseline in the default "
           "schedule (annealing: in the default schedule; joint: in its own "
           f"order). Load average at the start: {report.load_average()}.",
           ""] + HEADER
  print("\n".join(lines), flush=True)
  report.table_per_workload(
      specs, lambda spec: rows_for(spec.build(), searches, shares,
                                   args.seeds, args.time_s),
      lines, study)
  report.finish(lines, study)
  return 0


if __name__ == "__main__":
  sys.exit(main())
