"""What a training run writes after every chunk (:class:`RunOutputs`, so a
killed run keeps them): metrics, best placements, progress bar, curve and
``results.json``, strict JSON (non-finite numbers as ``null``)."""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from gplace import plotting
from gplace.rl.best_placement_file import (BEST_PLACEMENT_FILE,
                                           BestPlacementWriter)
from gplace.rl.metrics import (GREEDY_PHASE, METRICS_FILE, MetricsWriter,
                               chunk_records, read_metrics, write_json)
from gplace.rl.reports import (GraphSummary, best_classical, format_table,
                               result_tables)
from gplace.sim.topology import Topology

CURVE_FILE = "learning_curve.png"
RESULTS_FILE = "results.json"
CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"
# What a run leaves in its workdir, in the order the end of a run lists it.
OUTPUTS = ((BEST_PLACEMENT_FILE, "best placement per graph"),
           (METRICS_FILE, "metrics of every train step"),
           (RESULTS_FILE, "runtimes vs baselines and bound"),
           (CURVE_FILE, "learning curve"),
           (CONFIG_FILE, "the run's config"),
           (CHECKPOINT_DIR, "checkpoints (rerun to resume)"))


def output_lines(workdir: str) -> list[str]:
  """One line per output of :data:`OUTPUTS` that ``workdir`` holds: what it
  is and its path."""
  return [f"[gplace] {what:<33} {os.path.join(workdir, name)}"
          for name, what in OUTPUTS
          if os.path.exists(os.path.join(workdir, name))]


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
  (:class:`BestPlacementWriter`) and the :class:`ProgressBar`; at every
  checkpoint ``results.json`` and ``learning_curve.png``
  (:meth:`at_checkpoint`). A fresh run (``first_step=0``) first removes the
  results, curve and best placement an earlier run left in ``workdir``.

  Args:
    workdir: where the files go; None: no files (only the bar).
    graphs: ``B`` graph summaries.
    topology: names the devices.
    best_runtime_s: ``[B]`` best runtimes of the (restored) state.
    total_steps: the run's last step.
    first_step: the step the run starts from (0, or a restored step).
    progress_bar: show the bar.
    log: where lines of text go (a damaged ``metrics.jsonl`` on resume).
    schedules: per graph the schedule of the training runtimes
      (``best_placement.json``'s ``schedule`` while training).
  """

  def __init__(self, workdir: Optional[str], graphs: Sequence[GraphSummary],
               topology: Topology, best_runtime_s, *, total_steps: int,
               first_step: int, progress_bar: bool = True,
               log: Callable[[str], None] = print,
               schedules: Optional[Sequence[str]] = None):
    self.workdir, self.graphs, self.topology = workdir, graphs, topology
    self.metrics = self.best = None
    if workdir is not None:
      if first_step == 0:
        for name in (RESULTS_FILE, CURVE_FILE, BEST_PLACEMENT_FILE):
          if os.path.exists(os.path.join(workdir, name)):
            os.remove(os.path.join(workdir, name))
      self.metrics = MetricsWriter(os.path.join(workdir, METRICS_FILE),
                                   resume_step=first_step, log=log)
      self.best = BestPlacementWriter(
          os.path.join(workdir, BEST_PLACEMENT_FILE), graphs, topology,
          best_runtime_s, schedules)
    self.bar = ProgressBar(total_steps, first_step, enabled=progress_bar)

  def after_chunk(self, first_step: int, phase: str,
                  metrics: Mapping[str, np.ndarray], state, *,
                  start_s: float, elapsed_s: float) -> dict:
    """Records a chunk that started after ``first_step``; ``state``: anything
    with ``best_placement [B, N_pad]`` and ``best_runtime_s [B]`` (the
    ``TrainState`` after the chunk). Returns the chunk's last record."""
    records = chunk_records(first_step, phase, metrics, start_s, elapsed_s)
    if self.workdir is not None:
      self.metrics.write(records)
      self.best.update(records[-1]["step"], state.best_placement,
                       state.best_runtime_s, force=first_step == 0,
                       best_priority=getattr(state, "best_priority", None),
                       best_fusion=getattr(state, "best_fusion", None))
    self.bar.update(len(records), elapsed_s, state.best_runtime_s,
                    records[-1])
    return records[-1]

  def after_greedy(self, step: int, greedy_runtime_s, *,
                   start_s: float) -> None:
    """Records the policy's greedy placement scored after ``step``: one
    ``metrics.jsonl`` line with ``"phase": "greedy"`` and
    ``greedy_runtime_s`` (``[B]``, seconds; ``null`` where it failed)."""
    if self.metrics is None:
      return
    self.metrics.write([{
        "step": int(step), "phase": GREEDY_PHASE,
        "wall_s": round(start_s, 3),
        "greedy_runtime_s": [float(r) for r in greedy_runtime_s]}])

  def ensure_best_placement(self, state) -> None:
    """Writes ``best_placement.json`` if no chunk has (a resumed run that had
    nothing left to do)."""
    if self.best is not None and not os.path.exists(self.best.path):
      self.best.write(int(state.step), state.best_placement,
                      state.best_runtime_s,
                      getattr(state, "best_priority", None),
                      getattr(state, "best_fusion", None))

  def at_checkpoint(self, step: int, state) -> None:
    """Rewrites ``results.json`` (``"finished": false``) and the learning
    curve for ``state`` (anything with ``best_runtime_s [B]``) at ``step``."""
    write_results(self.workdir, self.graphs,
                  np.asarray(state.best_runtime_s).tolist(),
                  [g.name for g in self.graphs], self.topology, step=step,
                  finished=False)

  def close(self) -> None:
    if self.metrics is not None:
      self.metrics.close()
    self.bar.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


# -- results.json and the end of a run -----------------------------------------


def write_results(workdir: str, graphs: Sequence[GraphSummary],
                  best_runtime_s: Sequence[float],
                  workload_names: Sequence[str], topology: Topology, *,
                  step: Optional[int], finished: bool,
                  policy_records: Optional[Sequence[Mapping]] = None
                  ) -> list[dict]:
  """``results.json`` and the learning curve PNG (from ``metrics.jsonl``).

  ``results.json`` holds ``step``, ``finished``, ``workloads``, ``topology``
  and ``tables``: per graph :func:`~gplace.rl.reports.result_tables`, with
  ``null`` for OOM / failed rows and for a bound that does not apply.

  Args:
    workdir: the run's directory.
    graphs: ``B`` graph summaries.
    best_runtime_s: ``B`` best runtimes so far.
    workload_names: names of the ``B`` graphs.
    topology: the run's topology (its name is written).
    step: the train step they are from.
    finished: the run has reached its last step.

  Returns:
    :func:`~gplace.rl.reports.result_tables`.
  """
  records = read_metrics(os.path.join(workdir, METRICS_FILE))
  plotting.plot_learning_curve(
      os.path.join(workdir, CURVE_FILE), records,
      best_baseline_s=float(np.mean([best_classical(g)[1]
                                     for g in graphs])),
      lower_bound_s=float(np.mean([g.lower_bound_s for g in graphs])))
  tables = result_tables(graphs, best_runtime_s, policy_records)
  write_json(os.path.join(workdir, RESULTS_FILE),
             {"step": step, "finished": finished, "tables": tables,
              "workloads": list(workload_names), "topology": topology.name})
  return tables


def write_final_report(workdir: Optional[str],
                       graphs: Sequence[GraphSummary],
                       best_runtime_s: Sequence[float],
                       workload_names: Sequence[str], topology: Topology,
                       log: Optional[Callable[[str], None]] = None, *,
                       step: Optional[int] = None,
                       policy_rows: Optional[Sequence] = None,
                       policy_records: Optional[Sequence[Mapping]] = None,
                       verdicts: Optional[Sequence[str]] = None,
                       best_found_name: str = "gplace best found",
                       measured: bool = False) -> list[dict]:
  """:func:`write_results` of a finished run (none without a ``workdir``)
  and (with ``log``) one table per graph
  (:func:`~gplace.rl.reports.format_table`; ``policy_rows[b]`` and
  ``verdicts[b]``: graph ``b``'s; ``measured``: the runtimes are the
  executor's, else simulated on ``topology``); returns
  :func:`~gplace.rl.reports.result_tables`."""
  if workdir is None:
    tables = result_tables(graphs, best_runtime_s, policy_records)
  else:
    tables = write_results(workdir, graphs, best_runtime_s, workload_names,
                           topology, step=step, finished=True,
                           policy_records=policy_records)
  if log is not None:
    for b, (s, runtime) in enumerate(zip(graphs, best_runtime_s)):
      log(format_table(s, runtime, best_found_name,
                       policy_rows[b] if policy_rows else (),
                       verdicts[b] if verdicts else "",
                       runtimes=("measured" if measured
                                 else f"simulated on {topology.name}")))
  return tables
