"""Learning vs search at an equal budget of simulator evaluations.

    python experiments/learning_vs_search.py --size tiny \
        --workloads rnnlm2,wavenet2 --evaluations 12800 \
        --out experiments/results/learning_vs_search/tiny

For each workload (default the suite of ``experiments/search_controls.py``)
and seed, every arm below gets the same number of simulator evaluations
(``--evaluations``; the RL arms spend it as ``steps x --samples``):

* **policy greedy** (learned): pure RL (``experiments/configs/quickstart.py``:
  group-level actions, no warm start, no search around the best), then the
  policy's own argmax placement.
* **policy best sample** (learned): the fastest placement the policy itself
  sampled during that run (every one of them drawn from the policy; no
  baseline seeding, no search).
* **policy refined per op** (learned; ``--refine_evaluations R``): the
  pure-RL arm spends ``R`` of its evaluations after training on
  :mod:`gplace.rl.refine`: a per-op policy started at its greedy placement,
  trained on single-op moves of its own greedy placement (per-move credit);
  its greedy placement and best own sample. With ``--refine_start best``
  it starts at the fastest of that greedy placement and every baseline's
  placement (a row names the baseline when one was faster). Its control
  (search): a local search over single ops from the same start with ``R``
  evaluations.
* **policy with priority levels** (learned; ``--levels P``): the same pure
  RL with ``policy.priority_levels = P``: each group also takes a priority
  level, and its placement runs in the dynamic schedule ranked by level,
  then by the critical path (joint placement + scheduling, as GO's
  multi-task setting).
* **policy given the best plan** (learned; ``--hint``, ``0`` skips it): the
  same pure RL on single ops (no groups) with ``policy.hint``: the policy
  reads the best default-schedule baseline's plan as a node input and
  starts from it (its greedy placement is that plan at step 0), then PPO
  moves ops off it. Its greedy placement and best own sample are the
  policy's; the plan it was given is the best baseline row below.
* **policy-guided search** (search, not learned): the same policy warm
  started from the best baseline, with ``rl.mutate_best``: samples are the
  best placement so far with a few groups re-drawn from the policy; its best
  found is seeded with the best baseline.
* **local search, annealing, genetic** (``gplace.search``, started from the
  best cheap baseline) and **random** (uniform random placements).
* every baseline, each in its best schedule (the default schedule, or a list
  scheduler's own planned order), and the lower bound (``gplace.lower_bound``).

The markdown table gives each arm's simulated runtime, its change against the
best baseline in any schedule (negative = faster), the evaluations it spent
and its wall time; a PNG per workload draws runtime against evaluations for
the learned and search arms. Numbers from search arms are never called
learned. Below the budget the curves are also tabulated at 10^3, 10^4, ...
evaluations (rows "... by N evaluations": the best so far; "policy greedy at
N evaluations": the policy's greedy placement scored during training every
``--greedy_every`` steps, scorings that are not counted as evaluations), so
one long run also gives the shorter budgets' comparison.
"""

import argparse
import os
import sys
import tempfile
import time
from typing import Any, NamedTuple

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import gplace
from gplace import plotting, report, search, workloads
from gplace.autoplace.candidates import baseline_rows
from gplace.errors import GplaceError
from gplace.report import best_by, checkpoints, first_within, value_at
from gplace.rl import metrics
from gplace.rl import settings
from gplace.rl import training
from gplace.rl.refine import START_GIVEN
from gplace.search import controls
from gplace.sim.presets import preset
from experiments.configs import quickstart
from experiments.configs.suite import SUITE
# pylint: enable=g-import-not-at-top,wrong-import-position

# The wall-time bar: seconds until the policy is within this of its final
# best (its greedy placement or best own sample, after any refinement).
WITHIN = 0.02
LEARNED, SEARCH, BASELINE, BOUND = "learned", "search", "baseline", "bound"


