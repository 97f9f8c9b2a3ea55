"""What a training run writes: metrics, the best placement, the progress bar,
the learning curve, and the final table of the learned placement against
every baseline and the lower bound.

Where this sits: the bottom of :mod:`gplace.rl`; :mod:`gplace.rl.train` calls
these after every chunk and at the end. Host-side; every function receives
plain values (arrays, dicts, and graph summaries: anything with the
attributes of :class:`GraphSummary`, such as ``gplace.rl.data.GraphSetup``).
"""

from __future__ import annotations

import json
import os
from typing import Callable, Mapping, Optional, Protocol, Sequence

import numpy as np

from gplace.graphs.graph import Graph
from gplace.sim.topology import Topology

METRICS_FILE = "metrics.jsonl"
BEST_PLACEMENT_FILE = "best_placement.json"
CURVE_FILE = "learning_curve.png"
RESULTS_FILE = "results.json"
CONFIG_FILE = "config.json"


class GraphSummary(Protocol):
  """What reports need to know about one graph of the batch."""

  name: str
  graph: Graph
  baseline_runtime_s: Mapping[str, float]
  lower_bound_s: float


def write_json(path: str, obj) -> None:
  """Writes ``obj`` as JSON atomically (a reader never sees half a file)."""
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(obj, f)
  os.replace(tmp, path)


# -- metrics.jsonl -------------------------------------------------------------


def chunk_records(first_step: int, phase: str,
                  metrics: Mapping[str, np.ndarray], start_s: float,
                  elapsed_s: float) -> list[dict]:
  """One JSON-ready record per step of a chunk.

  Args:
    first_step: steps taken before the chunk (records count from
      ``first_step + 1``).
    phase: ``"warm_start"`` or ``"rl"``.
    metrics: stacked ``[L, ...]`` per metric, for the ``L`` steps.
    start_s: seconds from the start of the run to the start of the chunk.
    elapsed_s: seconds the chunk took; ``wall_s`` of its steps is
      interpolated over it (set-up and compiles included).

  Returns:
    ``L`` dicts with ``step``, ``phase``, ``wall_s`` and every metric (a
    float, or a list for per-graph metrics).
  """
  length = len(next(iter(metrics.values())))
  records = []
  for i in range(length):
    record = {"step": first_step + i + 1, "phase": phase,
              "wall_s": round(start_s + elapsed_s * (i + 1) / length, 3)}
    for key, value in metrics.items():
      value = np.asarray(value[i])
      record[key] = value.tolist() if value.ndim else float(value)
    records.append(record)
  return records


def trim_metrics(path: str, last_step: int) -> None:
  """Drops lines written after the checkpoint a run resumes from (all of them
  for ``last_step=0``)."""
  if not os.path.exists(path):
    return
  with open(path) as f:
    lines = [l for l in f if l.strip() and json.loads(l)["step"] <= last_step]
  with open(path, "w") as f:
    f.writelines(lines)


def read_metrics(path: str) -> list[dict]:
  """The records of a ``metrics.jsonl`` file."""
  with open(path) as f:
    return [json.loads(l) for l in f if l.strip()]


class MetricsWriter:
  """Appends one JSON line per train step to ``metrics.jsonl``.

  Args:
    path: the file.
    resume_step: the step the run starts from: later lines (left by an
      interrupted run) are dropped, so the file always matches the state.
  """

  def __init__(self, path: str, resume_step: int = 0):
    self.path = path
    trim_metrics(path, resume_step)
    self._file = open(path, "a")  # pylint: disable=consider-using-with

  def write(self, records: Sequence[dict]) -> None:
    for record in records:
      self._file.write(json.dumps(record) + "\n")
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


# -- best_placement.json -------------------------------------------------------


