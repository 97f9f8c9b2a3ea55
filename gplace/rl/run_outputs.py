"""What a training run writes after every chunk (:class:`RunOutputs`, so a
killed run keeps them): metrics, best placements, progress bar, curve and
``results.json``, strict JSON (non-finite numbers as ``null``)."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from gplace import plotting
from gplace.rl.reports import (GraphSummary, best_classical, format_table,
                               result_tables)
from gplace.sim.topology import Topology

METRICS_FILE = "metrics.jsonl"
#: ``phase`` of the ``metrics.jsonl`` lines that score the policy's greedy
#: placement during training (``settings.train.greedy_every``).
GREEDY_PHASE = "greedy"
BEST_PLACEMENT_FILE = "best_placement.json"
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


def json_safe(obj: Any) -> Any:
  """``obj`` with every non-finite float (``inf``: OOM or failed, NaN) as
  None (JSON ``null``) and numpy scalars and arrays as Python values: what a
  strict JSON parser accepts."""
  if isinstance(obj, Mapping):
    return {k: json_safe(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [json_safe(v) for v in obj]
  if isinstance(obj, np.ndarray):
    return json_safe(obj.tolist())
  if isinstance(obj, (bool, np.bool_)):
    return bool(obj)
  if isinstance(obj, numbers.Integral):
    return int(obj)
  if isinstance(obj, numbers.Real):
    value = float(obj)
    return value if math.isfinite(value) else None
  return obj


def write_json(path: str, obj) -> None:
  """Writes ``obj`` as strict JSON (:func:`json_safe`) atomically."""
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(json_safe(obj), f, allow_nan=False)
  os.replace(tmp, path)


def read_json(path: str) -> Any:
  """The content of a JSON file.

  Raises:
    OSError: it cannot be read. ValueError: it is not JSON.
  """
  with open(path) as f:
    return json.load(f)


def output_lines(workdir: str) -> list[str]:
  """One line per output of :data:`OUTPUTS` that ``workdir`` holds: what it
  is and its path."""
  return [f"[gplace] {what:<33} {os.path.join(workdir, name)}"
          for name, what in OUTPUTS
          if os.path.exists(os.path.join(workdir, name))]


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


def _parse_record(line: str) -> Optional[dict]:
  """One ``metrics.jsonl`` line; None for a blank or half-written one (a run
  killed while writing)."""
  try:
    record = json.loads(line)
  except ValueError:
    return None
  return record if isinstance(record, dict) and "step" in record else None


#: ``phase`` of the line that stands for a train step whose record was lost
#: (a damaged ``metrics.jsonl``; :func:`trim_metrics`), with ``lost``: why.
MISSING_PHASE = "missing"
# Phases with one record per train step.
_STEP_PHASES = ("warm_start", "rl", MISSING_PHASE)
_STEP_KEY = re.compile(r'"step"\s*:\s*(\d+)')


def trim_metrics(path: str, last_step: int,
                 per_step: bool = True) -> list[str]:
  """Makes ``metrics.jsonl`` match the checkpoint a run resumes from: keeps
  the records of steps up to ``last_step`` (none for ``last_step=0``) and
  drops later ones (the run takes those steps again).

  A record lost to damage is never dropped silently: a line that is not a
  record (torn, or not JSON) is dropped and reported with its line number;
  a train step up to ``last_step`` with no record left gets a line
  ``{"step": k, "phase": "missing", "lost": why}`` (a checkpoint holds the
  state, not the metrics of each step, so the record cannot be rebuilt);
  of two records of one step and phase the later is kept. With
  ``per_step=False`` (a file of one line per chunk, as pretraining writes)
  no step is expected to have a record.

  Returns:
    Lines saying what was damaged or lost (empty if nothing).
  """
  if not os.path.exists(path):
    return []
  with open(path) as f:
    lines = f.readlines()
  kept, torn, seen, duplicates = [], [], {}, set()
  for number, line in enumerate(lines, 1):
    record = _parse_record(line)
    if record is None:
      if line.strip():
        match = _STEP_KEY.search(line)
        step = int(match.group(1)) if match else None
        if step is None or step <= last_step:
          torn.append((number, step, line.strip()))
      continue
    if last_step <= 0 or record["step"] > last_step:
      continue
    key = (record["step"], record.get("phase"))
    if key in seen:
      kept[seen[key]] = None  # the later record of a step replaces it
      duplicates.add(record["step"])
    seen[key] = len(kept)
    kept.append(record)
  kept = [r for r in kept if r is not None]
  present = {r["step"] for r in kept if r.get("phase") in _STEP_PHASES}
  missing = [k for k in range(1, last_step + 1)
             if per_step and k not in present]
  messages = []
  for number, step, text in torn:
    excerpt = text if len(text) <= 60 else text[:57] + "..."
    messages.append(
        f"[gplace] {path}: line {number} is damaged (not a JSON record: "
        f"{excerpt!r}); dropped" + (f", it held step {step}" if step
                                    else ""))
  if duplicates:
    messages.append(f"[gplace] {path}: {_ranges(sorted(duplicates))} "
                    "recorded more than once (two runs in one "
                    "workdir?); kept the later record of each")
  if missing:
    why = ("its line in metrics.jsonl was damaged; the checkpoint holds "
           "the state, not the step's metrics")
    kept += [{"step": k, "phase": MISSING_PHASE, "lost": why}
             for k in missing]
    messages.append(
        f"[gplace] {path}: the records of {_ranges(missing)} are "
        f"lost (resuming from step {last_step}); they are marked "
        f'"phase": "{MISSING_PHASE}" in the file, and training resumes '
        "from the checkpoint unaffected")
  kept.sort(key=lambda r: (r["step"], r.get("phase") not in _STEP_PHASES))
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    f.writelines(json.dumps(json_safe(r), allow_nan=False) + "\n"
                 for r in kept)
  os.replace(tmp, path)
  return messages


def _ranges(steps: Sequence[int]) -> str:
  """``"steps 3-5, 8"`` for ``[3, 4, 5, 8]``, ``"step 3"`` for ``[3]``."""
  out, start = [], None
  for i, step in enumerate(steps):
    if start is None:
      start = step
    if i + 1 == len(steps) or steps[i + 1] != step + 1:
      out.append(str(start) if start == step else f"{start}-{step}")
      start = None
  return ("step " if len(steps) == 1 else "steps ") + ", ".join(out)


def read_metrics(path: str) -> list[dict]:
  """The records of a ``metrics.jsonl`` file (``null`` for non-finite
  numbers; half-written lines skipped)."""
  with open(path) as f:
    return [r for l in f if (r := _parse_record(l)) is not None]


class MetricsWriter:
  """Appends one JSON line per train step to ``metrics.jsonl`` (strict JSON:
  non-finite numbers as ``null``).

  Args:
    path: the file.
    resume_step: the step the run starts from: later lines (left by an
      interrupted run) are dropped, so the file always matches the state
      (:func:`trim_metrics`; what it finds damaged or lost goes to ``log``).
    log: where lines of text go.
  """

  def __init__(self, path: str, resume_step: int = 0,
               log: Callable[[str], None] = print):
    self.path = path
    for line in trim_metrics(path, resume_step):
      log(line)
    self._file = open(path, "a")  # pylint: disable=consider-using-with

  def write(self, records: Sequence[dict]) -> None:
    for record in records:
      self._file.write(json.dumps(json_safe(record), allow_nan=False) + "\n")
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


# -- best_placement.json -------------------------------------------------------


#: ``best_placement.json``'s ``schedule``: how its ``runtime_s`` was
#: obtained. ``gplace.simulate(graph, placement, topology, schedule=s)``
#: reproduces a simulated one; with ``order`` in the record,
#: ``gplace.simulate(..., order=order)`` (``"static"``) or
#: ``gplace.simulate(..., priority=p)`` with ``p[order[i]] = -i`` (an
#: ordering policy's ``"dynamic: order as priority"``).
DEFAULT_SCHEDULE = "best"  # gplace.simulate's default
STATIC_SCHEDULE = "static"
OWN_SCHEDULE = "dynamic: order as priority"
MEASURED = "measured"
#: ``source`` of a best placement written during training.
TRAINING_SOURCE = "training samples"


class FoundPlacement(NamedTuple):
  """One placement of one graph that a run found or scored, for
  ``best_placement.json``.

  Attributes:
    source: what produced it, e.g. ``"baseline: single_device"``.
    placement: ``int [N]`` device per node.
    runtime_s: its runtime (inf: OOM / failed), as ``results.json`` lists
      it.
    schedule: how ``runtime_s`` was obtained (:data:`DEFAULT_SCHEDULE`...).
    order: ``int [N]`` node ids in the order its schedule runs them (static
      and ordering-policy schedules), or None.
  """

  source: str
  placement: np.ndarray
  runtime_s: float
  schedule: str = DEFAULT_SCHEDULE
  order: Optional[np.ndarray] = None


def fastest(found: Sequence[FoundPlacement]) -> FoundPlacement:
  """The fastest of ``found`` (the first on ties; a failed one only if all
  failed)."""
  def key(f):
    runtime = float(f.runtime_s)
    return runtime if math.isfinite(runtime) else math.inf
  return min(found, key=key)


def ordered_schedule(schedule: str) -> str:
  """The label of ``schedule`` steered by a policy's own priority:
  ``"dynamic: order as priority"``."""
  return f"{schedule}: order as priority"


def priority_order(priority: np.ndarray) -> np.ndarray:
  """Node ids by decreasing ``priority`` (the dynamic schedule's ranking)."""
  return np.argsort(-np.asarray(priority), kind="stable").astype(np.int32)


def _graph_record(summary: GraphSummary, topology: Topology,
                  found: FoundPlacement, **extra) -> dict:
  devices = np.asarray(found.placement)[:summary.graph.n_nodes]
  record = {
      "workload": summary.name, "runtime_s": float(found.runtime_s),
      "source": found.source, "schedule": found.schedule, **extra,
      "placement": [{"node": i, "name": str(summary.graph.names[i]),
                     "device": topology.device_names[int(d)]}
                    for i, d in enumerate(devices)]}
  if found.order is not None:
    record["order"] = [int(i) for i in found.order]
  return record


def best_placement_record(graphs: Sequence[GraphSummary],
                          best_placement: np.ndarray,
                          best_runtime_s: np.ndarray, topology: Topology,
                          step: int, best_priority=None,
                          schedules: Optional[Sequence[str]] = None,
                          found_steps: Optional[Sequence] = None) -> dict:
  """The content of ``best_placement.json`` during training: per graph the
  best placement sampled so far (``"source": "training samples"``), its
  runtime (written as ``null`` while nothing fits in memory), the device
  name of every real node, ``found_at_step`` (the chunk by whose end it was
  found) and its ``schedule`` (:data:`DEFAULT_SCHEDULE`...): the training
  reward's, or for an ordering policy ``"dynamic: order as priority"`` with
  ``order``, the node ids in the policy's order.

  Args:
    graphs: ``B`` graph summaries.
    best_placement: ``int [B, N_pad]``.
    best_runtime_s: ``[B]``.
    topology: names the devices.
    step: the train step it was written at.
    best_priority: ``[B, N_pad]`` (ordering policies) or None.
    schedules: per graph the schedule of the training runtimes (default:
      :data:`DEFAULT_SCHEDULE`); ``"static"`` is node-id order.
    found_steps: per graph the step it was found by (None: unknown).
  """
  best = np.asarray(best_placement)
  runtime = np.asarray(best_runtime_s)
  out = {"step": int(step), "topology": topology.name,
         "device_names": topology.device_names, "graphs": []}
  for b, s in enumerate(graphs):
    n = s.graph.n_nodes
    schedule = schedules[b] if schedules is not None else DEFAULT_SCHEDULE
    order = np.arange(n) if schedule == STATIC_SCHEDULE else None
    if best_priority is not None:
      schedule = (OWN_SCHEDULE if schedules is None
                  else ordered_schedule(schedule))
      order = priority_order(np.asarray(best_priority)[b, :n])
    found_step = found_steps[b] if found_steps is not None else None
    out["graphs"].append(_graph_record(
        s, topology, FoundPlacement(TRAINING_SOURCE, best[b, :n],
                                    float(runtime[b]), schedule, order),
        found_at_step=None if found_step is None else int(found_step)))
  return out


def best_of_run_record(graphs: Sequence[GraphSummary], topology: Topology,
                       step: int, winners: Sequence[FoundPlacement],
                       tried: Sequence[int] = ()) -> dict:
  """The content of ``best_placement.json`` at the end of a run: per graph
  the fastest placement of the run, whatever found it (``winners[b]``,
  :func:`fastest` of everything the run scored), with its ``source``,
  ``runtime_s`` (as ``results.json`` lists it), ``schedule`` and
  ``candidates`` (how many placements it was picked from, ``tried[b]``)."""
  out = {"step": int(step), "finished": True, "topology": topology.name,
         "device_names": topology.device_names, "graphs": []}
  for b, (s, found) in enumerate(zip(graphs, winners)):
    extra = {"candidates": int(tried[b])} if len(tried) > b else {}
    out["graphs"].append(_graph_record(s, topology, found, **extra))
  return out


class BestPlacementWriter:
  """Rewrites ``best_placement.json`` whenever a graph's best runtime drops.

  Args:
    path: the file.
    graphs: ``B`` graph summaries.
    topology: names the devices.
    best_runtime_s: ``[B]`` the best runtimes already known (from a restored
      state): only improvements on these are written.
    schedules: per graph the schedule of the training runtimes
      (:func:`best_placement_record`).
  """

  def __init__(self, path: str, graphs: Sequence[GraphSummary],
               topology: Topology, best_runtime_s: np.ndarray,
               schedules: Optional[Sequence[str]] = None):
    self.path, self.graphs, self.topology = path, graphs, topology
    self.schedules = schedules
    self._best_seen = np.array(best_runtime_s, copy=True)
    self.found_steps = self._saved_found_steps()

  def _saved_found_steps(self) -> list:
    """Per graph the step a resumed run's best was found by (from the file
    the interrupted run left), else None."""
    steps = [None] * len(self.graphs)
    try:
      saved = read_json(self.path)["graphs"]
      for b, record in enumerate(saved[:len(steps)]):
        steps[b] = record.get("found_at_step")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
      pass
    return steps

  def update(self, step: int, best_placement, best_runtime_s,
             force: bool = False, best_priority=None) -> None:
    """Writes if any best runtime improved (or ``force``)."""
    best_now = np.asarray(best_runtime_s)
    if force or np.any(best_now < self._best_seen):
      self.write(step, best_placement, best_now, best_priority)

  def write(self, step: int, best_placement, best_runtime_s,
            best_priority=None) -> None:
    best_now = np.asarray(best_runtime_s)
    for b, (now, seen) in enumerate(zip(best_now, self._best_seen)):
      if now < seen or self.found_steps[b] is None:
        self.found_steps[b] = int(step)
    write_json(self.path, best_placement_record(
        self.graphs, best_placement, best_now, self.topology, step,
        best_priority, self.schedules, self.found_steps))
    self._best_seen = np.array(best_now, copy=True)

  def write_best_of_run(self, step: int,
                        winners: Sequence[FoundPlacement],
                        tried: Sequence[int] = ()) -> None:
    """Writes the fastest placement of the run per graph
    (:func:`best_of_run_record`)."""
    write_json(self.path, best_of_run_record(self.graphs, self.topology,
                                             step, winners, tried))


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
                       best_priority=getattr(state, "best_priority", None))
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
                      getattr(state, "best_priority", None))

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
                       best_found_name: str = "gplace best found"
                       ) -> list[dict]:
  """:func:`write_results` of a finished run (none without a ``workdir``)
  and (with ``log``) one table per graph
  (:func:`~gplace.rl.reports.format_table`; ``policy_rows[b]`` and
  ``verdicts[b]``: graph ``b``'s); returns
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
                       verdicts[b] if verdicts else ""))
  return tables


class Curves(NamedTuple):
  """A finished run's curves against the samples it spent (graph 0's).

  Attributes:
    evaluations: ``[S]`` train samples spent so far at each logged RL step
      (``num_samples`` per step, counted from the run's first RL step).
    mean: ``[S]`` the mean runtime of the step's samples.
    best: ``[S]`` the best own sample so far (NaN: none yet).
    step_wall_s: ``[S]`` seconds since the run started (NaN: not logged).
    greedy: ``(evaluations [G], runtime_s [G])`` of the policy's greedy
      placement scored every ``settings.train.greedy_every`` steps (empty if
      never), against the train samples spent before it.
  """

  evaluations: np.ndarray
  mean: np.ndarray
  best: np.ndarray
  step_wall_s: np.ndarray
  greedy: tuple[np.ndarray, np.ndarray]


def read_curves(workdir: str, num_samples: int) -> Curves:
  """The :class:`Curves` in ``workdir``'s ``metrics.jsonl``, for a run of
  ``num_samples`` samples per RL step."""
  all_records = read_metrics(os.path.join(workdir, METRICS_FILE))
  records = [r for r in all_records if r["phase"] == "rl"]
  first = records[0]["step"] - 1 if records else 0
  evaluations = np.array([(r["step"] - first) * num_samples for r in records])
  mean = np.array([r["mean_runtime_s"] for r in records], np.float64)
  best = np.array([np.nan if r["best_runtime_s"][0] is None
                   else r["best_runtime_s"][0] for r in records], np.float64)
  step_wall = np.array([r.get("wall_s", np.nan) for r in records], np.float64)
  greedy = [r for r in all_records if r["phase"] == GREEDY_PHASE]
  greedy_curve = (np.array([(r["step"] - first) * num_samples
                            for r in greedy]),
                  np.array([np.nan if r["greedy_runtime_s"][0] is None
                            else r["greedy_runtime_s"][0] for r in greedy],
                           np.float64))
  return Curves(evaluations, mean, best, step_wall, greedy_curve)