def rl_config(args, workload: str, seed: int, guided: bool,
              hinted: bool = False, levels: int = 0):
  """The quickstart config for one RL arm (pure RL, policy-guided search
  with ``guided``, pure RL given the best plan with ``hinted``, or pure RL
  that also chooses ``levels`` priority levels)."""
  config = quickstart.get_config()
  config.workload, config.workload_size = workload, args.size
  config.topology, config.seed = args.topology, seed
  config.graph_cache = args.graph_cache or ""
  config.progress_bar = config.print_table = False
  config.rl.num_samples = args.samples
  if args.max_groups is not None:
    config.groups.max_groups = args.max_groups
  if args.entropy_floor is not None:
    config.rl.entropy_floor = args.entropy_floor
  config.refine.evaluations = args.refine_evaluations
  config.refine.start = args.refine_start
  config.rl.reward_schedule = args.reward_schedule
  steps = max(1, (args.evaluations - args.refine_evaluations) // args.samples)
  config.train.update(num_steps=steps, chunk_steps=min(25, steps),
                      checkpoint_every=steps, resume=False,
                      greedy_every=args.greedy_every)
  if guided:
    config.warm_start.baseline = "best"
    config.rl.mutate_best = args.mutate_best
  if hinted:
    config.policy.hint, config.policy.hint_init = True, args.hint
    config.groups.max_groups = 0
  config.policy.priority_levels = levels
  return config


class RLRun(NamedTuple):
  """One RL run: its result, its curves (``evaluations``, ``mean``, ``best``,
  ``step_wall_s``, ``greedy``: :class:`gplace.rl.metrics.Curves`) and
  ``wall_s``, the whole run, the per-op refinement included."""
  result: Any
  evaluations: np.ndarray
  mean: np.ndarray
  best: np.ndarray
  step_wall_s: np.ndarray
  wall_s: float
  greedy: tuple[np.ndarray, np.ndarray]


def run_rl(config, workdir: str) -> RLRun:
  """Trains and evaluates ``config`` in ``workdir``; see :class:`RLRun`."""
  start = time.perf_counter()
  result = training.train_experiment(
      settings.from_config(config), workdir=workdir, log=lambda line: None)
  wall_s = time.perf_counter() - start
  curves = metrics.read_curves(workdir, config.rl.num_samples)
  return RLRun(result, curves.evaluations, curves.mean, curves.best,
               curves.step_wall_s, wall_s, curves.greedy)


def time_to_within(final_s: float, tolerance: float, rl_best, rl_wall_s,
                   refine_curve=None, refine_wall_s=(0.0, 0.0)):
  """``(wall s, runtime s)`` when the policy first came within
  ``tolerance`` (e.g. 0.02) of ``final_s``, or ``(nan, nan)``.

  Args:
    final_s: the runtime to come close to (the policy's final best).
    tolerance: relative: a runtime ``<= final_s * (1 + tolerance)`` counts.
    rl_best, rl_wall_s: ``[S]`` best own sample so far and seconds since the
      start per RL step.
    refine_curve: ``(evaluations [R], greedy runtime [R])`` of the per-op
      refinement (evaluations counted from the start of the run), or None.
    refine_wall_s: ``(start, end)`` seconds of the refinement, whose steps are
      not timed one by one: a point's time is interpolated linearly in its
      evaluations between them (an estimate).
  """
  index = first_within(rl_best, final_s, tolerance)
  if index >= 0:
    return float(np.asarray(rl_wall_s)[index]), float(rl_best[index])
  if refine_curve is None:
    return float("nan"), float("nan")
  evaluations = np.asarray(refine_curve[0], np.float64)
  index = first_within(refine_curve[1], final_s, tolerance)
  if index < 0 or evaluations[-1] <= evaluations[0]:
    return float("nan"), float("nan")
  start, end = refine_wall_s
  fraction = (evaluations[index] - evaluations[0]) / (
      evaluations[-1] - evaluations[0])
  return (float(start + fraction * (end - start)),
          float(refine_curve[1][index]))


def workload_rows(args, workload: str, topology, plots_dir: str):
  """Markdown rows of one workload (all seeds) and the PNG of seed 0."""
  graph = workloads.load(workload, args.size, "train",
                         cache_dir=args.graph_cache).graph
  base = baseline_rows(graph, topology)
  _, best_s = base[0]
  bound = float(gplace.lower_bound(graph, topology))
  arms = {}  # name -> (kind, [runtime_s per seed], evaluations, wall_s)
  curves = {}

  def add(name, kind, runtime, evaluations, wall_s):
    entry = arms.setdefault(name, (kind, [], [], []))
    entry[1].append(float(runtime))
    entry[2].append(int(evaluations))
    entry[3].append(float(wall_s))

  init, _ = search.initial_placements(graph, topology)
  for seed in range(args.first_seed, args.first_seed + args.seeds):
    rl_arms = [("", {})] if not args.no_pure else []
    if args.levels:
      rl_arms.append((f"with {args.levels} priority levels: ",
                   {"levels": args.levels}))
    if args.hint > 0:
      rl_arms.append(("given the best plan: ", {"hinted": True}))
    for prefix, arm in rl_arms:
      with tempfile.TemporaryDirectory() as workdir:
        run = run_rl(
            rl_config(args, workload, seed, guided=False, **arm), workdir)
      result, ev, mean, best = run.result, run.evaluations, run.mean, run.best
      wall, greedy = run.wall_s, run.greedy
      own = result.policy[0]
      spent = int(ev[-1]) if len(ev) else 0
      add(f"policy {prefix}greedy", LEARNED, own.greedy_runtime_s,
          spent + 1, wall)
      add(f"policy {prefix}best sample (during training)", LEARNED,
          result.best_runtime_s[0], spent, wall)
      add(f"policy {prefix}sampled, mean of {own.num_samples} after "
          "training", LEARNED, own.sampled_mean_s, spent + own.num_samples,
          wall)
      refined = result.refined[0] if result.refined else None
      # Past the RL's evaluations the policy is the per-op refinement: its
      # rows and curve take over there.
      for c in [c for c in checkpoints(args.evaluations) if c <= spent]:
        if len(greedy[0]):
          add(f"policy {prefix}greedy at {c:,} evaluations", LEARNED,
              value_at(*greedy, c), c, float("nan"))
        add(f"policy {prefix}best sample by {c:,} evaluations", LEARNED,
            best_by(ev, best, c), c, float("nan"))
      if refined is not None:
        # It starts at the RL's greedy placement, or with --refine_start
        # best at a faster baseline's.
        if refined.start_name != START_GIVEN:
          add(f"policy {prefix}refinement starts at {refined.start_name}'s "
              "placement", BASELINE, refined.start_runtime_s, spent, wall)
        refine_curve = (
            spent + np.concatenate([[0], np.asarray(refined.curve[0])]),
            np.concatenate([[refined.start_runtime_s],
                            np.asarray(refined.curve[1], np.float64)]))
        for c in [c for c in checkpoints(args.evaluations) if c > spent]:
          add(f"policy {prefix}refined per op: greedy at {c:,} evaluations",
              LEARNED, value_at(*refine_curve, c), c, float("nan"))
      if seed == args.first_seed:
        if len(greedy[0]):
          curves[f"policy {prefix}greedy"] = greedy
        curves[f"policy {prefix}samples: mean per step"] = (ev, mean)
        curves[f"policy {prefix}samples: best so far"] = (ev, best)
        if refined is not None:
          curves[f"policy {prefix}refined per op: greedy"] = refine_curve
      final = float(np.nanmin([own.greedy_runtime_s, *best] + (
          [] if refined is None else
          [refined.greedy_runtime_s, refined.best_sample_runtime_s])))
      rl_end = float(run.step_wall_s[-1]) if len(run.step_wall_s) else 0.0
      at_s, reached = time_to_within(
          final, WITHIN, best, run.step_wall_s,
          refine_curve if refined is not None else None, (rl_end, wall))
      add(f"policy {prefix}within {WITHIN:.0%} of its final best (wall s: "
          "when)", LEARNED, reached, 0, at_s)
      if refined is not None:
        total = spent + refined.evaluations
        add(f"policy {prefix}refined per op: greedy", LEARNED,
            refined.greedy_runtime_s, total, wall)
        add(f"policy {prefix}refined per op: best sample", LEARNED,
            refined.best_sample_runtime_s, total, wall)
        # The second stage's control: plain local search over single ops
        # from the same start with the same evaluations.
        res = search.local_search(graph, topology, seed=seed,
                                  budget=args.refine_evaluations,
                                  init=refined.start_placement,
                                  batch_size=args.samples)
        start = ("greedy" if refined.start_name == START_GIVEN else
                 f"refinement's start ({refined.start_name})")
        add(f"policy {prefix}{start}, then local search over ops", SEARCH,
            res.runtime_s, spent + res.evaluations, wall + res.wall_s)
    if args.mutate_best > 0:
      with tempfile.TemporaryDirectory() as workdir:
        run = run_rl(rl_config(args, workload, seed, guided=True), workdir)
      result, ev, best, wall = run.result, run.evaluations, run.best, run.wall_s
      add("policy-guided search (warm start + mutate_best)", SEARCH,
          result.best_runtime_s[0], int(ev[-1]) if len(ev) else 0, wall)
      if seed == args.first_seed:
        curves["policy-guided search: best so far"] = (ev, best)
    for name, res in ([] if args.no_search else controls.equal_budget(
        graph, topology, budget=args.evaluations, seed=seed,
        batch_size=args.samples, init=init, random=not args.no_random)):
      add(name, SEARCH, res.runtime_s, res.evaluations, res.wall_s)
      for c in checkpoints(args.evaluations):
        add(f"{name} by {c:,} evaluations", SEARCH, best_by(*res.history, c),
            c, float("nan"))
      if seed == args.first_seed:
        curves[name] = tuple(res.history)
  plotting.plot_evaluation_curves(
      os.path.join(plots_dir, f"learning_vs_search_{workload}_{args.size}"
                   f"_{args.topology}.png"), curves,
      best_baseline_s=best_s, lower_bound_s=bound,
      title=f"{workload} ({args.size}, {graph.n_nodes} nodes, "
      f"{args.topology}), seed {args.first_seed}")
  rows = []
  for name, (kind, runtime, evaluations, wall) in arms.items():
    rows.append(f"| {workload} | {graph.n_nodes} | {name} | {kind} | "
                f"{np.mean(runtime) * 1e3:.4f} | "
                f"{report.mean_change(runtime, best_s)} | "
                f"{np.mean(evaluations):.0f} | "
                f"{'–' if np.isnan(wall).all() else f'{np.mean(wall):.1f}'}"
                " |")
  for name, runtime in base:
    rows.append(f"| {workload} | {graph.n_nodes} | {name} | {BASELINE} | "
                f"{runtime * 1e3:.4f} | {100 * (runtime / best_s - 1):+.1f}%"
                f" | 1 | – |")
  rows.append(f"| {workload} | {graph.n_nodes} | lower bound | {BOUND} | "
              f"{bound * 1e3:.4f} | {100 * (bound / best_s - 1):+.1f}% | – "
              f"| – |")
  return rows


HEADER = ["| workload | nodes | arm | kind | runtime ms (mean over seeds) | "
          "vs best baseline (any schedule) [min, max] | evaluations | "
          "wall s |", "|---|---:|---|---|---:|---:|---:|---:|"]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default=",".join(SUITE),
                      help="comma-separated workload names")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.topology preset name")
  parser.add_argument("--evaluations", type=int, default=12800,
                      help="simulator evaluations per arm")
  parser.add_argument("--samples", type=int, default=64,
                      help="policy samples per RL step")
  parser.add_argument("--mutate_best", type=float, default=0.01,
                      help="policy-guided search arm (0: skip it)")
  parser.add_argument("--hint", type=float, default=0.0,
                      help="arm of a policy given the best plan as input: "
                      "its policy.hint_init (e.g. 5.0; 0: skip it)")
  parser.add_argument("--levels", type=int, default=0,
                      help="arm of the policy with priority levels (joint "
                      "placement + scheduling, policy.priority_levels; 0: "
                      "skip it)")
  parser.add_argument("--refine_start", choices=("policy", "best"),
                      default="policy",
                      help="where the per-op refinement starts: the RL "
                      "policy's greedy placement, or the fastest of it and "
                      "every baseline's placement (config.refine.start)")
  parser.add_argument("--reward_schedule",
                      choices=("auto", "best", "dynamic"), default="auto",
                      help="the schedule RL's samples are simulated in "
                      "(config.rl.reward_schedule): the default 'best', its "
                      "cheaper half 'dynamic' (then the best-own-sample "
                      "curve and the time to within 2%% read dynamic "
                      "runtimes, never faster than the default schedule's; "
                      "the final rows are scored in 'best'), or 'auto' "
                      "(dynamic on graphs of over 10,000 ops)")
  parser.add_argument("--refine_evaluations", type=int, default=0,
                      help="of --evaluations, this many go to the per-op "
                      "refinement of the RL arms' greedy placements "
                      "(config.refine.evaluations; gplace.rl.refine), the "
                      "rest to RL; a local search over ops from the same "
                      "greedy placement with as many is its control (0: no "
                      "refinement)")
  parser.add_argument("--max_groups", type=int, default=None,
                      help="config.groups.max_groups of the grouped arms "
                      "(default: the quickstart's)")
  parser.add_argument("--entropy_floor", type=float, default=None,
                      help="config.rl.entropy_floor of the RL arms (nats "
                      "per group; default: the quickstart's)")
  parser.add_argument("--no_pure", action="store_true",
                      help="skip the pure RL arm (e.g. to run --levels "
                      "alone)")
  parser.add_argument("--no_search", action="store_true",
                      help="skip the search controls")
  parser.add_argument("--greedy_every", type=int, default=5,
                      help="score the RL arms' greedy placement every this "
                      "many steps (config.train.greedy_every; 0: only at "
                      "the end): the greedy curve and its rows at 10^3, "
                      "10^4, ... evaluations")
  parser.add_argument("--no_random", action="store_true",
                      help="skip the uniform-random control (hundreds of "
                      "percent behind everything; it costs as much as a "
                      "search)")
  parser.add_argument("--seeds", type=int, default=1,
                      help="how many seeds: --first_seed, --first_seed+1, ...")
  parser.add_argument("--first_seed", type=int, default=0,
                      help="the first seed (curves are drawn for it)")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  parser.add_argument("--plots_dir", default=None,
                      help="where the PNGs go (default: --out, or the "
                      "working directory)")
  args = parser.parse_args(argv)
  if args.evaluations - args.refine_evaluations < args.samples:
    parser.error("--evaluations minus --refine_evaluations must be at least "
                 "--samples")
  if 0 < args.refine_evaluations < 3 or args.refine_evaluations < 0:
    parser.error("--refine_evaluations must be 0 or at least 3")
  study = report.Study.create(args.out, __file__, argv)
  topology = preset(args.topology)
  plots_dir = args.plots_dir or args.out or os.getcwd()
  os.makedirs(plots_dir, exist_ok=True)
  lines = [f"### Learning vs search: {args.topology}, size={args.size}, "
           f"train step, {args.evaluations} evaluations per arm, "
           f"{args.seeds} seed(s) from {args.first_seed}", "",
           "Simulated ms per step; changes against the best baseline in any "
           "schedule (negative = faster). *learned*: the policy's own "
           "placements (pure RL from a near-uniform policy over op groups, "
           "no warm start, no search; the rows \"given the best plan\" "
           "read the best default-schedule baseline's placement as an input "
           "and start from it, on single ops; the rows \"refined per op\" "
           "are a per-op policy trained from the policy's greedy placement "
           "(or, where a row says so, a faster baseline's) on single-op "
           "moves, gplace.rl.refine); *search*: placements "
           "found by searching, including the policy-guided search, which is "
           "not learning. Searches start from the best cheap baseline, "
           "except \"then local search over ops\", which starts where the "
           "per-op refinement starts." + (
               " RL's samples are scored in the dynamic schedule "
               "(--reward_schedule dynamic): the rows \"best sample by N "
               "evaluations\" and the time to within 2% read those runtimes, never faster "
               "than the default schedule's; every other row is in the "
               "default schedule." if args.reward_schedule == "dynamic" else
               " RL's samples of graphs of over 10,000 ops are scored in the "
               "dynamic schedule (--reward_schedule auto): there the rows "
               "\"best sample by N evaluations\" and the time to within 2% "
               "read those runtimes, never faster than the default "
               "schedule's." if args.reward_schedule == "auto" else ""), ""]
  lines += HEADER
  print("\n".join(lines), flush=True)
  report.table_per_workload(
      args.workloads,
      lambda w: workload_rows(args, w, topology, plots_dir), lines, study,
      skip=(GplaceError,))
  return 0


if __name__ == "__main__":
  sys.exit(main())
