"""What reusing built problems saves `gplace.simulate` (gplace.sim.cache).

    python experiments/bench_problem_cache.py --repeats 5 \
        --graph_cache experiments/cache

Times repeated `gplace.simulate` calls on one graph in one process, each
call either after `gplace.sim.cache.clear()` (the problem is built again,
as before the cache) or with the kept problem, alternating so that load
changes hit both alike; prints the medians and their ratio, and checks the
results are identical. Cases: a 10k-node random DAG in node-id order
(`schedule="static"`, the scan), and paper-size train steps in the default
(dynamic) schedule.

Then one placement per call with a measured cost table, passed as the
caller holds it or frozen (`gplace.sim.cache.freeze`, hashed once for
good): what hashing the table costs a call (`gplace.simulate` hashes it
once per call, however many problems it looks up).
"""

import argparse
import os
import sys
import time

import numpy as np

import gplace
from gplace import workloads
from gplace.graphs.graph import random_dag
from gplace.sim import cache
from gplace.sim.presets import preset


def time_case(graph, placements, topology, schedule: str,
              repeats: int) -> tuple[float, float]:
  """Median seconds per call ``(built every call, kept)``."""
  def call():
    return np.asarray(gplace.simulate(graph, placements, topology,
                                      schedule=schedule).runtime_s)
  reference = call()
  call()                                  # compiled and kept
  times = {"built": [], "kept": []}
  for _ in range(repeats):
    for mode, seconds in times.items():
      if mode == "built":
        cache.clear()
      start = time.perf_counter()
      result = call()
      seconds.append(time.perf_counter() - start)
      np.testing.assert_array_equal(result, reference)
  return float(np.median(times["built"])), float(np.median(times["kept"]))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=5,
                      help="timed calls per mode and case (medians)")
  parser.add_argument("--workloads", default="rnnlm2,resnet50,gnmt4",
                      help="paper-size train steps, dynamic schedule")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz)")
  args = parser.parse_args(argv)
  topology = preset("1cpu+4gpu")
  cases = [("random_dag 10000, static, K=256", random_dag(10000, seed=0),
            256, "static")]
  cases += [(f"{w} paper, dynamic, K=64",
             workloads.load(w, "paper", "train",
                            cache_dir=args.graph_cache).graph, 64, "dynamic")
            for w in args.workloads.split(",") if w]
  print(f"load average {os.getloadavg()[0]:.2f}")
  print("| case | built every call, ms | kept, ms | speed-up |")
  print("|---|---:|---:|---:|")
  for name, graph, k, schedule in cases:
    placements = np.random.default_rng(0).integers(
        0, topology.n_devices, (k, graph.n_nodes)).astype(np.int32)
    built, kept = time_case(graph, placements, topology, schedule,
                            args.repeats)
    print(f"| {name} | {built * 1e3:.1f} | {kept * 1e3:.1f} | "
          f"{built / kept:.2f}x |", flush=True)
  print()
  print("| one placement per call, measured costs | as held, ms | frozen, "
        "ms | ratio |")
  print("|---|---:|---:|---:|")
  for name, graph, _, _ in cases[1:]:
    rng = np.random.default_rng(1)
    table = np.array(topology.op_costs(graph)) * rng.uniform(
        0.5, 2.0, (graph.n_nodes, topology.n_devices))
    placement = rng.integers(0, topology.n_devices, graph.n_nodes)
    held, frozen = time_tables(graph, placement, topology, table,
                               args.repeats)
    print(f"| {name.split(',')[0]} ({graph.n_nodes} ops) | {held * 1e3:.3f} "
          f"| {frozen * 1e3:.3f} | {held / frozen:.2f}x |", flush=True)
  print(f"load average {os.getloadavg()[0]:.2f}")
  return 0


def time_tables(graph, placement, topology, table, repeats: int,
                calls: int = 20) -> tuple[float, float]:
  """Median seconds per call ``(table as held, a frozen copy)``."""
  frozen = cache.freeze(table.copy())
  runs = {"held": table, "frozen": frozen}
  want = gplace.simulate(graph, placement, topology, frozen).runtime_s
  times = {mode: [] for mode in runs}
  for _ in range(repeats):
    for mode, costs in runs.items():
      start = time.perf_counter()
      for _ in range(calls):
        got = gplace.simulate(graph, placement, topology, costs).runtime_s
      times[mode].append((time.perf_counter() - start) / calls)
      assert got == want
  return float(np.median(times["held"])), float(np.median(times["frozen"]))


if __name__ == "__main__":
  sys.exit(main())
