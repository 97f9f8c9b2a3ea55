"""Benchmark: per-placement schedules (list scheduling) vs the shared-order
scan, simulated placements per second.

Random DAGs (``random_dag``, average in-degree 2.5) on preset ``1cpu+4gpu``,
``K`` random placements. For each size: the median over repeats of a steady
jitted call of ``simulate_problem`` (one shared node-id order) and of
``simulate_dispatch`` (``dynamic=True``, critical-path priority: each
placement list-scheduled on its own), their ratio, and how much faster the
dynamic schedules run than node-id order (mean over the ``K`` placements).
For every graph it also reports the most candidates any placement had at
once (its frontier) and, when that overflows the first 64-slot buffer, the
dispatch time with a buffer wide enough for it from the start (the narrowest
width of ``gplace.sim.dispatch.width_ladder`` that fits: what such a graph
cost before the rank trees of ``gplace.sim.tree_kernel``, which the default
path now falls back to). ``--workloads`` adds zoo train steps (``--size``)
with the same columns.

  python experiments/bench_dispatch.py --sizes 300 1000 3000 --placements 16
  python experiments/bench_dispatch.py --sizes --workloads transformer_xl4 \
      resnet50 inception_v3 --size paper --placements 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from gplace import workloads
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim import simulator
from gplace.sim.dispatch import (BUFFER_WIDTH, dispatch_problem,
                                 make_dispatch_problem, width_ladder)
from gplace.sim.priority import bottom_level
from gplace.sim.presets import preset


def _median_s(fn, repeats: int) -> float:
  fn()                                          # compile
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def frontier(graph, order: np.ndarray) -> int:
  """The most executed nodes that are candidates at once (all producers
  dispatched, itself not yet) when ``graph`` is dispatched in ``order``
  (``[N]``): the buffer width that order needs."""
  position = np.empty(graph.n_nodes, np.int64)
  position[order] = np.arange(graph.n_nodes)
  ready = np.zeros(graph.n_nodes, np.int64)
  np.maximum.at(ready, graph.edge_dst, position[graph.edge_src] + 1)
  executed = graph.kind != NODE_INPUT
  change = np.zeros(graph.n_nodes + 1, np.int64)
  np.add.at(change, ready[executed], 1)
  np.add.at(change, position[executed], -1)
  return int(np.cumsum(change).max())


def bench_size(n_nodes: int, k: int, repeats: int, seed: int = 0,
               graph=None) -> dict:
  """Timings of ``K`` random placements of ``graph`` (default a
  ``random_dag`` of ``n_nodes``)."""
  topology = preset("1cpu+4gpu")
  if graph is None:
    graph = random_dag(n_nodes, avg_degree=2.5, seed=seed)
  n_nodes = graph.n_nodes
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

  dispatch = jax.jit(dispatch_problem, static_argnames=("dynamic", "width"),
                     compiler_options=simulator.COMPILER_OPTIONS or None)

  def run_dispatch(width=BUFFER_WIDTH, field="runtime_s"):
    with simulator.one_kernel_loops():   # as gplace.simulate traces it
      return jax.block_until_ready(getattr(dispatch(
          problem, placements, priority, dynamic=True, width=width), field))

  scan_s = _median_s(run_scan, repeats)
  dispatch_s = _median_s(run_dispatch, repeats)
  speedup = np.asarray(run_scan()) / np.asarray(run_dispatch())
  orders = np.asarray(run_dispatch(field="order"))
  widest = max(frontier(graph, row) for row in orders)
  fits = next(w for w in width_ladder(BUFFER_WIDTH, n_nodes) if w >= widest)
  buffer_s = (_median_s(lambda: run_dispatch(fits), repeats)
              if fits > BUFFER_WIDTH else float("nan"))
  return dict(nodes=n_nodes, k=k, scan_s=scan_s, dispatch_s=dispatch_s,
              ratio=dispatch_s / scan_s, frontier=widest, fits=fits,
              buffer_s=buffer_s, dynamic_speedup=float(np.mean(speedup)))


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", type=int, nargs="*", default=[300, 1000],
                      help="random_dag node counts")
  parser.add_argument("--workloads", nargs="*", default=[],
                      help="zoo workloads (train steps) to add")
  parser.add_argument("--size", default="tiny",
                      choices=("tiny", "small", "paper"),
                      help="size of the --workloads")
  parser.add_argument("--placements", type=int, default=16,
                      help="placements simulated per call (K)")
  parser.add_argument("--repeats", type=int, default=5,
                      help="timed calls per size (the median is reported)")
  args = parser.parse_args(argv)
  print(f"backend {jax.default_backend()}, {jax.devices()[0].device_kind}, "
        f"load average {os.getloadavg()}")
  print("| graph | nodes | K | scan s (id order) | dispatch s (dynamic) | "
        "dispatch / scan | id-order runtime / dynamic runtime | frontier | "
        "buffer that fits: width, s | buffer s / dispatch s |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  graphs = [(f"random_dag:{n}", n, None) for n in args.sizes]
  for name in args.workloads:
    graph = workloads.load(name, args.size, "train").graph
    graphs.append((f"{name} ({args.size})", graph.n_nodes, graph))
  for name, n, graph in graphs:
    r = bench_size(n, args.placements, args.repeats, graph=graph)
    print(f"| {name} | {r['nodes']} | {r['k']} | {r['scan_s']:.4f} | "
          f"{r['dispatch_s']:.4f} | {r['ratio']:.1f}x | "
          f"{r['dynamic_speedup']:.2f}x | {r['frontier']} | {r['fits']}, "
          f"{r['buffer_s']:.4f} | {r['buffer_s'] / r['dispatch_s']:.1f}x |",
          flush=True)


if __name__ == "__main__":
  main()
