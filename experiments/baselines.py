"""Every non-learned baseline on the workload suite, under the simulator.

    python experiments/baselines.py --topology 1cpu+4gpu --size paper \
        --out experiments/results/baselines_1cpu+4gpu.md

For each training step of the suite (inception_v3, resnet50, bert, gnmt4,
rnnlm2, transformer_xl4, wavenet2; ``--workloads`` picks others) it captures
the graph (cached in ``experiments/cache/<name>_<size>_<step>.npz``, since
paper-size captures take a while), runs every baseline of
``gplace.baselines``, simulates all placements in one batch and prints a
markdown table: simulated seconds per step, gap to ``gplace.lower_bound`` in
%, and OOM; the list schedulers again in their own planned op order; and how
long each baseline took to plan. Workloads not (yet) in ``gplace.workloads``
are listed as skipped.
"""

import argparse
import os
import sys
import time

import numpy as np

import gplace
from gplace import baselines
from gplace.errors import GplaceError
from gplace.graph import Graph
from gplace.topology import preset

SUITE = ("inception_v3", "resnet50", "bert", "gnmt4", "rnnlm2",
         "transformer_xl4", "wavenet2")
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")


def load_graph(name: str, size: str, step: str, cache_dir: str,
               refresh: bool = False) -> Graph:
  """The captured graph of a workload, from the cache or freshly captured."""
  path = os.path.join(cache_dir, f"{name}_{size}_{step}.npz")
  if os.path.exists(path) and not refresh:
    return Graph.load(path)
  from gplace import workloads  # pylint: disable=g-import-not-at-top
  fn, args = workloads.get(name, size=size, step=step, abstract=True)
  graph = gplace.capture(fn, *args, name=name)
  os.makedirs(cache_dir, exist_ok=True)
  graph.save(path)
  return graph


def evaluate(graph, topology, names, seed=0):
  """Plans, times and simulates each baseline on one graph.

  Returns:
    dict with ``runtime_s [K]``, ``oom [K]``, ``peak_bytes [K, D]`` (in the
    simulator's default id order), ``plan_s [K]`` (seconds each baseline
    took), ``bound_s``, and for list schedulers ``own`` = {name: (simulated
    runtime in the planned order, planned makespan, oom)}.
  """
  plans, plan_s = [], []
  for name in names:
    start = time.perf_counter()
    plans.append(baselines.plan(name, graph, topology, seed=seed))
    plan_s.append(time.perf_counter() - start)
  result = gplace.simulate(graph, np.stack([p.placement for p in plans]),
                           topology)
  own = {}
  for name, p in zip(names, plans):
    if name in baselines.schedulers() and name != "ordered_eft":
      res = gplace.simulate(graph, p.placement, topology, order=p.order)
      own[name] = (float(res.runtime_s), p.makespan_s, bool(res.oom))
  return dict(runtime_s=np.asarray(result.runtime_s, np.float64),
              oom=np.asarray(result.oom, bool),
              peak_bytes=np.asarray(result.peak_bytes, np.float64),
              plan_s=np.asarray(plan_s), own=own,
              bound_s=float(gplace.lower_bound(graph, topology)))


def _cell(runtime, bound, oom=False, bold=False):
  gap = 100.0 * (runtime / bound - 1.0) if bound > 0 else float("nan")
  cell = f"{runtime:.4g} ({gap:+.0f}%)"
  if oom:
    return cell + " OOM"
  return f"**{cell}**" if bold else cell


def format_tables(rows, names, topology_name, size) -> str:
  """Markdown: runtime / gap / OOM tables and a planning-time table."""
  head = "| workload | nodes | bound s | " + " | ".join(names) + " |"
  rule = "|---|---:|---:|" + "---:|" * len(names)
  lines = [f"### {topology_name}, size={size}, train step",
           "",
           "Simulated seconds per step, each device running its ops in node-id "
           "order (the simulator's default, as for learned placements); in "
           "brackets the gap to the lower bound; OOM: over some device's "
           "memory in the simulator's liveness model; bold: best without OOM.",
           "", head, rule]
  for workload, graph, res in rows:
    if res is None:
      lines.append(f"| {workload} | – | – | " +
                   " | ".join("–" for _ in names) + " |")
      continue
    ok = np.where(res["oom"], np.inf, res["runtime_s"])
    best = np.min(ok)
    cells = [_cell(res["runtime_s"][k], res["bound_s"], res["oom"][k],
                   res["runtime_s"][k] == best) for k in range(len(names))]
    lines.append(f"| {workload} | {graph.n_nodes} | {res['bound_s']:.4g} | "
                 + " | ".join(cells) + " |")
  own_names = [n for n in names
               if n in baselines.schedulers() and n != "ordered_eft"]
  if own_names:
    lines += ["", "List schedulers simulated in their own planned op order "
              "(`order=plan.order`), as the runtime they assume would run "
              "them; after the slash, the scheduler's own makespan estimate:",
              "", "| workload | " + " | ".join(own_names) + " |",
              "|---|" + "---:|" * len(own_names)]
    for workload, graph, res in rows:
      if res is None:
        continue
      cells = []
      for name in own_names:
        runtime, planned, oom = res["own"][name]
        cells.append(_cell(runtime, res["bound_s"], oom) + f" / {planned:.4g}")
      lines.append(f"| {workload} | " + " | ".join(cells) + " |")
  lines += ["", "Seconds to plan (host, this machine):", "",
            "| workload | nodes | " + " | ".join(names) + " |",
            "|---|---:|" + "---:|" * len(names)]
  for workload, graph, res in rows:
    if res is None:
      continue
    lines.append(f"| {workload} | {graph.n_nodes} | " + " | ".join(
        f"{t:.2f}" for t in res["plan_s"]) + " |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--topology", default="1cpu+4gpu")
  parser.add_argument("--size", default="paper")
  parser.add_argument("--step", default="train")
  parser.add_argument("--workloads", default=",".join(SUITE))
  parser.add_argument("--baselines", default=",".join(baselines.names()))
  parser.add_argument("--cache", default=CACHE)
  parser.add_argument("--refresh", action="store_true",
                      help="capture again even if a cached graph exists "
                      "(after changes to capture or the workloads)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", default=None,
                      help="also write the tables to this markdown file")
  args = parser.parse_args(argv)
  topology = preset(args.topology)
  names = args.baselines.split(",")
  for name in names:
    baselines.get(name)  # fail early on a typo
  rows = []
  for workload in args.workloads.split(","):
    start = time.perf_counter()
    try:
      graph = load_graph(workload, args.size, args.step, args.cache,
                         args.refresh)
    except GplaceError as err:
      print(f"skip {workload}: {err}", file=sys.stderr, flush=True)
      rows.append((workload, None, None))
      continue
    loaded = time.perf_counter() - start
    res = evaluate(graph, topology, names, seed=args.seed)
    print(f"{workload}: {graph.n_nodes} nodes, graph {loaded:.1f}s, plan "
          + ", ".join(f"{n} {t:.2f}s" for n, t in zip(names, res["plan_s"])),
          file=sys.stderr, flush=True)
    rows.append((workload, graph, res))
  table = format_tables(rows, names, args.topology, args.size)
  print(table)
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      f.write(table)


if __name__ == "__main__":
  main()
