"""Does the learned policy earn its place in gplace.optimize? (issue 45)

    python experiments/learning_in_optimize.py \
        --out experiments/results/learning_in_optimize

The ablation: ``gplace.optimize(method="auto")`` on graphs the shipped
policy never saw (``experiments/configs/pretrain.py``'s ``HELD_OUT``
families, tiny train steps, ``1cpu+4gpu``, the topology gplace ships a
policy for), at each of ``--budgets`` seconds, once with the policy
(``policy=`` the shipped one, zero-shot; its placements start the search,
:func:`gplace.autoplace.candidates.search_starts`) and once without
(``policy=False``, ``"auto"``'s default since this study: the same
baselines, searches, solver and LNS, which get the policy's time). The two runs of a cell follow
each other, in alternating order, so the machine's load falls on both.

Per cell it reports, in simulated ms and against the best classical plan in
its best schedule (``gplace.baselines.best``): ``optimize`` with and without
the policy and the winning candidate of each; the policy's own placements
inside the run with it (zero-shot greedy, zero-shot best of 16 samples, and
fine-tuned greedy / best sampled where fine-tuning ran: ``"auto"``
fine-tuned at budgets of 180 s and more before this study), apart from
anything a search found; and both runs' wall seconds. Every runtime is simulated;
wall seconds are measured here, and a budget in seconds buys less on a
loaded machine (the load average is in the README's header).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Optional

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from experiments.configs import pretrain as pretrain_config
import gplace
from gplace import baselines, report, workloads
from gplace.rl import policy_file
from gplace.sim.presets import preset

TOPOLOGY = "1cpu+4gpu"
SHIPPED = policy_file.shipped_policy_path(TOPOLOGY)
#: optimize's answer counts as a tie within this relative difference.
TIE = 1e-6


def _own(candidates: dict, *words: str) -> float:
  """The runtime of the policy's candidate whose label has every word."""
  hits = [s for label, s in candidates.items()
          if label.startswith("pretrained") and all(w in label for w in words)]
  return min(hits) if hits else math.nan


def cell(graph, budget_s: float, *, seed: int, policy_first: bool) -> dict:
  """``optimize`` with and without the policy at ``budget_s`` (seconds in the
  returned dict are simulated runtimes, ``*_wall`` measured)."""
  runs = {}
  for with_policy in ((True, False) if policy_first else (False, True)):
    result = gplace.optimize(graph, topology=TOPOLOGY, budget_s=budget_s,
                             seed=seed, progress=False,
                             policy=SHIPPED if with_policy else False)
    runs[with_policy] = result
  with_, without = runs[True], runs[False]
  c = with_.candidates
  return dict(
      budget=budget_s, with_s=with_.runtime_s, with_method=with_.method,
      with_wall=with_.wall_s, without_s=without.runtime_s,
      without_method=without.method, without_wall=without.wall_s,
      zero_greedy=_own(c, "zero-shot", ": greedy"),
      zero_samples=_own(c, "zero-shot", "samples"),
      tuned_greedy=_own(c, "fine-tuned", ": greedy"),
      tuned_best=_own(c, "fine-tuned", "best sampled"),
      policy_won="pretrained" in with_.method,
      bound=max(with_.lower_bound_s, without.lower_bound_s))


def _ms(seconds: float, reference: float) -> str:
  if math.isnan(seconds):
    return "–"
  if not math.isfinite(seconds):
    return "OOM"
  return f"{seconds * 1e3:.3f} ({report.percent_change(seconds, reference)})"


def _verdict(r: dict) -> str:
  if abs(r["with_s"] / r["without_s"] - 1) <= TIE:
    return "tie"
  return "with" if r["with_s"] < r["without_s"] else "without"


