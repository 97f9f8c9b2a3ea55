"""Every non-learned placer by name: baselines, searches and the solvers
(the exact solver, and large-neighbourhood search with it).

:func:`get` returns ``fn(graph, topology, *, costs=None, seed=0) -> int32
[N]`` (searches and the solver with their default budgets); :func:`names`
and :func:`kind_of` list them as ``"baseline"``, ``"search"``, ``"solver"``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from gplace import baselines, search, solvers
from gplace.errors import BaselineError

Placer = Callable[..., np.ndarray]

BASELINE = "baseline"
SEARCH = "search"
SOLVER = "solver"
KINDS = (BASELINE, SEARCH, SOLVER)

_PLACERS: dict[str, tuple[str, Placer]] = {
    **{name: (BASELINE, baselines.get(name)) for name in baselines.names()},
    **{name: (SEARCH, placer) for name, placer in search.PLACERS.items()},
    "exact": (SOLVER, solvers.exact),
    "lns": (SOLVER, solvers.lns_placer),
}


def names(kind: str | None = None) -> list[str]:
  """Names of every placer, or of those of one kind (:data:`KINDS`), in a
  fixed order: baselines (as :func:`gplace.baselines.names`), searches,
  the solvers.

  Raises:
    BaselineError: an unknown kind.
  """
  if kind is not None and kind not in KINDS:
    raise BaselineError(f"Unknown kind of placer {kind!r}; choose one of "
                        f"{list(KINDS)} (or None for all).")
  return [name for name, (of, _) in _PLACERS.items()
          if kind is None or of == kind]


def kind_of(name: str) -> str:
  """Which kind of placer ``name`` is (:data:`KINDS`).

  Raises:
    BaselineError: unknown name; the message lists the known ones.
  """
  return _PLACERS[_check_name(name)][0]


def get(name: str) -> Placer:
  """The placer called ``name``: a baseline, a search or a solver.

  Raises:
    BaselineError: unknown name; the message lists the known ones.
  """
  return _PLACERS[_check_name(name)][1]


def _check_name(name: str) -> str:
  if isinstance(name, str) and name in _PLACERS:
    return name
  known = (f"a baseline ({', '.join(names(BASELINE))}), a search "
           f"({', '.join(names(SEARCH))}) or a solver "
           f"({', '.join(names(SOLVER))})")
  if not isinstance(name, str):
    raise BaselineError(f"A placer name must be a str, got "
                        f"{type(name).__name__} {name!r}; choose {known}.")
  raise BaselineError(f"Unknown placer {name!r}; choose {known}.")
