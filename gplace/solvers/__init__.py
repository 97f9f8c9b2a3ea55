"""Exact solvers: a proven optimum and a proven bound to measure against.

:func:`solve` places and schedules with OR-tools CP-SAT and proves a lower
bound on the simulated runtime; :func:`solver_lower_bound`; :func:`exact`,
the solver as a placer; :func:`lns`, large-neighbourhood search with CP-SAT
windows for graphs too large to solve whole (:func:`lns_placer`;
:func:`lns_default_workers`, the windows it solves at once). The
model: :mod:`gplace.solvers.model`.
"""

from gplace.solvers.cpsat import (BOUND_SLACK, COARSE_GROUPS, MAX_EXACT_NODES,
                                  SolverResult, solve, solver_lower_bound)
from gplace.solvers.placer import HINT_BASELINES, exact
from gplace.solvers.lns import LNSResult, lns, lns_placer
from gplace.solvers.lns import default_workers as lns_default_workers
from gplace.solvers.model import (ScaledProblem, build_model,
                                  interchangeable_devices, scale_problem)

__all__ = ["BOUND_SLACK", "COARSE_GROUPS", "HINT_BASELINES", "LNSResult",
           "MAX_EXACT_NODES", "ScaledProblem", "SolverResult", "build_model",
           "exact", "interchangeable_devices", "lns", "lns_default_workers",
           "lns_placer",
           "scale_problem", "solve", "solver_lower_bound"]
