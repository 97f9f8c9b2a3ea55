"""Best placements on hosts of GPUs as the network between them slows.

    python experiments/multihost.py --out experiments/results/multihost

For each zoo training step (``--workloads``) on each multi-host preset
(``--topologies``: hosts of 8 H100s, NVLink inside a host, a 400 Gb/s
network between hosts) with the network between hosts at each of
``--network_gbps`` (the preset's links between hosts get that bandwidth;
NVLink and the latencies stay), it runs every baseline of
``gplace.baselines`` (each in its best schedule) and ``gplace.optimize``
(``--budget_s``), and reports the best placement: its simulated runtime,
the method that found it, the hosts and GPUs it uses, the bytes it sends
between hosts per step (one copy per value and destination device, as the
simulator sends them) and the edges it cuts between hosts and within a
host; next to it the best on one host (``8xh100``) for comparison.
Everything is simulated.
"""

import argparse
import dataclasses
import os
import time

import numpy as np

import gplace
from gplace import baselines, report, workloads
from gplace.sim.presets import preset

WORKLOADS = ("transformer_xl4", "bert", "gnmt4")
TOPOLOGIES = ("2x8h100", "4x8h100")
NETWORK_GBPS = (400.0, 100.0, 25.0)
SINGLE_HOST = "8xh100"


def hosts_of(topology) -> np.ndarray:
  """``[D]`` int host index per device: devices named ``host<h>:...`` (the
  multi-host presets) are on host ``h``; any other device on host 0."""
  return np.array([int(d.name.split(":")[0][4:])
                   if d.name.startswith("host") else 0
                   for d in topology.devices])


def with_network(topology, gbps: float):
  """``topology`` with every link between two hosts at ``gbps`` gigabits
  per second (each way); links inside a host and all latencies unchanged."""
  hosts = hosts_of(topology)
  across = ~np.equal.outer(hosts, hosts)
  bandwidth = np.where(across, gbps * 1e9 / 8, topology.link_bandwidth)
  return dataclasses.replace(topology, link_bandwidth=bandwidth,
                             name=f"{topology.name}@{gbps:g}Gbps")


def cut(graph, placement: np.ndarray, hosts: np.ndarray) -> dict:
  """What ``placement`` sends: bytes between hosts per step (one copy per
  value and destination device), and the edges cut between hosts and
  between devices of one host."""
  src_dev = placement[graph.edge_src]
  dst_dev = placement[graph.edge_dst]
  across = hosts[src_dev] != hosts[dst_dev]
  within = (src_dev != dst_dev) & ~across
  copies = {}
  for src, dev, size in zip(graph.edge_src[across], dst_dev[across],
                            graph.edge_bytes[across]):
    copies[(src, dev)] = max(copies.get((src, dev), 0), int(size))
  used = np.unique(placement)
  return dict(bytes_across=float(sum(copies.values())),
              edges_across=int(across.sum()), edges_within=int(within.sum()),
              devices=len(used), hosts=len(np.unique(hosts[used])))


def best_baseline(graph, topology) -> tuple[float, str]:
  """(runtime_s, name) of the fastest baseline in its best schedule (the
  simulator's default, or a list scheduler's own planned order)."""
  best = (np.inf, "-")
  for name in baselines.names():
    plan = baselines.plan(name, graph, topology)
    runs = [gplace.simulate(graph, plan.placement, topology)]
    if name in baselines.schedulers():
      runs.append(gplace.simulate(graph, plan.placement, topology,
                                  order=plan.order))
    for run in runs:
      runtime = float(np.ravel(run.runtime_s)[0])
      if not bool(np.ravel(run.oom)[0]) and runtime < best[0]:
        best = (runtime, name)
  return best


