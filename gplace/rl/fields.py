"""Declared settings fields: a default, a valid range, and the check.

:mod:`gplace.rl.settings` declares each field with :func:`int_field`,
:func:`real_field`, :func:`choice_field` or :func:`flag_field`;
:func:`check_fields` checks a dataclass against them and raises
:class:`~gplace.errors.ConfigError` naming the field, the value and a fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from typing import Any, Mapping, NamedTuple, Optional

from gplace.errors import ConfigError, is_int


# -- fields and their checks --------------------------------------------------


class _Int(NamedTuple):
  minimum: int
  maximum: Optional[int]
  example: int


class _Real(NamedTuple):
  low: float
  high: float
  low_included: bool
  high_included: bool
  example: float


class _Choice(NamedTuple):
  choices: tuple
  example: str


class _Flag(NamedTuple):
  example: bool = True


def field(default, check, *, free_on_resume: bool = False):
  return dataclasses.field(default=default, metadata=dict(
      check=check, free_on_resume=free_on_resume))


def int_field(default, minimum=0, maximum=None, example=None, **kw):
  if example is None:
    example = default or minimum + 1
  return field(default, _Int(minimum, maximum, example), **kw)


def real_field(default, low=0.0, high=math.inf, low_included=True,
          high_included=False, example=None, **kw):
  return field(default, _Real(low, high, low_included, high_included,
                               default if example is None else example), **kw)


def choice_field(default, choices, **kw):
  return field(default, _Choice(tuple(choices), default), **kw)


def flag_field(default, **kw):
  return field(default, _Flag(), **kw)


def _describe(check) -> str:
  if isinstance(check, _Int):
    if check.maximum is not None:
      return f"an integer in [{check.minimum}, {check.maximum})"
    return {0: "a non-negative integer", 1: "a positive integer"}.get(
        check.minimum, f"an integer of at least {check.minimum}")
  if isinstance(check, _Real):
    if math.isinf(check.high):
      return (f"a finite number {'>=' if check.low_included else '>'} "
              f"{check.low:g}")
    return (f"a number in {'[' if check.low_included else '('}"
            f"{check.low:g}, {check.high:g}"
            f"{']' if check.high_included else ')'}")
  if isinstance(check, _Choice):
    return f"one of {', '.join(map(repr, check.choices))}"
  return "True or False"


def is_real(value) -> bool:
  """Whether ``value`` is a real number (an int included), not a bool."""
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _valid(value, check) -> bool:
  if isinstance(check, _Int):
    return is_int(value) and value >= check.minimum and (
        check.maximum is None or value < check.maximum)
  if isinstance(check, _Real):
    if not is_real(value):
      return False
    try:
      value = float(value)
    except OverflowError:  # an integer beyond any float
      return False
    above = value >= check.low if check.low_included else value > check.low
    below = (value <= check.high if check.high_included
             else value < check.high)
    return math.isfinite(value) and above and below
  if isinstance(check, _Choice):
    return isinstance(value, str) and value in check.choices
  return isinstance(value, bool)


def bad_value(path: str, value, valid_text: str, example) -> ConfigError:
  """The error of a setting ``path`` (``"rl.num_samples"``) that cannot
  take ``value``: what it must be and the override that fixes it."""
  return ConfigError(f"{path}={value!r}: must be {valid_text}; use e.g. "
                     f"--config.{path}={example}.")


def check_fields(settings) -> None:
  """Every field of a settings dataclass against its declared check."""
  prefix = f"{settings.SECTION}." if settings.SECTION else ""
  for field in dataclasses.fields(settings):
    check = field.metadata.get("check")
    value = getattr(settings, field.name)
    if check is not None and not _valid(value, check):
      raise bad_value(prefix + field.name, value, _describe(check),
                      check.example)


def divisors_near(number: int, near: int, reach: int = 10_000) -> str:
  """The divisors of ``number`` closest to ``near`` (``"2 or 4"``)."""
  below = next((d for d in range(min(near - 1, number),
                                 max(near - 1 - reach, 0), -1)
                if number % d == 0), 1)
  above = next((d for d in range(near + 1, min(number, near + reach) + 1)
                if number % d == 0), None)
  return " or ".join(str(d) for d in (below, above) if d is not None)


def unknown_field(keys, known, where: str) -> ConfigError:
  key = sorted(keys)[0]
  close = difflib.get_close_matches(key, sorted(known), n=2, cutoff=0.5)
  hint = (f"did you mean {' or '.join(close)}?" if close
          else f"{where} has {', '.join(sorted(known))}.")
  return ConfigError(f"Unknown setting {key!r} in {where}; {hint}")


class Section:
  """Base of a settings dataclass: ``SECTION`` names it in a config
  (``"rl"``; ``""`` for the top level), and building one checks every
  declared field (:func:`check_fields`)."""

  SECTION = ""

  def __post_init__(self):
    check_fields(self)


def flatten(tree: Mapping, prefix: str = "",
            separator: str = ".") -> dict[str, Any]:
  """``{"rl.num_samples": 16, ...}``: the leaves of nested mappings, kept as
  they are, each under its keys joined by ``separator``."""
  out = {}
  for key, value in tree.items():
    path = f"{prefix}{key}"
    if isinstance(value, Mapping):
      out.update(flatten(value, path + separator, separator))
    else:
      out[path] = value
  return out
