"""Errors gplace raises at its public boundary.

Every error a user can cause is a :class:`GplaceError` subclass whose
message says what was wrong and how to fix it.
"""

import numbers
from typing import Any, Callable


class GplaceError(Exception):
  """Base class of every error gplace raises on bad input."""


class CaptureError(GplaceError):
  """A function could not be traced, or its arguments do not match."""


class GraphError(GplaceError):
  """A graph is malformed, or a file does not hold a gplace graph."""


class PlacementError(GplaceError):
  """A placement has the wrong length, or names a device that does not exist."""


class TopologyError(GplaceError):
  """A topology is malformed (no devices, bad link matrix, NaN costs)."""


class WorkloadError(GplaceError):
  """An unknown workload, size or step was requested."""


class ExecutionError(GplaceError):
  """A placed program could not be built or run."""


class ConfigError(GplaceError):
  """An experiment config holds a value that cannot work."""


class WorkdirBusyError(ConfigError):
  """Another run holds the workdir (its lock names the process)."""


class DistributedError(GplaceError):
  """A multi-process run is set up wrongly (process id, coordinator), or
  another process of it failed."""


class ProcessLostError(DistributedError):
  """Another process of a multi-process run stopped responding (killed or
  crashed) while this one ran."""


class CheckpointError(GplaceError):
  """A checkpoint could not be written or restored."""


class BudgetError(GplaceError):
  """A padding budget is too small for the graphs, or budgets do not match."""


class CoarseningError(GplaceError):
  """A coarsening rule or its arguments cannot be applied."""


class BuildError(ExecutionError):
  """A placed program could not be compiled for its devices."""


class RewardError(GplaceError):
  """A reward function returned values of the wrong shape or kind."""


class BaselineError(GplaceError):
  """An unknown baseline was requested, or a baseline cannot run here."""


class ScheduleError(PlacementError):
  """A schedule (priorities or an execution order) is malformed."""


class SearchError(GplaceError):
  """A search or solver was given a budget or setting that cannot work."""


class PolicyError(GplaceError):
  """An unknown policy family, or policy hyperparameters that cannot work."""


class FusionError(GplaceError):
  """A fusion decision is malformed, or fuses ops that cannot share a
  kernel (across devices, a cycle, a loop, two matmuls)."""


class PlotError(GplaceError):
  """A plotting function got data it cannot draw, or cannot write its
  picture."""


def is_int(value) -> bool:
  """Whether ``value`` is an integer (numpy's included), not a bool."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_seed(seed, caller: str, error: type) -> int:
  """``seed`` as an int in ``[0, 2**31)`` (what numpy, pymetis and CP-SAT
  all take), else ``error`` naming ``caller``."""
  if not is_int(seed) or not 0 <= seed < 2**31:
    raise error(f"{caller}: seed must be an integer in [0, 2**31), got "
                f"{seed!r}; pass e.g. seed=0.")
  return int(seed)


def first_line(err: BaseException) -> str:
  """``"TypeName: first line of the message"``: a one-line cause to quote."""
  text = str(err).strip().splitlines()
  return f"{type(err).__name__}: {text[0] if text else ''}"


def or_exit(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
  """``fn(*args, **kwargs)``, with a :class:`GplaceError` turned into a
  ``SystemExit`` that quotes its :func:`first_line` (for scripts: a bad
  flag ends the run with one line, not a traceback)."""
  try:
    return fn(*args, **kwargs)
  except GplaceError as err:
    raise SystemExit(first_line(err)) from err


def check_type(value, expected: type, argument: str, caller: str,
               error: type, how: str) -> None:
  """Raises ``error`` unless ``value`` is an ``expected`` instance; the
  message names ``caller``, the ``argument`` and ``how`` to get one."""
  if not isinstance(value, expected):
    raise error(f"{caller} needs {argument} to be a gplace."
                f"{expected.__name__}, got {type(value).__name__}; {how}.")
