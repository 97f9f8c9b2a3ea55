"""Every non-learned baseline on the workload suite, under the simulator.

    python experiments/baselines.py --topology 1cpu+4gpu --size paper \
        --out experiments/results/baselines/1cpu+4gpu

For each training step of the suite (inception_v3, resnet50, bert, gnmt4,
rnnlm2, transformer_xl4, wavenet2; ``--workloads`` picks others) it captures
the graph (``gplace.workloads.load``, cached in
``experiments/cache/<name>_<size>_<step>.npz``, since paper-size captures
take a while), runs every baseline of
``gplace.baselines`` and simulates every placement under every schedule
(the simulator's default, dynamic list scheduling, the planned schedule,
node-id order, and a list scheduler's own plan). It prints markdown tables:
each method in its best schedule, then one table per schedule (simulated
seconds per step, gap to ``gplace.lower_bound`` in %, OOM), the list
schedulers' default-vs-own and dynamic-vs-own ratios,
and how long each baseline took to plan. Workloads not (yet) in ``gplace.workloads``
are listed as skipped.
"""

import argparse
import os
import sys
import time

import numpy as np

import gplace
from gplace import baselines, report, workloads
from gplace.errors import GplaceError
from gplace.sim.presets import preset
from gplace.workloads.loader import cache_path

SUITE = ("inception_v3", "resnet50", "bert", "gnmt4", "rnnlm2",
         "transformer_xl4", "wavenet2")
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")


SCHEDULES = ("default", "dynamic", "planned", "id", "own")


def evaluate(graph, topology, names, seed=0):
  """Plans, times and simulates each baseline on one graph, in every schedule.

  Schedules: ``default`` (``gplace.simulate``'s default, ``"best"``: the
  faster of the next two), ``dynamic`` (``schedule="dynamic"``: list
  scheduling on critical-path priorities, as an asynchronous runtime),
  ``planned`` (``schedule="planned"``: HEFT's insertion rule on the
  placement), ``id`` (each device runs its ops in node-id order) and, for
  list schedulers, ``own`` (the op order the scheduler planned,
  ``order=plan.order``).

  Returns:
    dict with ``runtime_s`` and ``oom``: ``{schedule: [K]}`` (NaN where a
    schedule does not apply), ``makespan_s [K]`` (a scheduler's own
    estimate, NaN otherwise), ``plan_s [K]`` (seconds each baseline took to
    plan) and ``bound_s``.
  """
  plans, plan_s = [], []
  for name in names:
    start = time.perf_counter()
    plans.append(baselines.plan(name, graph, topology, seed=seed))
    plan_s.append(time.perf_counter() - start)
  placements = np.stack([p.placement for p in plans])
  by_id = np.arange(graph.n_nodes, dtype=np.int32)
  runtime, oom = {}, {}
  for schedule in SCHEDULES:
    if schedule == "own":
      rows = [gplace.simulate(graph, p.placement, topology, order=p.order)
              if name in baselines.schedulers() else None
              for name, p in zip(names, plans)]
      runtime[schedule] = np.array(
          [np.nan if r is None else float(np.ravel(r.runtime_s)[0]) for r in rows])
      oom[schedule] = np.array(
          [False if r is None else bool(np.ravel(r.oom)[0]) for r in rows])
      continue
    if schedule == "id":
      result = gplace.simulate(graph, placements, topology, order=by_id)
    else:
      result = gplace.simulate(
          graph, placements, topology,
          schedule=None if schedule == "default" else schedule)
    runtime[schedule] = np.asarray(result.runtime_s, np.float64)
    oom[schedule] = np.asarray(result.oom, bool)
  return dict(runtime_s=runtime, oom=oom,
              makespan_s=np.array([p.makespan_s for p in plans]),
              plan_s=np.asarray(plan_s),
              bound_s=float(gplace.lower_bound(graph, topology)))


def best_of(res, k):
  """(runtime, schedule) of baseline ``k``'s best schedule without OOM."""
  best = (np.inf, "-")
  for schedule in SCHEDULES:
    runtime = res["runtime_s"][schedule][k]
    if np.isfinite(runtime) and not res["oom"][schedule][k] and (
        runtime < best[0]):
      best = (float(runtime), schedule)
  return best


