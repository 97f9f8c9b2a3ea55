"""Transfer of a pretrained policy to held-out graphs (GO's generalization
table), next to the best classical plan, an equal-budget search and GO
trained from scratch.

    python experiments/transfer.py --policy gplace/pretrained/go_1cpu+4gpu.npz \
        --out experiments/results/transfer/1cpu+4gpu

For each held-out workload (default ``experiments/configs/pretrain.py``'s
``HELD_OUT``: whole families the policy never saw; tiny train steps on the
policy's topology) it reports, in simulated ms and as a change against the
best classical plan in its best schedule:

* **zero-shot**: the pretrained policy's own greedy placement and the best
  of 16 fresh samples (no training); a policy with ``policy.hint`` is given
  the best baseline in the default schedule (a column of its own, with how
  many ops the greedy placement moves off it);
* **fine-tuned**: the same policy after ``--steps`` RL steps on the graph
  (``config.policy_init``, the pretraining config, no warm start): its
  greedy placement afterwards and the best placement it sampled while
  fine-tuning, with the wall time (compiling the training step included);
* **from scratch**: the same config and steps from a fresh initialisation
  (GO-one at the fine-tuning budget), run second, so its wall time reuses
  the compiled step; the pretraining's own cost is not in the table (its
  steps are in the policy file's metadata, printed above it);
* **annealing**: simulated annealing from the best default-schedule baseline
  with as many simulator evaluations as fine-tuning sampled
  (steps x samples), the equal-budget search control;
* the lower bound.

Everything is the policy's own placement except the annealing row; no
number here mixes search into a learned one.
"""

import argparse
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from experiments.configs import pretrain as pretrain_config
from gplace import report, workloads
from gplace.autoplace import candidates as candidates_lib
from gplace.autoplace import policy as learned
from gplace.autoplace.inputs import Problem
from gplace.rl import policy_file
from gplace.rl import settings
from gplace.sim.bounds import lower_bound
from gplace.sim.presets import preset


def _change(runtime_s: float, reference_s: float) -> str:
  if not np.isfinite(runtime_s):
    return "OOM"
  return f"{runtime_s * 1e3:.3f} ({(runtime_s / reference_s - 1) * 100:+.1f}%)"


def _pick(found: list, suffix: str) -> float:
  hits = [c.runtime_s for c in found if c.label.endswith(suffix)]
  return hits[0] if hits else float("inf")


def transfer_row(name: str, loaded, *, steps: int, seed: int,
                 size: str = "tiny") -> dict:
  """Every column of one held-out workload (runtimes in seconds)."""
  graph = workloads.load(name, size, "train").graph
  topology = preset(loaded.topology)
  problem = Problem(graph, topology)
  runs = candidates_lib.baseline_runs(problem, seed=seed)
  best = runs.best[0]
  plan = candidates_lib.best_of(runs.default)
  zero = learned.zero_shot_candidates(problem, loaded, seed=seed,
                                      default_baselines=runs.default)
  greedy = [c for c in zero if c.label.endswith(": greedy")][0]
  began = time.perf_counter()
  tuned = learned.finetune_candidates(problem, loaded, time_s=1e9,
                                      seed=seed, steps=steps)
  tuned_s = time.perf_counter() - began
  # The same training settings and policy, from a fresh initialisation.
  scratch_settings = settings.from_record(
      {k: v for k, v in loaded.config.items() if k != "pretrain"},
      legacy=True).replace(policy_init="", warm_start=dict(baseline="none"))
  began = time.perf_counter()
  scratch = learned.train_candidates(
      problem, settings.PolicySettings.from_record(loaded.policy),
      scratch_settings, time_s=1e9, seed=seed, max_steps=steps,
      label="from scratch")
  scratch_s = time.perf_counter() - began
  evaluations = steps * int(loaded.config["rl"]["num_samples"])
  start = candidates_lib.best_of(runs.default)
  search = candidates_lib.search_candidate(
      problem, "annealing", start, time_s=1e9, seed=seed,
      max_evaluations=evaluations)
  return dict(
      name=name, nodes=graph.n_nodes, best=best.runtime_s, best_label=best.label,
      plan=plan.runtime_s, plan_label=plan.label,
      off_plan=int(np.sum(greedy.placement != plan.placement)),
      bound=lower_bound(graph, topology),
      zero_greedy=_pick(zero, ": greedy"), zero_samples=_pick(zero, "samples"),
      tuned_greedy=_pick(tuned, ": greedy"),
      tuned_best=_pick(tuned, ": best sampled"), tuned_s=tuned_s,
      scratch_greedy=_pick(scratch, ": greedy"),
      scratch_best=_pick(scratch, ": best sampled"), scratch_s=scratch_s,
      search=search.runtime_s, evaluations=evaluations)