def best_placement_record(graphs: Sequence[GraphSummary],
                          best_placement: np.ndarray,
                          best_runtime_s: np.ndarray, topology: Topology,
                          step: int) -> dict:
  """The content of ``best_placement.json``: per graph its runtime and the
  device name of every real node.

  Args:
    graphs: ``B`` graph summaries.
    best_placement: ``int [B, N_pad]``.
    best_runtime_s: ``[B]``.
    topology: names the devices.
    step: the train step it was found by.
  """
  best = np.asarray(best_placement)
  runtime = np.asarray(best_runtime_s)
  out = {"step": int(step), "topology": topology.name,
         "device_names": topology.device_names, "graphs": []}
  for b, s in enumerate(graphs):
    devices = best[b, :s.graph.n_nodes]
    out["graphs"].append({
        "workload": s.name, "runtime_s": float(runtime[b]),
        "placement": [{"node": i, "name": str(s.graph.names[i]),
                       "device": topology.device_names[int(d)]}
                      for i, d in enumerate(devices)]})
  return out


class BestPlacementWriter:
  """Rewrites ``best_placement.json`` whenever a graph's best runtime drops.

  Args:
    path: the file.
    graphs: ``B`` graph summaries.
    topology: names the devices.
    best_runtime_s: ``[B]`` the best runtimes already known (from a restored
      state): only improvements on these are written.
  """

  def __init__(self, path: str, graphs: Sequence[GraphSummary],
               topology: Topology, best_runtime_s: np.ndarray):
    self.path, self.graphs, self.topology = path, graphs, topology
    self._best_seen = np.array(best_runtime_s, copy=True)

  def update(self, step: int, best_placement, best_runtime_s,
             force: bool = False) -> None:
    """Writes if any best runtime improved (or ``force``)."""
    best_now = np.asarray(best_runtime_s)
    if force or np.any(best_now < self._best_seen):
      self.write(step, best_placement, best_now)

  def write(self, step: int, best_placement, best_runtime_s) -> None:
    write_json(self.path, best_placement_record(
        self.graphs, best_placement, best_runtime_s, self.topology, step))
    self._best_seen = np.array(best_runtime_s, copy=True)


# -- progress bar --------------------------------------------------------------


class ProgressBar:
  """A tqdm bar over train steps, with the best runtime and the last metrics
  as its postfix; does nothing when disabled or tqdm is missing."""

  def __init__(self, total: int, initial: int, enabled: bool = True):
    try:
      from tqdm import tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm(total=total, initial=initial, disable=not enabled,
                       dynamic_ncols=True)
    except ImportError:  # pragma: no cover
      self._bar = None

  def update(self, length: int, elapsed_s: float, best_runtime_s,
             last: Mapping[str, float]) -> None:
    """Advances by a chunk of ``length`` steps; ``last``: its last record."""
    if self._bar is None:
      return
    self._bar.update(length)
    self._bar.set_postfix(progress_postfix(length, elapsed_s, best_runtime_s,
                                           last))

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()


def progress_postfix(length: int, elapsed_s: float, best_runtime_s,
                     last: Mapping[str, float]) -> dict:
  """The bar's postfix: mean best runtime, speed, and the phase's metrics."""
  post = {"best_ms": f"{np.mean(np.asarray(best_runtime_s)) * 1e3:.4g}",
          "steps/s": f"{length / max(elapsed_s, 1e-9):.2f}"}
  if last["phase"] == "rl":
    post.update(mean_ms=f"{last['mean_runtime_s'] * 1e3:.4g}",
                entropy=f"{last['entropy']:.3f}")
  else:
    post.update(accuracy=f"{last['accuracy']:.3f}")
  return post


# -- all of them, after every chunk --------------------------------------------


