"""What a training run writes: the best placement, the learning curve, and
the final table of the learned placement against every baseline and the
lower bound. Host-side; used by :mod:`gplace.train`.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import numpy as np

from gplace.rl.data import GraphSetup


class TrainResult(NamedTuple):
  """What :func:`train_and_evaluate` returns.

  Attributes:
    state: final (unreplicated) ``rl.TrainState``.
    best_placements: ``[N_b]`` int32 per graph, the best placement found.
    best_runtime_s: per graph.
    table: per graph, ``{row name: runtime_s}`` for the learned placement,
      every baseline and the lower bound.
    steps_per_second: RL training throughput of the last chunk.
  """

  state: Any
  best_placements: list
  best_runtime_s: list
  table: list
  steps_per_second: float


def _write_json(path, obj):
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(obj, f)
  os.replace(tmp, path)


def write_best_placement(path, setups, state, topology, step):
  best = np.asarray(state.best_placement)
  runtime = np.asarray(state.best_runtime_s)
  out = {"step": int(step), "topology": topology.name,
         "device_names": topology.device_names, "graphs": []}
  for b, s in enumerate(setups):
    n = s.graph.n_nodes
    devices = best[b, :n]
    out["graphs"].append({
        "workload": s.name, "runtime_s": float(runtime[b]),
        "placement": [{"node": i, "name": str(s.graph.names[i]),
                       "device": topology.device_names[int(d)]}
                      for i, d in enumerate(devices)]})
  _write_json(path, out)


def _trim_metrics(path, last_step):
  """Drops lines written after the checkpoint a run resumes from."""
  if not os.path.exists(path):
    return
  with open(path) as f:
    lines = [l for l in f if l.strip() and json.loads(l)["step"] <= last_step]
  with open(path, "w") as f:
    f.writelines(lines)


def _plot_curve(path, records, setups):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  rl_records = [r for r in records if r.get("phase") == "rl"]
  if not rl_records:
    return
  fig, ax = plt.subplots(figsize=(7, 4))
  steps = [r["step"] for r in rl_records]
  ax.plot(steps, [r["mean_runtime_s"] for r in rl_records],
          label="mean sampled runtime (failed = penalty)", alpha=0.7)
  ax.plot(steps, [np.mean(r["best_runtime_s"]) for r in rl_records],
          label="best runtime so far")
  best_base = np.mean([min(s.baseline_runtime_s.values()) for s in setups])
  bound = np.mean([s.lower_bound_s for s in setups])
  if np.isfinite(best_base):
    ax.axhline(best_base, color="k", ls="--", label="best baseline")
  if np.isfinite(bound):
    ax.axhline(bound, color="g", ls=":", label="lower bound")
  ax.set_xlabel("train step")
  ax.set_ylabel("runtime (s), mean over graphs")
  ax.set_yscale("log")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def format_table(setup: GraphSetup, learned_runtime_s: float,
                 learned_name: str = "gplace GO (learned)") -> str:
  """Runtime of the learned placement vs every baseline and the lower bound,
  with the % gap to the bound."""
  bound = setup.lower_bound_s
  rows = [(learned_name, learned_runtime_s)]
  rows += sorted(setup.baseline_runtime_s.items(), key=lambda kv: kv[1])
  if np.isfinite(bound):
    rows.append(("lower bound", bound))
  lines = [f"{setup.name} ({setup.graph.n_nodes} nodes)",
           f"  {'placement':<24}{'runtime (ms)':>14}{'gap to bound':>14}"]
  for name, runtime in rows:
    if np.isfinite(runtime):
      if bound > 0:  # False for NaN (measured runtimes: no bound)
        gap = f"{(runtime / bound - 1.0) * 100:>13.1f}%"
      else:
        gap = f"{'n/a':>14}"
      lines.append(f"  {name:<24}{runtime * 1e3:>14.4f}{gap}")
    else:
      lines.append(f"  {name:<24}{'OOM/failed':>14}{'':>14}")
  return "\n".join(lines)
