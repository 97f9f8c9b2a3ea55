"""GO's multi-task table: every mix of placement (P), scheduling (S) and
fusion (F) learnt by GO, against the defaults and an equal-budget search
over the same decisions (simulated).

    python experiments/multitask.py --workloads rnnlm2,wavenet2 \
        --size paper --samples 192 \
        --out experiments/results/multitask/paper_mixes
    python experiments/multitask.py --programs mlp,convnet \
        --out experiments/results/multitask/programs

For each zoo inference graph (``--workloads``, ``--size``), or each real
program of ``experiments/programs.py`` captured with ``gplace.capture``
(``--programs``), on ``--topology`` (simulated; roofline costs, or
``local``: this machine's devices), it finds the best classical placement
in its best schedule and then, per task mix (P, S, F, P+S, P+F, S+F,
P+S+F; ``experiments/multitask_mixes.py``):

- trains GO from scratch (``gplace.rl.train``, host-simulated rewards,
  ``--samples`` evaluations, ``--num_samples`` per step) with the heads of
  the mix's tasks (``priority_levels=2`` for S, ``fusion_head=True`` for
  F); where placement is not a task it is held at the classical one (the
  graph's ``allowed_devices`` one-hot on it);
- runs a search over the same decisions from the classical plan with the
  same number of evaluations (``multitask_mixes.SEARCHES``);

and reports the policy's greedy decision, its best sample in training and
the search's result, each against the best classical plan, plus the
defaults (XLA's own clusters and ``default_fusion`` on the classical
placement, one device), then plain verdicts. Every runtime here is
simulated; ``experiments/multitask_measured.py`` measures the best ones.
"""

import os
import sys

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))

import argparse  # noqa: E402  pylint: disable=wrong-import-position
import time  # noqa: E402  pylint: disable=wrong-import-position

import gplace  # noqa: E402  pylint: disable=wrong-import-position
from gplace import report, workloads  # noqa: E402  pylint: disable=wrong-import-position
from experiments import multitask_mixes as mixes  # noqa: E402  pylint: disable=wrong-import-position


def zoo_problem(name: str, size: str, topology) -> mixes.Problem:
  """A zoo inference graph on ``topology``, roofline costs."""
  return mixes.Problem(name, workloads.load(name, size, "infer").graph,
                       topology)


def program_problem(name: str, topology) -> mixes.Problem:
  """A real program of ``experiments/programs.py``, captured, on
  ``topology`` (roofline costs)."""
  from experiments.programs import PROGRAMS  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  fn, args = PROGRAMS[name]()
  return mixes.Problem(name, gplace.capture(fn, *args, name=name), topology)


def parse_mixes(text: str) -> tuple:
  names = [m.strip() for m in text.split(",") if m.strip()]
  known = {m.name: m for m in mixes.MIXES}
  unknown = [m for m in names if m not in known]
  if unknown:
    raise SystemExit(f"unknown mixes {unknown}; choose from {list(known)}")
  return tuple(known[m] for m in names)


def run_tables(problems, args, log=print) -> tuple[list[str], list[str]]:
  """``(table lines, verdict lines)`` of every problem."""
  lines, said = list(mixes.HEADER), []
  for problem in problems:
    _, rows = mixes.table(problem, samples=args.samples,
                          num_samples=args.num_samples, seed=args.seed,
                          mixes=parse_mixes(args.mixes),
                          log=lambda line: log(line, flush=True))
    start = rows[0].plan
    lines += [mixes.format_row(problem, row, start) for row in rows]
    said += mixes.verdicts(problem.name, rows)
  return lines, said


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="wavenet2,rnnlm2",
                      help="comma-separated zoo names (infer step)")
  parser.add_argument("--size", default="tiny", choices=workloads.SIZES,
                      help="size of the zoo graphs")
  parser.add_argument("--programs", default="",
                      help="comma-separated real programs of "
                      "experiments/programs.py (mlp, lm, convnet), captured, "
                      "instead of the zoo")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.topology preset name, or local")
  parser.add_argument("--mixes", default=",".join(m.name for m in
                                                  mixes.MIXES),
                      help="comma-separated task mixes")
  parser.add_argument("--samples", type=int, default=256,
                      help="simulator evaluations per RL run and search")
  parser.add_argument("--num_samples", type=int, default=16,
                      help="samples per RL step")
  parser.add_argument("--seed", type=int, default=0,
                      help="of the policies, the baselines and the searches")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  if args.num_samples < 2 or args.samples < args.num_samples:
    parser.error("--num_samples must be >= 2 and --samples >= --num_samples")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  study = report.Study.create(args.out, __file__, argv)
  topology = (gplace.topology.local() if args.topology == "local"
              else gplace.topology.preset(args.topology))
  print(f"load average at the start: {report.load_average(', ')}", flush=True)
  if args.programs:
    problems = [program_problem(p.strip(), topology)
                for p in args.programs.split(",") if p.strip()]
    what = "real programs captured with gplace.capture"
  else:
    problems = [zoo_problem(w.strip(), args.size, topology)
                for w in args.workloads.split(",") if w.strip()]
    what = f"{args.size} infer graphs"
  title = [f"### GO multi-task table: {topology.name} (simulated), {what}, "
           f"{args.samples} evaluations per run and per search, seed "
           f"{args.seed}", ""]
  print("\n".join(title + mixes.HEADER), flush=True)
  start = time.time()
  table, said = run_tables(problems, args, log=print)
  print("\n".join(said), flush=True)
  lines = (title + mixes.method_lines(args.num_samples) + [""] + table
           + ["", "One seed, one run per row: differences of a few percent "
              "are noise.", ""] + said
           + ["", f"Wall {time.time() - start:.0f} s; load average at the "
              f"end: {report.load_average(', ')}. Every runtime is simulated "
              "(gplace.simulate, roofline costs)."])
  print(lines[-1], flush=True)
  if study is not None:
    print(f"wrote {study.write(lines)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
