"""Benchmark: what each of gplace.simulate's per-placement schedules costs.

The default schedule (``"best"``) runs the dynamic list scheduler and the
planned one (HEFT's insertion rule on the placement, then the planned order
simulated) and keeps the faster. For each workload's train step this times
``gplace.simulate`` on ``K`` placements with ``schedule="dynamic"``,
``"planned"`` and ``"best"``, alternated call by call in one process
(medians over repeats after one untimed call each), on two kinds of
placements: uniform random ones (many transfers, the planner's worst case)
and the HEFT placement with 5% of its ops moved at random (what a learner
samples near a good plan). It prints each schedule's seconds, ``best /
dynamic``, how often the planned schedule was the faster, and the load
average.

  python experiments/bench_schedules.py --size paper --placements 64 \
      --workloads rnnlm2 wavenet2 resnet50 inception_v3 gnmt4 \
      --graph_cache experiments/cache
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from gplace import baselines, report, workloads
from gplace.sim import simulator
from gplace.sim.presets import preset

SCHEDULES = ("dynamic", "planned", "best")


def time_schedules(graph, topology, placements, repeats: int):
  """``({schedule: median s}, fraction planned wins)``, alternated calls."""
  times = {s: [] for s in SCHEDULES}
  runtime = {}
  for i in range(repeats + 1):
    for schedule in SCHEDULES:
      start = time.perf_counter()
      result = simulator.simulate(graph, placements, topology,
                                  schedule=schedule)
      runtime[schedule] = np.asarray(result.runtime_s)
      if i:
        times[schedule].append(time.perf_counter() - start)
  np.testing.assert_array_equal(
      runtime["best"], np.minimum(runtime["dynamic"], runtime["planned"]))
  wins = float(np.mean(runtime["planned"] < runtime["dynamic"]))
  return {s: statistics.median(ts) for s, ts in times.items()}, wins


def placements_near(plan: np.ndarray, n_devices: int, k: int, fraction: float,
                    rng: np.random.Generator) -> np.ndarray:
  """``k`` copies of ``plan`` with ``fraction`` of the ops redrawn."""
  rows = np.tile(plan, (k, 1))
  moved = rng.random(rows.shape) < fraction
  rows[moved] = rng.integers(0, n_devices, int(moved.sum()))
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  report.add_zoo_arguments(parser, ["rnnlm2", "wavenet2", "resnet50"])
  parser.add_argument("--placements", type=int, default=64,
                      help="placements per call (K)")
  parser.add_argument("--repeats", type=int, default=3,
                      help="timed calls per schedule (the median is reported)")
  args = parser.parse_args()
  topology = preset(args.topology)
  rng = np.random.default_rng(0)
  print("| workload | nodes | placements | dynamic s | planned s | best s | "
        "best / dynamic | planned faster | load average |")
  print("|---|---:|---|---:|---:|---:|---:|---:|---|")
  for name in args.workloads:
    graph = workloads.load(name, args.size, "train",
                           cache_dir=args.graph_cache).graph
    heft = np.asarray(baselines.heft(graph, topology), np.int32)
    kinds = {
        "uniform": rng.integers(0, topology.n_devices,
                                (args.placements, graph.n_nodes)),
        "HEFT, 5% moved": placements_near(heft, topology.n_devices,
                                          args.placements, 0.05, rng)}
    for kind, placements in kinds.items():
      medians, wins = time_schedules(graph, topology, placements,
                                     args.repeats)
      load = " ".join(f"{x:.1f}" for x in os.getloadavg())
      print(f"| {name} ({args.size}) | {graph.n_nodes} | {kind} | "
            + " | ".join(f"{medians[s]:.4f}" for s in SCHEDULES)
            + f" | {medians['best'] / medians['dynamic']:.2f}x | "
            f"{100 * wins:.0f}% | {load} |", flush=True)


if __name__ == "__main__":
  main()
