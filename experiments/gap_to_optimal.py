"""How far the classical baselines and the CP-SAT solver are from optimal.

    python experiments/gap_to_optimal.py --topology 1cpu+2gpu \
        --sizes 10,20,40 --seeds 2 --workloads wavenet2,rnnlm2 \
        --time_limit_s 30 --out experiments/results/gap_to_optimal/1cpu+2gpu

For each graph (``random_dag`` of each of ``--sizes`` nodes with seeds
``0..--seeds-1``, then the ``--workloads`` zoo graphs, captured at
``--size`` / ``--step``, tiny inference steps by default) it runs every
baseline of ``gplace.baselines`` and simulates each placement in every
schedule the simulator offers (node-id order; ``schedule="dynamic"`` list
scheduling where ``gplace.simulate`` has it; a list scheduler's own
planned order), keeps the best that fits in memory, and then runs
``gplace.solvers.solve`` with that placement as its hint. It prints a
markdown table: the best baseline (name, schedule, seconds), the solver's
answer (seconds in its own order), its status, the bound it proved, the
gaps of both to that bound, ``gplace.lower_bound`` and the solver's wall
time. The bound holds for every memory-feasible placement in every order,
so a gap of 0 is optimal and the gap of the best baseline is how much any
placer could still gain on it.
"""

import argparse
import inspect
import sys
import time

import numpy as np

import gplace
from gplace import baselines, report, solvers, workloads
from gplace.errors import GplaceError, first_line
from gplace.graphs.graph import Graph, random_dag
from gplace.sim.presets import preset
from gplace.sim.topology import Topology


def schedules() -> tuple[str, ...]:
  """The schedules to try: ``id``, ``dynamic`` if the simulator has it, and
  ``own`` (a list scheduler's planned order)."""
  has_dynamic = "schedule" in inspect.signature(gplace.simulate).parameters
  return ("id", "dynamic", "own") if has_dynamic else ("id", "own")


def best_baseline(graph: Graph, topology: Topology, seed: int = 0
                  ) -> tuple[str, str, float, np.ndarray]:
  """``(name, schedule, runtime_s, placement)`` of the fastest baseline in
  its best schedule among those that fit in memory (all of them when none
  does)."""
  names = baselines.names()
  plans = [baselines.plan(name, graph, topology, seed=seed) for name in names]
  placements = np.stack([np.asarray(p.placement, np.int32) for p in plans])
  rows = []                        # (oom, runtime, name, schedule, index)
  for schedule in schedules():
    if schedule == "own":
      for k, name in enumerate(names):
        if name in baselines.schedulers():
          result = gplace.simulate(graph, placements[k], topology,
                                   order=plans[k].order)
          rows.append((bool(result.oom), float(result.runtime_s), name,
                       schedule, k))
      continue
    if schedule == "dynamic":
      result = gplace.simulate(graph, placements, topology,
                               schedule="dynamic")
    else:
      result = gplace.simulate(graph, placements, topology,
                               order=np.arange(graph.n_nodes))
    for k, name in enumerate(names):
      rows.append((bool(result.oom[k]), float(result.runtime_s[k]), name,
                   schedule, k))
  oom, runtime, name, schedule, k = min(rows)
  if oom:
    name += " (OOM)"
  return name, schedule, runtime, placements[k]


def graphs(sizes, seeds, names, size, step, coarsen_to=0):
  """Yields ``(label, graph or None, error or None)``; zoo graphs of more
  than ``coarsen_to > 0`` nodes are coarsened (co-location, then by size)
  to at most that many groups, and the coarse graph is what is placed."""
  for n in sizes:
    for seed in range(seeds):
      yield f"random_dag({n}, seed={seed})", random_dag(n, seed=seed), None
  for name in names:
    label = f"{name} ({size} {step})"
    try:
      graph = workloads.load(name, size, step).graph
      if coarsen_to and graph.n_nodes > coarsen_to:
        graph = gplace.coarsen(graph, "colocation",
                               max_groups=coarsen_to).graph
        label = f"{name} ({size} {step}, coarsened to {graph.n_nodes})"
      yield label, graph, None
    except GplaceError as err:
      yield label, None, first_line(err)


