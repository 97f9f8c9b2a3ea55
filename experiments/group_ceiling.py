"""What placing groups instead of ops costs: the ceiling of the action space.

    python experiments/group_ceiling.py --size paper \
        --workloads wavenet2,resnet50 --graph_cache experiments/cache \
        --out experiments/results/group_ceiling/paper_1cpu+4gpu

The pure-RL learner (``experiments/configs/quickstart.py``) places at most
``groups.max_groups`` groups of ops (``gplace.rl.grouping``), and every op
runs on its group's device. A placement that splits a group cannot be
represented. This script measures how much that costs, per workload:

* **plans projected onto the groups**: each list scheduler's placement
  (HEFT, m-ETF, m-SCT), run in its own planned order and under the default
  schedule, and the same placement with every group moved to the device most
  of its ops are on (the best the policy could do by imitating that plan);
* **searches around a placement** (``--placement WORKLOAD=best_placement.json``,
  e.g. a pure-RL run's): local search and annealing from it with
  ``--budget`` evaluations, moving whole groups (the policy's action space)
  and moving single ops. If the group moves find nothing and the op moves
  do, the policy sits at a local optimum of its action space, and only a
  finer one can go further. These rows are searches, never learned results.

Runtimes are simulated ms under the default schedule (list schedulers also
in their own planned order); changes are against the best classical plan in
any schedule (every baseline under the default schedule, the list schedulers
also in their own order).
"""

import argparse
import sys
import time

import numpy as np

import gplace
from gplace import baselines, report, search, workloads
from gplace.errors import GplaceError, first_line
from gplace.rl.best_placement_file import read_best_placement
from gplace.rl.grouping import coarsen_for_policy, group_placement
from gplace.sim.presets import preset

PLANNERS = ("heft", "m_etf", "m_sct")
SEARCHES = (("local search", search.local_search),
            ("annealing", search.annealing))


def read_placement(path: str, workload: str, device_names) -> np.ndarray:
  """The placement of ``workload`` in a run's ``best_placement.json``
  (:func:`gplace.rl.best_placement_file.read_best_placement`)."""
  return read_best_placement(path, workload, device_names).placement


def group_majority(placement: np.ndarray, coarsening,
                   n_devices: int) -> np.ndarray:
  """Every op moved to the device most of its group is on (ties: the lowest
  device; :func:`gplace.rl.grouping.group_placement`): ``[N] int32``."""
  groups = group_placement(np.asarray(placement)[None],
                           np.asarray(coarsening.group_of)[None],
                           coarsening.n_groups, n_devices)[0]
  return np.asarray(coarsening.expand(np.asarray(groups)), np.int32)


def simulated_ms(graph, placement, topology, order=None) -> float:
  result = gplace.simulate(graph, placement[None], topology,
                           order=None if order is None else order[None])
  return float(result.runtime_s[0]) * 1e3


def workload_rows(args, name: str, topology) -> list[str]:
  graph = workloads.load(name, args.size, "train",
                         cache_dir=args.graph_cache).graph
  coarsening = coarsen_for_policy(graph, max_groups=args.max_groups,
                                  rule=args.rule, min_nodes=0)
  if coarsening is None:
    return [f"| {name} | {graph.n_nodes} | (no groups: at most "
            f"{args.max_groups} nodes) | | | |"]
  n_groups = coarsening.n_groups
  plans = {p: baselines.plan(p, graph, topology) for p in PLANNERS}
  own = {p: simulated_ms(graph, plan.placement, topology, plan.order)
         for p, plan in plans.items()}
  default = {p: simulated_ms(graph, plan.placement, topology)
             for p, plan in plans.items()}
  others = baselines.run_all(graph, topology, only=[
      b for b in baselines.names() if b not in PLANNERS])
  others_s = gplace.simulate(graph, np.stack(list(others.values())),
                             topology).runtime_s if others else []
  best = min([*own.values(), *default.values()] +
             [float(r) * 1e3 for r in others_s])
  rows = []

  def row(what, ms, extra=""):
    rows.append(f"| {name} | {graph.n_nodes} / {n_groups} | {what} | "
                f"{ms:.4f} | {ms / best - 1:+.1%} | {extra} |")

  for p, plan in plans.items():
    row(f"{p}: own plan", own[p])
    row(f"{p}: default schedule", default[p])
    row(f"{p}: groups at its majority device",
        simulated_ms(graph, group_majority(plan.placement, coarsening,
                                           topology.n_devices), topology))
  if name in args.placements:
    start = read_placement(args.placements[name], name,
                           topology.device_names)
    row("given placement", simulated_ms(graph, start, topology))
    for units, groups in (("groups", coarsening), ("ops", None)):
      for label, fn in SEARCHES:
        t0 = time.time()
        result = fn(graph, topology, init=start, budget=args.budget,
                    groups=groups, seed=args.seed)
        row(f"search: {label} moving {units} from it", result.runtime_s * 1e3,
            f"{result.evaluations} evaluations, {time.time() - t0:.0f} s")
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="paper",
                      help="workload size: tiny | small | paper")
  parser.add_argument("--workloads", default="wavenet2,resnet50",
                      help="comma-separated workload names")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.sim.presets preset")
  parser.add_argument("--max_groups", type=int, default=256,
                      help="the policy's groups.max_groups")
  parser.add_argument("--rule", default="colocation",
                      help="the policy's groups.rule")
  parser.add_argument("--placement", action="append", default=[],
                      metavar="WORKLOAD=PATH",
                      help="a run's best_placement.json to search around")
  parser.add_argument("--budget", type=int, default=12800,
                      help="simulator evaluations per search")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the searches")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs to read and fill")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  study = report.Study.create(args.out, __file__, argv)
  try:
    args.placements = dict(item.split("=", 1) for item in args.placement)
  except ValueError:
    parser.error("--placement takes WORKLOAD=PATH")
  try:
    topology = preset(args.topology)
    lines = [f"### Group ceiling: size={args.size}, {args.topology}, "
             f"{args.rule} groups (at most {args.max_groups})", "",
             "| workload | ops / groups | placement | ms | vs best classical "
             "| |", "|---|---|---|---:|---:|---|"]
    for name in args.workloads.split(","):
      for line in workload_rows(args, name, topology):
        print(line, flush=True)
        lines.append(line)
  except GplaceError as e:
    print(f"error: {first_line(e)}", file=sys.stderr)
    return 2
  if study:
    study.write(lines)
  return 0


if __name__ == "__main__":
  sys.exit(main())
