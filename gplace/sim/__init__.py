"""The cost model: devices, simulated runtime and memory, and bounds.

``topology`` describes devices, links and op costs (``topology_json`` is
its JSON form, ``jax_devices`` the local devices ``topology.local``
describes; ``graph_files`` reads and writes graphs with their topology and
costs); ``simulator`` scores placements (jitted, vmapped): ``problem``
builds its arrays on the host, ``scan`` is the jitted scan and ``kernel``
its CPU one-kernel compilation; ``dispatch`` list-schedules each placement
on its own (dynamic rule or priorities; ``native`` is its compiled host
twin), ``planned`` plans each placement's schedule as HEFT would
(``list_scheduler``, the list scheduler the baselines share; the default
takes the faster of the two) and ``priority`` holds the critical-path
default; ``reference`` is the plain-Python twin of both for tests;
``bounds`` says how fast any placement could possibly be.
"""

from gplace.sim.topology import Topology, preset, local
from gplace.sim.problem import SimProblem, SimResult, make_problem
from gplace.sim.scan import simulate_problem
from gplace.sim.dispatch import (DispatchProblem, make_dispatch_problem,
                                 simulate_dispatch)
from gplace.sim.priority import bottom_level, priority_order
from gplace.sim.simulator import simulate
from gplace.sim.bounds import lower_bound
