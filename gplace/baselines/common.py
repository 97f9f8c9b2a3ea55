"""Shared pieces of the baselines: placers from planners, resident and
peak memory, the layer-name pattern. Host-side numpy.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

import numpy as np

from gplace.errors import BaselineError, check_seed
from gplace.graphs import constraints
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT, check_graph
from gplace.sim.priority import bottom_level, priority_order
from gplace.sim.list_scheduler import PlanningProblem, prepare
from gplace.sim.simulator import simulate
from gplace.sim.topology import Topology

Baseline = Callable[..., np.ndarray]


def placer_from_planner(planner: Callable, name: str, doc: str) -> Baseline:
  """A baseline ``fn(graph, topology, *, costs=None, seed=0) -> [N]`` from a
  list scheduler's ``planner(PlanningProblem) -> Plan`` (deterministic: the
  seed is ignored)."""

  def placer(graph: Graph, topology: Topology, *, costs=None,
             seed: int = 0) -> np.ndarray:
    check_seed(seed, f"gplace.baselines.{name}", BaselineError)
    problem = prepare(graph, topology, costs)
    return constraints.repair(graph, planner(problem).placement,
                              problem.costs)

  placer.__name__ = placer.__qualname__ = name
  placer.__doc__ = doc
  return placer


# A layer index in a node name: a name component (or part of one, e.g. after
# "jvp(" or "transpose(") whose word ends in layer / block / lstm / cell /
# stack, an optional plural "s", an optional "_" or "-", and digits, with no
# letter or digit right before the word or right after the digits. It matches
# "Encoder/layer_3", "layers_3", "decoder/lstm_2", "LSTMCell_2",
# "OptimizedLSTMCell_2", "TransformerXL/block_2", "EncoderBlock_1",
# "BertEncoder/layer_11", "conv_block_2", "layer3" and
# "transpose(jvp(Encoder))/layer_3"; it does not match "Dense_0",
# "LayerNorm_0", "attention" or "Mixed_5b". The first (outermost) match in a
# name wins, so "Encoder/layer_3/ResidualBlock_0" is layer 3.
LAYER_PATTERN = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]*?(?:layer|block|lstm|cell|stack)s?[_\-]?"
    r"(\d+)(?![A-Za-z0-9])", re.IGNORECASE)



# -- small shared pieces -------------------------------------------------------


def respecting_constraints(baseline: Baseline) -> Baseline:
  """``baseline`` followed by :func:`gplace.graphs.constraints.repair`, so
  that its placement keeps the graph's device constraints (a node on a
  device it does not allow moves to its cheapest allowed device; a split
  co-location class joins the device most of it is on). A graph without
  constraints gets the baseline's placement unchanged."""

  @functools.wraps(baseline)
  def placer(graph: Graph, topology: Topology, *, costs=None, seed: int = 0,
             **kwargs) -> np.ndarray:
    check_seed(seed, f"gplace.baselines.{baseline.__name__}", BaselineError)
    placement = baseline(graph, topology, costs=costs, seed=seed, **kwargs)
    if not constraints.has_constraints(graph):
      return placement
    costs = topology.op_costs(graph) if costs is None else np.asarray(
        costs, np.float64)
    return constraints.repair(graph, placement, costs)

  return placer


def resident_bytes(graph: Graph, placement, n_devices: int) -> np.ndarray:
  """``[D]`` float64 bytes resident per device: ``out_bytes`` of its nodes."""
  placement = np.asarray(placement)
  return np.bincount(placement, weights=graph.out_bytes.astype(np.float64),
                     minlength=n_devices)[:n_devices]


