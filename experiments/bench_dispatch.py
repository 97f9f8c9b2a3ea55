"""Benchmark: per-placement schedules (list scheduling) vs the shared-order
scan, simulated placements per second.

Random DAGs (``random_dag``, average in-degree 2.5) on preset ``1cpu+4gpu``,
``K`` random placements. For each size: the median over repeats of a steady
jitted call of ``simulate_problem`` (one shared node-id order) and of
``simulate_dispatch`` (``dynamic=True``, critical-path priority: each
placement list-scheduled on its own), their ratio, and how much faster the
dynamic schedules run than node-id order (mean over the ``K`` placements).

  python experiments/bench_dispatch.py --sizes 300 1000 3000 --placements 16
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from gplace.graphs.graph import random_dag
from gplace.sim import simulator
from gplace.sim.dispatch import dispatch_problem, make_dispatch_problem
from gplace.sim.priority import bottom_level
from gplace.sim.topology import preset


def _median_s(fn, repeats: int) -> float:
  fn()                                          # compile
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def bench_size(n_nodes: int, k: int, repeats: int, seed: int = 0) -> dict:
  topology = preset("1cpu+4gpu")
  graph = random_dag(n_nodes, avg_degree=2.5, seed=seed)
  rng = np.random.default_rng(seed)
  placements = jnp.asarray(
      rng.integers(0, topology.n_devices, (k, n_nodes)), jnp.int32)
  scan_problem = simulator.make_problem(graph, topology)
  scan = jax.jit(simulator.simulate_problem,
                 compiler_options=simulator.COMPILER_OPTIONS or None)

  def run_scan():
    with simulator.one_kernel_loops():
      return jax.block_until_ready(scan(scan_problem, placements).runtime_s)

  problem = make_dispatch_problem(graph, topology)
  priority = jnp.asarray(bottom_level(graph, topology), jnp.float32)

  dispatch = jax.jit(dispatch_problem, static_argnames=("dynamic",),
                     compiler_options=simulator.COMPILER_OPTIONS or None)

  def run_dispatch():
    with simulator.one_kernel_loops():   # as gplace.simulate traces it
      return jax.block_until_ready(dispatch(
          problem, placements, priority, dynamic=True).runtime_s)

  scan_s = _median_s(run_scan, repeats)
  dispatch_s = _median_s(run_dispatch, repeats)
  speedup = np.asarray(run_scan()) / np.asarray(run_dispatch())
  return dict(nodes=n_nodes, k=k, scan_s=scan_s, dispatch_s=dispatch_s,
              ratio=dispatch_s / scan_s,
              dynamic_speedup=float(np.mean(speedup)))


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000],
                      help="random_dag node counts")
  parser.add_argument("--placements", type=int, default=16,
                      help="placements simulated per call (K)")
  parser.add_argument("--repeats", type=int, default=5,
                      help="timed calls per size (the median is reported)")
  args = parser.parse_args(argv)
  print(f"backend {jax.default_backend()}, {jax.devices()[0].device_kind}")
  print("| nodes | K | scan s (id order) | dispatch s (dynamic) | dispatch / "
        "scan | id-order runtime / dynamic runtime |")
  print("|---:|---:|---:|---:|---:|---:|")
  for n in args.sizes:
    r = bench_size(n, args.placements, args.repeats)
    print(f"| {n} | {r['k']} | {r['scan_s']:.4f} | {r['dispatch_s']:.4f} | "
          f"{r['ratio']:.1f}x | {r['dynamic_speedup']:.2f}x |", flush=True)


if __name__ == "__main__":
  main()
