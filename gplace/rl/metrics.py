"""A run's strict JSON files (non-finite numbers as ``null``) and its
``metrics.jsonl``: one record per train step, written after every chunk,
trimmed to the checkpoint on resume, read back as curves."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

METRICS_FILE = "metrics.jsonl"
#: ``phase`` of the ``metrics.jsonl`` lines that score the policy's greedy
#: placement during training (``settings.train.greedy_every``).
GREEDY_PHASE = "greedy"


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


# -- curves --------------------------------------------------------------------


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
