"""A run's directory: what identifies the run, and resuming only that run.

:func:`prepare_workdir` refuses checkpoints of another run
(:func:`check_resume` lists the differing fields), deletes them with
``settings.train.resume=False``, and writes :func:`run_record`.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from gplace.errors import ConfigError, first_line
from gplace.graphs.graph import Graph
from gplace.rl import checkpoint
from gplace.rl import run_outputs
from gplace.rl.settings import (PolicySettings, TrainSettings, flatten,
                                free_on_resume, to_record)


def _digest(*arrays: Optional[np.ndarray]) -> str:
  h = hashlib.blake2b(digest_size=8)
  for array in arrays:
    if array is None:
      h.update(b"none")
      continue
    array = np.ascontiguousarray(array)
    h.update(f"{array.dtype.str}{array.shape}".encode())
    h.update(array.tobytes())
  return h.hexdigest()


def graph_fingerprint(graph: Graph, costs: Optional[np.ndarray] = None
                      ) -> str:
  """A hash of what the simulator reads of ``graph`` (kinds, costs, edges,
  device constraints; not the names) and of measured ``costs``."""
  return _digest(graph.kind, graph.flops, graph.bytes_accessed,
                 graph.out_bytes, graph.edge_src, graph.edge_dst,
                 graph.edge_bytes, graph.allowed_devices, graph.colocation,
                 costs)


def run_record(settings: TrainSettings, policy: PolicySettings, topology,
               graphs: Sequence[Any]) -> dict:
  """What ``config.json`` holds: the settings (sectioned as a config), the
  policy, the topology (name, devices, fingerprint) and per graph its name,
  size and fingerprint (``graphs``: anything with ``name``, ``graph`` and
  ``costs``)."""
  record = to_record(settings)
  record["policy"] = policy.record()
  record["topology"] = {"name": topology.name,
                        "devices": list(topology.device_names),
                        "fingerprint": hashlib.blake2b(
                            repr(topology).encode(),
                            digest_size=8).hexdigest()}
  record["graphs"] = [{"name": g.name, "nodes": g.graph.n_nodes,
                       "edges": g.graph.n_edges,
                       "fingerprint": graph_fingerprint(g.graph, g.costs)}
                      for g in graphs]
  return record


def record_differences(saved: Mapping, record: Mapping
                       ) -> list[tuple[str, Any, Any]]:
  """``(field, saved value, new value)`` for every field that differs
  between a saved ``config.json`` and ``record``, except the fields free on
  resume (a field only one side has: ``"(missing)"``)."""
  old, new = flatten(saved), flatten(json.loads(json.dumps(
      run_outputs.json_safe(record))))
  free = set(free_on_resume())
  diffs = []
  for path in sorted(set(old) | set(new)):
    if path in free:
      continue
    before, after = old.get(path, "(missing)"), new.get(path, "(missing)")
    if before != after:
      diffs.append((path, before, after))
  return diffs


_FRESH_START = ("use a new --workdir, or --config.train.resume=False to "
                "discard its checkpoints and start over there")


def check_resume(record: Mapping, workdir: str, checkpoint_step: int,
                 settings: TrainSettings) -> None:
  """Refuses to resume a run whose checkpoints another run wrote:
  ``workdir/config.json`` must equal ``record`` in every field not free on
  resume, and the newest checkpoint must not lie past the run's last step.

  Raises:
    ConfigError: the fields that differ (saved -> new) and the fix.
  """
  path = os.path.join(workdir, run_outputs.CONFIG_FILE)
  try:
    saved = run_outputs.read_json(path)
  except (OSError, ValueError) as err:
    raise ConfigError(
        f"{workdir} holds checkpoints (step {checkpoint_step}) but its "
        f"{run_outputs.CONFIG_FILE} cannot be read ({first_line(err)}), so "
        f"nothing says they come from this run; {_FRESH_START}.") from err
  if not isinstance(saved, Mapping):
    raise ConfigError(f"{path} does not hold a run record; {_FRESH_START}.")
  diffs = record_differences(saved, record)
  if diffs:
    listed = "; ".join(f"{p}: {json.dumps(a)} -> {json.dumps(b)}"
                       for p, a, b in diffs)
    raise ConfigError(
        f"{workdir} holds a run (checkpoint at step {checkpoint_step}) "
        f"trained with different settings or graphs; resuming would mix "
        f"two runs. Fields that differ (saved -> new): {listed}. To "
        f"continue that run, drop those changes; otherwise {_FRESH_START}. "
        f"(Fields free to change on resume: "
        f"{', '.join(free_on_resume())}.)")
  if checkpoint_step > settings.total_steps:
    raise ConfigError(
        f"{workdir} holds a checkpoint at step {checkpoint_step}, past this "
        f"run's last step {settings.total_steps} (warm_start.steps + "
        f"train.num_steps); use --config.train.num_steps="
        f"{checkpoint_step - settings.warm_steps} or more, or "
        f"{_FRESH_START}.")


def write_probe(directory: str) -> Optional[OSError]:
  """Creates ``directory`` and writes a file there: None, or the error."""
  try:
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, ".gplace_write_test")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as err:
    return err
  return None


def check_workdir(workdir: str) -> None:
  """Creates ``workdir`` and writes a probe file there.

  Raises:
    ConfigError: it cannot be written.
  """
  err = write_probe(workdir)
  if err is not None:
    raise ConfigError(f"Cannot write to workdir {workdir!r}: {err}. Pass a "
                      "writable --workdir.") from err


def prepare_workdir(workdir: str, record: Mapping, settings: TrainSettings,
                    log: Callable[[str], None]) -> str:
  """Decides what becomes of a run already in ``workdir``, then writes
  ``record`` as ``config.json``; returns the checkpoint directory.

  With checkpoints there, ``train.resume=False`` deletes them (the run
  starts over); otherwise the run resumes only if the saved record matches
  (:func:`check_resume`). A refused run leaves ``config.json`` as it was.

  Raises:
    ConfigError: ``workdir`` cannot be written, or holds another run.
  """
  check_workdir(workdir)
  directory = os.path.join(workdir, run_outputs.CHECKPOINT_DIR)
  steps = checkpoint.saved_steps(directory)
  if steps and not settings.train.resume:
    checkpoint.discard(directory)
    log(f"[gplace] train.resume=False: deleted the checkpoints of steps "
        f"{', '.join(map(str, steps))} in {directory}; starting over")
  elif steps:
    check_resume(record, workdir, steps[-1], settings)
  run_outputs.write_json(os.path.join(workdir, run_outputs.CONFIG_FILE),
                         record)
  return directory
