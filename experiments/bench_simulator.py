"""Benchmark: simulated placements per second, jitted vs the reference.

Random DAGs (``random_dag``, average in-degree 2.5) on preset ``1cpu+4gpu``,
``K`` random placements each. For every size it reports the host-side
``make_problem`` time, the compile time (first call minus a steady call), the
median over repeats of a steady jitted call (wall and this process's CPU
time), node-placement evaluations per second, and the same rate for the
plain-Python reference measured in the same run, with their ratio, for
either schedule (``--schedules static dynamic``): ``static`` is the shared
node-id order (the scan), ``dynamic`` per-placement list scheduling
(:mod:`gplace.sim.dispatch`, critical-path priority), each against the
reference's same rule. The jitted call runs on one core; the column
``gplace.simulate`` is what a caller of ``gplace.simulate`` gets (host-side
checks and priorities included; per-placement schedules run in parts on all
cores, through the compiled host list scheduler of ``gplace.sim.native``,
and, alternated with it in the same run, through the jitted one with
``GPLACE_NATIVE=0``; their results are checked to be identical).

  python experiments/bench_simulator.py --sizes 1000 10000 80000 \
      --placements 256 --repeats 5 --schedules static dynamic \
      --out experiments/results/simulator_speed/bench_simulator
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from gplace import report
from gplace.graphs.graph import random_dag
from gplace.sim.dispatch import dispatch_problem, make_dispatch_problem
from gplace.sim.priority import bottom_level
from gplace.sim.reference import simulate_reference
from gplace.sim import native, runner, simulator
from gplace.sim.simulator import make_problem, simulate_problem
from gplace.sim.presets import preset

JSON_FILE = "bench_simulator.json"


def _timed(fn):
  wall, cpu = time.perf_counter(), time.process_time()
  out = fn()
  return out, time.perf_counter() - wall, time.process_time() - cpu


def bench_size(n_nodes: int, n_placements: int, repeats: int,
               reference_placements: int, chunk: int, seed: int,
               schedule: str = "static") -> dict:
  topology = preset("1cpu+4gpu")
  graph = random_dag(n_nodes, avg_degree=2.5, seed=seed)
  dynamic = schedule == "dynamic"
  if dynamic:
    problem, make_s, _ = _timed(lambda: make_dispatch_problem(graph,
                                                              topology))
    priority = jnp.asarray(bottom_level(graph, topology), jnp.float32)
    jitted = jax.jit(dispatch_problem, static_argnames=("dynamic",),
                     compiler_options=simulator.COMPILER_OPTIONS or None)
    run = lambda p, b: jitted(p, b, priority, dynamic=True)
  else:
    problem, make_s, _ = _timed(lambda: make_problem(graph, topology))
    # Compiled as gplace.simulate compiles it (same per-compile options).
    run = jax.jit(simulate_problem,
                  compiler_options=simulator.COMPILER_OPTIONS or None)
  rng = np.random.default_rng(seed)
  placements = rng.integers(0, topology.n_devices, (n_placements, n_nodes))
  chunk = min(chunk or n_placements, n_placements)
  if jax.default_backend() == "cpu":
    # In blocks, as gplace.simulate runs a large batch there: XLA's CPU
    # one-kernel loops fail to compile from 2,048 rows on.
    chunk = min(chunk, runner.MAX_SCAN_ROWS)
  batches = [jnp.asarray(placements[i:i + chunk], jnp.int32)
             for i in range(0, n_placements, chunk)]

  def call():
    with simulator.one_kernel_loops():  # as gplace.simulate traces it
      return [jax.block_until_ready(run(problem, b).runtime_s)
              for b in batches]

  _, first_s, _ = _timed(call)
  walls, cpus = [], []
  for _ in range(repeats):
    _, wall, cpu = _timed(call)
    walls.append(wall)
    cpus.append(cpu)
  wall, cpu = float(np.median(walls)), float(np.median(cpus))
  evaluations = n_nodes * n_placements

  # What a caller gets: gplace.simulate (validation, priorities, padding;
  # per-placement schedules in parts on the cores), for per-placement
  # schedules through each of its two list schedulers: the compiled host
  # one (gplace.sim.native, the default) and the jitted one
  # (GPLACE_NATIVE=0), alternated call by call; results must be identical.
  def simulate_all():
    return np.concatenate([np.asarray(simulator.simulate(
        graph, placements[i:i + chunk], topology,
        schedule=schedule).runtime_s) for i in range(0, n_placements, chunk)])

  paths = ("native", "jitted") if dynamic and native.available() else (
      "jitted",)
  walls = {path: [] for path in paths}
  results = {}
  previous = os.environ.get("GPLACE_NATIVE")
  for _ in range(repeats + 1):
    for path in paths:
      os.environ["GPLACE_NATIVE"] = "1" if path == "native" else "0"
      results[path], wall_s, _ = _timed(simulate_all)
      walls[path].append(wall_s)
  if previous is None:
    os.environ.pop("GPLACE_NATIVE")
  else:
    os.environ["GPLACE_NATIVE"] = previous
  if len(paths) == 2:
    np.testing.assert_array_equal(results["native"], results["jitted"])
  simulate_wall = float(np.median(walls[paths[0]][1:]))
  jitted_simulate_wall = float(np.median(walls["jitted"][1:]))

  # The reference is slow: fewer placements on big graphs.
  ref_k = max(1, min(reference_placements, 40000 // n_nodes))
  reference = lambda i: simulate_reference(graph, placements[i], topology,
                                           schedule=schedule)
  _, ref_wall, ref_cpu = _timed(lambda: [reference(i) for i in range(ref_k)])
  ref_rate = n_nodes * ref_k / ref_wall
  # Agreement check on the placements the reference ran.
  with simulator.one_kernel_loops():
    fast = np.asarray(run(problem, jnp.asarray(placements[:ref_k],
                                                jnp.int32)).runtime_s)
  ref = np.array([reference(i).runtime_s for i in range(min(ref_k, 2))])
  max_rel_err = float(np.max(np.abs(fast[:len(ref)] - ref) / ref))
  return dict(
      schedule=schedule, n_nodes=n_nodes, n_edges=graph.n_edges,
      placements=n_placements, chunk=chunk, make_problem_s=make_s,
      compile_s=max(first_s - wall, 0.0), median_wall_s=wall,
      median_cpu_s=cpu, rate_wall=evaluations / wall,
      rate_cpu=evaluations / cpu, simulate_wall_s=simulate_wall,
      rate_simulate=evaluations / simulate_wall, simulate_path=paths[0],
      rate_simulate_jitted=evaluations / jitted_simulate_wall,
      reference_placements=ref_k,
      reference_wall_s=ref_wall, reference_cpu_s=ref_cpu,
      reference_rate=ref_rate, speedup_wall=evaluations / wall / ref_rate,
      max_rel_err_vs_reference=max_rel_err)


def describe_path() -> str:
  """Which compilation path the scan takes here, and its vector width."""
  from gplace.sim import kernel  # pylint: disable=g-import-not-at-top
  one_kernel = (kernel._HAS_OP_METADATA and kernel.ONE_KERNEL_LOOPS
                and jax.default_backend() == "cpu")
  width = simulator.COMPILER_OPTIONS.get("xla_cpu_prefer_vector_width",
                                         "XLA default (256)")
  return (f"backend {jax.default_backend()}, jax {jax.__version__}; scan "
          f"path: {'one-kernel CPU loops' if one_kernel else 'plain lax.scan'}"
          f"; preferred vector width: {width}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _print_row(r: dict) -> None:
  print(f"{r['schedule']:>7} n={r['n_nodes']:>6} K={r['placements']} "
        f"(chunk {r['chunk']}): make {r['make_problem_s']:.2f}s compile "
        f"{r['compile_s']:.2f}s median {r['median_wall_s'] * 1e3:.1f} ms "
        f"wall / {r['median_cpu_s'] * 1e3:.1f} ms cpu -> "
        f"{r['rate_wall']:.3g}/s wall, {r['rate_cpu']:.3g}/s cpu; "
        f"gplace.simulate ({r['simulate_path']}) {r['rate_simulate']:.3g}/s"
        f" (jitted: {r['rate_simulate_jitted']:.3g}/s); "
        f"reference {r['reference_rate']:.3g}/s; "
        f"speedup {r['speedup_wall']:.0f}x; "
        f"max rel err {r['max_rel_err_vs_reference']:.1e}", flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", type=int, nargs="+",
                      default=[1000, 10000, 80000],
                      help="random_dag node counts")
  parser.add_argument("--placements", type=int, default=256,
                      help="placements simulated per size (K)")
  parser.add_argument("--repeats", type=int, default=5,
                      help="timed calls per size (the median is reported)")
  parser.add_argument("--reference-placements", type=int, default=4,
                      help="placements the reference simulates per size")
  parser.add_argument("--chunk", type=int, default=0,
                      help="placements per jitted call (0: all at once; "
                      "on CPU at most gplace.sim.runner.MAX_SCAN_ROWS)")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the graphs and placements")
  parser.add_argument("--schedules", nargs="+", default=["static"],
                      choices=["static", "dynamic"],
                      help="static: shared id order (scan); dynamic: "
                      "per-placement list scheduling")
  parser.add_argument("--out", default=None,
                      help=f"{report.OUT_HELP}; {JSON_FILE}: every figure")
  args = parser.parse_args()
  study = report.Study.create(args.out, __file__)

  scan_path = describe_path()
  print(scan_path, flush=True)
  rows = []
  for n in args.sizes:
    for schedule in args.schedules:
      rows.append(bench_size(n, args.placements, args.repeats,
                             args.reference_placements, args.chunk,
                             args.seed, schedule))
      _print_row(rows[-1])

  lines = [
      "| schedule | nodes | edges | K | compile s | median ms (wall) | "
      "median ms (cpu) | node-placements/s (wall) | (cpu) | "
      "gplace.simulate /s (wall) | its path | same, jitted path | "
      "reference /s | speedup (gplace.simulate) |", "|---" * 14 + "|"]
  for r in rows:
    lines.append(
        f"| {r['schedule']} | {r['n_nodes']} | {r['n_edges']} | "
        f"{r['placements']} | {r['compile_s']:.2f} | "
        f"{r['median_wall_s'] * 1e3:.1f} | {r['median_cpu_s'] * 1e3:.1f} | "
        f"{r['rate_wall']:.3g} | {r['rate_cpu']:.3g} | "
        f"{r['rate_simulate']:.3g} | {r['simulate_path']} | "
        f"{r['rate_simulate_jitted']:.3g} | {r['reference_rate']:.3g} | "
        f"{r['rate_simulate'] / r['reference_rate']:.0f}x |")
  print()
  print("\n".join(lines))
  if study:
    meta = dict(jax=jax.__version__, backend=jax.default_backend(),
                path=describe_path(),
                machine=platform.machine(), processor=platform.processor(),
                argv=vars(args), load_average=list(os.getloadavg()))
    with open(study.path(JSON_FILE), "w") as f:
      json.dump(dict(meta=meta, rows=rows), f, indent=2)
    print(f"wrote {study.write([scan_path, '', *lines])}")


if __name__ == "__main__":
  main()
