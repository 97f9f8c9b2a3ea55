"""Resuming a run only under the config that wrote it.

Where this sits: :func:`gplace.rl.train.train_and_evaluate` calls
:func:`check_resume` before restoring a checkpoint, so that a workdir reused
with another config is refused (the fields that differ are listed) instead
of silently mixing two runs; ``config.json`` is written only after it.
Host-side, no JAX.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from gplace.errors import ConfigError, first_line
from gplace.rl import run_outputs

# Fields a resumed run may change: how long it runs, where chunks end (every
# step computes the same; the RNG is in the state), how it reports, and the
# cache of captured graphs. Any other difference changes results.
FREE_ON_RESUME = ("train.num_steps", "train.chunk_steps",
                  "train.checkpoint_every", "train.max_to_keep",
                  "train.resume", "train.eval_samples",
                  "train.greedy_every", "progress_bar",
                  "print_table",
                  "graph_cache",
                  # The per-op refinement runs after training, from the
                  # policy's greedy placement: a finished run can be
                  # refined again with other settings.
                  "refine.evaluations", "refine.num_samples",
                  "refine.max_moves", "refine.learning_rate",
                  "refine.init_logit", "refine.start")


def config_record(config) -> dict:
  """``config`` as the JSON object written to ``config.json``."""
  return json.loads(config.to_json_best_effort())


def flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
  """``{"rl.num_samples": 16, ...}``: the leaves of nested mappings."""
  out = {}
  for key, value in tree.items():
    path = f"{prefix}{key}"
    if isinstance(value, Mapping):
      out.update(flatten(value, path + "."))
    else:
      out[path] = value
  return out


def config_differences(saved: Mapping, config) -> list[tuple[str, Any, Any]]:
  """``(field, saved value, new value)`` for every field that differs
  between a saved ``config.json`` and ``config``, except
  :data:`FREE_ON_RESUME` (a field only one side has: the value
  ``"(missing)"``)."""
  old, new = flatten(saved), flatten(config_record(config))
  diffs = []
  for path in sorted(set(old) | set(new)):
    if path in FREE_ON_RESUME:
      continue
    before, after = old.get(path, "(missing)"), new.get(path, "(missing)")
    if before != after:
      diffs.append((path, before, after))
  return diffs


_FRESH_START = ("use a new --workdir, or --config.train.resume=False to "
                "discard its checkpoints and start over there")


def check_resume(config, workdir: str, checkpoint_step: int) -> None:
  """Refuses to resume a run whose checkpoints were written under another
  config: ``workdir/config.json`` must equal ``config`` in every field but
  :data:`FREE_ON_RESUME`, and the newest checkpoint must not lie past the
  run's last step.

  Args:
    config: the new config.
    workdir: the run's directory, holding ``config.json``.
    checkpoint_step: the newest checkpoint's step.

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
        f"nothing says they come from this config; {_FRESH_START}.") from err
  if not isinstance(saved, Mapping):
    raise ConfigError(f"{path} does not hold a config object; "
                      f"{_FRESH_START}.")
  diffs = config_differences(saved, config)
  if diffs:
    listed = "; ".join(f"{p}: {json.dumps(a)} -> {json.dumps(b)}"
                       for p, a, b in diffs)
    raise ConfigError(
        f"{workdir} holds a run (checkpoint at step {checkpoint_step}) "
        f"trained with a different config; resuming would mix two runs. "
        f"Fields that differ (saved -> new): {listed}. To continue that "
        f"run, drop those overrides; otherwise {_FRESH_START}. (Fields "
        f"free to change on resume: {', '.join(FREE_ON_RESUME)}.)")
  warm = (0 if config.warm_start.baseline == "none"
          else int(config.warm_start.steps))
  last_step = warm + int(config.train.num_steps)
  if checkpoint_step > last_step:
    raise ConfigError(
        f"{workdir} holds a checkpoint at step {checkpoint_step}, past this "
        f"config's last step {last_step} (warm_start.steps + "
        f"train.num_steps); use --config.train.num_steps="
        f"{checkpoint_step - warm} or more, or {_FRESH_START}.")
