"""Why a list scheduler's own order can beat the dynamic schedule.

For each workload (paper size, train step, graphs cached by
``experiments/baselines.py``) and each list scheduler, it simulates the
scheduler's placement in its own planned order and under
``schedule="dynamic"`` with three priorities: the default critical path
(``bottom_level``), HEFT's upward rank over the GPUs, and the planner's own
order as a priority (so the only difference left is the dynamic rule's
work conservation).

With ``--bandwidth-scales 1,2,4`` a second table keeps each scheduler's
placement and order (planned on the preset) and simulates them with every
link's bandwidth multiplied by each factor: where the own order's lead
over the default schedule is link contention, it goes with more bandwidth.
With ``--jitter 0.01`` a third table runs the dynamic schedule with
``--jitter-samples`` bottom-level priorities each multiplied by
``exp(jitter * z)``, ``z`` standard normal: how far the default's figure
is from what nearly the same priority gives, and what the default schedule
plus the best of those draws (a best-of-restarts default) would give. With
``--priority-variants`` a fourth table runs the dynamic and the planned
schedule with other critical-path priorities (:func:`priority_variants`).

  python -m experiments.schedule_gap --workloads rnnlm2,gnmt4
  python -m experiments.schedule_gap --workloads rnnlm2 --schedulers m_sct \
      --bandwidth-scales 1,2,4,1000 --jitter 0.01 --priority-variants
"""

import argparse
import os

import numpy as np

import gplace
from gplace import baselines, workloads
from gplace.baselines import list_scheduling
from gplace.graphs.graph import NODE_INPUT
from gplace.sim import list_scheduler
from gplace.sim.priority import (bottom_level, mean_transfer_s,
                                 order_priority, upward_rank)
from gplace.sim.presets import preset

# The graphs experiments/baselines.py captures.
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="rnnlm2,gnmt4",
                      help="comma-separated workload names")
  parser.add_argument("--schedulers", default="heft,m_etf,m_sct",
                      help="comma-separated list schedulers")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace topology preset")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--cache", default=CACHE,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--bandwidth-scales", default="",
                      help="comma-separated link bandwidth factors for the "
                      "second table (empty: no such table)")
  parser.add_argument("--jitter", type=float, default=0.0,
                      help="sigma of the log-normal noise on the bottom "
                      "level for the third table (0: no such table)")
  parser.add_argument("--jitter-samples", type=int, default=64,
                      help="noisy priorities per placement in that table")
  parser.add_argument("--priority-variants", action="store_true",
                      help="a fourth table: other critical-path priorities "
                      "in the dynamic and the planned schedule")
  args = parser.parse_args(argv)
  topology = preset(args.topology)
  plans = []
  print("| workload | scheduler | own s | dynamic, bottom level | dynamic, "
        "HEFT rank | dynamic, own order as priority |")
  print("|---|---|---:|---:|---:|---:|")
  for name in args.workloads.split(","):
    graph = workloads.load(name, args.size, "train",
                           cache_dir=args.cache).graph
    rank = list_scheduling.schedule_ranks(
        list_scheduler.prepare(graph, topology, None),
        list_scheduler.gpu_devices(topology))
    for scheduler in args.schedulers.split(","):
      plan = baselines.plan(scheduler, graph, topology)
      plans.append((name, scheduler, graph, plan))
      own = float(gplace.simulate(graph, plan.placement, topology,
                                  order=plan.order).runtime_s)
      cells = []
      for priority in (None, rank, order_priority(plan.order)):
        runtime = float(gplace.simulate(graph, plan.placement, topology,
                                        schedule="dynamic",
                                        priority=priority).runtime_s)
        cells.append(f"{runtime:.4f} ({100 * (runtime / own - 1):+.1f}%)")
      print(f"| {name} | {scheduler} | {own:.4f} | " + " | ".join(cells)
            + " |", flush=True)
  if args.bandwidth_scales:
    bandwidth_table(plans, topology,
                    [float(x) for x in args.bandwidth_scales.split(",")])
  if args.jitter > 0:
    jitter_table(plans, topology, args.jitter, args.jitter_samples)
  if args.priority_variants:
    variants_table(plans, topology)


