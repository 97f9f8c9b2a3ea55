"""Errors gplace raises at its public boundary.

Every error a user can cause (bad arguments, an untraceable function, a
placement of the wrong length, a config that cannot work) is a subclass of
:class:`GplaceError`, with a message that says what was wrong and how to fix
it, so that nobody has to read a stack trace from deep inside JAX.
"""


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


class CheckpointError(GplaceError):
  """A checkpoint could not be written or restored."""


class BudgetError(GplaceError):
  """A padding budget is too small for the graphs, or budgets do not match."""


class CoarseningError(GplaceError):
  """A coarsening rule or its arguments cannot be applied."""
