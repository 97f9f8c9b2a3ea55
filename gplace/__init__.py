"""gplace: learned device placement for JAX programs.

The pipeline: :func:`capture` turns a jittable function into a :class:`Graph`;
``gplace.features`` turns graphs into padded ``jraph.GraphsTuple`` batches;
:func:`simulate` predicts runtime and memory of placements on a
:class:`Topology`; ``gplace.baselines`` and :func:`lower_bound` say how good a
placement is; :func:`place` and :func:`measure` run it for real; and
``gplace.policies`` / ``gplace.rl`` learn placements.
"""

from gplace.errors import GplaceError
from gplace.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.capture import capture
from gplace.topology import Topology
from gplace import features
from gplace.coarsening import coarsen, expand, Coarsening
from gplace.executor import place, PlacedFunction
from gplace.timing import measure, Measurement
from gplace.profiler import profile, Profile
from gplace.simulator import simulate, SimResult
from gplace.bounds import lower_bound

__version__ = "0.1.0"
