"""Executor modes compared: build time and run time, cluster vs op.

    python experiments/bench_executor.py --workload resnet50 --size tiny

Places a workload's inference step with ``--placements`` random placements
with long same-device runs (and one uniform random placement, the worst case
for clusters) on two forced CPU devices, in both modes, starting from a cold
executable cache, and prints per mode: the first build (cold cache), the
median build of the following placements (warm cache), and the median run.
``--schedule`` picks the dispatch order: ``default`` (the simulator's default
schedule of each placement) or ``device_greedy`` (the order before schedules).

Measured before schedules (device-greedy order; resnet50 tiny inference, 300
nodes, 2 forced CPU devices on a loaded 2-core machine, so +-30%):

=========  ==========  ==========  ========  ==============================
mode       cold build  warm build  run       uniform-random placement
=========  ==========  ==========  ========  ==============================
cluster    0.87 s      0.83 s      1.23 ms   38 clusters: 3.1 s / 3.4 ms
op         4.63 s      0.05 s      3.07 ms   210 ops: 0.01 s / 6.2 ms
=========  ==========  ==========  ========  ==============================

(5 placements with 2..16 same-device blocks; warm = median build after the
first placement.)
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=2").strip()

import jax  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_num_cpu_devices", 2)

import argparse  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import numpy as np  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import gplace  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import workloads  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import cache  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import executor  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import calibration  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workload", default="resnet50",
                      help="a zoo workload name")
  parser.add_argument("--size", default="tiny", help="tiny | small | paper")
  parser.add_argument("--placements", type=int, default=5,
                      help="random placements to run")
  parser.add_argument("--repeats", type=int, default=7,
                      help="timed runs per placement")
  parser.add_argument("--schedule", default="default",
                      choices=("default", "device_greedy"),
                      help="the executor's op order: default or device_greedy")
  args_ns = parser.parse_args()
  workload = workloads.load(args_ns.workload, args_ns.size, "infer",
                            runnable=True)
  fn, args, graph = workload.fn, workload.args, workload.graph
  devices = jax.devices()[:2]
  schedule = None if args_ns.schedule == "default" else args_ns.schedule
  rng = np.random.default_rng(0)
  placements = list(calibration.block_placements(
      graph.n_nodes, 2, args_ns.placements, rng))
  uniform = rng.integers(0, 2, graph.n_nodes).astype(np.int32)
  print(f"{args_ns.workload} ({args_ns.size}, infer): {graph.n_nodes} nodes, "
        f"devices {devices}, schedule {args_ns.schedule}")
  print("| mode | placements | cold build s | warm build s (median) | "
        "run ms (median) | clusters | uniform-random: build s / run ms / "
        "clusters |")
  print("|---|---|---|---|---|---|---|")
  for mode in executor.MODES:
    cache.clear_cache()
    builds, runs, clusters = [], [], []
    for placement in placements:
      result = gplace.measure(executor.place(fn, graph, placement, devices,
                                             mode=mode, schedule=schedule),
                              *args, repeats=args_ns.repeats)
      builds.append(result.build_s)
      runs.append(result.runtime_s)
      clusters.append(result.n_clusters)
    worst = gplace.measure(executor.place(fn, graph, uniform, devices,
                                          mode=mode, schedule=schedule), *args,
                           repeats=args_ns.repeats)
    print(f"| {mode} | {len(placements)} | {builds[0]:.2f} | "
          f"{np.median(builds[1:]):.2f} | {np.median(runs) * 1e3:.2f} | "
          f"{min(clusters)}-{max(clusters)} | {worst.build_s:.2f} / "
          f"{worst.runtime_s * 1e3:.2f} / {worst.n_clusters} |", flush=True)


if __name__ == "__main__":
  main()
