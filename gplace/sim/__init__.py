"""The cost model: devices, simulated runtime and memory, and bounds.

``topology`` (devices, links, op costs) and ``presets`` (named and local
topologies), ``simulator`` (:func:`simulate`) over ``scan`` (a shared
order), ``dispatch`` / ``native`` (an order per placement) and ``planned``
(HEFT's plan); ``reference`` is the plain-Python specification, ``bounds``
the lower bound, ``explain`` a placement's critical path taken apart
(:func:`explain`). The model:
``docs/design.md#the-simulators-model``.
"""

from gplace.sim.topology import Topology
from gplace.sim.presets import preset, local
from gplace.sim.problem import SimProblem, SimResult, make_problem
from gplace.sim.scan import simulate_problem
from gplace.sim.dispatch import (DispatchProblem, make_dispatch_problem,
                                 simulate_dispatch)
from gplace.sim.priority import bottom_level, priority_order
from gplace.sim.simulator import simulate
from gplace.sim.bounds import lower_bound
from gplace.sim.explain import Explanation, explain
