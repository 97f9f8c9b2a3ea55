"""The cost model: devices, simulated runtime and memory, and bounds.

``topology`` describes devices, links and op costs; ``simulator`` scores
placements (jitted, vmapped): ``problem`` builds its arrays on the host,
``scan`` is the jitted scan and ``kernel`` its CPU one-kernel compilation;
``reference`` is its plain-Python twin for tests; ``bounds`` says how fast
any placement could possibly be.
"""

from gplace.sim.topology import Topology, preset, local
from gplace.sim.problem import SimProblem, SimResult, make_problem
from gplace.sim.scan import simulate_problem
from gplace.sim.simulator import simulate
from gplace.sim.bounds import lower_bound
