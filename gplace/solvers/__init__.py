"""Exact solvers: a proven optimum and a proven bound to measure against.

:func:`solve` places and schedules a graph with OR-tools CP-SAT and returns
its best placement + order (evaluated in ``gplace.simulate``) with a lower
bound on the simulated runtime that it proved; :func:`exact` is the same as
a placer with the baselines' interface; :func:`solver_lower_bound` tightens
``gplace.lower_bound`` with the solver's bound. The model and what it
relaxes: :mod:`gplace.solvers.model`; the solve loop: :mod:`gplace.solvers.
cpsat`.
"""

from gplace.solvers.cpsat import (BOUND_SLACK, COARSE_GROUPS, MAX_EXACT_NODES,
                                  SolverResult, exact, solve,
                                  solver_lower_bound)
from gplace.solvers.model import (ScaledProblem, build_model,
                                  interchangeable_devices, scale_problem)

__all__ = ["BOUND_SLACK", "COARSE_GROUPS", "MAX_EXACT_NODES", "ScaledProblem",
           "SolverResult", "build_model", "exact", "interchangeable_devices",
           "scale_problem", "solve", "solver_lower_bound"]