def inputs_with_first_consumer(graph: Graph, placement: np.ndarray,
                                default: int) -> np.ndarray:
  """Moves each input node to the device of its lowest-id consumer.

  Inputs without consumers go to ``default``. ``placement`` is ``[N]``; a new
  array is returned.
  """
  placement = np.array(placement, np.int32)
  is_input = graph.kind == NODE_INPUT
  if not is_input.any():
    return placement
  first = np.full(graph.n_nodes, -1, np.int64)
  # Edges are sorted by (src, dst): the first edge of each src is its
  # lowest-id consumer.
  src = graph.edge_src
  starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]]) if src.size else []
  first[src[starts]] = graph.edge_dst[starts]
  has = is_input & (first >= 0)
  placement[has] = placement[first[has]]
  placement[is_input & (first < 0)] = default
  return placement


# -- trivial baselines ---------------------------------------------------------


def single_device_peak_bytes(graph: Graph) -> float:
  """Peak live bytes of the whole graph run on one device in id order.

  The simulator's memory model on one device: an input is live for the whole
  step, an output node from its position to the end, any other node from its
  position to its last consumer's.
  """
  check_graph(graph, "gplace.baselines.single_device_peak_bytes")
  n = graph.n_nodes
  if n == 0:
    return 0.0
  last = np.arange(n)
  np.maximum.at(last, graph.edge_src, graph.edge_dst)
  first = np.arange(n)
  first[graph.kind == NODE_INPUT] = 0
  last[(graph.kind == NODE_INPUT) | (graph.kind == NODE_OUTPUT)] = n - 1
  delta = np.zeros(n + 1)
  nbytes = graph.out_bytes.astype(np.float64)
  np.add.at(delta, first, nbytes)
  np.add.at(delta, last + 1, -nbytes)
  return float(np.cumsum(delta)[:n].max())


def simulated_peak_bytes(graph: Graph, placement, n_devices: int,
                         order=None) -> np.ndarray:
  """``[D]`` float64 peak live bytes per device, exactly as the simulator.

  The simulator's memory model (``docs/design.md#the-simulators-model``), in
  vectorized numpy, for one placement: a node's own copy lives from its
  position to its last consumer on its device (inputs the whole step,
  output nodes to the end); a copy on each other device holding a consumer
  lives from the producer's position to that device's last consumer and
  holds the producer's largest out-edge. ``O(N D + E)``.

  Args:
    graph: the op graph.
    placement: ``[N]`` int device per node, valid for ``n_devices``.
    n_devices: number of devices ``D``.
    order: optional ``[N]`` priority order (a permutation of node ids);
      default node-id order (the simulator's ``schedule="static"``).
  """
  n = graph.n_nodes
  if n == 0:
    return np.zeros(n_devices)
  placement = np.asarray(placement, np.int64)
  position = np.arange(n)
  if order is not None:
    position = np.empty(n, np.int64)
    position[np.asarray(order, np.int64)] = np.arange(n)
  src = graph.edge_src.astype(np.int64)
  dst = graph.edge_dst.astype(np.int64)
  send = np.zeros(n, np.int64)
  np.maximum.at(send, src, graph.edge_bytes)
  # last[u, d]: the last position of a consumer of u on device d (-1: none).
  last = np.full(n * n_devices, -1, np.int64)
  np.maximum.at(last, src * n_devices + placement[dst], position[dst])
  last = last.reshape(n, n_devices)
  resident = (graph.kind == NODE_INPUT) | (graph.kind == NODE_OUTPUT)
  own_first = np.where(graph.kind == NODE_INPUT, 0, position)
  own_last = np.where(resident, n - 1,
                      np.maximum(position, last[np.arange(n), placement]))
  node, device = np.nonzero(last >= 0)
  remote = device != placement[node]
  node, device = node[remote], device[remote]
  where = np.concatenate([placement, device])
  first = np.concatenate([own_first, position[node]])
  final = np.concatenate([own_last, last[node, device]])
  size = np.concatenate([graph.out_bytes, send[node]]).astype(np.float64)
  delta = np.zeros((n_devices, n + 1))
  np.add.at(delta, (where, first), size)
  np.add.at(delta, (where, final + 1), -size)
  return np.cumsum(delta, axis=1)[:, :n].max(axis=1)