def _cell(runtime, bound, oom=False, bold=False):
  if not np.isfinite(runtime):
    return "–"
  gap = 100.0 * (runtime / bound - 1.0) if bound > 0 else float("nan")
  cell = f"{runtime:.4g} ({gap:+.0f}%)"
  if oom:
    return cell + " OOM"
  return f"**{cell}**" if bold else cell


def _table(rows, names, cell_fn):
  lines = ["| workload | nodes | bound s | " + " | ".join(names) + " |",
           "|---|---:|---:|" + "---:|" * len(names)]
  for workload, graph, res in rows:
    if res is None:
      lines.append(f"| {workload} | – | – | " +
                   " | ".join("–" for _ in names) + " |")
      continue
    lines.append(f"| {workload} | {graph.n_nodes} | {res['bound_s']:.4g} | "
                 + " | ".join(cell_fn(res, k) for k in range(len(names)))
                 + " |")
  return lines


def format_tables(rows, names, topology_name, size) -> str:
  """Markdown: best-schedule table, one table per schedule, planning times."""
  def best_cell(res, k):
    runtime, schedule = best_of(res, k)
    overall = min(best_of(res, j)[0] for j in range(len(names)))
    return (_cell(runtime, res["bound_s"], bold=runtime == overall)
            + f" {schedule}")

  lines = [f"### {topology_name}, size={size}, train step", "",
           "Each method in its best schedule (simulated seconds per step; in "
           "brackets the gap to the lower bound; after it the schedule that "
           "gave it: `default` = the simulator's default (the faster of "
           "`dynamic`, its dynamic list scheduling, and `planned`, HEFT's "
           "insertion rule on the placement), "
           "`id` = node-id order per device, `own` = the list scheduler's "
           "own planned order); bold: best overall. OOM placements are "
           "excluded.", ""]
  lines += _table(rows, names, best_cell)
  titles = {
      "default": "The simulator's default schedule (`schedule=\"best\"`: "
                 "per placement the faster of dynamic and planned):",
      "planned": "Planned schedule (`schedule=\"planned\"`: HEFT's "
                 "insertion rule on the placement, critical-path order):",
      "dynamic": "Dynamic list scheduling (`schedule=\"dynamic\"`, "
                 "critical-path priority):",
      "id": "Node-id order on every device:",
      "own": "List schedulers in their own planned op order "
             "(`order=plan.order`):"}
  for schedule in SCHEDULES:
    def cell(res, k, schedule=schedule):
      ok = np.where(res["oom"][schedule], np.inf, res["runtime_s"][schedule])
      return _cell(res["runtime_s"][schedule][k], res["bound_s"],
                   res["oom"][schedule][k], ok[k] == np.nanmin(ok))
    lines += ["", titles[schedule], ""] + _table(rows, names, cell)
  schedulers = [n for n in names if n in baselines.schedulers()]
  for schedule in ("default", "dynamic") if schedulers else ():
    lines += ["", f"List schedulers: {schedule} schedule vs own plan "
              f"({schedule} / own - 1):", "",
              "| workload | " + " | ".join(schedulers) + " |",
              "|---|" + "---:|" * len(schedulers)]
    for workload, graph, res in rows:
      if res is None:
        continue
      cells = []
      for name in schedulers:
        k = names.index(name)
        ratio = res["runtime_s"][schedule][k] / res["runtime_s"]["own"][k]
        cells.append(f"{100 * (ratio - 1):+.1f}%")
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
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.topology preset name")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--step", default="train", help="train | infer")
  parser.add_argument("--workloads", default=",".join(SUITE),
                      help="comma-separated workload names")
  parser.add_argument("--baselines", default=",".join(baselines.names()),
                      help="comma-separated baseline names")
  parser.add_argument("--cache", default=CACHE,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--refresh", action="store_true",
                      help="capture again even if a cached graph exists "
                      "(after changes to capture or the workloads)")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the randomised baselines")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  study = report.Study.create(args.out, __file__, argv)
  topology = preset(args.topology)
  names = args.baselines.split(",")
  for name in names:
    baselines.get(name)  # fail early on a typo
  rows = []
  for workload in args.workloads.split(","):
    start = time.perf_counter()
    try:
      cached = cache_path(args.cache, workload, args.size, args.step)
      if args.refresh and os.path.exists(cached):
        os.remove(cached)
      graph = workloads.load(workload, args.size, args.step,
                             cache_dir=args.cache).graph
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
  if study:
    study.write(table.splitlines())


if __name__ == "__main__":
  main()
