"""The seed systems side by side, at an equal budget of simulator evaluations.

    python experiments/compare_systems.py --size tiny \
        --workloads rnnlm2,wavenet2 --topologies 1cpu+4gpu,1cpu+2gpu \
        --evaluations 6400 --out experiments/results/seed_systems/tiny

Every system (``--systems``: GO and the seed systems of issue 11, each with
its own config ``experiments/configs/<system>.py``; GO's is the quickstart)
trains on every workload and topology with the same number of simulator
evaluations (``--evaluations``, spent as ``steps x`` the system's own
``rl.num_samples``), scored under the simulator's default schedule (DOPPLER,
which chooses the schedule too, in its own order). Per system the table
gives:

* **policy greedy**: the policy's own argmax placement after training (no
  search, no best-ever bookkeeping);
* **policy sampled after training**: the best of ``K`` fresh samples of
  the trained policy (``train.eval_samples``);
* **best sampled**: the fastest placement the policy sampled during
  training (every one drawn from the policy; no search, no warm-start seed
  unless the system's config warm-starts, which the row then says: then
  this column includes the teacher's plan it was seeded with);
* its gap to the lower bound (``gplace.lower_bound``) and its change
  against the best classical baseline in its best schedule (the default, or
  a list scheduler's own planned order), negative = faster;
* evaluations and wall seconds until the best sampled was within 2% of its
  final value, total wall seconds, and the policy's parameter count.

Next to them, the equal-budget search controls
(``gplace.search.controls.equal_budget``, as in
``experiments/learning_vs_search.py``: local search, annealing and genetic
search from the best cheap baseline, and uniform random placements; seed 0):
their numbers are search, never learning. ``--no_controls`` leaves them out
(a second run that adds systems to a graph's table).

ColocRL's lesson is checked on every graph: a system "finds at least the
single device" when its best sampled placement is no slower than the
``single_device`` baseline (the whole graph on the fastest device that
holds it).
"""

import argparse
import importlib
import os
import sys
import tempfile
import time

import numpy as np

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import jax

import gplace
from gplace import report, workloads
from gplace.autoplace.candidates import baseline_rows
from gplace.errors import GplaceError, first_line
from gplace.report import percent_change
from gplace.rl import metrics
from gplace.rl import settings
from gplace.rl import training
from gplace.search import controls
from gplace.sim.presets import preset
from experiments.configs.suite import SUITE
# pylint: enable=g-import-not-at-top,wrong-import-position

SYSTEMS = ("go", "colocrl", "hdp", "hsdag", "placeto", "doppler")
# The "to 2%" columns: when the best sampled came within this of its final.
WITHIN = 0.02
# The config module of each system (experiments/configs/<name>.py).
CONFIG_OF = {"go": "quickstart"}


