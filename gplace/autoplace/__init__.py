"""One call from a program or a graph to a placement: :func:`optimize`.

Baselines, a pretrained policy, a search and the exact solver, then the
fastest feasible placement as a :class:`PlacementResult`. Modules in call
order: ``inputs``, ``candidates``, ``policy``, ``optimizer`` (its phases'
time from ``budget``), ``measured``, ``outcome``, ``result``.
"""

from gplace.autoplace.candidates import (BaselineRuns, Candidate,
                                         baseline_candidates, baseline_rows,
                                         baseline_runs)
from gplace.autoplace.budget import AUTO_SOLVER_MAX_NODES, SOLVER_MAX_NODES
from gplace.autoplace.optimizer import optimize
from gplace.autoplace.result import PlacementResult

__all__ = ["AUTO_SOLVER_MAX_NODES", "BaselineRuns", "Candidate",
           "PlacementResult", "SOLVER_MAX_NODES", "baseline_candidates",
           "baseline_rows", "baseline_runs", "optimize"]
