"""Why a list scheduler's own order can beat the dynamic schedule.

For each workload (paper size, train step, graphs cached by
``experiments/baselines.py``) and each list scheduler, it simulates the
scheduler's placement in its own planned order and under
``schedule="dynamic"`` with three priorities: the default critical path
(``bottom_level``), HEFT's upward rank over the GPUs, and the planner's own
order as a priority (so the only difference left is the dynamic rule's
work conservation).

  python -m experiments.schedule_gap --workloads rnnlm2,gnmt4
"""

import argparse


import gplace
from gplace import baselines
from gplace.baselines import common, list_scheduling
from gplace.sim.priority import order_priority
from gplace.sim.topology import preset

from experiments.baselines import CACHE, load_graph


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
  args = parser.parse_args(argv)
  topology = preset(args.topology)
  print("| workload | scheduler | own s | dynamic, bottom level | dynamic, "
        "HEFT rank | dynamic, own order as priority |")
  print("|---|---|---:|---:|---:|---:|")
  for name in args.workloads.split(","):
    graph = load_graph(name, args.size, "train", args.cache)
    rank = list_scheduling.schedule_ranks(
        common.prepare(graph, topology, None), common.gpu_devices(topology))
    for scheduler in args.schedulers.split(","):
      plan = baselines.plan(scheduler, graph, topology)
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


if __name__ == "__main__":
  main()
