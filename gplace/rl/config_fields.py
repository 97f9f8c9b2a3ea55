"""The fields of a training config: their valid ranges, lookups, overrides.

Where this sits: :func:`gplace.rl.validation.validate_config` starts with
:func:`validate_numbers`: every numeric field has its valid range in one
table (:data:`INT_FIELDS`, :data:`FLOAT_FIELDS`; NaN and infinity fail every
range), every flag is in :data:`BOOL_FIELDS`, and each bad value raises
:class:`~gplace.errors.ConfigError` with the field, the value and an example
to use instead. ``experiments/run.py`` checks that every
``--config.<path>=...`` flag names a field (:func:`check_override`);
:func:`lookup` reads a field by its dotted path. The checks of what the
fields mean together (workloads, policy, rewards) are in
:mod:`gplace.rl.validation`.
"""

from __future__ import annotations

import difflib
import math
import numbers
from typing import Any, NamedTuple, Optional

from gplace.errors import ConfigError, is_int


class IntRange(NamedTuple):
  """Valid integers: ``minimum <= value < maximum`` (no maximum: None)."""
  minimum: int
  maximum: Optional[int]
  example: int


class FloatRange(NamedTuple):
  """Valid finite numbers between ``low`` and ``high`` (each end included
  or not)."""
  low: float
  high: float
  low_included: bool
  high_included: bool
  example: float


INT_FIELDS = {
    "seed": IntRange(0, 2**31, 0),    # what the baselines (numpy, pymetis) take
    "rl.ppo_epochs": IntRange(1, None, 4),
    "warm_start.steps": IntRange(0, None, 50),
    "train.num_steps": IntRange(0, None, 100),
    "train.chunk_steps": IntRange(1, None, 25),
    "train.checkpoint_every": IntRange(1, None, 50),
    "train.max_to_keep": IntRange(1, None, 2),
    "train.eval_samples": IntRange(1, None, 64),
    "train.greedy_every": IntRange(0, None, 5),
    "executor.repeats": IntRange(1, None, 5),
    "executor.warmup": IntRange(0, None, 1),
    "groups.max_groups": IntRange(0, None, 256),
    "groups.min_nodes": IntRange(0, None, 256),
    "refine.evaluations": IntRange(0, None, 3200),
    "refine.num_samples": IntRange(1, None, 64),
    "refine.max_moves": IntRange(1, None, 1),
}
_INF = math.inf
FLOAT_FIELDS = {
    "optimizer.learning_rate": FloatRange(0.0, _INF, False, False, 3e-4),
    "optimizer.grad_clip": FloatRange(0.0, _INF, False, False, 1.0),
    "optimizer.final_fraction": FloatRange(0.0, 1.0, True, True, 0.1),
    "warm_start.learning_rate": FloatRange(0.0, _INF, False, False, 1e-2),
    "warm_start.label_smoothing": FloatRange(0.0, 1.0, True, False, 0.0),
    "rl.ppo_clip": FloatRange(0.0, 1.0, False, False, 0.2),
    "rl.entropy_weight": FloatRange(0.0, _INF, True, False, 1e-2),
    "rl.entropy_floor": FloatRange(0.0, _INF, True, False, 0.1),
    "rl.entropy_floor_weight": FloatRange(0.0, _INF, True, False, 1.0),
    "rl.baseline_decay": FloatRange(0.0, 1.0, True, False, 0.9),
    "rl.oom_penalty_factor": FloatRange(1.0, _INF, True, False, 10.0),
    "rl.explore_epsilon": FloatRange(0.0, 1.0, True, False, 0.01),
    "rl.mutate_best": FloatRange(0.0, 1.0, True, True, 0.01),
    "refine.learning_rate": FloatRange(0.0, _INF, False, False, 4.0),
    "refine.init_logit": FloatRange(0.0, _INF, True, False, 5.0),
}
BOOL_FIELDS = ("pmap", "progress_bar", "print_table", "rl.normalize_rewards",
               "rl.fresh_optimizer", "train.resume")
# Fields older configs may lack (their readers have defaults).
OPTIONAL_FIELDS = ("rl.explore_epsilon", "rl.mutate_best",
                   "rl.entropy_floor", "rl.entropy_floor_weight",
                   "optimizer.final_fraction",
                   "warm_start.label_smoothing", "train.resume",
                   "train.eval_samples", "train.greedy_every",
                   "groups.max_groups",
                   "groups.min_nodes",
                   "executor.repeats", "executor.warmup",
                   "refine.evaluations", "refine.num_samples",
                   "refine.max_moves", "refine.learning_rate",
                   "refine.init_logit")
