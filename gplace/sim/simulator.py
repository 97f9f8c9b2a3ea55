"""Fast simulated runtime and memory of placements: the RL reward.

Where it sits: a policy proposes ``K`` placements of a :class:`~gplace.Graph`
on a :class:`~gplace.Topology`; :func:`simulate_problem` scores all of them in
one jitted call, inside the training step. :func:`make_problem` is the
host-side (numpy) half that turns a graph, a topology and a cost table into a
padded :class:`SimProblem` of arrays; :func:`simulate` is the convenience
wrapper that validates its arguments, builds the problem and runs a cached
jitted simulation. :mod:`gplace.sim.reference` holds a plain-Python,
event-driven implementation of exactly the same model; tests check that the
two agree to 1e-6 relative (graphs of up to 40 nodes; see Precision).

Modules: :mod:`gplace.sim.problem` builds the arrays (host side),
:mod:`gplace.sim.scan` is the jitted scan, :mod:`gplace.sim.kernel` compiles
its loops as single CPU kernels; this module holds the public wrapper.

The model
---------
Let ``p[v]`` be the device of node ``v`` and ``pos(v)`` its index in the
priority ``order`` (default: node id order). ``order`` must be a topological
order. Costs are ``costs[v, p[v]]`` seconds (default: the topology's roofline
``Topology.op_costs``).

Time:

* ``NODE_INPUT`` nodes are not executed: their outputs are resident on their
  device at time 0 (start = finish = 0, cost ignored).
* Every other node runs on its device's compute group (devices with the same
  ``topology.compute_group`` act as one processor). A group runs its nodes one
  at a time, strictly in priority order, without preemption: node ``v``
  starts at ``max(ready(v), finish of the group's previous node in priority
  order)`` and finishes ``costs[v, p[v]]`` later.
* ``ready(v)`` is the latest arrival of its inputs on ``p[v]``: a producer on
  the same device delivers at its finish time; otherwise its output arrives by
  a transfer.
* Transfers are eager and sent once per destination device: when producer
  ``u`` finishes, its output is sent to every device other than ``p[u]`` that
  holds at least one of its consumers. A transfer on link ``(s, d)`` carries
  ``send_bytes[u]`` = the largest ``edge_bytes`` among ``u``'s out-edges and
  takes ``link_latency[s, d] + send_bytes[u] / link_bandwidth[s, d]``. Each
  link (ordered device pair) carries one transfer at a time, in priority
  order of the producers: the transfer of ``u`` starts at ``max(finish(u),
  end of the previous transfer on that link)``. Transfers on different links
  overlap freely, and with compute.
* ``runtime_s`` is the latest finish time of any node.

Because every queue (group or link) is served in a fixed order, the whole
schedule is a max-plus recurrence that one sequential pass over nodes in
priority order computes exactly; that is what :func:`simulate_problem` does,
with the ``K`` placements vectorized inside each step.

Memory (by position in the priority order, not by time): a node's output has
one copy on its own device and one on each remote device that receives it.

* The own copy holds ``out_bytes[u]`` and lives over positions
  ``[pos(u), max(pos(u), last pos of a consumer of u on p[u])]``; the own
  copy of a ``NODE_INPUT`` lives over the whole step (parameters stay
  resident), that of a ``NODE_OUTPUT`` from ``pos(u)`` to the end.
* A remote copy on ``d`` holds ``send_bytes[u]`` and lives over
  ``[pos(u), last pos of a consumer of u on d]`` (it is allocated when it is
  sent).
* ``peak_bytes[d]`` is the maximum over positions of the bytes of copies on
  ``d`` live there (a node's inputs and its output both count at its
  position). A placement is ``oom`` when ``peak_bytes[d] >
  topology.memory_bytes[d]`` for some device.

Precision: float32 throughout. Times carry a relative rounding error that
grows like ``sqrt(path length) * 6e-8``; byte counts are exact while live
bytes stay below 2**24 bytes or are multiples of a large power of two (as
in ``random_dag``), otherwise within ~1e-7 relative per step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import TopologyError
from gplace.graphs.graph import Graph
from gplace.graphs.placement import check_placements
from gplace.sim.kernel import COMPILER_OPTIONS, one_kernel_loops
from gplace.sim.problem import (DEFAULT_WIDTH, SimProblem, SimResult,
                                check_order, make_problem, send_bytes)
from gplace.sim.scan import simulate_problem
from gplace.sim.topology import Topology

__all__ = ["COMPILER_OPTIONS", "DEFAULT_WIDTH", "SimProblem", "SimResult",
           "check_order", "dispatch_order", "make_problem", "one_kernel_loops",
           "send_bytes",
           "simulate", "simulate_problem"]

_simulate_jit = jax.jit(simulate_problem, static_argnames=("return_schedule",),
                        compiler_options=COMPILER_OPTIONS or None)


def _check_topology(topology) -> None:
  """Raises TopologyError unless ``topology`` is a Topology with devices."""
  if not isinstance(topology, Topology):
    raise TopologyError(f"topology must be a gplace.Topology, got "
                        f"{type(topology).__name__}.")
  if topology.n_devices < 1:
    raise TopologyError("The topology has no devices; placements need at "
                        "least one.")


def simulate(graph: Graph, placements, topology: Topology, costs=None,
             order=None, *, return_schedule: bool = False) -> SimResult:
  """Simulated runtime and memory of placements of ``graph`` on ``topology``.

  Validates everything on the host, builds the problem with
  :func:`make_problem` and runs a cached jitted :func:`simulate_problem`.
  Inside a jitted training step, call :func:`simulate_problem` directly.

  Args:
    graph: the op graph (``N`` nodes).
    placements: ``[K, N]`` or ``[N]`` int device index per node.
    topology: the devices (``D``).
    costs: optional ``[N, D]`` measured seconds per node and device.
    order: optional ``[N]`` priority order (topological); default node ids.
    return_schedule: also return per-node ``start_s`` / ``finish_s``.

  Returns:
    :class:`SimResult`; fields have no ``K`` axis if ``placements`` is 1-D.

  Raises:
    PlacementError: bad placements.
    ScheduleError: ``order`` is not a topological order of the nodes.
    TopologyError: bad topology or cost table.
  """
  single = np.ndim(placements) == 1
  _check_topology(topology)
  array = check_placements(placements, graph, topology.n_devices,
                           device_names=topology.device_names)
  problem = make_problem(graph, topology, costs=costs, order=order)
  with one_kernel_loops():
    result = _simulate_jit(problem, jnp.asarray(array),
                           return_schedule=return_schedule)
  if return_schedule:
    result = result._replace(order=dispatch_order(result.start_s))
  if single:
    result = jax.tree_util.tree_map(lambda x: x[0], result)
  return result


def dispatch_order(start_s) -> np.ndarray:
  """``[K, N]`` int32 dispatch order from ``[K, N]`` start times.

  Nodes by start time, ties by node id: a topological order (node ids are
  one, and a consumer never starts before its producer).
  """
  start = np.atleast_2d(np.asarray(start_s))
  ids = np.arange(start.shape[-1])
  return np.stack([np.lexsort((ids, row)) for row in start]).astype(np.int32)
