"""The final table of a run: the learned placements against every baseline
and the lower bound (:func:`classical_runtimes`, :func:`format_table`,
:func:`result_tables`; host-side, plain values).
"""

from __future__ import annotations

from typing import Mapping, Optional, Protocol, Sequence

import numpy as np

from gplace.graphs.graph import Graph


class GraphSummary(Protocol):
  """What reports need to know about one graph of the batch (a
  ``planned_runtime_s`` attribute, ``{list scheduler: runtime_s}`` in its own
  planned order, is read where present: :func:`classical_runtimes`)."""

  name: str
  graph: Graph
  baseline_runtime_s: Mapping[str, float]
  lower_bound_s: float


#: How a list scheduler's own planned order is labelled next to baselines.
OWN_PLAN_LABEL = "{} (own plan)"


def classical_runtimes(setup: GraphSummary) -> dict[str, float]:
  """Every classical plan of ``setup`` (a :class:`GraphSummary`):
  ``{label: runtime_s}``, the baselines under the run's scoring (labelled by
  name) and each list scheduler in its own planned order (``"<name> (own
  plan)"``)."""
  out = dict(setup.baseline_runtime_s)
  for name, runtime in (getattr(setup, "planned_runtime_s", None)
                        or {}).items():
    out[OWN_PLAN_LABEL.format(name)] = float(runtime)
  return out


def best_classical(setup: GraphSummary) -> tuple[str, float]:
  """``(label, runtime_s)`` of the fastest of :func:`classical_runtimes`:
  the best classical plan in its best schedule."""
  runtimes = classical_runtimes(setup)
  label = min(runtimes, key=runtimes.get)
  return label, runtimes[label]


# -- the end of a run ----------------------------------------------------------


#: What the training run's own row is, said under its table: the number is
#: the best of every placement sampled (with ``rl.mutate_best`` > 0 that
#: includes search around the best), not the policy's greedy placement.
BEST_FOUND_NOTE = ("gplace best found = fastest placement sampled during "
                   "training (policy samples, and search around the best "
                   "when rl.mutate_best > 0; with a warm start, the "
                   "warm-start baseline's placement counts too), not the "
                   "policy's own greedy placement")
BOUND_NOTE = ("lower bound = gplace.lower_bound: no placement can beat it "
              "(critical path and per-device load); it is loose, the "
              "optimum lies between it and the best row")


BEST_FOUND_ROW = "best found (samples)"
BEST_FOUND_SEARCH_ROW = "best found (includes search)"
#: A warm-started run's best starts as its warm-start baseline's placement.
BEST_FOUND_SEEDED_ROW = "best found (incl. seed)"


def format_table(setup: GraphSummary, learned_runtime_s: float,
                 learned_name: str = "gplace best found",
                 policy_rows: Sequence[tuple[str, float]] = (),
                 verdict: str = "", runtimes: str = "simulated") -> str:
  """Runtime of the run's best placement vs every baseline and the lower
  bound, with the % gap to the bound, and two lines saying what the best
  found row and the bound are. ``policy_rows``: ``(name, runtime_s)`` of the
  policy's own placements (:mod:`gplace.rl.evaluation`), listed first;
  ``verdict``: a last line (how the policy compares); ``runtimes``: what
  the times are (e.g. ``"simulated on 1cpu+4gpu"``, ``"measured"``), said
  in the title line."""
  bound = setup.lower_bound_s
  rows = list(policy_rows) + [(learned_name, learned_runtime_s)]
  rows += sorted(classical_runtimes(setup).items(), key=lambda kv: kv[1])
  if np.isfinite(bound):
    rows.append(("lower bound", bound))
  width = max([24] + [len(name) + 1 for name, _ in rows])
  lines = [f"{setup.name} ({setup.graph.n_nodes} nodes; runtimes "
           f"{runtimes})",
           f"  {'placement':<{width}}{'runtime (ms)':>14}{'gap to bound':>14}"]
  for name, runtime in rows:
    if np.isfinite(runtime):
      if bound > 0:  # False for NaN (measured runtimes: no bound)
        gap = f"{(runtime / bound - 1.0) * 100:>13.1f}%"
      else:
        gap = f"{'n/a':>14}"
      lines.append(f"  {name:<{width}}{runtime * 1e3:>14.4f}{gap}")
    else:
      lines.append(f"  {name:<{width}}{'OOM/failed':>14}{'':>14}")
  lines.append(f"  ({BEST_FOUND_NOTE})")
  if np.isfinite(bound):
    lines.append(f"  ({BOUND_NOTE})")
  if verdict:
    lines.append(f"  {verdict}")
  return "\n".join(lines)


def result_tables(graphs: Sequence[GraphSummary],
                  best_runtime_s: Sequence[float],
                  policy_records: Optional[Sequence[Mapping]] = None
                  ) -> list[dict]:
  """Per graph ``{row: runtime_s}``: every baseline (under the run's
  scoring), each list scheduler in its own planned order (``"<name> (own
  plan)"``), ``"gplace"`` (best found, search included), ``"lower_bound"``,
  and ``policy_records[b]``."""
  tables = []
  for b, (s, runtime) in enumerate(zip(graphs, best_runtime_s)):
    row = classical_runtimes(s)
    row["gplace"] = float(runtime)
    row["lower_bound"] = s.lower_bound_s
    if policy_records:
      row.update(policy_records[b])
    tables.append(row)
  return tables