# Valid ranges of the policy's integer hyperparameters (the GO family's
# names); any other integer hyperparameter must be non-negative, any float
# finite.
POLICY_INT_FIELDS = {
    "hidden_size": IntRange(1, None, 64), "num_heads": IntRange(1, None, 4),
    "segment_length": IntRange(1, None, 128),
    "op_embedding_size": IntRange(1, None, 16),
    "head_hidden_size": IntRange(1, None, 64),
    "vocabulary_size": IntRange(1, None, 256),
    "num_sage_layers": IntRange(0, None, 2),
    "num_attention_layers": IntRange(0, None, 2),
    "num_position_frequencies": IntRange(0, None, 8),
    "free_logits": IntRange(0, None, 256),
}
_MISSING = object()


def lookup(config, path: str, default: Any = _MISSING) -> Any:
  """``config.a.b`` for ``path="a.b"``; ``default`` where a key is missing."""
  node = config
  for key in path.split("."):
    if not hasattr(node, "keys") or key not in node:
      return default
    node = node[key]
  return node


def is_real(value) -> bool:
  """Whether ``value`` is a real number (an int included), not a bool."""
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def describe_int_range(valid: IntRange) -> str:
  """E.g. ``"a positive integer"``, ``"an integer in [0, 4294967296)"``."""
  if valid.maximum is not None:
    return f"an integer in [{valid.minimum}, {valid.maximum})"
  if valid.minimum == 1:
    return "a positive integer"
  if valid.minimum == 0:
    return "a non-negative integer"
  return f"an integer of at least {valid.minimum}"


def describe_float_range(valid: FloatRange) -> str:
  """E.g. ``"a finite number > 0"``, ``"a number in [0, 1)"``."""
  if math.isinf(valid.high):
    return (f"a finite number {'>=' if valid.low_included else '>'} "
            f"{valid.low:g}")
  return (f"a number in {'[' if valid.low_included else '('}{valid.low:g}, "
          f"{valid.high:g}{']' if valid.high_included else ')'}")


def _in_range(value, valid: FloatRange) -> bool:
  try:
    value = float(value)
  except OverflowError:  # an integer beyond any float
    return False
  above = value >= valid.low if valid.low_included else value > valid.low
  below = value <= valid.high if valid.high_included else value < valid.high
  return math.isfinite(value) and above and below


def out_of_range(path: str, value, valid_text: str, example) -> ConfigError:
  """The error of ``config.<path>=value``: what it must be, and an example
  override that fixes it."""
  return ConfigError(f"config.{path}={value!r}: must be {valid_text}; use "
                     f"e.g. --config.{path}={example}.")


def validate_numbers(config) -> None:
  """Every field of :data:`INT_FIELDS`, :data:`FLOAT_FIELDS` and
  :data:`BOOL_FIELDS`: present (unless optional), of its type, in range."""
  fields = list(INT_FIELDS.items()) + list(FLOAT_FIELDS.items())
  for path, valid in fields:
    value = lookup(config, path)
    if value is _MISSING:
      if path in OPTIONAL_FIELDS:
        continue
      raise ConfigError(f"config.{path} is missing; every config starts "
                        "from experiments/configs/quickstart.py, which sets "
                        f"it (e.g. {valid.example}).")
    if isinstance(valid, IntRange):
      text = describe_int_range(valid)
      if not is_int(value) or value < valid.minimum or (
          valid.maximum is not None and value >= valid.maximum):
        raise out_of_range(path, value, text, valid.example)
    elif not is_real(value) or not _in_range(value, valid):
      raise out_of_range(path, value, describe_float_range(valid),
                          valid.example)
  for path in BOOL_FIELDS:
    value = lookup(config, path, True)
    if not isinstance(value, bool):
      raise ConfigError(f"config.{path}={value!r}: must be True or False.")


# -- command-line overrides ---------------------------------------------------


def check_override(config, path: str) -> None:
  """Checks that ``--config.<path>=...`` names a field of ``config``.

  Raises:
    ConfigError: one line naming the unknown key and the closest valid
      ones (difflib), or every key of its group when none is close.
  """
  node, walked, keys_in_path = config, [], path.split(".")
  for depth, key in enumerate(keys_in_path):
    where = "config." + ".".join(walked) if walked else "the config"
    if not hasattr(node, "keys"):
      raise ConfigError(f"--config.{path}: {where} is a value ({node!r}), "
                        f"not a group of fields; set --config."
                        f"{'.'.join(walked)}=... instead.")
    if key not in node:
      keys = sorted(node.keys())
      tail = keys_in_path[depth + 1:]
      # Only candidates under which the rest of the path exists.
      close = [c for c in difflib.get_close_matches(key, keys, n=3,
                                                    cutoff=0.5)
               if lookup(node[c], ".".join(tail)) is not _MISSING or not tail]
      prefix = "--config." + "".join(k + "." for k in walked)
      rest = "".join("." + k for k in keys_in_path[depth + 1:])
      hint = (f"did you mean {' or '.join(prefix + c + rest for c in close)}?"
              if close else f"{where} has {', '.join(keys)}.")
      raise ConfigError(f"--config.{path}: unknown field {key!r} in "
                        f"{where}; {hint}")
    node, walked = node[key], walked + [key]