HEADER = [
    "| graph | nodes | best baseline (schedule) | baseline s | solver s | "
    "status | bound s | solver gap | baseline gap | lower_bound s | "
    "solver wall s |",
    "|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|"]


def row(label: str, graph: Graph, topology: Topology, time_limit_s: float,
        num_workers: int, seed: int = 0) -> str:
  """One markdown row: best baseline, then the solver hinted with it."""
  name, schedule, base_s, hint = best_baseline(graph, topology, seed=seed)
  result = solvers.solve(graph, topology, time_limit_s=time_limit_s,
                         num_workers=num_workers, hint=hint, seed=seed)
  status = result.status + (" OOM" if result.oom else "") + (
      " coarsened" if result.coarsened else "")
  return (f"| {label} | {graph.n_nodes} | {name} ({schedule}) | "
          f"{base_s:.4g} | {result.runtime_s:.4g} | {status} | "
          f"{result.bound_s:.4g} | "
          f"{report.percent_change(result.runtime_s, result.bound_s, 2)} | "
          f"{report.percent_change(base_s, result.bound_s, 2)} | "
          f"{gplace.lower_bound(graph, topology):.4g} | "
          f"{result.wall_s:.1f} |")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--topology", default="1cpu+2gpu",
                      help="a gplace.topology preset name")
  parser.add_argument("--sizes", default="10,20,40",
                      help="comma-separated random_dag sizes (nodes)")
  parser.add_argument("--seeds", type=int, default=2,
                      help="random_dag seeds per size (0..seeds-1)")
  parser.add_argument("--workloads", default="wavenet2,rnnlm2",
                      help="comma-separated zoo workloads ('' for none)")
  parser.add_argument("--size", default="tiny", help="tiny | small | paper")
  parser.add_argument("--step", default="infer", help="train | infer")
  parser.add_argument("--time_limit_s", type=float, default=30.0,
                      help="CP-SAT seconds per graph")
  parser.add_argument("--num_workers", type=int, default=2,
                      help="CP-SAT search threads")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the randomised baselines and of CP-SAT")
  parser.add_argument("--coarsen", type=int, default=0,
                      help="coarsen zoo graphs above this many nodes to at "
                      "most this many groups (0: never)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  study = report.Study.create(args.out, __file__, argv)

  topology = preset(args.topology)
  sizes = [int(s) for s in args.sizes.split(",") if s]
  names = [w for w in args.workloads.split(",") if w]
  lines = [f"### Gap to optimal: {args.topology}, CP-SAT "
           f"{args.time_limit_s:g} s x {args.num_workers} workers", "",
           "Simulated seconds per step. Best baseline: the fastest of "
           f"{len(baselines.names())} baselines in its best schedule "
           f"({', '.join(schedules())}) that fits in memory. Solver: "
           "`gplace.solvers.solve` hinted with it, in its own order. Bound: "
           "what the solver proved (at least `gplace.lower_bound`); gaps are "
           "runtime / bound - 1.", ""] + HEADER
  print("\n".join(lines), flush=True)
  for label, graph, error in graphs(sizes, args.seeds, names, args.size,
                                    args.step, args.coarsen):
    start = time.perf_counter()
    if graph is None:
      line = f"| {label} | – | skipped: {error} |"
    else:
      try:
        line = row(label, graph, topology, args.time_limit_s,
                   args.num_workers, seed=args.seed)
      except GplaceError as err:
        line = f"| {label} | {graph.n_nodes} | failed: {first_line(err)} |"
    print(line, flush=True)
    print(f"<!-- {label}: {time.perf_counter() - start:.1f} s -->",
          file=sys.stderr, flush=True)
    lines.append(line)
    if study:
      study.write(lines)
  return 0


if __name__ == "__main__":
  sys.exit(main())
