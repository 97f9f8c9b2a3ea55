"""Benchmark: gplace.simulate's dynamic schedule on the zoo's train
steps, through the compiled host list scheduler (gplace.sim.native) and
through the jitted one (GPLACE_NATIVE=0).

The dynamic half of the RL loop's host reward (``rl.reward=
"simulator_host"``, the default schedule ``"best"``; the planned half is
timed by ``bench_schedules.py``): ``K`` samples of one graph per step. For each workload it times ``gplace.simulate``
on ``K`` random placements, the two paths alternated call by call in one
process (medians over repeats, after one untimed call each), checks that
their results are identical, and prints their ratio and the load average.

  python experiments/bench_native.py --size paper --placements 64 \
      --workloads rnnlm2 wavenet2 resnet50 inception_v3 gnmt4 \
      --graph_cache experiments/cache
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from gplace import report, workloads
from gplace.sim import native, simulator
from gplace.sim.presets import preset


def time_paths(graph, topology, placements, repeats: int) -> dict:
  """Median seconds of ``gplace.simulate`` per path (alternated)."""
  previous = os.environ.get("GPLACE_NATIVE")
  times = {"native": [], "jitted": []}
  results = {}
  try:
    for i in range(repeats + 1):
      for path in times:
        os.environ["GPLACE_NATIVE"] = "1" if path == "native" else "0"
        start = time.perf_counter()
        result = simulator.simulate(graph, placements, topology,
                                    schedule="dynamic")
        runtime = np.asarray(result.runtime_s)
        if i:
          times[path].append(time.perf_counter() - start)
        results[path] = (runtime, np.asarray(result.peak_bytes))
  finally:
    if previous is None:
      os.environ.pop("GPLACE_NATIVE", None)
    else:
      os.environ["GPLACE_NATIVE"] = previous
  np.testing.assert_array_equal(results["native"][0], results["jitted"][0])
  np.testing.assert_allclose(results["native"][1], results["jitted"][1],
                             rtol=1e-6)
  return {path: statistics.median(ts) for path, ts in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  report.add_zoo_arguments(parser, ["rnnlm2", "wavenet2", "resnet50"])
  parser.add_argument("--placements", type=int, default=64,
                      help="random placements per call (K)")
  parser.add_argument("--repeats", type=int, default=3,
                      help="timed calls per path (the median is reported)")
  args = parser.parse_args()
  if not native.available():
    raise SystemExit("gplace.sim.native is unavailable (numba missing or "
                     "GPLACE_NATIVE=0); nothing to compare.")
  topology = preset(args.topology)
  rng = np.random.default_rng(0)
  print("| workload | nodes | K | native s | jitted s | jitted / native | "
        "native node-placements/s | load average |")
  print("|---|---:|---:|---:|---:|---:|---:|---|")
  for name in args.workloads:
    graph = workloads.load(name, args.size, "train",
                           cache_dir=args.graph_cache).graph
    placements = rng.integers(0, topology.n_devices,
                              (args.placements, graph.n_nodes))
    medians = time_paths(graph, topology, placements, args.repeats)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"| {name} ({args.size}) | {graph.n_nodes} | {args.placements} | "
          f"{medians['native']:.4f} | {medians['jitted']:.4f} | "
          f"{medians['jitted'] / medians['native']:.1f}x | "
          f"{graph.n_nodes * args.placements / medians['native']:.3g} | "
          f"{load} |", flush=True)


if __name__ == "__main__":
  main()
