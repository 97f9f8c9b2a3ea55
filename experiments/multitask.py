"""GO's multi-task learning, small: placement alone, with fusion, with
scheduling and fusion, against an equal-budget fusion search (simulated).

    python experiments/multitask.py --workloads wavenet2,rnnlm2 \
        --samples 256 --out experiments/results/multitask/tiny

For each zoo inference graph (``--size``, tiny by default) on ``--topology`` (simulated, roofline
costs) it trains GO from scratch (``gplace.rl.train``, host-simulated
rewards, ``--samples`` simulator evaluations: ``--num_samples`` per step)
as

(a) placement only (XLA's own clusters: no explicit fusion),
(b) placement + fusion (``fusion_head=True``),
(c) placement + scheduling + fusion (``priority_levels=2`` too),

and reports each policy's own greedy decision and the best decision it
sampled in training. Next to them: the defaults (the best classical
placement in its best schedule, with no explicit fusion and with
``gplace.graphs.fusion.default_fusion``) and ``gplace.search.
fusion_annealing`` from that placement with the same number of
evaluations, moving the fusion and the placement. Every runtime is
simulated. The load average is printed at the start and the end.
"""

import os
import sys

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))

import argparse  # noqa: E402  pylint: disable=wrong-import-position
import time  # noqa: E402  pylint: disable=wrong-import-position


import gplace  # noqa: E402  pylint: disable=wrong-import-position
from gplace import baselines, report, rl, workloads  # noqa: E402  pylint: disable=wrong-import-position
from gplace.graphs.fusion import default_fusion  # noqa: E402  pylint: disable=wrong-import-position
from gplace.search.fusion import fusion_annealing  # noqa: E402  pylint: disable=wrong-import-position

#: ``(row label, GO hyperparameters of the task)``.
VARIANTS = (
    ("(a) GO placement only", dict()),
    ("(b) GO placement + fusion", dict(fusion_head=True)),
    ("(c) GO placement + scheduling + fusion",
     dict(fusion_head=True, priority_levels=2)),
)

#: GO's shared encoder, small enough to train in seconds per graph.
ENCODER = dict(hidden_size=32, num_heads=4, segment_length=64,
               num_sage_layers=2, num_attention_layers=1, head_hidden_size=32,
               free_logits=256)

HEADER = ["| workload | decision | found by | runtime (ms, simulated) | "
          "vs best classical | simulator evaluations | wall (s) |",
          "|---|---|---|---:|---:|---:|---:|"]


def load_text() -> str:
  return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def classical(graph, topology, seed):
  """The best classical placement in its best schedule: ``(label,
  placement, order or None, runtime_s)``."""
  fastest = baselines.best(graph, topology, seed=seed).any
  label = f"{fastest.name} ({fastest.schedule})"
  return label, fastest.placement, fastest.order, fastest.runtime_s


