"""GO's multi-task table, measured: do the best simulated placement,
schedule and fusion decisions run faster on this machine?

    python experiments/multitask_measured.py --programs mlp,convnet \
        --out experiments/results/multitask/measured

On two forced CPU devices (set before JAX starts), for each real program
of ``experiments/programs.py`` it

1. calibrates with ``gplace.profile`` (cached: ``--cache``);
2. runs the multi-task table on the calibrated local topology
   (``experiments/multitask_mixes.py``: every mix learnt by GO and searched
   at an equal budget, simulated with the profile's costs);
3. runs with the executor (``gplace.place(fn, graph, placement,
   schedule=order, fusion=labels)``) each mix's best simulated plan of the
   policy (the faster of its greedy decision and best sample) and of the
   search, and the defaults (one device; the best classical placement in
   its best schedule with XLA's own clusters, twice: the second copy shows
   the measurement's noise), in ``--rounds`` interleaved rounds of
   ``gplace.measure``, keeping the fastest call of all rounds;
4. prints measured ms next to simulated ms, and whether the schedule-only
   (S) and fusion-only (F) decisions move the measured runtime.

The machine is shared: load averages are printed at the start and end.
"""

import os
import sys

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))

if __name__ == "__main__":       # two CPU devices, before JAX starts
  os.environ["XLA_FLAGS"] = (
      os.environ.get("XLA_FLAGS", "")
      + " --xla_force_host_platform_device_count=2").strip()

import argparse  # noqa: E402  pylint: disable=wrong-import-position
import time  # noqa: E402  pylint: disable=wrong-import-position
from typing import NamedTuple, Optional  # noqa: E402  pylint: disable=wrong-import-position

import jax  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
  jax.config.update("jax_num_cpu_devices", 2)

import numpy as np  # noqa: E402  pylint: disable=wrong-import-position
from scipy import stats  # noqa: E402  pylint: disable=wrong-import-position

import gplace  # noqa: E402  pylint: disable=wrong-import-position
from gplace import report  # noqa: E402  pylint: disable=wrong-import-position
from gplace.execution import cache as executor_cache  # noqa: E402  pylint: disable=wrong-import-position
from gplace.execution.timing import fastest_in_rounds  # noqa: E402  pylint: disable=wrong-import-position
from gplace.graphs.fusion import fuse  # noqa: E402  pylint: disable=wrong-import-position
from experiments import multitask_mixes as mixes  # noqa: E402  pylint: disable=wrong-import-position

#: Where calibrated profiles are kept (ignored by git).
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache",
                     "multitask")
#: A relative change of the measured runtime under this (or under twice
#: the control's difference) is called noise.
NOISE_FLOOR = 0.03


class Measured(NamedTuple):
  """One configuration measured: ``label`` (mix, who), its plan, the
  fastest call of all rounds (seconds; inf: it failed)."""
  label: str
  mix: str
  plan: mixes.Plan
  measured_s: float


def calibrated_problem(name: str, fn, args: tuple, devices, cache,
                       time_s: Optional[float] = None) -> mixes.Problem:
  """The program's graph on ``devices``' calibrated topology, with the
  profile's costs (``gplace.profile``, cached in ``cache``)."""
  prof = gplace.profile(fn, *args, devices=devices, cache=cache,
                        time_s=time_s)
  return mixes.Problem(name, prof.graph, prof.topology, prof.costs)


def chosen_plans(rows: list) -> list[tuple[str, str, mixes.Plan]]:
  """``[(label, mix, plan)]`` to measure: the defaults, the classical plan
  again (control), and per mix the policy's faster decision and the
  search's; a plan equal to an earlier one (same placement, order and
  fusion) is measured once."""
  chosen = [(f"default: {r.who}", "default", r.plan) for r in rows
            if r.mix == "default" and "default_fusion" not in r.who]
  for mix in dict.fromkeys(r.mix for r in rows if r.mix != "default"):
    policy = [r for r in rows if r.mix == mix and r.who.startswith("policy")]
    if policy:                 # the faster of greedy and best sampled
      policy = min(policy, key=lambda r: r.plan.runtime_s)
      chosen.append((f"{mix}: {policy.who}", mix, policy.plan))
    chosen += [(f"{mix}: {r.who}", mix, r.plan) for r in rows
               if r.mix == mix and r.who.startswith("search")]
  kept, seen = [], {}
  for label, mix, plan in chosen:
    key = _key(plan)
    if key in seen:
      print(f"    ({label} is the same plan as {seen[key]}: measured once)")
      continue
    seen[key] = label
    kept.append((label, mix, plan))
  classical = rows[0].plan
  kept.insert(1, ("control: the classical plan again", "control", classical))
  return kept