def best_placement(graph, topology, budget_s: float, seed: int,
                   single=None) -> dict:
  """The best placement known and what it cuts: ``gplace.optimize``'s
  (never slower than the best baseline) or, when faster, ``single``'s (the
  best on one host, whose devices are the first host's here)."""
  result = gplace.optimize(graph, topology=topology, budget_s=budget_s,
                           seed=seed, progress=False)
  baseline_s, baseline = best_baseline(graph, topology)
  best = dict(runtime_s=float(result.runtime_s),
              method=f"optimize: {result.method}",
              placement=np.asarray(result.placement), order=result.order)
  if single is not None:
    run = gplace.simulate(graph, single["placement"], topology,
                          order=single["order"])
    runtime = float(np.ravel(run.runtime_s)[0])
    if not bool(np.ravel(run.oom)[0]) and runtime < best["runtime_s"]:
      best.update(runtime_s=runtime, method="the one-host best, on host 0",
                  placement=single["placement"], order=single["order"])
  return dict(best, optimize_s=float(result.runtime_s),
              baseline_s=baseline_s, baseline=baseline,
              **cut(graph, best["placement"], hosts_of(topology)))


HEADER = ["| workload | nodes | topology | network Gb/s | best ms | method | "
          "hosts | GPUs | MB between hosts | edges cut between hosts | "
          "within a host | optimize ms | best baseline ms | "
          "1 host (8xh100) ms | vs 1 host |",
          "|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
          "---:|---:|"]


def row(workload, graph, topology_name, gbps, best, single) -> str:
  return (f"| {workload} | {graph.n_nodes} | {topology_name} | {gbps:g} | "
          f"{1e3 * best['runtime_s']:.2f} | {best['method']} | "
          f"{best['hosts']} | {best['devices']} | "
          f"{best['bytes_across'] / 1e6:.1f} | {best['edges_across']} | "
          f"{best['edges_within']} | {1e3 * best['optimize_s']:.2f} | "
          f"{1e3 * best['baseline_s']:.2f} "
          f"({best['baseline']}) | {1e3 * single['runtime_s']:.2f} | "
          f"{report.percent_change(best['runtime_s'], single['runtime_s'])} |")


EXPLANATION = [
    "Simulated seconds per training step (`gplace.simulate`'s cost model "
    "on the presets' hardware, not measured). Per workload, multi-host "
    "preset and bandwidth between hosts (each way, per GPU; the presets' "
    "400 Gb/s is one ConnectX-7 per GPU): the fastest placement known, "
    "`gplace.optimize`'s (the best of the baselines and its searches; "
    "*method* says which won) or, where faster, the best placement on one "
    "host moved onto the first host; the hosts and GPUs it uses; the "
    "megabytes it sends between hosts per step (one copy per value and "
    "destination GPU); the graph edges it cuts between hosts and between "
    "GPUs of one host; optimize's own result; the best baseline alone "
    "(each in its best schedule); and the best placement on one 8-GPU "
    "host (`8xh100`, NVLink only), with the multi-host best's change "
    "against it.", ""]


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS),
                      help="zoo workloads (train steps)")
  parser.add_argument("--size", default="paper",
                      help="workload size: tiny, small or paper")
  parser.add_argument("--topologies", nargs="+", default=list(TOPOLOGIES),
                      help="multi-host topology presets")
  parser.add_argument("--network_gbps", nargs="+", type=float,
                      default=list(NETWORK_GBPS),
                      help="bandwidths between hosts to try, Gb/s each way")
  parser.add_argument("--budget_s", type=float, default=10.0,
                      help="gplace.optimize's budget per problem, seconds")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of optimize and the randomised baselines")
  parser.add_argument("--graph_cache", default="",
                      help="directory of captured graphs (reused)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  study = report.Study.create(args.out, __file__, argv)
  print(f"load average at the start: {os.getloadavg()}", flush=True)
  lines = list(EXPLANATION) + HEADER
  for workload in args.workloads:
    graph = workloads.load(workload, args.size, "train",
                           cache_dir=args.graph_cache or None).graph
    start = time.perf_counter()
    single = best_placement(graph, preset(SINGLE_HOST), args.budget_s,
                            args.seed)
    for topology_name in args.topologies:
      for gbps in args.network_gbps:
        topology = with_network(preset(topology_name), gbps)
        best = best_placement(graph, topology, args.budget_s, args.seed,
                              single)
        lines.append(row(workload, graph, topology_name, gbps, best, single))
        print(lines[-1], flush=True)
    print(f"{workload}: {time.perf_counter() - start:.0f}s", flush=True)
    if study:
      study.write(lines)
  print(f"load average at the end: {os.getloadavg()}", flush=True)
  if study:
    study.write(lines)


if __name__ == "__main__":
  main()
