"""How far gplace.optimize is from the best answer, per graph (issue 45).

    python experiments/optimality.py --graph_cache experiments/cache \
        --out experiments/results/optimality/<run>

For each instance of the benchmark (``gplace.workloads.benchmark``: class
``memory``, zoo inference steps on 1 CPU + 2 or 4 accelerators of different
speeds whose memory holds 50-80% of the weights; class ``homogeneous``,
transformer, feed-forward and matmul-chain graphs of 184-294 ops on 4 and 8
H100s; class ``paper``, the zoo's paper-size train steps on ``1cpu+4gpu``,
only when ``--classes`` names it) and each seed it writes one row:

* the best baseline (``gplace.baselines.best``) in the default schedule and
  in any schedule (a list scheduler's own plan);
* ``gplace.optimize`` (``--method``, default ``"auto"``; ``"lns"``:
  large-neighbourhood search from the best baseline) at each of
  ``--budgets`` seconds: its runtime, the
  winning candidate, its gap to its own lower bound, its wall seconds, and
  the learned policy's own greedy and sampled placements when it ran (GO
  trained on the graph inside ``optimize``; before any search from them);
* a reference run of ``--reference_s`` seconds, once per graph: CP-SAT
  (``gplace.solvers.solve``) hinted with the best placement found so far on
  graphs of at most ``--solver_max_nodes`` ops, else ``gplace.optimize``
  with that budget;
* the best known runtime (the fastest of the reference and every optimize
  run) and the proven bound (the largest of every bound proven: the
  solver's, each optimize's, ``gplace.lower_bound``);
* optimize's gap to the best known and to the proven bound at each budget
  (``runtime / reference - 1``), and whether it was never slower than the
  best baseline (within ``NEVER_SLOWER_TOLERANCE``).

A second table gives the inner loop's speed per graph: candidates scored
per second by ``gplace.simulate`` on a batch of 64 random placements, in the
default schedule and in each candidate's own order (``priority=``, as the
joint placement + schedule search scores them). The optimize runs at the
budgets trace quality against wall seconds. Runtimes are simulated
milliseconds per step. ``--out`` also gets ``optimality.csv``, every row's
numbers in seconds, with each optimize run's candidates (what each phase
found, as JSON).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from typing import NamedTuple, Optional, Sequence

import numpy as np

import gplace
from gplace import baselines, report, solvers
from gplace.autoplace import budget as budget_lib
from gplace.autoplace.candidates import CHAIN
from gplace.errors import GplaceError, first_line, or_exit
from gplace.workloads import benchmark

#: optimize may return a simpler plan within this relative tie of the
#: fastest (``gplace.autoplace.measured.PRESET_TIE``); this much slower than
#: the best baseline still counts as never slower.
NEVER_SLOWER_TOLERANCE = 1e-5
#: Placements per simulator call in the inner loop's timing (the searches'
#: batch).
SPEED_BATCH = 64
#: Seconds of timed calls per schedule, at least SPEED_CALLS calls.
SPEED_S = 2.0
SPEED_CALLS = 2
CSV_NAME = "optimality.csv"


class Run(NamedTuple):
  """One answer: its runtime and how it was found.

  Attributes:
    runtime_s: simulated seconds (``inf``: out of memory or none).
    method: the winning candidate's label.
    bound_s: the lower bound the run proved (or ``gplace.lower_bound``).
    wall_s: wall seconds the run took.
    placement: ``[N]`` int32, or None.
    policy: the learned policy's own placements among the candidates
      (:func:`policy_own`): ``{"greedy" | "sampled": runtime_s}`` and how
      GO's training ended (``"trained"``), empty when no policy ran.
    explanation: ``gplace.explain`` of an optimize answer, or None.
    chain_s: gplace's critical-chain plan among the candidates, before any
      search from it (:func:`chain_own`), or None.
    candidates: ``{label: runtime_s}`` of everything the run tried
      (``gplace.optimize``'s ``candidates``: how each phase ended, the
      winner's among them), empty for a CP-SAT reference.
  """

  runtime_s: float
  method: str
  bound_s: float
  wall_s: float
  placement: Optional[np.ndarray] = None
  policy: dict = {}
  explanation: Optional[gplace.Explanation] = None
  chain_s: Optional[float] = None
  candidates: dict = {}


#: Labels of the learned policies' own candidates in ``optimize``'s result
#: (GO trained on the graph; the pretrained policy zero-shot or fine-tuned).
POLICY_PREFIXES = ("GO trained", "pretrained")
TRAINED_PREFIX = POLICY_PREFIXES[0]


def policy_own(candidates: dict) -> dict:
  """The fastest greedy and the fastest sampled placement of the learned
  policies among ``optimize``'s ``{label: runtime_s}`` candidates, apart
  from anything a search started from them found: ``{"greedy":
  runtime_s, "sampled": runtime_s}`` (a key only when there is one), and
  ``"trained"``: how GO's training on the graph ended, read off its label
  (e.g. ``"120 steps, stalled"``), when it trained."""
  own = {}
  for label, runtime in candidates.items():
    if not label.startswith(POLICY_PREFIXES):
      continue
    kind = "greedy" if label.endswith(": greedy") else "sampled"
    own[kind] = min(own.get(kind, math.inf), float(runtime))
    if label.startswith(TRAINED_PREFIX) and "(" in label:
      own["trained"] = label[label.index("(") + 1:label.rindex(")")]
  return own


def chain_own(candidates: dict) -> Optional[float]:
  """The fastest of gplace's critical-chain plans among ``optimize``'s
  ``{label: runtime_s}`` candidates (``"critical chain (default)"`` or
  ``"... (own plan)"``; not what a search found from it), or None."""
  own = [float(r) for label, r in candidates.items()
         if label.startswith(f"{CHAIN} (")]
  return min(own) if own else None


def candidates_json(candidates: dict) -> str:
  """``{label: runtime_s}`` as JSON (``null``: out of memory or breaking
  the graph's device constraints), for the CSV: which phase found what."""
  return json.dumps({label: float(r) if math.isfinite(r) else None
                     for label, r in candidates.items()})


def optimize_run(instance: benchmark.Instance, budget_s: float,
                 seed: int, method: str = "auto") -> Run:
  """``gplace.optimize`` with ``budget_s`` seconds and ``method``."""
  result = gplace.optimize(instance.graph, topology=instance.topology,
                           costs=instance.costs, budget_s=budget_s,
                           seed=seed, progress=False, method=method)
  return Run(result.runtime_s, result.method, result.lower_bound_s,
             result.wall_s, result.placement, policy_own(result.candidates),
             result.explain(), chain_own(result.candidates),
             dict(result.candidates))


def reference_run(instance: benchmark.Instance, hint: Optional[np.ndarray],
                  reference_s: float, *, seed: int, solver_max_nodes: int,
                  num_workers: int) -> Run:
  """The long run: CP-SAT from ``hint`` on graphs of at most
  ``solver_max_nodes`` ops, else ``gplace.optimize`` for ``reference_s``."""
  if instance.graph.n_nodes <= solver_max_nodes:
    result = solvers.solve(instance.graph, instance.topology, instance.costs,
                           time_limit_s=reference_s, num_workers=num_workers,
                           hint=hint, seed=seed)
    runtime = math.inf if result.oom else float(result.runtime_s)
    return Run(runtime, f"CP-SAT {result.status.lower()}",
               float(result.bound_s), result.wall_s, result.placement)
  run = optimize_run(instance, reference_s, seed)
  return run._replace(method=f"optimize: {run.method}")


def inner_loop_speed(instance: benchmark.Instance, seed: int = 0,
                     min_s: float = SPEED_S) -> tuple[float, float]:
  """Candidates scored per second by ``gplace.simulate`` on a batch of
  :data:`SPEED_BATCH` random placements: ``(default schedule, own order)``,
  the latter with a random priority per candidate (``priority=``). The
  first call of each (compiling) is not timed."""
  graph, topology = instance.graph, instance.topology
  rng = np.random.default_rng(seed)
  placements = rng.integers(0, topology.n_devices,
                            (SPEED_BATCH, graph.n_nodes)).astype(np.int32)
  priority = rng.random((SPEED_BATCH, graph.n_nodes)).astype(np.float32)
  rates = []
  for extra in ({}, {"priority": priority}):
    def call():
      result = gplace.simulate(graph, placements, topology, instance.costs,
                               **extra)
      np.asarray(result.runtime_s)
    call()
    calls, began = 0, time.perf_counter()
    while calls < SPEED_CALLS or time.perf_counter() - began < min_s:
      call()
      calls += 1
    rates.append(SPEED_BATCH * calls / (time.perf_counter() - began))
  return rates[0], rates[1]


# -- rows ----------------------------------------------------------------------


def budget_label(budget_s: float) -> str:
  return f"{budget_s:g}s"


def columns(budgets: Sequence[float]) -> list[str]:
  """The results table's columns (markdown header and CSV keys alike)."""
  per_budget = [f"{name} {budget_label(b)}" for b in budgets
                for name in ("optimize ms", "winner", "own gap", "wall s",
                             "policy greedy", "policy sampled",
                             "policy trained", "critical chain")]
  gaps = [f"{name} {budget_label(b)}" for b in budgets
          for name in ("vs best", "vs bound")]
  return (["class", "graph", "ops", "devices", "seed", "baseline default ms",
           "baseline any ms"] + per_budget
          + ["reference ms", "reference", "reference wall s", "best ms",
             "bound ms"] + gaps + ["never slower"])


def _ms(seconds: float) -> str:
  return f"{1e3 * seconds:.4g}" if math.isfinite(seconds) else "inf"


def _gap(runtime_s: float, reference_s: float) -> str:
  return report.percent_change(runtime_s, reference_s, 2)


def result_row(instance: benchmark.Instance, seed: int,
               best: baselines.Best, runs: dict, reference: Run,
               best_s: float, bound_s: float) -> dict:
  """One row: ``{column: text}`` (:func:`columns`) and ``"raw"``, the
  numbers in seconds for the CSV."""
  row = {"class": instance.benchmark_class, "graph": instance.name,
         "ops": str(instance.graph.n_nodes),
         "devices": str(instance.topology.n_devices), "seed": str(seed),
         "baseline default ms": f"{_ms(best.default.runtime_s)} "
                                f"({best.default.name})",
         "baseline any ms": f"{_ms(best.any.runtime_s)} ({best.any.label})"}
  raw = {"baseline_default_s": best.default.runtime_s,
         "baseline_any_s": best.any.runtime_s}
  never_slower = True
  for budget, run in runs.items():
    b = budget_label(budget)
    row[f"optimize ms {b}"] = _ms(run.runtime_s)
    row[f"winner {b}"] = run.method
    row[f"own gap {b}"] = _gap(run.runtime_s, run.bound_s)
    row[f"wall s {b}"] = f"{run.wall_s:.1f}"
    for kind in ("greedy", "sampled"):
      own = run.policy.get(kind)
      row[f"policy {kind} {b}"] = "–" if own is None else (
          f"{_ms(own)} ({_gap(own, best.any.runtime_s)})")
      if own is not None:
        raw[f"policy_{kind}_s {b}"] = own
    row[f"policy trained {b}"] = run.policy.get("trained", "–")
    row[f"critical chain {b}"] = "–" if run.chain_s is None else (
        f"{_ms(run.chain_s)} ({_gap(run.chain_s, best.any.runtime_s)})")
    if run.chain_s is not None:
      raw[f"chain_s {b}"] = run.chain_s
    row[f"vs best {b}"] = _gap(run.runtime_s, best_s)
    row[f"vs bound {b}"] = _gap(run.runtime_s, bound_s)
    raw.update({f"optimize_s {b}": run.runtime_s,
                f"optimize_bound_s {b}": run.bound_s,
                f"wall_s {b}": run.wall_s,
                f"candidates {b}": candidates_json(run.candidates)})
    never_slower &= run.runtime_s <= best.any.runtime_s * (
        1 + NEVER_SLOWER_TOLERANCE)
  row.update({"reference ms": _ms(reference.runtime_s),
              "reference": reference.method,
              "reference wall s": f"{reference.wall_s:.1f}",
              "best ms": _ms(best_s), "bound ms": _ms(bound_s),
              "never slower": "yes" if never_slower else "NO"})
  raw.update({"reference_s": reference.runtime_s,
              "reference_bound_s": reference.bound_s,
              "reference_wall_s": reference.wall_s, "best_s": best_s,
              "bound_s": bound_s, "never_slower": never_slower})
  row["raw"] = raw
  row["explanation"] = runs[max(runs)].explanation
  return row


#: Where the time of optimize's answer at the largest budget goes.
EXPLAIN_HEADER = [
    "| graph | seed | optimize ms | bound ms | path ops | compute ms | "
    "of it behind others on a device ms | transfers ms | waits ms | path "
    "at fastest devices ms | memory blocks |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]


def explain_row(row: dict) -> str:
  """One line of the table under :data:`EXPLAIN_HEADER`."""
  e = row["explanation"]
  cells = [row["graph"], row["seed"], _ms(e.runtime_s), _ms(e.bound_s),
           str(e.path.size), _ms(e.compute_s), _ms(e.behind_s),
           _ms(e.transfer_s), _ms(e.wait_s + e.start_s), _ms(e.fastest_s),
           blocked_cell(e)]
  return "| " + " | ".join(cells) + " |"


def blocked_cell(e: gplace.Explanation) -> str:
  """How many single moves of the path's ops memory blocks, and the
  fastest: ``"2: <op> to <device>, <ms> ms"`` (that move's runtime), or
  ``"none"``."""
  moves = e.blocked_moves()
  if not moves:
    return "none"
  op, device, seconds = moves[0]
  return f"{len(moves)}: {op} to {device}, {_ms(seconds)} ms"


def markdown_row(row: dict, keys: Sequence[str]) -> str:
  return "| " + " | ".join(str(row.get(k, "–")).replace("|", "/")
                           for k in keys) + " |"


#: Columns of text; the others are numbers, right-aligned.
TEXT_COLUMNS = ("class", "graph", "reference", "never slower")


def header(keys: Sequence[str]) -> list[str]:
  """A markdown table's header and alignment rows."""
  align = ["---" if k in TEXT_COLUMNS or k.startswith("winner") else "---:"
           for k in keys]
  return ["| " + " | ".join(keys) + " |", "|" + "|".join(align) + "|"]


def measure(instance: benchmark.Instance, budgets: Sequence[float],
            seeds: Sequence[int], reference_s: float, *,
            solver_max_nodes: int, num_workers: int,
            method: str = "auto") -> list[dict]:
  """The rows of one instance: one per seed, sharing one reference run
  (seed ``seeds[0]``, hinted with the best placement of every run)."""
  graph, topology, costs = instance.graph, instance.topology, instance.costs
  per_seed = []
  for seed in seeds:
    best = baselines.best(graph, topology, costs=costs, seed=seed)
    runs = {b: optimize_run(instance, b, seed, method) for b in budgets}
    per_seed.append((seed, best, runs))
  answers = [run for _, _, runs in per_seed for run in runs.values()]
  fastest = min(answers, key=lambda run: run.runtime_s)
  reference = reference_run(
      instance, fastest.placement if math.isfinite(fastest.runtime_s)
      else None, reference_s, seed=seeds[0],
      solver_max_nodes=solver_max_nodes, num_workers=num_workers)
  best_s = min([reference.runtime_s] + [r.runtime_s for r in answers])
  bound_s = max([reference.bound_s, gplace.lower_bound(graph, topology, costs)]
                + [r.bound_s for r in answers])
  return [result_row(instance, seed, best, runs, reference, best_s, bound_s)
          for seed, best, runs in per_seed]


def summary(rows: Sequence[dict], budgets: Sequence[float]) -> list[str]:
  """Per class: median and worst gap of optimize to the best known and to
  the proven bound at each budget, and how often it was never slower than
  the best baseline."""
  keys = ["class", "rows"] + [f"{name} {budget_label(b)}" for b in budgets
                              for name in ("vs best", "vs bound")] + [
                                  "never slower"]
  lines = header(keys)
  for name in dict.fromkeys(r["class"] for r in rows):
    mine = [r["raw"] for r in rows if r["class"] == name]
    cells = {"class": name, "rows": str(len(mine))}
    for b in budgets:
      label = budget_label(b)
      for key, ref in (("vs best", "best_s"), ("vs bound", "bound_s")):
        gaps = np.array([100 * (r[f"optimize_s {label}"] / r[ref] - 1)
                         for r in mine if r[ref] > 0 and math.isfinite(
                             r[f"optimize_s {label}"])])
        cells[f"{key} {label}"] = (
            f"{np.median(gaps):+.2f}% (max {gaps.max():+.2f}%)"
            if gaps.size else "–")
    cells["never slower"] = (f"{sum(r['never_slower'] for r in mine)}/"
                             f"{len(mine)}")
    lines.append(markdown_row(cells, keys))
  return lines


def write_csv(path: str, rows: Sequence[dict], keys: Sequence[str]) -> None:
  raw_keys = list(dict.fromkeys(k for r in rows for k in r["raw"]))
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(list(keys) + raw_keys)
    for r in rows:
      writer.writerow([r.get(k, "") for k in keys]
                      + [r["raw"].get(k, "") for k in raw_keys])


def _floats(text: str, flag: str) -> list[float]:
  try:
    values = [float(x) for x in text.split(",") if x.strip()]
  except ValueError:
    values = []
  if not values or not all(v > 0 and math.isfinite(v) for v in values):
    raise SystemExit(f"{flag} must be comma-separated positive seconds, got "
                     f"{text!r}.")
  return values


def apply_overrides(settings: Sequence[str], module=budget_lib,
                    flag: str = "--set") -> str:
  """Sets ``NAME=VALUE`` constants of ``module`` (default
  :mod:`gplace.autoplace.budget`; for this process) and says which, e.g.
  ``"AUTO_POLICY_MIN_NODES=1e9"``;
  a switch (``LNS_FROM_PLAN_TOO``) takes ``true`` or ``false``. ``flag``:
  the option its errors name.

  Raises:
    SystemExit: not ``NAME=VALUE``, an unknown name, or a value that is not
      a number (``true`` / ``false`` for a switch).
  """
  said = []
  for setting in settings:
    name, _, text = setting.partition("=")
    old = getattr(module, name, None) if name.isupper() else None
    if not text or not isinstance(old, (int, float)):
      known = sorted(k for k, v in vars(module).items()
                     if k.isupper() and isinstance(v, (int, float)))
      raise SystemExit(f"{flag} takes NAME=VALUE with a number or switch "
                       f"constant of {module.__name__}, got "
                       f"{setting!r}; the names: {', '.join(known)}.")
    if isinstance(old, bool):
      if text.lower() not in ("true", "false"):
        raise SystemExit(f"{flag} {name}: {text!r} is not true or false.")
      value = text.lower() == "true"
    else:
      try:
        value = (type(old)(float(text)) if isinstance(old, int)
                 else float(text))
      except (ValueError, OverflowError):
        raise SystemExit(f"{flag} {name}: {text!r} is not a number.") \
            from None
    setattr(module, name, value)
    said.append(f"{name}={text}")
  return ", ".join(said)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--classes", default=",".join(benchmark.DEFAULT_CLASSES),
                      help="comma-separated benchmark classes: "
                      f"{', '.join(benchmark.CLASSES)} (paper: big graphs, "
                      "off by default)")
  parser.add_argument("--budgets", default="10,60,300",
                      help="comma-separated gplace.optimize budgets, seconds")
  parser.add_argument("--reference_s", type=float, default=1800.0,
                      help="seconds of the reference run per graph")
  parser.add_argument("--seeds", type=int, default=1,
                      help="optimize runs per graph and budget, seeds "
                      "0..seeds-1 (one row each)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  parser.add_argument("--graph_cache", default=None,
                      help="folder of captured zoo graphs (.npz), read if "
                      "there, else captured and written")
  parser.add_argument("--max_graphs", type=int, default=0,
                      help="at most this many graphs per class, smallest "
                      "first (0: all; for smoke runs)")
  parser.add_argument("--graphs", default="",
                      help="only graphs whose name contains one of these "
                      "comma-separated strings ('|'-separated when given "
                      "one: names hold commas)")
  parser.add_argument("--solver_max_nodes", type=int,
                      default=solvers.MAX_EXACT_NODES,
                      help="the reference is CP-SAT on graphs of at most "
                      "this many ops, else a long gplace.optimize")
  parser.add_argument("--num_workers", type=int, default=2,
                      help="CP-SAT search threads of the reference run")
  parser.add_argument("--set", action="append", default=[],
                      metavar="NAME=VALUE",
                      help="override a constant of gplace.autoplace.budget "
                      "for an ablation (repeatable), e.g. "
                      "AUTO_POLICY_MIN_NODES=1000000000: optimize without "
                      "the GO phase (a switch takes true or false, e.g. "
                      "LNS_FROM_PLAN_TOO=false)")
  parser.add_argument("--method", default="auto",
                      help="gplace.optimize's method at each budget, e.g. "
                      "'lns' (large-neighbourhood search with CP-SAT "
                      "windows from the best baseline)")
  args = parser.parse_args(argv)
  budgets = _floats(args.budgets, "--budgets")
  overrides = apply_overrides(args.set)
  if not args.reference_s > 0 or args.seeds < 1 or args.max_graphs < 0:
    raise SystemExit("--reference_s must be positive, --seeds at least 1 "
                     "and --max_graphs at least 0.")
  classes = [c for c in args.classes.split(",") if c]
  seeds = list(range(args.seeds))
  separator = "|" if "|" in args.graphs else ","
  wanted = [w for w in args.graphs.split(separator) if w]
  all_specs = or_exit(benchmark.specs, classes,
                      cache_dir=args.graph_cache)
  chosen, taken = [], {}
  for spec in all_specs:
    if wanted and not any(w in spec.name for w in wanted):
      continue
    if args.max_graphs and taken.get(spec.benchmark_class, 0) >= \
        args.max_graphs:
      continue
    taken[spec.benchmark_class] = taken.get(spec.benchmark_class, 0) + 1
    chosen.append(spec)
  if not chosen:
    raise SystemExit(
        f"--graphs {args.graphs!r} names no graph of the classes "
        f"{', '.join(classes)}; the names: "
        f"{'; '.join(spec.name for spec in all_specs)}. End a name that "
        "holds a comma with '|'.")
  study = report.Study.create(args.out, __file__, argv)

  keys = columns(budgets)
  intro = [
      "### Optimality: gplace.optimize against the best known answer", "",
      f"Method {args.method!r}; budgets "
      f"{', '.join(budget_label(b) for b in budgets)}; reference "
      f"{args.reference_s:g} s per graph (CP-SAT hinted with the best "
      f"found on graphs of at most {args.solver_max_nodes} ops, else "
      "gplace.optimize); seeds "
      f"{', '.join(map(str, seeds))}. Simulated ms per step. own gap: "
      "optimize's runtime over its own lower bound; vs best: over the best "
      "known (the reference and every optimize run); vs bound: over the "
      "largest proven bound. policy greedy / sampled: the learned policy's "
      "own placements inside optimize (before any search from them), "
      "against the best baseline in any schedule; –: no policy ran. policy "
      "trained: GO's steps on the graph, and why it stopped early "
      "(stopped behind: not faster than the best baseline; stalled: it "
      "stopped gaining). critical chain: gplace's critical-chain plan "
      "inside optimize (gplace.baselines.critical_chain, not a classical "
      "baseline; before any search from it), against the best baseline in "
      "any schedule. never "
      "slower: optimize was no slower than the best baseline in any "
      "schedule at every budget."
      + (f" Ablation: gplace.autoplace.budget's {overrides}." if overrides
         else ""), ""]
  instances = ["#### Graphs", "", "| class | graph | ops | devices |",
               "|---|---|---:|---|"]
  results = ["#### Results", ""] + header(keys)
  speed = ["#### Inner loop", "",
           f"Candidates scored per second, gplace.simulate on batches of "
           f"{SPEED_BATCH} random placements.", "",
           "| class | graph | ops | default schedule /s | own order "
           "(priority=) /s | ratio |", "|---|---|---:|---:|---:|---:|"]
  explained = [
      "#### Where the time goes", "",
      f"gplace.explain of optimize's answer at {budget_label(max(budgets))}"
      ": its critical path in its schedule, split into the compute of its "
      "ops (and of that, ops it waited behind on their device), transfers "
      "between devices and waits (busy links, idle devices); the bound "
      "sees a path at the ops' fastest devices and work spread freely over "
      "the devices. Memory blocks: single "
      "moves of the path's ops that would make the step faster in the same "
      "schedule but do not fit (how many; the fastest, and the runtime it "
      "would give).", ""] + EXPLAIN_HEADER
  rows: list[dict] = []

  def document() -> list[str]:
    return (intro + instances + [""] + results + [""] + explained + [""]
            + speed + [""] + ["#### Summary", ""] + summary(rows, budgets))

  print("\n".join(intro + results), flush=True)
  for spec in chosen:
    began = time.perf_counter()
    try:
      instance = spec.build()
      instances.append(f"| {instance.benchmark_class} | {instance.name} | "
                       f"{instance.graph.n_nodes} | {instance.devices} |")
      new = measure(instance, budgets, seeds, args.reference_s,
                    solver_max_nodes=args.solver_max_nodes,
                    num_workers=args.num_workers, method=args.method)
      rows += new
      lines = [markdown_row(r, keys) for r in new]
      explained += [explain_row(r) for r in new]
      default_rate, own_rate = inner_loop_speed(instance)
      speed.append(f"| {instance.benchmark_class} | {instance.name} | "
                   f"{instance.graph.n_nodes} | {default_rate:.4g} | "
                   f"{own_rate:.4g} | {own_rate / default_rate:.3g} |")
    except GplaceError as err:
      lines = [f"| {spec.benchmark_class} | {spec.name} | failed: "
               f"{first_line(err)} |"]
    results += lines
    print("\n".join(lines), flush=True)
    print(f"<!-- {spec.name}: {time.perf_counter() - began:.1f} s -->",
          file=sys.stderr, flush=True)
    if study:
      write_csv(study.path(CSV_NAME), rows, keys)
      study.write(document())
  print("\n".join([""] + speed + ["", "#### Summary", ""]
                  + summary(rows, budgets)), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