class RunOutputs:
  """The files and the bar a run updates after every chunk: ``metrics.jsonl``
  (:class:`MetricsWriter`), ``best_placement.json``
  (:class:`BestPlacementWriter`) and the :class:`ProgressBar`.

  Args:
    workdir: where the files go.
    graphs: ``B`` graph summaries.
    topology: names the devices.
    best_runtime_s: ``[B]`` best runtimes of the (restored) state.
    total_steps: the run's last step.
    first_step: the step the run starts from (0, or a restored step).
    progress_bar: show the bar.
  """

  def __init__(self, workdir: str, graphs: Sequence[GraphSummary],
               topology: Topology, best_runtime_s, *, total_steps: int,
               first_step: int, progress_bar: bool = True):
    self.metrics = MetricsWriter(os.path.join(workdir, METRICS_FILE),
                                 resume_step=first_step)
    self.best = BestPlacementWriter(
        os.path.join(workdir, BEST_PLACEMENT_FILE), graphs, topology,
        best_runtime_s)
    self.bar = ProgressBar(total_steps, first_step, enabled=progress_bar)

  def after_chunk(self, first_step: int, phase: str,
                  metrics: Mapping[str, np.ndarray], state, *,
                  start_s: float, elapsed_s: float) -> dict:
    """Records a chunk that started after ``first_step``; ``state``: anything
    with ``best_placement [B, N_pad]`` and ``best_runtime_s [B]`` (the
    ``TrainState`` after the chunk). Returns the chunk's last record."""
    records = chunk_records(first_step, phase, metrics, start_s, elapsed_s)
    self.metrics.write(records)
    step = records[-1]["step"]
    self.best.update(step, state.best_placement, state.best_runtime_s,
                     force=first_step == 0)
    self.bar.update(len(records), elapsed_s, state.best_runtime_s,
                    records[-1])
    return records[-1]

  def ensure_best_placement(self, state) -> None:
    """Writes ``best_placement.json`` if no chunk has (a resumed run that had
    nothing left to do)."""
    if not os.path.exists(self.best.path):
      self.best.write(int(state.step), state.best_placement,
                      state.best_runtime_s)

  def close(self) -> None:
    self.metrics.close()
    self.bar.close()


# -- the end of a run ----------------------------------------------------------


def plot_curve(path: str, records: Sequence[dict],
               graphs: Sequence[GraphSummary]) -> None:
  """Mean sampled and best runtime per RL step, with the best baseline and
  the lower bound, as a PNG (nothing without RL records)."""
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
  best_base = np.mean([min(s.baseline_runtime_s.values()) for s in graphs])
  bound = np.mean([s.lower_bound_s for s in graphs])
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


def format_table(setup: GraphSummary, learned_runtime_s: float,
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


def result_tables(graphs: Sequence[GraphSummary],
                  best_runtime_s: Sequence[float]) -> list[dict]:
  """Per graph ``{row: runtime_s}``: every baseline, ``"gplace"`` (the
  learned placement) and ``"lower_bound"``."""
  tables = []
  for s, runtime in zip(graphs, best_runtime_s):
    row = dict(s.baseline_runtime_s)
    row["gplace"] = float(runtime)
    row["lower_bound"] = s.lower_bound_s
    tables.append(row)
  return tables


def write_final_report(workdir: str, graphs: Sequence[GraphSummary],
                       best_runtime_s: Sequence[float],
                       workload_names: Sequence[str], topology: Topology,
                       log: Optional[Callable[[str], None]] = None
                       ) -> list[dict]:
  """The learning curve PNG, ``results.json`` and (with ``log``) one table
  per graph; returns :func:`result_tables`."""
  records = read_metrics(os.path.join(workdir, METRICS_FILE))
  plot_curve(os.path.join(workdir, CURVE_FILE), records, graphs)
  tables = result_tables(graphs, best_runtime_s)
  if log is not None:
    for s, runtime in zip(graphs, best_runtime_s):
      log(format_table(s, runtime))
  write_json(os.path.join(workdir, RESULTS_FILE),
             {"tables": [{k: (v if np.isfinite(v) else None)
                          for k, v in t.items()} for t in tables],
              "workloads": list(workload_names), "topology": topology.name})
  return tables
