"""Annealing over op chains, then ops, against annealing over ops alone.

    python experiments/chain_search.py --evaluations 20000 \
        --graph_cache experiments/cache \
        --out experiments/results/chain_search/<run>

For each workload (default the suite; the paper-size train step on
``1cpu+4gpu``) both searches start from the best baseline in the default
schedule and spend the same number of simulator evaluations: *ops*,
``gplace.search.annealing`` whose moves redraw single ops; *chains, then
ops*, the same annealing whose moves redraw whole op chains
(``gplace.coarsen(graph, "colocation")``: an op with one consumer joins it)
for ``--chain_share`` of the evaluations, then single ops from its best
for the rest, as ``gplace.optimize(method="auto")`` does on big graphs
(``gplace.autoplace.budget.CHAIN_SEARCH_*``). Simulated seconds per step in
the default schedule, change against the best baseline, per seed and the
median over seeds; wall seconds are on this machine's load (printed).
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
from gplace.autoplace import budget as budget_lib
from gplace.errors import GplaceError, or_exit
from gplace.graphs.coarsening import coarsen
from gplace.sim.presets import preset
from experiments.configs.suite import SUITE
# pylint: enable=g-import-not-at-top,wrong-import-position

HEADER = [
    "| workload | ops | chains | best baseline ms | seed | ops: ms | ops: "
    "vs baseline | chains: ms | chains, then ops: ms | chains, then ops: vs "
    "baseline | wall s (ops / chains, then ops) |",
    "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]


def chains_then_ops(graph, topology, labels: np.ndarray, start: np.ndarray,
                    evaluations: int, share: float, seed: int):
  """``(after chains, after ops, wall_s)``: annealing over the op chains
  ``labels`` (``[N]``) for ``share`` of ``evaluations`` from ``start``, then
  over ops from its best."""
  began = time.perf_counter()
  first = max(1, int(evaluations * share))
  chains = search.annealing(graph, topology, seed=seed, budget=first,
                            init=start, groups=labels)
  ops = search.annealing(graph, topology, seed=seed,
                         budget=max(1, evaluations - first),
                         init=np.asarray(chains.placement, np.int32))
  return chains, ops, time.perf_counter() - began


def rows_for(workload: str, args, topology) -> list[str]:
  graph = workloads.load(workload, args.size, "train",
                         cache_dir=args.graph_cache).graph
  best = baselines.best(graph, topology)
  base_s = best.default.runtime_s
  start = np.asarray(best.default.placement, np.int32)
  labels = coarsen(graph, "colocation").group_of
  n_chains = int(labels.max()) + 1
  rows, ops_gain, chain_gain = [], [], []
  for seed in range(args.seeds):
    began = time.perf_counter()
    ops = search.annealing(graph, topology, seed=seed,
                           budget=args.evaluations, init=start)
    ops_s = time.perf_counter() - began
    chains, then, chain_s = chains_then_ops(graph, topology, labels, start,
                                            args.evaluations,
                                            args.chain_share, seed)
    ops_gain.append(ops.runtime_s / base_s - 1)
    chain_gain.append(then.runtime_s / base_s - 1)
    rows.append(
        f"| {workload} | {graph.n_nodes} | {n_chains} | {best.default.name} "
        f"{1e3 * base_s:.4g} | {seed} | {1e3 * ops.runtime_s:.4g} | "
        f"{report.percent_change(ops.runtime_s, base_s)} | "
        f"{1e3 * chains.runtime_s:.4g} | {1e3 * then.runtime_s:.4g} | "
        f"{report.percent_change(then.runtime_s, base_s)} | "
        f"{ops_s:.0f} / {chain_s:.0f} |")
  if args.seeds > 1:
    rows.append(f"| {workload} | | | | median | | "
                f"{100 * np.median(ops_gain):+.1f}% | | | "
                f"{100 * np.median(chain_gain):+.1f}% | |")
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default=",".join(SUITE),
                      help="comma-separated zoo workloads")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a topology preset")
  parser.add_argument("--evaluations", type=int, default=20_000,
                      help="simulator evaluations of each search")
  parser.add_argument("--chain_share", type=float,
                      default=budget_lib.CHAIN_SEARCH_SHARE,
                      help="share of the evaluations that move whole chains")
  parser.add_argument("--seeds", type=int, default=1,
                      help="searches per workload, seeds 0..seeds-1")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  if (args.evaluations < 2 or args.seeds < 1
      or not 0 < args.chain_share < 1):
    raise SystemExit("--evaluations must be at least 2, --seeds at least 1 "
                     "and --chain_share in (0, 1).")
  topology = or_exit(preset, args.topology)
  study = report.Study.create(args.out, __file__, argv)
  lines = [f"### Annealing over op chains, then ops: {args.topology}, "
           f"{args.size} train steps, {args.evaluations} evaluations each, "
           f"{args.chain_share:g} of them over chains", "",
           "Simulated ms per step in the default schedule; both searches "
           "start from the best baseline in that schedule. Load average at "
           f"the start: {report.load_average()}.", ""] + HEADER
  print("\n".join(lines), flush=True)
  report.table_per_workload(args.workloads,
                            lambda w: rows_for(w, args, topology), lines,
                            study, skip=(GplaceError,))
  end = f"Load average at the end: {report.load_average()}."
  print(end)
  if study is not None:
    study.write(lines + ["", end])
  return 0


if __name__ == "__main__":
  sys.exit(main())