def _key(plan: mixes.Plan) -> bytes:
  fusion = b"" if plan.fusion is None else plan.fusion.tobytes()
  return plan.placement.tobytes() + plan.order.tobytes() + b"|" + fusion


def measure_plans(fn, args: tuple, graph, plans, devices, *, rounds: int,
                  repeats: int, warmup: int, seed: int = 0) -> np.ndarray:
  """``float64 [len(plans)]``: each plan placed with the executor
  (``gplace.place(..., schedule=plan.order, fusion=plan.fusion)``), timed
  in ``rounds`` interleaved rounds (a fresh random order each) of
  ``repeats`` calls after ``warmup``, the fastest call of all rounds (inf:
  it could not be built or run)."""
  placed = [gplace.place(fn, graph, plan.placement, devices,
                         schedule=plan.order, fusion=plan.fusion)
            for plan in plans]
  return fastest_in_rounds(placed, *args, rounds=rounds, repeats=repeats,
                           warmup=warmup, rng=np.random.default_rng(seed))


def measured_rows(problem: mixes.Problem, fn, args: tuple, devices, rows,
                  ns) -> list[Measured]:
  """The chosen plans of one program's table, measured."""
  chosen = chosen_plans(rows)
  fastest = measure_plans(fn, args, problem.graph, [p for _, _, p in chosen],
                          devices, rounds=ns.rounds, repeats=ns.repeats,
                          warmup=ns.warmup, seed=ns.seed)
  return [Measured(label, mix, plan, float(t))
          for (label, mix, plan), t in zip(chosen, fastest)]


def format_measured(problem: mixes.Problem, out: list[Measured]) -> list[str]:
  """Markdown rows: simulated next to measured, each against the
  classical plan's (the first of ``out``)."""
  classical = out[0]
  rows = []
  for m in out:
    groups = ("XLA's clusters" if m.plan.fusion is None else
              str(int((fuse(problem.graph, m.plan.fusion).n_members
                       > 1).sum())))
    rows.append(
        f"| {problem.name} ({problem.graph.n_nodes} ops) | {m.label} | "
        f"{len(np.unique(m.plan.placement))} | {groups} | "
        f"{m.plan.runtime_s * 1e3:.3f} | "
        f"{report.percent_change(m.plan.runtime_s, classical.plan.runtime_s)}"
        f" | {m.measured_s * 1e3:.3f} | "
        f"{report.percent_change(m.measured_s, classical.measured_s)} |")
  return rows


MEASURED_HEADER = [
    "| program | configuration | devices used | fused groups | simulated ms "
    "| simulated vs classical | measured ms (fastest) | measured vs "
    "classical |", "|" + "---|" * 8]


def measured_verdicts(name: str, out: list[Measured]) -> list[str]:
  """Plain sentences: the control's noise; whether the schedule-only and
  fusion-only decisions move the measured runtime; the fastest measured
  configuration; the rank agreement of simulated and measured."""
  classical = out[0].measured_s
  control = next(m.measured_s for m in out if m.mix == "control")
  noise = max(NOISE_FLOOR, 2 * abs(control / classical - 1))
  lines = [f"- {name}: the classical plan measured twice: "
           f"{classical * 1e3:.3f} / {control * 1e3:.3f} ms; changes under "
           f"{noise * 100:.1f}% are called noise."]
  for mix, what in (("S", "scheduling"), ("F", "fusion"),
                    ("S+F", "scheduling + fusion")):
    changes = [m.measured_s / classical - 1 for m in out if m.mix == mix]
    if not changes:     # every plan of the mix was an earlier one
      lines.append(f"- {name}: {what} alone: neither the policy nor the "
                   "search changed the plan from one measured above, so it "
                   "cannot move the measured runtime here.")
      continue
    moved = [c for c in changes if abs(c) > noise]
    text = ", ".join(f"{c * 100:+.1f}%" for c in changes)
    verdict = ("moves the measured runtime" if moved else
               "does NOT move the measured runtime beyond noise")
    lines.append(f"- {name}: {what} alone on the classical placement "
                 f"{verdict} ({text} vs the classical plan).")
  best = min(out, key=lambda m: m.measured_s)
  lines.append(f"- {name}: fastest measured: {best.label} "
               f"({best.measured_s * 1e3:.3f} ms, "
               f"{report.percent_change(best.measured_s, classical)} vs "
               "the classical plan).")
  simulated = np.array([m.plan.runtime_s for m in out])
  measured = np.array([m.measured_s for m in out])
  ok = np.isfinite(simulated) & np.isfinite(measured)
  if ok.sum() >= 3:
    rho = stats.spearmanr(simulated[ok], measured[ok]).statistic
    lines.append(f"- {name}: Spearman of simulated against measured over "
                 f"{int(ok.sum())} configurations: {rho:.2f}.")
  return lines


