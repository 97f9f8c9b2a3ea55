"""gplace: learned device placement for JAX programs.

:func:`capture` a function into a :class:`Graph`, :func:`simulate` its
placements on a :class:`Topology` (:func:`explain`: where one's time goes),
run them with :func:`place`, and find good ones with ``gplace.rl``,
``baselines``, ``search``, ``solvers`` or :func:`optimize`. Subpackages
load on first use. Layers, lowest first, each importing only those below
(tests/test_layering.py): errors; graphs; sim; workloads; execution;
plotting; baselines, search, solvers, placers; policies; rl; autoplace.
"""

import importlib as _importlib
import sys as _sys

from gplace.errors import GplaceError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT
from gplace.graphs.capture import capture
from gplace.sim.topology import Topology
from gplace.graphs import features
from gplace.graphs.coarsening import coarsen, expand, Coarsening
from gplace.execution.executor import place, PlacedFunction
from gplace.execution.timing import measure, Measurement
from gplace.execution.profile_file import Profile
from gplace.execution.profiler import profile
from gplace.sim.simulator import simulate, SimResult
from gplace.sim.bounds import lower_bound
from gplace.sim.explain import explain, Explanation
from gplace.sim import presets as topology
from gplace import graphs, sim, execution
from gplace.graphs import graph as _graph

__version__ = "0.1.0"

# Subpackages that load heavier dependencies (flax models, scipy, optax,
# orbax, OR-tools, numba) are imported on first attribute access, so
# `import gplace` stays cheap and `gplace.baselines.heft` still works
# without a second import.
_LAZY_SUBPACKAGES = ("autoplace", "baselines", "workloads", "policies", "rl",
                     "search", "solvers", "placers", "plotting")

# Names of the public API defined in a lazy subpackage, loaded with it.
_LAZY_NAMES = {"optimize": "gplace.autoplace",
               "PlacementResult": "gplace.autoplace"}

# Old names of moved user-facing modules (0.1), resolved on first use.
_MOVED = {"layers": "gplace.policies.layers"}


def __getattr__(name):
  if name in _LAZY_SUBPACKAGES or name in _MOVED:
    return _importlib.import_module(_MOVED.get(name, f"gplace.{name}"))
  if name in _LAZY_NAMES:
    value = getattr(_importlib.import_module(_LAZY_NAMES[name]), name)
    globals()[name] = value
    return value
  raise AttributeError(f"module 'gplace' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_LAZY_SUBPACKAGES) | set(_LAZY_NAMES))


# Modules that moved into subpackages in 0.2 keep their old import paths.
# gplace.topology is gplace.sim.presets: preset(), local(), and the
# Topology, Device and uniform_links they are built from.
def _alias_moved_modules():
  _sys.modules.setdefault("gplace.graph", _graph)
  _sys.modules.setdefault("gplace.features", features)
  _sys.modules.setdefault("gplace.topology", topology)


_alias_moved_modules()
