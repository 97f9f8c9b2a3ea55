"""Times gplace.capture on the workload zoo (paper sizes by default).

    python experiments/bench_capture.py --size paper --step train \
        --names gnmt8,transformer_xl8

Prints, per workload: nodes, edges, seconds for jax.make_jaxpr alone and for
the whole capture (median over --repeats; the first, cold capture in its own
column), so the capture's own overhead is
visible next to JAX's tracing. CPU seconds (process time) are shown too,
since this shared 2-core machine's wall times swing with load.
"""

import argparse
import statistics
import time

import jax

import gplace
from gplace import workloads


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--step", default="train", help="train | infer")
  parser.add_argument("--names", default="gnmt8",
                      help="comma-separated workload names to capture")
  parser.add_argument("--repeats", type=int, default=3,
                      help="captures per workload (the fastest is reported)")
  args = parser.parse_args()
  print("| workload | size | step | nodes | edges | make_jaxpr s | capture s "
        "| capture CPU s | cold capture s |")
  print("|---|---|---|---:|---:|---:|---:|---:|---:|")
  for name in args.names.split(","):
    fn, fn_args = workloads.get(name, size=args.size, step=args.step,
                                abstract=True)
    trace, total, cpu = [], [], []
    for _ in range(args.repeats):
      start = time.perf_counter()
      jax.make_jaxpr(lambda *a: fn(*a))(*fn_args)  # fresh: no trace cache
      trace.append(time.perf_counter() - start)
      start, start_cpu = time.perf_counter(), time.process_time()
      graph = gplace.capture(fn, *fn_args, name=name)
      total.append(time.perf_counter() - start)
      cpu.append(time.process_time() - start_cpu)
    print(f"| {name} | {args.size} | {args.step} | {graph.n_nodes} | "
          f"{graph.n_edges} | {statistics.median(trace):.1f} | "
          f"{statistics.median(total):.1f} | {statistics.median(cpu):.1f} | "
          f"{total[0]:.1f} |",
          flush=True)


if __name__ == "__main__":
  main()