def run_program(name: str, ns, devices) -> tuple[list[str], list[str],
                                                   list[str]]:
  """``(simulated table rows, measured rows, verdicts)`` of one program."""
  from experiments.programs import PROGRAMS  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  fn, args = PROGRAMS[name]()
  began = time.time()
  problem = calibrated_problem(name, fn, args, devices, ns.cache,
                               ns.profile_s or None)
  print(f"{name}: calibrated in {time.time() - began:.0f} s; load "
        f"{report.load_average(', ')}", flush=True)
  _, rows = mixes.table(problem, samples=ns.samples,
                        num_samples=ns.num_samples, seed=ns.seed,
                        log=lambda line: print(line, flush=True))
  start = rows[0].plan
  simulated = [mixes.format_row(problem, row, start) for row in rows]
  out = measured_rows(problem, fn, args, devices, rows, ns)
  executor_cache.clear_cache()
  measured = format_measured(problem, out)
  print("\n".join(measured), flush=True)
  said = mixes.verdicts(name, rows) + measured_verdicts(name, out)
  print("\n".join(said) + f"\n(load {report.load_average(', ')})", flush=True)
  return simulated, measured, said


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--programs", default="mlp,convnet",
                      help="comma-separated programs of "
                      "experiments/programs.py")
  parser.add_argument("--samples", type=int, default=128,
                      help="simulator evaluations per RL run and search")
  parser.add_argument("--num_samples", type=int, default=16,
                      help="samples per RL step")
  parser.add_argument("--rounds", type=int, default=5,
                      help="interleaved measurement rounds")
  parser.add_argument("--repeats", type=int, default=10,
                      help="timed calls per configuration and round")
  parser.add_argument("--warmup", type=int, default=2,
                      help="untimed calls before timing")
  parser.add_argument("--profile_s", type=float, default=30.0,
                      help="gplace.profile's time_s per program (0: its "
                      "full profile)")
  parser.add_argument("--cache", default=CACHE,
                      help="directory of cached profiles")
  parser.add_argument("--seed", type=int, default=0,
                      help="of the policies, searches and round orders")
  parser.add_argument("--out", default="", help=report.OUT_HELP)
  ns = parser.parse_args(argv)
  devices = list(jax.devices("cpu")[:2])
  study = report.Study.create(ns.out, __file__, argv)
  print(f"devices: {devices}; load average {report.load_average(', ')}",
        flush=True)
  simulated, measured, said = list(mixes.HEADER), list(MEASURED_HEADER), []
  for name in [p.strip() for p in ns.programs.split(",") if p.strip()]:
    sim_rows, meas_rows, lines = run_program(name, ns, devices)
    simulated += sim_rows
    measured += meas_rows
    said += lines
  end = f"load average at the end: {report.load_average(', ')}"
  print(end)
  if study:
    study.write([
        f"{len(devices)} forced CPU devices; each program calibrated with "
        "gplace.profile, the mixes run on its calibrated topology "
        f"(simulated, {ns.samples} evaluations per GO run and per search); "
        "then the chosen plans run with gplace.place(..., schedule=, "
        f"fusion=), {ns.rounds} interleaved rounds of {ns.repeats} timed "
        "calls, the fastest call of all rounds (measured). The machine is "
        f"shared (2 cores); {end}.", "", "Measured subset:", "", *measured,
        "", *said, "", "Simulated table (calibrated profile):", "",
        *simulated, "", *mixes.method_lines(ns.num_samples)])
  return 0


if __name__ == "__main__":
  sys.exit(main())