def table(rows: list, loaded, steps: int) -> list[str]:
  samples = int(loaded.config["rl"]["num_samples"])
  lines = [
      f"Policy: `{os.path.relpath(loaded.path)}` (trained on "
      f"{', '.join(loaded.meta.get('trained_on', []))}; "
      f"{loaded.meta.get('steps', '?')} steps), topology "
      f"{loaded.topology}; fine-tuning and from-scratch: {steps} RL steps of "
      f"{samples} samples; annealing: {steps * samples} evaluations. "
      "Simulated ms, change against the best classical plan.",
      "",
      "| workload | nodes | best classical (schedule) | best in the default "
      "schedule (a hinted policy's plan) | zero-shot greedy | "
      "zero-shot greedy: ops off that plan | "
      "zero-shot best of 16 | fine-tuned greedy | fine-tuned best sampled | "
      "from scratch greedy | from scratch best sampled | annealing, equal "
      "evaluations | lower bound | fine-tune wall s (incl. compile) | "
      "from scratch wall s (step already compiled) |",
      "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|"]
  for r in rows:
    ref = r["best"]
    lines.append(
        f"| {r['name']} | {r['nodes']} | {ref * 1e3:.3f} ({r['best_label']}) "
        f"| {_change(r['plan'], ref)} {r['plan_label']} "
        f"| {_change(r['zero_greedy'], ref)} | {r['off_plan']} "
        f"| {_change(r['zero_samples'], ref)} "
        f"| {_change(r['tuned_greedy'], ref)} "
        f"| {_change(r['tuned_best'], ref)} "
        f"| {_change(r['scratch_greedy'], ref)} "
        f"| {_change(r['scratch_best'], ref)} "
        f"| {_change(r['search'], ref)} | {r['bound'] * 1e3:.3f} "
        f"| {r['tuned_s']:.0f} | {r['scratch_s']:.0f} |")
  return lines


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--policy", default=None,
                      help="policy file (default: the shipped 1cpu+4gpu one)")
  parser.add_argument("--workloads", default=",".join(
      pretrain_config.HELD_OUT), help="comma-separated held-out workloads")
  parser.add_argument("--steps", type=int, default=learned.FINETUNE_STEPS,
                      help="fine-tuning (and from-scratch) RL steps")
  parser.add_argument("--seed", type=int, default=0, help="seed")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  flags = parser.parse_args()
  study = report.Study.create(flags.out, __file__)
  path = flags.policy or policy_file.shipped_policy_path("1cpu+4gpu")
  loaded = policy_file.load_policy(path)
  rows = []
  for name in [w.strip() for w in flags.workloads.split(",") if w.strip()]:
    began = time.perf_counter()
    rows.append(transfer_row(name, loaded, steps=flags.steps,
                             seed=flags.seed))
    print(f"{name}: {time.perf_counter() - began:.0f} s", flush=True)
  lines = table(rows, loaded, flags.steps)
  print("\n".join(lines))
  if study:
    study.write(lines)


if __name__ == "__main__":
  main()
