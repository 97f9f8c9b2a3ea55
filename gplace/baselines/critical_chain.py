"""The critical-chain plan: the ops on or near the graph's longest path on
one device, everything else placed by HEFT around them.

CPOP (Topcuoglu et al. 2002, the paper of HEFT) keeps the critical path on
one processor; taken literally (mean costs over every device, a single
path) it trails HEFT by 10-20% on the zoo's train steps, where the CPU's
costs swamp the mean and a train step's longest path is one of many nearly
as long. This variant measures the path at each op's fastest device with
free transfers (the path of :func:`gplace.lower_bound`), keeps every op
within ``slack_share`` of that path's length on the device that runs the
chain fastest, and schedules the rest with HEFT's insertion scheduler
(earliest finish, in upward rank with the chain's ops first), so a train
step's forward and input-gradient chain runs without interruption while
the weight gradients and updates fill the other devices. With more than one
chain, the longest path of what the chains before it leave (their ops'
costs set to zero) is the next chain, on the fastest device not yet taken
(on a train step, the longest of what runs beside the first chain).

It is gplace's own construction, not a published baseline: it is not among
``gplace.baselines.names()`` and never counts as "the best classical plan";
``gplace.optimize`` tries it as a start for its searches and reports it as
its own candidate. Host-side numpy.
"""

from __future__ import annotations

import numpy as np

from gplace.baselines.list_scheduling import schedule_ranks
from gplace.baselines.scheduler import plan_within_memory
from gplace.errors import BaselineError
from gplace.graphs.graph import NODE_INPUT, Graph
from gplace.sim.bounds import path_levels
from gplace.sim.list_scheduler import Plan, PlanningProblem, heft_schedule
from gplace.sim.list_scheduler import prepare
from gplace.sim.topology import Topology

#: The slacks (shares of the longest path) :func:`plans` tries: the
#: best differs by graph (paper train steps on 1 CPU + 4 GPUs: 0.1% on
#: bert, 0.3% on inception_v3, 1% on resnet50 and rnnlm2, 3% on wavenet2
#: and transformer_xl4; none beats HEFT on gnmt4, where 8,000 ops tie for
#: the longest path and more than one device's worth of them is near it).
SLACK_SHARES = (0.001, 0.003, 0.01, 0.03)
#: The numbers of chains :func:`plans` tries at each slack: on the same
#: train steps, the best plan of one chain is 17.8% faster than HEFT on
#: inception_v3 and 8.8% than METIS on resnet50, the best of one to three
#: chains 20.6% and 9.6% (three and two chains), and one chain stays the
#: best on bert and wavenet2.
CHAIN_COUNTS = (1, 2, 3)


def path_slack(graph: Graph, costs: np.ndarray) -> np.ndarray:
  """``[N]`` each node's slack on the longest path at each node's fastest
  device (transfers free), as a share of that path's length (inputs:
  ``inf``).

  Args:
    graph: the op graph.
    costs: ``[N, D]`` seconds per node and device.
  """
  is_input = graph.kind == NODE_INPUT
  fastest = np.where(is_input, 0.0,
                     np.asarray(costs, np.float64).min(axis=1))
  top, bottom = path_levels(graph, fastest)
  through = top + bottom
  length = through.max(initial=0.0)
  slack = ((length - through) / length if length > 0
           else np.zeros_like(through))
  return np.where(is_input, np.inf, slack)


def chain_nodes(graph: Graph, costs: np.ndarray,
                slack_share: float) -> np.ndarray:
  """``[N]`` bool: the non-input nodes within ``slack_share`` of the
  longest path at each node's fastest device (:func:`path_slack`)."""
  return path_slack(graph, costs) <= slack_share