def copies_bytes(graph: Graph, placement, n_devices: int) -> np.ndarray:
  """``[D]`` float64 bytes of every copy a device ever holds, all at once:
  the peak in every order (the simulator's model; see
  :func:`simulated_peak_bytes`) is at most this."""
  placement = np.asarray(placement, np.int64)
  src = graph.edge_src.astype(np.int64)
  dst_device = placement[graph.edge_dst]
  send = np.zeros(graph.n_nodes, np.int64)
  np.maximum.at(send, src, graph.edge_bytes)
  remote = dst_device != placement[src]
  pairs = np.unique(src[remote] * n_devices + dst_device[remote])
  total = np.bincount(placement, weights=graph.out_bytes.astype(np.float64),
                      minlength=n_devices)
  total += np.bincount(pairs % n_devices,
                       weights=send[pairs // n_devices].astype(np.float64),
                       minlength=n_devices)
  return total[:n_devices]


def default_schedule_peak_bytes(problem: PlanningProblem,
                                placements) -> np.ndarray:
  """``[K, D]`` float64 peak live bytes of ``[K, N]`` placements in the
  order the simulator's default schedule runs them (``gplace.simulate``
  without an order: the dynamic list scheduler, whose order depends on the
  placement), exactly as :func:`simulated_peak_bytes`.

  It runs ``gplace.simulate``'s jitted list scheduler, one placement at a
  time (one compilation per graph size bucket, whatever ``K``): call it
  only where :func:`copies_bytes` says a device could overflow.
  """
  graph, topology = problem.graph, problem.topology
  placements = np.asarray(placements, np.int32).reshape(-1, graph.n_nodes)
  peaks = []
  for placement in placements:
    order = simulate(graph, placement, topology, problem.costs,
                     return_schedule=True).order
    peaks.append(simulated_peak_bytes(graph, placement, topology.n_devices,
                                      np.asarray(order)))
  return np.stack(peaks)


def single_device_default_peak_bytes(problem: PlanningProblem) -> float:
  """Peak live bytes of the whole graph on one device under the simulator's
  default schedule.

  On one device the dynamic list scheduler (``gplace.sim.dispatch``) never
  waits: every arrived op is ready when the device frees, so it runs inputs
  first and then, among ops whose producers have run, the one of highest
  critical-path priority (``gplace.sim.priority.bottom_level``, the same
  for every device): the priority-respecting topological order
  (``priority_order``). Inputs are resident all step wherever they stand, so
  the peak is that order's (:func:`simulated_peak_bytes`); equal to
  ``gplace.simulate``'s (tested) at no simulation cost.
  """
  graph = problem.graph
  order = priority_order(bottom_level(graph, problem.topology, problem.costs),
                         graph)
  return float(simulated_peak_bytes(graph, np.zeros(graph.n_nodes, np.int64),
                                    1, order)[0])


def single_device_fits(problem: PlanningProblem) -> list[np.ndarray]:
  """Which devices could hold the whole graph alone, best first: ``[D]``
  bool masks of the devices whose memory holds its peak in node-id order
  (:func:`single_device_peak_bytes`) and in the simulator's default
  schedule (:func:`single_device_default_peak_bytes`, another order), then
  of those that hold it in node-id order (``schedule="static"``) only.

  The default schedule's peak is computed only where it decides something:
  for a device whose memory holds the node-id peak but not every output at
  once (an order-independent bound)."""
  graph, memory = problem.graph, problem.topology.memory_bytes
  in_id_order = memory >= single_device_peak_bytes(graph)
  in_both = in_id_order.copy()
  every_output = float(graph.out_bytes.astype(np.float64).sum())
  if np.any(in_id_order & (memory < every_output)):
    in_both &= memory >= single_device_default_peak_bytes(problem)
  return [in_both, in_id_order]