def system_config(system: str, args, workload: str, topology: str,
                  seed: int):
  """The system's own config, set to this workload, topology, seed and
  evaluation budget."""
  module = importlib.import_module(
      f"experiments.configs.{CONFIG_OF.get(system, system)}")
  config = module.get_config()
  config.workload, config.workload_size = workload, args.size
  config.topology, config.seed = topology, seed
  config.graph_cache = args.graph_cache or ""
  config.baselines = "single_device"  # the table scores them itself
  if config.warm_start.baseline not in ("none", "best"):  # DOPPLER's teacher
    config.baselines += f",{config.warm_start.baseline}"
  config.progress_bar = config.print_table = False
  steps = max(1, args.evaluations // int(config.rl.num_samples))
  config.train.update(num_steps=steps, chunk_steps=min(25, steps),
                      checkpoint_every=steps, resume=False)
  return config


def time_to_within(evaluations: np.ndarray, best: np.ndarray,
                   wall_s: np.ndarray, within: float = WITHIN):
  """``(evaluations, wall_s)`` at the first record whose best so far is
  within ``within`` of the final best (``(nan, nan)`` without records)."""
  finite = np.isfinite(best)
  if not finite.any():
    return float("nan"), float("nan")
  index = report.first_within(best, best[finite][-1], within)
  return float(evaluations[index]), float(wall_s[index])


def parameter_count(params) -> int:
  return int(sum(np.size(x) for x in jax.tree.leaves(params)))


def run_system(system: str, args, workload: str, topology: str, seed: int):
  """One training run: a dict of the row's numbers."""
  config = system_config(system, args, workload, topology, seed)
  with tempfile.TemporaryDirectory() as workdir:
    start = time.perf_counter()
    result = training.train_experiment(
      settings.from_config(config), workdir=workdir, log=lambda line: None)
    wall_s = time.perf_counter() - start
    curves = metrics.read_curves(workdir, config.rl.num_samples)
  evaluations = curves.evaluations
  to_evals, to_wall = time_to_within(evaluations, curves.best,
                                     curves.step_wall_s)
  own = result.policy[0]
  return dict(greedy=own.greedy_runtime_s, best=result.best_runtime_s[0],
              sampled=own.sampled_best_s, samples=own.num_samples,
              evaluations=int(evaluations[-1]) if len(evaluations) else 0,
              to_evals=to_evals, to_wall=to_wall, wall=wall_s,
              params=parameter_count(result.state.params),
              warm=config.warm_start.baseline != "none")


def graph_rows(args, workload: str, topology_name: str,
               emit=lambda row: None) -> list[str]:
  """Markdown rows of one workload on one topology (means over seeds);
  ``emit(row)`` is called with each row as soon as it is known (a long run
  shows, and keeps in its log, every finished system)."""
  graph = workloads.load(workload, args.size, "train",
                         cache_dir=args.graph_cache).graph
  topology = preset(topology_name)
  base = baseline_rows(graph, topology)
  best_name, best_s = base[0]
  bound = float(gplace.lower_bound(graph, topology))
  single_s = dict(base)["single_device (default)"]
  prefix = f"| {workload} | {graph.n_nodes} | {topology_name} |"
  rows = []

  def add(row: str) -> None:
    rows.append(row)
    emit(row)

  for system in args.systems:
    try:
      runs = [run_system(system, args, workload, topology_name, seed)
              for seed in range(args.seeds)]
    except GplaceError as err:
      add(f"{prefix} {system} | cannot run: {first_line(err)} "
          "| | | | | | | | | |")
      continue
    mean = lambda key: float(np.mean([r[key] for r in runs]))
    greedy, best, sampled = mean("greedy"), mean("best"), mean("sampled")
    # A warm-started run's best is seeded with its teacher's plan.
    label = system + (" (warm start: best includes its teacher)"
                      if runs[0]["warm"] else "")
    single_ok = all(r["best"] <= single_s * (1 + 1e-6) for r in runs)
    add(
        f"{prefix} {label} | {greedy * 1e3:.4f} "
        f"({percent_change(greedy, best_s)}) "
        f"| {sampled * 1e3:.4f} ({percent_change(sampled, best_s)}) "
        f"| {best * 1e3:.4f} ({percent_change(best, best_s)}) | "
        f"{percent_change(best, bound)} | {mean('to_evals'):.0f} | "
        f"{mean('to_wall'):.1f} | {mean('wall'):.1f} | "
        f"{runs[0]['params']:,} | {'yes' if single_ok else 'NO'} |")
  found = (controls.equal_budget(graph, topology, budget=args.evaluations,
                                 seed=0, batch_size=64)
           if args.controls else [])
  for name, res in found:
    runtime = res.runtime_s
    add(f"{prefix} search control: {name} | | | {runtime * 1e3:.4f} "
        f"({percent_change(runtime, best_s)}) | "
        f"{percent_change(runtime, bound)} | {res.evaluations} | | "
        f"{res.wall_s:.1f} | | |")
  add(f"{prefix} best classical: {best_name} | {best_s * 1e3:.4f} | | | "
      f"{percent_change(best_s, bound)} | 1 | | | | single device "
      f"{single_s * 1e3:.4f} |")
  return rows


HEADER = [
    "| workload | nodes | topology | system | policy greedy ms (vs best "
    "classical) | policy sampled after training: best of K ms | best "
    "sampled during training ms (vs best classical) | best vs lower bound "
    "| evaluations to 2% | wall s to 2% | wall s | parameters | finds the "
    "single device |",
    "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--systems", default=",".join(SYSTEMS),
                      help=f"comma-separated, from {', '.join(SYSTEMS)}")
  parser.add_argument("--workloads", default=",".join(SUITE),
                      help="comma-separated workload names")
  parser.add_argument("--size", default="paper", help="tiny | small | paper")
  parser.add_argument("--topologies", default="1cpu+4gpu,1cpu+2gpu",
                      help="comma-separated gplace.topology preset names")
  parser.add_argument("--evaluations", type=int, default=6400,
                      help="simulator evaluations per system and graph")
  parser.add_argument("--seeds", type=int, default=1, help="seeds 0..n-1")
  parser.add_argument("--graph_cache", default=None,
                      help="directory of captured graphs (.npz)")
  parser.add_argument("--no_controls", dest="controls", action="store_false",
                      help="leave out the search controls (e.g. when a "
                      "second run adds systems to a graph's table)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  args.systems = [s for s in args.systems.split(",") if s]
  unknown = sorted(set(args.systems) - set(SYSTEMS))
  if unknown:
    parser.error(f"unknown systems {unknown}; choose from {SYSTEMS}")
  study = report.Study.create(args.out, __file__, argv)
  lines = [f"### Systems compared: size={args.size}, train step, "
           f"{args.evaluations} simulator evaluations per system, "
           f"{args.seeds} seed(s)", "",
           "Simulated ms per step under the default schedule; "
           "changes against the best classical baseline in its best "
           "schedule (negative = faster). Every system's numbers are its "
           "policy's own placements: the greedy one after training, and the "
           "best one it sampled during training (no search).", ""]
  lines += HEADER
  print("\n".join(lines), flush=True)
  for topology in [t for t in args.topologies.split(",") if t]:
    for workload in [w for w in args.workloads.split(",") if w]:
      try:
        rows = graph_rows(args, workload, topology,
                          emit=lambda row: print(row, flush=True))
      except GplaceError as err:
        rows = [f"| {workload} | – | {topology} | skipped: "
                f"{first_line(err)} |"]
        print(rows[0], flush=True)
      lines += rows
      if study:
        study.write(lines)
  return 0


if __name__ == "__main__":
  sys.exit(main())