def rows_for(name: str, budgets: list[float], *, seed: int,
             size: str) -> list[dict]:
  """Every budget's cell of one workload."""
  graph = workloads.load(name, size, "train").graph
  best = baselines.best(graph, preset(TOPOLOGY), seed=seed).any
  rows = []
  for i, budget_s in enumerate(budgets):
    began = time.perf_counter()
    r = cell(graph, budget_s, seed=seed, policy_first=i % 2 == 0)
    r.update(name=name, nodes=graph.n_nodes, best=best.runtime_s,
             best_label=f"{best.name} ({best.schedule})")
    print(f"{name} {budget_s:g} s: with {r['with_s'] * 1e3:.4f} ms "
          f"({r['with_method']}), without {r['without_s'] * 1e3:.4f} ms "
          f"({r['without_method']}); {time.perf_counter() - began:.0f} s",
          flush=True)
    rows.append(r)
  return rows


def table(rows: list[dict]) -> list[str]:
  """The ablation table and its summary lines."""
  lines = [
      "Simulated ms per step (change against the best classical plan in its "
      "best schedule); wall seconds measured here. The policy's own columns "
      "are placements the policy produced inside the run with it, apart "
      "from anything a search found.", "",
      "| workload | nodes | budget s | best classical | optimize with the "
      "policy | optimize without | better | winner with the policy | "
      "policy zero-shot greedy | zero-shot best of 16 | fine-tuned greedy | "
      "fine-tuned best sampled | lower bound | wall s with / without |",
      "|---|---:|---:|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"]
  for r in rows:
    ref = r["best"]
    lines.append(
        f"| {r['name']} | {r['nodes']} | {r['budget']:g} "
        f"| {ref * 1e3:.3f} {r['best_label']} "
        f"| {_ms(r['with_s'], ref)} | {_ms(r['without_s'], ref)} "
        f"| {_verdict(r)} | {r['with_method']} "
        f"| {_ms(r['zero_greedy'], ref)} | {_ms(r['zero_samples'], ref)} "
        f"| {_ms(r['tuned_greedy'], ref)} | {_ms(r['tuned_best'], ref)} "
        f"| {r['bound'] * 1e3:.3f} "
        f"| {r['with_wall']:.0f} / {r['without_wall']:.0f} |")
  lines.append("")
  for budget in sorted({r["budget"] for r in rows}):
    at = [r for r in rows if r["budget"] == budget]
    verdicts = [_verdict(r) for r in at]
    ratio = math.exp(sum(math.log(r["with_s"] / r["without_s"]) for r in at)
                     / len(at))
    lines.append(
        f"- {budget:g} s: with the policy better on "
        f"{verdicts.count('with')}, worse on {verdicts.count('without')}, "
        f"tied on {verdicts.count('tie')} of {len(at)}; geometric mean "
        f"with / without {ratio:.4f}; the winner with the policy was the "
        f"policy's placement or a search from it on "
        f"{sum(r['policy_won'] for r in at)}.")
  return lines


def main(argv: Optional[list[str]] = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--workloads", default=",".join(
      pretrain_config.HELD_OUT), help="comma-separated held-out workloads")
  parser.add_argument("--budgets", default="10,60",
                      help="comma-separated optimize budgets in seconds")
  parser.add_argument("--long_budget", type=float, default=0.0,
                      help="one more budget, for --long_workloads only")
  parser.add_argument("--long_workloads", default="",
                      help="workloads that also get --long_budget")
  parser.add_argument("--size", default="tiny", help="workload size")
  parser.add_argument("--seed", type=int, default=0, help="seed")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  flags = parser.parse_args(argv)
  study = report.Study.create(flags.out, __file__, argv)
  budgets = [float(b) for b in flags.budgets.split(",") if b]
  long_ones = {w for w in flags.long_workloads.split(",") if w}
  rows: list[dict] = []
  for name in [w.strip() for w in flags.workloads.split(",") if w.strip()]:
    extra = [flags.long_budget] if name in long_ones and flags.long_budget \
        else []
    rows.extend(rows_for(name, budgets + extra, seed=flags.seed,
                         size=flags.size))
    if study:   # a long run keeps what it has
      study.write(table(rows))
  lines = table(rows)
  print("\n".join(lines))
  if study:
    study.write(lines)


if __name__ == "__main__":
  main()