def bandwidth_table(plans, topology, scales) -> None:
  """Own order against the default schedule, links ``scales`` x faster."""
  print("\n| workload | scheduler | " + " | ".join(
      f"bandwidth x{x:g}: own s / default s" for x in scales) + " |")
  print("|---|---|" + "---:|" * len(scales))
  for name, scheduler, graph, plan in plans:
    cells = []
    for scale in scales:
      fast = topology.replace(link_bandwidth=topology.link_bandwidth * scale)
      own = float(gplace.simulate(graph, plan.placement, fast,
                                  order=plan.order).runtime_s)
      default = float(gplace.simulate(graph, plan.placement, fast).runtime_s)
      cells.append(f"{own:.4f} / {default:.4f} "
                   f"({100 * (default / own - 1):+.1f}%)")
    print(f"| {name} | {scheduler} | " + " | ".join(cells) + " |",
          flush=True)


def jitter_table(plans, topology, sigma: float, samples: int) -> None:
  """The dynamic schedule under ``samples`` noisy bottom levels."""
  print(f"\n| workload | scheduler | own s | dynamic, bottom level | "
        f"dynamic, bottom level x exp({sigma:g} z): min / median / max "
        f"({samples} samples) | default + best of those |")
  print("|---|---|---:|---:|---:|---:|")
  rng = np.random.default_rng(0)
  for name, scheduler, graph, plan in plans:
    own = float(gplace.simulate(graph, plan.placement, topology,
                                order=plan.order).runtime_s)
    level = bottom_level(graph, topology)
    exact = float(gplace.simulate(graph, plan.placement, topology,
                                  schedule="dynamic").runtime_s)
    default = float(gplace.simulate(graph, plan.placement,
                                    topology).runtime_s)
    noisy = level[None] * np.exp(
        sigma * rng.standard_normal((samples, graph.n_nodes)))
    runs = np.asarray(gplace.simulate(
        graph, np.tile(plan.placement, (samples, 1)), topology,
        schedule="dynamic", priority=noisy).runtime_s, np.float64)
    gap = lambda t: f"{t:.4f} ({100 * (t / own - 1):+.1f}%)"
    print(f"| {name} | {scheduler} | {own:.4f} | {gap(exact)} | "
          f"{gap(runs.min())} / {gap(float(np.median(runs)))} / "
          f"{gap(runs.max())} | {gap(min(default, runs.min()))} |",
          flush=True)


def priority_variants(graph, topology) -> dict[str, np.ndarray]:
  """Critical-path priorities ``[N]`` to try instead of the bottom level:
  the bottom level itself; without transfers; with transfers counted twice
  or half; on each op's cheapest device; with every transfer on the
  slowest link."""
  costs = topology.op_costs(graph)
  mean_cost = costs.mean(axis=1)
  transfer = mean_transfer_s(topology, np.arange(topology.n_devices),
                             graph.edge_bytes)
  off = ~np.eye(topology.n_devices, dtype=bool)
  slowest = (topology.link_latency[off].max() + graph.edge_bytes
             * (1.0 / topology.link_bandwidth[off]).max())
  rank = lambda node, edge: upward_rank(
      graph, np.where(graph.kind == NODE_INPUT, 0.0, node), edge)
  return {"bottom level": bottom_level(graph, topology),
          "no transfers": rank(mean_cost, 0.0 * transfer),
          "transfers x2": rank(mean_cost, 2.0 * transfer),
          "transfers x0.5": rank(mean_cost, 0.5 * transfer),
          "cheapest device": rank(costs.min(axis=1), transfer),
          "slowest link": rank(mean_cost, slowest)}


def variants_table(plans, topology) -> None:
  """Each scheduler's placement, dynamic / planned, per priority."""
  names = list(priority_variants(plans[0][2], topology)) if plans else []
  print("\n| workload | scheduler | own s | " + " | ".join(
      f"{name}: dynamic / planned" for name in names) + " |")
  print("|---|---|---:|" + "---:|" * len(names))
  for name, scheduler, graph, plan in plans:
    own = float(gplace.simulate(graph, plan.placement, topology,
                                order=plan.order).runtime_s)
    cells = []
    for priority in priority_variants(graph, topology).values():
      runs = [float(gplace.simulate(
          graph, plan.placement, topology, schedule=schedule,
          priority=priority.astype(np.float32)).runtime_s)
              for schedule in ("dynamic", "planned")]
      cells.append(" / ".join(f"{100 * (t / own - 1):+.1f}%" for t in runs))
    print(f"| {name} | {scheduler} | {own:.4f} | " + " | ".join(cells)
          + " |", flush=True)


if __name__ == "__main__":
  main()