def train_variant(graph, topology, hparams, args):
  """One GO run: ``(greedy runtime_s, best sampled runtime_s, wall_s)``."""
  steps = max(1, args.samples // args.num_samples)
  settings = rl.TrainSettings(
      seed=args.seed, progress_bar=False, print_table=False).replace(
          rl=dict(num_samples=args.num_samples, reward="simulator_host"),
          train=dict(num_steps=steps, chunk_steps=steps),
          groups=dict(max_groups=0))
  policy = rl.PolicySettings("go", dict(ENCODER, **hparams))
  start = time.time()
  result = rl.train([graph], topology, policy, settings,
                    log=lambda line: None)
  return (float(result.policy[0].greedy_runtime_s),
          float(result.best_runtime_s[0]), time.time() - start)


def workload_rows(args, name: str, topology) -> list[str]:
  """The table rows of one workload."""
  graph = workloads.load(name, args.size, "infer").graph
  label, placement, order, classical_s = classical(graph, topology, args.seed)
  evaluations = (args.samples // args.num_samples) * args.num_samples

  def row(decision, who, runtime_s, spent, wall):
    return (f"| {name} ({graph.n_nodes} ops) | {decision} | {who} | "
            f"{runtime_s * 1e3:.4f} | "
            f"{report.percent_change(runtime_s, classical_s)} | {spent} | "
            f"{wall} |")

  default_s = float(gplace.simulate(
      graph, placement, topology, order=order,
      fusion=default_fusion(graph, placement)).runtime_s)
  rows = [row(f"{label}, no explicit fusion (XLA's clusters)", "default",
              classical_s, "–", "–"),
          row(f"{label}, default_fusion", "default", default_s, "–", "–")]
  start = time.time()
  search = fusion_annealing(graph, topology, placement=placement, order=order,
                            seed=args.seed, budget=evaluations,
                            placement_share=0.3)
  rows.append(row("fusion + placement from the classical one",
                  "search: fusion_annealing", search.runtime_s,
                  search.evaluations, f"{time.time() - start:.0f}"))
  learned = {}
  for variant, hparams in VARIANTS:
    greedy_s, best_s, wall = train_variant(graph, topology, hparams, args)
    learned[variant[:3]] = (greedy_s, best_s)
    rows.append(row(variant, "policy: greedy", greedy_s, f"{evaluations} + 1",
                    f"{wall:.0f}"))
    rows.append(row(variant, "policy: best sampled in training", best_s,
                    evaluations, "(same run)"))
  for line in rows:
    print(line, flush=True)
  return rows, verdicts(name, learned, search.runtime_s)


def verdicts(name: str, learned: dict, search_s: float) -> list[str]:
  """Plain sentences: does joint learning beat placement alone, and does
  any policy beat the search (``learned``: ``{"(a)": (greedy_s,
  best_sampled_s), ...}``)."""
  single = learned["(a)"]
  lines = []
  for key in ("(b)", "(c)"):
    for i, what in enumerate(("greedy", "best sampled")):
      change = report.percent_change(learned[key][i], single[i])
      word = "beats" if learned[key][i] < single[i] else "does NOT beat"
      lines.append(f"- {name}: joint {key} {word} placement only (a), "
                   f"{what}: {change} vs (a).")
  best_policy = min(min(v) for v in learned.values())
  word = "beats" if best_policy < search_s else "does NOT beat"
  lines.append(f"- {name}: the best policy decision {word} the equal-budget "
               f"fusion search ({report.percent_change(best_policy, search_s)}"
               " vs the search).")
  return lines


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="wavenet2,rnnlm2",
                      help="comma-separated zoo names (infer step)")
  parser.add_argument("--size", default="tiny", choices=workloads.SIZES,
                      help="size of the zoo graphs")
  parser.add_argument("--topology", default="1cpu+4gpu",
                      help="a gplace.topology preset name")
  parser.add_argument("--samples", type=int, default=256,
                      help="simulator evaluations per RL run and search")
  parser.add_argument("--num_samples", type=int, default=16,
                      help="samples per RL step")
  parser.add_argument("--seed", type=int, default=0,
                      help="of the policies, the baselines and the search")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  if args.num_samples < 2 or args.samples < args.num_samples:
    parser.error("--num_samples must be >= 2 and --samples >= --num_samples")
  study = report.Study.create(args.out, __file__, argv)
  topology = gplace.topology.preset(args.topology)
  print(f"load average at the start: {load_text()}", flush=True)
  lines = [f"### GO multi-task vs fusion search: {args.topology} "
           f"(simulated), {args.size} infer graphs, {args.samples} "
           f"evaluations per run, seed {args.seed}", ""] + HEADER
  print("\n".join(lines), flush=True)
  start = time.time()
  summary = []
  for name in args.workloads.split(","):
    rows, said = workload_rows(args, name.strip(), topology)
    lines += rows
    summary += said
  print("\n".join(summary), flush=True)
  lines += ["", "One seed, one run per row: differences of a few percent "
            "are noise.", ""] + summary
  lines += ["", f"Wall {time.time() - start:.0f} s; load average at the "
            f"end: {load_text()}. Every runtime is simulated "
            "(gplace.simulate, roofline costs); 'policy' rows are the "
            "policy's own decisions, 'search' the fusion search's."]
  print(lines[-1], flush=True)
  if study is not None:
    print(f"wrote {study.write(lines)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
