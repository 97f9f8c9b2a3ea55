"""One call from a program or a graph to a placement: :func:`optimize`.

``gplace.optimize(fn, *args)`` (or a graph, a ``networkx.DiGraph``, a graph
file) tries every baseline, applies a pretrained policy zero-shot (and
fine-tunes it given the time), searches from the best so far, runs the exact
solver on small graphs, and returns the fastest placement that fits in
memory and keeps the graph's device constraints, as a
:class:`PlacementResult` (placement, schedule, simulated runtime and
memory, everything it was compared with, the lower bound).

Modules, in the order a call meets them: :mod:`~gplace.autoplace.inputs`
(checks and resolves the arguments), :mod:`~gplace.autoplace.candidates`
(baselines in their best schedule, search, solver),
:mod:`~gplace.autoplace.policy` (the pretrained policy zero-shot or
fine-tuned, GO trained on the graph from scratch),
:mod:`~gplace.autoplace.optimizer` (the call itself),
:mod:`~gplace.autoplace.result` (what it returns),
:mod:`~gplace.autoplace.progress` (the progress bar).
"""

from gplace.autoplace.candidates import (BaselineRuns, Candidate,
                                         baseline_candidates, baseline_rows,
                                         baseline_runs)
from gplace.autoplace.optimizer import (AUTO_SOLVER_MAX_NODES,
                                        SOLVER_MAX_NODES, optimize)
from gplace.autoplace.result import PlacementResult

__all__ = ["AUTO_SOLVER_MAX_NODES", "BaselineRuns", "Candidate",
           "PlacementResult", "SOLVER_MAX_NODES", "baseline_candidates",
           "baseline_rows", "baseline_runs", "optimize"]