def chain_labels(graph: Graph, costs: np.ndarray, slack_share: float,
                 count: int = 1, slack: np.ndarray | None = None
                 ) -> np.ndarray:
  """``[N]`` int: the chain of each node (``-1``: none), for ``count``
  chains: chain 0 is :func:`chain_nodes`, chain ``i`` the nodes not in a
  chain before it within ``slack_share`` of the longest path that is left
  when those chains' costs are zero. Fewer chains where nothing is left.
  ``slack``: ``path_slack(graph, costs)`` where the caller has it.
  """
  costs = np.array(costs, np.float64)
  labels = np.full(graph.n_nodes, -1, np.int64)
  for i in range(count):
    if i or slack is None:
      slack = path_slack(graph, costs)
    chain = (slack <= slack_share) & (labels < 0)
    if not chain.any():
      break
    labels[chain] = i
    costs[chain] = 0.0
  return labels


def plan_critical_chain(problem: PlanningProblem,
                        chain: np.ndarray) -> Plan:
  """The critical-chain plan of ``problem`` (module doc) for ``chain``:
  ``[N]`` bool (one chain) or ``[N]`` int chain labels
  (:func:`chain_labels`), memory-aware as the list schedulers are
  (``plan_within_memory``). Chain ``i`` goes on the device that runs it
  fastest of those the chains before it left (none once every device has
  one).

  Returns:
    A :class:`~gplace.sim.list_scheduler.Plan`: the placement and the op
    order HEFT planned for it.
  """
  chain = np.asarray(chain)
  labels = (np.where(chain, 0, -1) if chain.dtype == bool
            else chain.astype(np.int64))
  devices = np.arange(problem.topology.n_devices)
  pinned = np.full(problem.graph.n_nodes, -1, np.int64)
  free = np.ones(devices.size, bool)
  for i in range(labels.max(initial=-1) + 1):
    members = labels == i
    if not members.any() or not free.any():
      continue
    work = np.where(free, problem.costs[members].sum(axis=0), np.inf)
    pinned[members] = device = int(np.argmin(work))
    free[device] = False
  # A chain op outweighs any path of other ops: the chains go first
  # wherever they compete for a device.
  rank = schedule_ranks(problem, devices, first=labels >= 0)
  return plan_within_memory(
      lambda p: heft_schedule(p, devices, rank, pinned=pinned), problem,
      devices)


def plans(graph: Graph, topology: Topology, *, costs=None,
          slack_shares=SLACK_SHARES,
          chain_counts=CHAIN_COUNTS) -> dict[tuple[float, int], Plan]:
  """The critical-chain plan at each slack share and number of chains.

  Args:
    graph: the op graph (``N`` nodes).
    topology: the devices.
    costs: optional ``[N, D]`` measured seconds (default: the roofline).
    slack_shares: shares of the longest path, each in ``[0, 1]``.
    chain_counts: numbers of chains, each at least 1.

  Returns:
    ``{(slack_share, count): Plan}``, without a count whose chains are
    those of a smaller one (nothing left for another chain); a graph's
    device constraints are not applied (callers keep the plans that
    respect them).

  Raises:
    BaselineError: a share outside ``[0, 1]`` or a count below 1.
    GraphError, TopologyError, PlacementError: as every baseline
      (``gplace.sim.list_scheduler.prepare``).
  """
  shares = [float(s) for s in slack_shares]
  if not shares or not all(0.0 <= s <= 1.0 for s in shares):
    raise BaselineError(
        f"slack_shares must be shares of the longest path in [0, 1], got "
        f"{list(slack_shares)!r}; e.g. {SLACK_SHARES}.")
  counts = list(chain_counts)
  if not counts or not all(isinstance(k, (int, np.integer))
                           and not isinstance(k, bool) and k >= 1
                           for k in counts):
    raise BaselineError(
        f"chain_counts must be whole numbers of chains, each at least 1, "
        f"got {counts!r}; e.g. {CHAIN_COUNTS}.")
  problem = prepare(graph, topology, costs)
  made = {}
  slack = path_slack(graph, problem.costs)   # chain 0's, for every share
  for share in shares:
    labels = chain_labels(graph, problem.costs, share, max(counts), slack)
    for count in sorted(set(int(k) for k in counts)):
      if count > 1 and labels.max(initial=-1) < count - 1:
        continue   # no chain left for this count: a smaller one's plan
      made[share, count] = plan_critical_chain(
          problem, np.where(labels < count, labels, -1))
  return made
