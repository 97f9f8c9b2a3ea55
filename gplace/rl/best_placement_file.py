"""``best_placement.json``: the best placement per graph, rewritten during
training whenever one improves and, at the end of a run, the fastest
placement the run found whatever found it (:class:`FoundPlacement`);
:func:`read_best_placement` reads one graph's back."""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence

import numpy as np

from gplace.errors import PlacementError, TopologyError
from gplace.graphs.fusion_decisions import decision_labels
from gplace.rl.metrics import read_json, write_json
from gplace.rl.reports import GraphSummary
from gplace.sim.topology import Topology

BEST_PLACEMENT_FILE = "best_placement.json"

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
    fusion: ``int [N]`` fusion group labels its ``runtime_s`` was simulated
      with (-1: unfused; a policy with a fusion head), as
      ``gplace.simulate(..., fusion=)`` and ``gplace.place(..., fusion=)``
      take them; None: no fusion decision.
  """

  source: str
  placement: np.ndarray
  runtime_s: float
  schedule: str = DEFAULT_SCHEDULE
  order: Optional[np.ndarray] = None
  fusion: Optional[np.ndarray] = None


class SavedPlacement(NamedTuple):
  """One graph's record of ``best_placement.json``, read back
  (:func:`read_best_placement`).

  Attributes:
    workload: the graph's name.
    placement: ``int32 [N]`` device index per node (into the file's
      ``device_names``).
    runtime_s: as recorded (inf: nothing fitted in memory).
    source, schedule: as :class:`FoundPlacement`.
    order: ``int32 [N]`` node ids in schedule order, or None.
    fusion: ``int64 [N]`` fusion group labels (-1: unfused), or None (the
      file has none: no fusion decision, or a file written before fusion
      was recorded).
  """

  workload: str
  placement: np.ndarray
  runtime_s: float
  source: str = TRAINING_SOURCE
  schedule: str = DEFAULT_SCHEDULE
  order: Optional[np.ndarray] = None
  fusion: Optional[np.ndarray] = None


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
  if found.fusion is not None:
    record["fusion"] = [int(label) for label in found.fusion]
  return record


def fusion_labels(summary: GraphSummary, placement,
                  choices) -> Optional[np.ndarray]:
  """``int64 [N]`` legal labels of a fusion head's ``choices [>= N]`` for
  ``placement [>= N]`` (padding cut;
  :func:`gplace.graphs.fusion_decisions.decision_labels`), None for
  None."""
  if choices is None:
    return None
  n = summary.graph.n_nodes
  return decision_labels(summary.graph, np.asarray(placement)[:n],
                         np.asarray(choices)[:n])


def best_placement_record(graphs: Sequence[GraphSummary],
                          best_placement: np.ndarray,
                          best_runtime_s: np.ndarray, topology: Topology,
                          step: int, best_priority=None,
                          schedules: Optional[Sequence[str]] = None,
                          found_steps: Optional[Sequence] = None,
                          best_fusion=None) -> dict:
  """The content of ``best_placement.json`` during training: per graph the
  best placement sampled so far (``"source": "training samples"``), its
  runtime (written as ``null`` while nothing fits in memory), the device
  name of every real node, ``found_at_step`` (the chunk by whose end it was
  found) and its ``schedule`` (:data:`DEFAULT_SCHEDULE`...): the training
  reward's, or for an ordering policy ``"dynamic: order as priority"`` with
  ``order``, the node ids in the policy's order; for a policy with a fusion
  head ``fusion``, the labels it was simulated with.

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
    best_fusion: ``int [B, N_pad]`` fusion choices (policies with a fusion
      head) or None.
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
    fusion = fusion_labels(s, best[b], None if best_fusion is None
                           else np.asarray(best_fusion)[b])
    out["graphs"].append(_graph_record(
        s, topology, FoundPlacement(TRAINING_SOURCE, best[b, :n],
                                    float(runtime[b]), schedule, order,
                                    fusion),
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
             force: bool = False, best_priority=None,
             best_fusion=None) -> None:
    """Writes if any best runtime improved (or ``force``)."""
    best_now = np.asarray(best_runtime_s)
    if force or np.any(best_now < self._best_seen):
      self.write(step, best_placement, best_now, best_priority, best_fusion)

  def write(self, step: int, best_placement, best_runtime_s,
            best_priority=None, best_fusion=None) -> None:
    best_now = np.asarray(best_runtime_s)
    for b, (now, seen) in enumerate(zip(best_now, self._best_seen)):
      if now < seen or self.found_steps[b] is None:
        self.found_steps[b] = int(step)
    write_json(self.path, best_placement_record(
        self.graphs, best_placement, best_now, self.topology, step,
        best_priority, self.schedules, self.found_steps, best_fusion))
    self._best_seen = np.array(best_now, copy=True)

  def write_best_of_run(self, step: int,
                        winners: Sequence[FoundPlacement],
                        tried: Sequence[int] = ()) -> None:
    """Writes the fastest placement of the run per graph
    (:func:`best_of_run_record`)."""
    write_json(self.path, best_of_run_record(self.graphs, self.topology,
                                             step, winners, tried))



def read_best_placement(path: str, workload: Optional[str] = None,
                        device_names: Optional[Sequence[str]] = None
                        ) -> SavedPlacement:
  """One graph's placement from a run's ``best_placement.json``, with its
  order and fusion labels where the file has them (files without them
  load with None).

  Args:
    path: the file.
    workload: the graph's name (None: the file's only graph).
    device_names: the topology to place on (None: not checked); the file
      must name the same devices in the same order.

  Raises:
    PlacementError: the file cannot be read, has no such graph, or
      ``workload`` is None and it has several.
    TopologyError: the file places on other devices.
  """
  try:
    record = read_json(path)
    names = list(record["device_names"])
    graphs = list(record["graphs"])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise PlacementError(
        f"{path} is not a readable best_placement.json ({e}); pass the file "
        "a training run wrote into its workdir.") from e
  if device_names is not None and names != list(device_names):
    raise TopologyError(
        f"{path} places on {names}, the topology has {list(device_names)}; "
        "pass the topology the run placed on (--topology).")
  if workload is None and len(graphs) != 1:
    raise PlacementError(
        f"{path} holds {len(graphs)} graphs "
        f"({[g.get('workload') for g in graphs]}); name the workload.")
  for entry in graphs:
    if workload is None or entry.get("workload") == workload:
      return _saved(entry, names)
  raise PlacementError(f"{path} has no placement of {workload!r}; it has "
                       f"{[g.get('workload') for g in graphs]}.")


def _saved(entry: dict, names: list) -> SavedPlacement:
  runtime = entry.get("runtime_s")
  optional = {key: np.asarray(entry[key], dtype)
              for key, dtype in (("order", np.int32), ("fusion", np.int64))
              if entry.get(key) is not None}
  return SavedPlacement(
      str(entry.get("workload")),
      np.asarray([names.index(op["device"]) for op in entry["placement"]],
                 np.int32),
      math.inf if runtime is None else float(runtime),
      entry.get("source", TRAINING_SOURCE),
      entry.get("schedule", DEFAULT_SCHEDULE), **optional)
