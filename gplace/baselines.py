"""Non-learned placement baselines: what a learned placer has to beat.

Every baseline maps a :class:`~gplace.graph.Graph` and a
:class:`~gplace.topology.Topology` to a placement, ``[N]`` int32 device index
per node, with the signature ``fn(graph, topology, *, costs=None, seed=0)``.
``costs`` is an optional measured ``[N, D]`` seconds table that replaces the
roofline ``topology.op_costs(graph)``.

Baselines (``names()``):

* ``single_device``: everything on the device with the least total op time
  among those whose memory holds the graph's peak live bytes (the
  largest-memory device when none does). ColocRL's lesson: this is often
  the one to beat.
* ``round_robin``: node ``i`` on device ``i mod D``.
* ``random``: uniform device per node (``seed``).
* ``expert``: what a human would do per workload, from node names (see
  :func:`expert` and :data:`LAYER_PATTERN`).
* ``metis``: balanced k-way min-cut (pymetis) over the GPUs.
* ``m_topo``, ``m_etf``, ``m_sct``: Baechi's memory-constrained topological
  fill, earliest-task-first and small-communication-time list schedulers
  (Jeon et al., SoCC 2020).
* ``heft``: heterogeneous earliest finish time (upward rank on mean costs,
  insertion-based), made memory-aware like the Baechi schedulers.
* ``ordered_eft``: earliest finish time taking nodes in id order without
  insertion, which is the simulator's default execution order (see below).

Shared conventions, chosen to match the simulator's cost model
(``gplace.simulator``):

* Op time is ``costs[i, d]``; devices that share a ``compute_group`` run one
  op at a time between them. A producer's output is sent once to each other
  device that consumes it, taking ``topology.transfer_time(bytes, src, dst)``
  for its largest out-edge, and each ordered link carries one transfer at a
  time (the list schedulers book link queues as they go).
* Input nodes (parameters, batches) cost nothing and are placed with their
  first scheduled consumer ("inputs follow their first consumer"): a list
  scheduler sees them as available at time 0 on whichever device that consumer
  picks, and later consumers pay the transfer from there.
* Memory: live bytes in the simulator's model, counted in the order a
  baseline commits nodes (see ``_Scheduler``): outputs live until their last
  consumer is placed, inputs and output nodes for the whole step.
  ``single_device``, ``m_topo``, ``m_etf``, ``m_sct``, ``heft`` and
  ``ordered_eft`` keep it within ``topology.memory_bytes`` when some device
  has room; if none has, a node goes to the device with the most room left and
  the placement will OOM. (:func:`resident_bytes`, every output resident
  forever, is the crude upper bound; it overestimates the paper workloads'
  training steps 5-11x.)
* ``expert``, ``metis``, ``m_topo`` and ``m_sct`` use the GPUs only (every
  device when the topology has no GPU), as a human or Baechi would; the
  earliest-finish schedulers (``m_etf``, ``heft``, ``ordered_eft``) may use
  any device, the CPU included, when it finishes an op earliest.
* Op order: m-ETF, m-SCT and HEFT plan an order of ops as well (Baechi and
  HEFT assume a runtime that runs ops as they become ready). The simulator by
  default runs each device's ops in node-id order, which can cost these
  placements much of what they planned; :func:`plan` returns the order too,
  for ``gplace.simulate(..., order=plan.order)``. ``ordered_eft`` plans for
  the id order itself.

All of this is host-side numpy / pure Python (heaps, bisect), built to place
80k-node graphs on a handful of devices in seconds; nothing here is traced.
"""

from __future__ import annotations

import bisect
import heapq
import re
import time
from typing import Callable, NamedTuple

import numpy as np

from gplace.errors import ConfigError, GraphError, TopologyError
from gplace.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.topology import Topology, validate_costs

Baseline = Callable[..., np.ndarray]

# The LP of m-SCT is solved whole up to this many scheduled nodes; larger
# graphs are cut into windows of consecutive node ids of this size, one LP
# each, until SCT_LP_TIME_BUDGET_S is spent; later windows use the greedy
# favourite-child rule (see _favourite_parents).
SCT_LP_MAX_NODES = 2000
SCT_LP_TIME_BUDGET_S = 4.0
# Insertion-based HEFT looks at most this many idle gaps of a device before
# appending at its end, which keeps it O(N * D * HEFT_MAX_GAPS).
HEFT_MAX_GAPS = 64

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

# Workloads an expert keeps on one GPU, matched as substrings of the
# lower-cased workload name. Every other workload is split by layer when its
# node names carry layer indices (gnmt, rnnlm, transformer_xl, bert, ...).
_ONE_GPU_WORKLOADS = ("inception", "resnet", "wavenet", "amoeba", "vgg",
                      "alexnet", "cnn", "conv")


# -- small shared pieces -------------------------------------------------------


class _Problem(NamedTuple):
  """The validated inputs every baseline starts from."""
  graph: Graph
  topology: Topology
  costs: np.ndarray        # [N, D] float64 seconds
  allowed: np.ndarray      # [G] int32, devices a GPU-only baseline may use


def _prepare(graph, topology, costs) -> _Problem:
  if not isinstance(graph, Graph):
    raise GraphError(f"A baseline needs a gplace.Graph, got "
                     f"{type(graph).__name__}; capture one with "
                     "gplace.capture(fn, *args).")
  if not isinstance(topology, Topology):
    raise TopologyError(f"A baseline needs a gplace Topology, got "
                        f"{type(topology).__name__}; use "
                        "gplace.topology.preset('1cpu+4gpu') or build one.")
  if topology.n_devices == 0:  # Topology rejects this; belt and braces.
    raise TopologyError("The topology has no devices; a placement needs at "
                        "least one.")
  if costs is None:
    costs = topology.op_costs(graph)
  costs = validate_costs(costs, graph, topology)
  return _Problem(graph, topology, costs, gpu_devices(topology))


def gpu_devices(topology: Topology) -> np.ndarray:
  """``[G]`` int32 indices of the non-CPU devices (all devices if none)."""
  gpus = [d for d, dev in enumerate(topology.devices) if dev.kind != "cpu"]
  if not gpus:
    gpus = list(range(topology.n_devices))
  return np.asarray(gpus, np.int32)


def resident_bytes(graph: Graph, placement, n_devices: int) -> np.ndarray:
  """``[D]`` float64 bytes resident per device: ``out_bytes`` of its nodes."""
  placement = np.asarray(placement)
  return np.bincount(placement, weights=graph.out_bytes.astype(np.float64),
                     minlength=n_devices)[:n_devices]


def _inputs_with_first_consumer(graph: Graph, placement: np.ndarray,
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


def _mean_transfer_s(topology: Topology, devices: np.ndarray,
                     nbytes: np.ndarray) -> np.ndarray:
  """Mean transfer seconds of ``nbytes`` over ordered pairs of ``devices``."""
  devices = np.asarray(devices)
  if devices.size < 2:
    return np.zeros(np.shape(nbytes))
  src, dst = np.meshgrid(devices, devices, indexing="ij")
  off = src != dst
  latency = topology.link_latency[src[off], dst[off]].mean()
  inv_bandwidth = (1.0 / topology.link_bandwidth[src[off], dst[off]]).mean()
  return latency + np.asarray(nbytes, np.float64) * inv_bandwidth


def _upward_rank(graph: Graph, node_cost: np.ndarray,
                 edge_cost: np.ndarray) -> np.ndarray:
  """HEFT's upward rank: longest cost path from each node to an exit.

  Args:
    node_cost: ``[N]`` seconds per node.
    edge_cost: ``[E]`` seconds per edge.

  Returns:
    ``[N]`` float64; ``rank[i] >= rank[j]`` for every edge ``i -> j``.
  """
  n = graph.n_nodes
  rank = [0.0] * n
  cost = node_cost.tolist()
  ptr = graph.succ_csr[0].tolist()
  dst = graph.edge_dst.tolist()
  comm = edge_cost.tolist()
  for i in range(n - 1, -1, -1):
    best = 0.0
    for k in range(ptr[i], ptr[i + 1]):
      value = comm[k] + rank[dst[k]]
      if value > best:
        best = value
    rank[i] = cost[i] + best
  return np.asarray(rank)


# -- trivial baselines ---------------------------------------------------------


def single_device_peak_bytes(graph: Graph) -> float:
  """Peak live bytes of the whole graph run on one device in id order.

  The simulator's memory model on one device: an input is live for the whole
  step, an output node from its position to the end, any other node from its
  position to its last consumer's.
  """
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


def _best_single(problem: _Problem, candidates) -> int:
  """Fastest device among ``candidates`` whose memory holds the graph."""
  candidates = np.asarray(candidates)
  peak = single_device_peak_bytes(problem.graph)
  memory = problem.topology.memory_bytes[candidates]
  total_time = problem.costs[:, candidates].sum(axis=0)
  fits = memory >= peak
  if fits.any():
    time_if_fits = np.where(fits, total_time, np.inf)
    return int(candidates[int(np.argmin(time_if_fits))])
  return int(candidates[int(np.argmax(memory))])


def single_device(graph: Graph, topology: Topology, *, costs=None,
                  seed: int = 0) -> np.ndarray:
  """Everything on the best single device.

  The best is the one with the least total op time among devices whose memory
  holds the graph's peak live bytes (:func:`single_device_peak_bytes`); if
  none does, the largest-memory one.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  problem = _prepare(graph, topology, costs)
  device = _best_single(problem, np.arange(topology.n_devices))
  return np.full(graph.n_nodes, device, np.int32)


def round_robin(graph: Graph, topology: Topology, *, costs=None,
                seed: int = 0) -> np.ndarray:
  """Node ``i`` on device ``i mod D``; ``[N]`` int32."""
  del seed
  _prepare(graph, topology, costs)
  return (np.arange(graph.n_nodes) % topology.n_devices).astype(np.int32)


def random(graph: Graph, topology: Topology, *, costs=None,
           seed: int = 0) -> np.ndarray:
  """A uniformly random device per node; ``[N]`` int32."""
  _prepare(graph, topology, costs)
  # Salted so that seed 0 does not replay the stream of random_dag(seed=0).
  rng = np.random.default_rng([seed, 0x9E3779B9])
  return rng.integers(0, topology.n_devices, graph.n_nodes).astype(np.int32)


# -- expert --------------------------------------------------------------------


def layer_index(name: str) -> int:
  """The outermost layer index in a node name (see LAYER_PATTERN), or -1."""
  match = LAYER_PATTERN.search(name)
  return int(match.group(1)) if match else -1


def _propagate_labels(graph: Graph, labels: np.ndarray) -> np.ndarray:
  """Gives unlabelled (-1) non-input nodes the label of a neighbour.

  A forward pass in id order copies the label of the labelled producer that
  sends the most bytes; a backward pass then copies the label of the
  labelled consumer that receives the most bytes; what is left gets the
  smallest label. Inputs keep the label of their own name (a parameter
  ``params/Encoder/layer_3/kernel`` says where its optimizer update belongs)
  but are not given one here; they follow their first consumer later.
  """
  labels = labels.astype(np.int64).tolist()
  kind = graph.kind.tolist()
  ptr, eids = graph.pred_csr
  ptr = ptr.tolist()
  psrc = graph.edge_src[eids].tolist()
  pbytes = graph.edge_bytes[eids].tolist()
  n = graph.n_nodes
  for i in range(n):
    if labels[i] >= 0 or kind[i] == NODE_INPUT:
      continue
    best, best_bytes = -1, -1
    for k in range(ptr[i], ptr[i + 1]):
      label = labels[psrc[k]]
      if label >= 0 and pbytes[k] > best_bytes:
        best, best_bytes = label, pbytes[k]
    labels[i] = best
  sptr = graph.succ_csr[0].tolist()
  sdst = graph.edge_dst.tolist()
  sbytes = graph.edge_bytes.tolist()
  for i in range(n - 1, -1, -1):
    if labels[i] >= 0 or kind[i] == NODE_INPUT:
      continue
    best, best_bytes = -1, -1
    for k in range(sptr[i], sptr[i + 1]):
      label = labels[sdst[k]]
      if label >= 0 and sbytes[k] > best_bytes:
        best, best_bytes = label, sbytes[k]
    labels[i] = best
  labels = np.asarray(labels, np.int64)
  known = labels[labels >= 0]
  if known.size:
    labels[(labels < 0) & (graph.kind != NODE_INPUT)] = known.min()
  return labels


def expert(graph: Graph, topology: Topology, *, costs=None, seed: int = 0,
           workload: str | None = None) -> np.ndarray:
  """A human expert's placement, chosen by workload family and node names.

  Rules (``workload`` defaults to ``graph.name``; matched case-insensitively
  as a substring):

  * CNNs (inception, resnet, wavenet, amoeba, ...): everything on the fastest
    GPU that holds the graph, as ColocRL's and HDP's experts did.
  * Layered models (gnmt / nmt, rnnlm, transformer(-xl), bert, ...) and any
    other workload whose node names carry layer indices (LAYER_PATTERN):
    contiguous blocks of layers per GPU, ``gpu = rank(layer) * min(G, L) //
    L`` for ``L`` distinct layer indices on ``G`` GPUs; so layer ``l`` on GPU
    ``l`` for GNMT / RNNLM when ``L <= G`` (Wu et al. 2016), and layers
    0..2, 3..5, ... for a 12-layer BERT on 4 GPUs. Encoder and decoder
    layers with the same index share a GPU. Nodes without an index
    (embeddings, attention, softmax, loss, optimizer) take the layer of
    their heaviest labelled producer, else of their heaviest labelled
    consumer.
  * No layer structure found: :func:`single_device` restricted to GPUs.

  Inputs go with their first consumer. Ops go to the CPU only when the
  topology has no GPU. Memory is not checked (a human would not either).

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  problem = _prepare(graph, topology, costs)
  gpus = problem.allowed
  single = _best_single(problem, gpus)
  family = (workload if workload is not None else graph.name).lower()
  placement = np.full(graph.n_nodes, single, np.int32)
  if any(key in family for key in _ONE_GPU_WORKLOADS):
    return placement
  labels = np.fromiter((layer_index(str(name)) for name in graph.names),
                       np.int64, graph.n_nodes)
  has_layers = np.unique(labels[labels >= 0]).size >= 2
  if not has_layers:
    return placement
  labels = _propagate_labels(graph, labels)
  distinct = np.unique(labels[labels >= 0])
  layer_rank = np.searchsorted(distinct, np.maximum(labels, distinct[0]))
  block = layer_rank * min(gpus.size, distinct.size) // distinct.size
  placement = gpus[block].astype(np.int32)
  return _inputs_with_first_consumer(graph, placement, single)


# -- METIS ---------------------------------------------------------------------


def _integer_weights(values: np.ndarray, total: float) -> np.ndarray:
  """Scales non-negative ``values`` so they sum to about ``total``; >= 1."""
  values = np.asarray(values, np.float64)
  norm = values.sum()
  if norm <= 0:
    return np.ones(values.shape, np.int64)
  return 1 + np.floor(values * (total / norm)).astype(np.int64)


def metis(graph: Graph, topology: Topology, *, costs=None,
          seed: int = 0) -> np.ndarray:
  """Balanced k-way min-cut over the GPUs with pymetis.

  ``k`` is the number of GPUs (all devices when there is no GPU): a min-cut
  that balances compute has no way to account for a slow CPU, and no human
  would hand a third of the compute to it. The graph is made undirected
  (each edge stored in both directions); vertex weights are the mean op time
  over the GPUs and edge weights the bytes, both scaled to integers summing to
  about 1e7 (METIS needs positive int32 weights; every weight is at least 1).
  Memory is not part of the objective.

  Returns:
    ``[N]`` int32 placement.
  """
  import pymetis  # pylint: disable=g-import-not-at-top
  problem = _prepare(graph, topology, costs)
  gpus = problem.allowed
  n = graph.n_nodes
  if gpus.size == 1:
    return np.full(n, gpus[0], np.int32)
  if n <= gpus.size or graph.n_edges == 0:  # nothing to cut
    return gpus[np.arange(n) % gpus.size].astype(np.int32)
  vertex_weight = _integer_weights(problem.costs[:, gpus].mean(axis=1), 1e7)
  edge_weight = _integer_weights(graph.edge_bytes, 1e7)
  src = np.concatenate([graph.edge_src, graph.edge_dst]).astype(np.int64)
  dst = np.concatenate([graph.edge_dst, graph.edge_src]).astype(np.int64)
  weight = np.concatenate([edge_weight, edge_weight])
  order = np.lexsort((dst, src))
  xadj = np.zeros(n + 1, np.int64)
  np.cumsum(np.bincount(src, minlength=n), out=xadj[1:])
  options = pymetis.Options(seed=int(seed) if seed >= 0 else 0)
  _, parts = pymetis.part_graph(
      int(gpus.size), xadj=xadj.tolist(), adjncy=dst[order].tolist(),
      vweights=vertex_weight.tolist(), eweights=weight[order].tolist(),
      options=options)
  return gpus[np.asarray(parts, np.int64)].astype(np.int32)


# -- Baechi m-TOPO -------------------------------------------------------------


def m_topo(graph: Graph, topology: Topology, *, costs=None,
           seed: int = 0) -> np.ndarray:
  """Baechi's m-TOPO: fill GPUs in topological order, balanced and in memory.

  Walks non-input nodes in id order (a topological order) and puts them on
  the current GPU until it holds ``1/G`` of the total compute (mean op time
  over the GPUs) or the node does not fit in its memory, then moves to the
  next GPU. Inputs are placed with their first consumer. Memory is live
  bytes in id order, as in the list schedulers (see _Scheduler). When the
  last GPU is full, a node goes to the GPU with the most room left.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  problem = _prepare(graph, topology, costs)
  gpus = problem.allowed.tolist()
  state = _Scheduler(problem, gpus)
  work = problem.costs[:, gpus].mean(axis=1)
  budget = work.sum() / len(gpus)
  work = work.tolist()
  current, load = 0, 0.0
  for i in range(graph.n_nodes):
    if state.is_input[i]:
      continue
    _, need, resident = state.data_ready(i)
    device = gpus[current]
    while (load >= budget or not state.fits(device, need, resident)) and (
        current + 1 < len(gpus)):
      current, load = current + 1, 0.0
      device = gpus[current]
    if not state.fits(device, need, resident):
      fitting = [d for d in gpus if state.fits(d, need, resident)]
      device = fitting[0] if fitting else state.most_room()
    state.commit(i, device, 0.0, 0.0)
    load += work[i]
  return state.result().placement


# -- list scheduling: m-ETF, m-SCT, HEFT ---------------------------------------


class Plan(NamedTuple):
  """A list scheduler's full plan: where each node runs, and in what order.

  Attributes:
    placement: ``[N]`` int32 device per node.
    order: ``[N]`` int32 node ids by planned start time (inputs first, ties
      by id): a topological order, usable as the simulator's ``order=``.
    start_s: ``[N]`` float64 planned start (0 for inputs).
    finish_s: ``[N]`` float64 planned finish.
    makespan_s: the scheduler's own estimate of the step time (NaN for
      baselines that do not schedule).
    peak_bytes: ``[D]`` float64 the scheduler's estimate of peak live bytes
      per device (see _Scheduler; NaN for baselines that do not track it).
  """
  placement: np.ndarray
  order: np.ndarray
  start_s: np.ndarray
  finish_s: np.ndarray
  makespan_s: float
  peak_bytes: np.ndarray


class _Scheduler:
  """State shared by the list schedulers (host-side, pure Python loops).

  Holds per-node predecessor lists, live bytes per device, link queues and
  the partial placement. Python lists rather than numpy because every step
  touches a handful of scalars and numpy's per-call overhead would dominate
  on 80k nodes.

  Transfers follow the simulator's model: a producer's output is sent once
  per remote device (``send_bytes``: its largest out-edge), and each ordered
  link carries one transfer at a time. A transfer is booked when its first
  consumer on the remote device is placed, starting when both the producer
  and the link are done; until then ``data_ready`` estimates it from the
  link's current queue (an estimate that can only grow).

  Memory follows the simulator's liveness model, in the order nodes are
  committed. Inputs, and copies of inputs on other devices, are resident for
  the whole step (``resident_on``). Activations (op outputs and the copies a
  device receives) are live from when they are placed until the last
  consumer anywhere is placed; output nodes to the end (``act_live``). A
  device's peak is then ``max over time of act_live + resident_on``, so a
  node fits on ``d`` if ``max(act_peak[d], act_live[d] + its activation
  bytes) + resident_on[d] + the inputs it would pin there <= memory_bytes[d]``:
  inputs pinned late still count against the activation peak of earlier
  times, as in the simulator. One gap: a copy of an activation is counted
  from its consumer's placement, while the simulator allocates it when the
  producer runs, so far-apart edges (forward to backward) can make the
  simulator's peak higher than planned. (Counting every output as resident
  forever, the simplest rule, overestimates the paper workloads' training
  steps 5-11x: GNMT-4 sums to 128 GB of outputs for an 11.9 GB peak on one
  GPU.)
  """

  def __init__(self, problem: _Problem, devices):
    graph, topology = problem.graph, problem.topology
    self.n = graph.n_nodes
    self.devices = list(devices)
    self.cost = problem.costs.tolist()
    self.out_bytes = graph.out_bytes.astype(np.float64).tolist()
    self.capacity = topology.memory_bytes.tolist()
    n_devices = topology.n_devices
    self.n_devices = n_devices
    self.act_live = [0.0] * n_devices
    self.act_peak = [0.0] * n_devices
    self.resident_on = [0.0] * n_devices
    _, group = np.unique(topology.compute_group, return_inverse=True)
    self.group = group.reshape(-1).tolist()
    self.latency = topology.link_latency.tolist()
    with np.errstate(divide="ignore"):
      inv = 1.0 / topology.link_bandwidth
    inv[~np.isfinite(inv)] = 0.0
    self.inv_bandwidth = inv.tolist()
    self.is_input = (graph.kind == NODE_INPUT).tolist()
    self.is_output = (graph.kind == NODE_OUTPUT).tolist()
    ptr, eids = graph.pred_csr
    self.pred_ptr = ptr.tolist()
    self.pred_src = graph.edge_src[eids].tolist()
    send = np.zeros(self.n)
    np.maximum.at(send, graph.edge_src, graph.edge_bytes.astype(np.float64))
    self.send_bytes = send.tolist()
    self.remaining = graph.out_degree.tolist()  # consumers not placed yet
    self.copies = {}   # producer -> devices that received a copy
    self.link_free = [[0.0] * n_devices for _ in range(n_devices)]
    self.arrival = {}  # producer * D + device -> arrival time of its copy
    self.succ_ptr = graph.succ_csr[0].tolist()
    self.succ_dst = graph.edge_dst.tolist()
    self.device = [-1] * self.n
    self.start = [0.0] * self.n
    self.finish = [0.0] * self.n

  def data_ready(self, i: int):
    """``(ready [D] s, need [D] bytes, resident [D] bytes)`` of node ``i``.

    ``ready[d]``: when all of its inputs could be on ``d``; ``need[d]``: the
    activation bytes placing it on ``d`` would add there (its output and the
    copies it would receive); ``resident[d]``: the bytes it would make
    resident there for the whole step (inputs it pins, copies of inputs).
    """
    n_devices = self.n_devices
    ready = [0.0] * n_devices
    need = [self.out_bytes[i]] * n_devices
    resident = [0.0] * n_devices
    device, finish, arrival = self.device, self.finish, self.arrival
    is_input = self.is_input
    for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
      p = self.pred_src[k]
      dp = device[p]
      if dp < 0:  # an input not placed yet: it will come here, for free.
        nbytes = self.out_bytes[p]
        for d in self.devices:
          resident[d] += nbytes
        continue
      t0 = finish[p]
      nbytes = self.send_bytes[p]
      lat, inv, link = (self.latency[dp], self.inv_bandwidth[dp],
                        self.link_free[dp])
      base = p * n_devices
      stays = resident if is_input[p] else need
      for d in self.devices:
        if d == dp:
          t = t0
        else:
          t = arrival.get(base + d)
          if t is None:
            t = link[d] if link[d] > t0 else t0
            t += lat[d] + nbytes * inv[d]
            stays[d] += nbytes
        if t > ready[d]:
          ready[d] = t
    return ready, need, resident

  def fits(self, d: int, need, resident) -> bool:
    """Whether placing a node with these ``data_ready`` bytes on ``d`` keeps
    the device's peak within its memory."""
    act = self.act_live[d] + need[d]
    if act < self.act_peak[d]:
      act = self.act_peak[d]
    return act + self.resident_on[d] + resident[d] <= self.capacity[d]

  def most_room(self) -> int:
    return max(self.devices, key=lambda d: self.capacity[d] - self.act_live[d]
               - self.resident_on[d])

  def commit(self, i: int, d: int, start: float, finish: float) -> None:
    """Places node ``i`` on ``d``: pins its unplaced inputs, books the
    transfers it needs and updates live bytes."""
    self.device[i] = d
    self.start[i] = start
    self.finish[i] = finish
    act_live = self.act_live
    act_live[d] += self.out_bytes[i]
    n_devices = self.n_devices
    lo, hi = self.pred_ptr[i], self.pred_ptr[i + 1]
    for k in range(lo, hi):
      p = self.pred_src[k]
      dp = self.device[p]
      if dp < 0:
        self.device[p] = d
        self.resident_on[d] += self.out_bytes[p]
      elif dp != d and p * n_devices + d not in self.arrival:
        link = self.link_free[dp]
        t = link[d] if link[d] > self.finish[p] else self.finish[p]
        t += (self.latency[dp][d]
              + self.send_bytes[p] * self.inv_bandwidth[dp][d])
        link[d] = t
        self.arrival[p * n_devices + d] = t
        if self.is_input[p]:
          self.resident_on[d] += self.send_bytes[p]
        else:
          act_live[d] += self.send_bytes[p]
          self.copies.setdefault(p, []).append(d)
    if act_live[d] > self.act_peak[d]:
      self.act_peak[d] = act_live[d]
    for k in range(lo, hi):
      p = self.pred_src[k]
      if self.is_input[p]:
        continue  # parameters stay resident
      self.remaining[p] -= 1
      if self.remaining[p] == 0:
        self._free(p)
    if self.remaining[i] == 0 and not self.is_output[i]:
      self._free(i)

  def _free(self, p: int) -> None:
    self.act_live[self.device[p]] -= self.out_bytes[p]
    for d in self.copies.pop(p, ()):
      self.act_live[d] -= self.send_bytes[p]

  def result(self) -> Plan:
    # Inputs nobody reads are resident all the same: largest first, each to
    # the device with the most room left.
    unused = [i for i in range(self.n) if self.device[i] < 0]
    for i in sorted(unused, key=lambda i: -self.out_bytes[i]):
      d = max(self.devices, key=lambda d: self.capacity[d] - self.act_peak[d]
              - self.resident_on[d])
      self.device[i] = d
      self.resident_on[d] += self.out_bytes[i]
    placement = np.asarray(self.device, np.int32)
    start, finish = np.asarray(self.start), np.asarray(self.finish)
    is_input = np.asarray(self.is_input)
    # Inputs first; then by start. An edge u -> v has start(v) >= finish(u)
    # >= start(u), and ids break ties, so this is a topological order.
    order = np.lexsort((np.arange(self.n), start, ~is_input))
    return Plan(placement, order.astype(np.int32), start, finish,
                float(finish.max()) if self.n else 0.0,
                np.asarray(self.act_peak) + np.asarray(self.resident_on))


def _etf_schedule(problem: _Problem, devices, priority: np.ndarray,
                  favourite_parent: np.ndarray | None = None) -> Plan:
  """Memory-constrained earliest-task-first list scheduling (Baechi m-ETF).

  Repeatedly takes the ready node that can start earliest on some device
  (ties: higher ``priority``), and puts it on the device with room for it
  where it finishes earliest (on identical devices that is the
  earliest-start device of classic ETF; with a CPU in the mix it stops slow
  devices from grabbing work just because they are idle). With
  ``favourite_parent`` (m-SCT) a node goes to its favourite parent's device
  whenever that device has room and is idle by the time the node's data is
  there. A node that fits nowhere goes where there is most room (the
  schedule will OOM).

  Each device keeps two heaps of the ready nodes: those whose data is not
  there before the device is free, keyed by data-ready time, and those that
  could start the moment it is free, keyed by priority. A device's best
  candidate is then the top of one heap, and a step costs O(D log R) instead
  of the O(R D) scan of textbook ETF over R ready nodes. Ready times only
  grow (inputs get pinned elsewhere, links fill up), so stale entries are
  re-checked lazily when they reach a top. Memory is left to the device
  choice: the node picked is the earliest to start ignoring memory.

  Args:
    devices: device indices the schedule may use.
    priority: ``[N]`` tie-break, larger first (upward rank).
    favourite_parent: ``[N]`` int, a producer id or -1.
  """
  state = _Scheduler(problem, devices)
  n = state.n
  devices = state.devices
  cost, group = state.cost, state.group
  group_free = [0.0] * (max(group) + 1)
  graph = problem.graph
  is_input = np.asarray(state.is_input)
  from_input = is_input[graph.edge_src]
  waiting = np.bincount(graph.edge_dst[~from_input], minlength=n).tolist()
  # Ready times of a node that reads an input can still grow while it waits
  # (another consumer may pin the input elsewhere first): always re-check.
  reads_input = (np.bincount(graph.edge_dst[from_input], minlength=n)
                 > 0).tolist()
  prio = (-np.asarray(priority, np.float64)).tolist()
  favourite = (favourite_parent.tolist() if favourite_parent is not None
               else None)
  ready_at = [None] * n
  done = [False] * n
  future = {d: [] for d in devices}     # (data-ready time, prio, node)
  available = {d: [] for d in devices}  # (prio, node), data there when free
  heappush, heappop = heapq.heappush, heapq.heappop

  def release(i):
    ready_at[i] = state.data_ready(i)[0]
    for d in devices:
      heappush(future[d], (ready_at[i][d], prio[i], i))

  def fix_future_top(d):
    """Pops done entries and re-keys a stale top of future[d]."""
    fut = future[d]
    while fut:
      r, p, i = fut[0]
      if done[i]:
        heappop(fut)
        continue
      if reads_input[i]:
        ready_at[i] = state.data_ready(i)[0]
        if ready_at[i][d] > r:
          heapq.heapreplace(fut, (ready_at[i][d], p, i))
          continue
      return

  def front(d):
    """``(earliest start, prio, node)`` of device d's best candidate."""
    free = group_free[group[d]]
    fut, avail = future[d], available[d]
    while True:
      fix_future_top(d)
      if fut and fut[0][0] <= free:
        _, p, i = heappop(fut)
        heappush(avail, (p, i))
        continue
      break
    while avail:
      p, i = avail[0]
      if done[i]:
        heappop(avail)
        continue
      if reads_input[i]:
        ready_at[i] = state.data_ready(i)[0]
        if ready_at[i][d] > free:
          heappop(avail)
          heappush(fut, (ready_at[i][d], p, i))
          continue
      return free, p, i
    fix_future_top(d)
    return fut[0] if fut else None

  for i in range(n):
    if not state.is_input[i] and waiting[i] == 0:
      release(i)
  while True:
    best = None
    for d in devices:
      candidate = front(d)
      if candidate is not None and (best is None or candidate < best):
        best = candidate
    if best is None:
      break
    i = best[2]
    ready, need, resident = state.data_ready(i)
    row = cost[i]
    choice = -1
    if favourite is not None and favourite[i] >= 0:
      d = state.device[favourite[i]]
      if d in devices and group_free[group[d]] <= ready[d] and state.fits(
          d, need, resident):
        choice = d
    if choice < 0:
      choice_finish = float("inf")
      for d in devices:
        if not state.fits(d, need, resident):
          continue
        s = ready[d]
        g = group_free[group[d]]
        if g > s:
          s = g
        if s + row[d] < choice_finish:
          choice, choice_finish = d, s + row[d]
    if choice < 0:
      choice = state.most_room()
    start = max(ready[choice], group_free[group[choice]])
    finish = start + row[choice]
    group_free[group[choice]] = finish
    state.commit(i, choice, start, finish)
    done[i] = True
    for k in range(state.succ_ptr[i], state.succ_ptr[i + 1]):
      j = state.succ_dst[k]
      waiting[j] -= 1
      if waiting[j] == 0:
        release(j)
  return state.result()


def _heft_schedule(problem: _Problem, devices, rank: np.ndarray, *,
                   max_gaps: int | None = None) -> Plan:
  """Insertion-based HEFT over ``devices`` in decreasing ``rank`` order.

  Each node goes to the device (with room, when any has) where it finishes
  earliest, using the first idle gap of that device's compute group that
  is long enough after the node's data is ready. At most ``max_gaps``
  (default HEFT_MAX_GAPS) gaps are tried per device before appending after
  its last op; ``max_gaps=0`` appends always (no insertion). Memory is
  tracked in rank order, the order nodes are committed.
  """
  max_gaps = HEFT_MAX_GAPS if max_gaps is None else max_gaps
  state = _Scheduler(problem, devices)
  n = state.n
  devices = state.devices
  cost, group = state.cost, state.group
  n_groups = max(group) + 1
  starts = [[] for _ in range(n_groups)]  # busy intervals, sorted
  ends = [[] for _ in range(n_groups)]
  # Decreasing rank is a topological order; ties broken by id keep it one.
  order = np.lexsort((np.arange(n), -np.asarray(rank)))
  is_input = state.is_input

  def slot(g, ready, duration):
    """(index, start) of the first gap of group g fitting the op."""
    s_list, e_list = starts[g], ends[g]
    m = len(s_list)
    if m == 0:
      return 0, ready
    k = bisect.bisect_right(s_list, ready)
    # The gap before interval idx runs from ends[idx-1] (or 0) to starts[idx].
    for idx in range(k, min(m, k + max_gaps)):
      gap_start = e_list[idx - 1] if idx > 0 else 0.0
      s = ready if ready > gap_start else gap_start
      if s + duration <= s_list[idx]:
        return idx, s
    tail = e_list[m - 1]
    return m, ready if ready > tail else tail

  for i in order.tolist():
    if is_input[i]:
      continue
    ready, need, resident = state.data_ready(i)
    row = cost[i]
    best = None
    candidates = [d for d in devices if state.fits(d, need, resident)]
    if not candidates:
      candidates = [state.most_room()]
    for d in candidates:
      idx, s = slot(group[d], ready[d], row[d])
      f = s + row[d]
      if best is None or f < best[0]:
        best = (f, s, d, idx)
    f, s, d, idx = best
    if f > s:
      g = group[d]
      starts[g].insert(idx, s)
      ends[g].insert(idx, f)
    state.commit(i, d, s, f)
  return state.result()


def _schedule_ranks(problem: _Problem, devices) -> np.ndarray:
  """Upward rank with op time and transfer time averaged over ``devices``."""
  node_cost = problem.costs[:, devices].mean(axis=1)
  edge_cost = _mean_transfer_s(problem.topology, devices,
                               problem.graph.edge_bytes)
  return _upward_rank(problem.graph, node_cost, edge_cost)


def _plan_ordered_eft(problem: _Problem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  by_id = -np.arange(problem.graph.n_nodes, dtype=np.float64)
  return _heft_schedule(problem, devices, by_id, max_gaps=0)


def ordered_eft(graph: Graph, topology: Topology, *, costs=None,
                seed: int = 0) -> np.ndarray:
  """Earliest finish time with nodes in id order, no insertion.

  Not from a paper: the list scheduler whose model matches the simulator's
  default execution (each device runs its ops in node-id order), so what it
  plans is what ``gplace.simulate`` measures, up to the transfer queues.
  Memory-aware like m-ETF; uses every device.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_ordered_eft(_prepare(graph, topology, costs)).placement


def _plan_m_etf(problem: _Problem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  rank = _schedule_ranks(problem, devices)
  return _etf_schedule(problem, devices, rank)


def _plan_heft(problem: _Problem) -> Plan:
  devices = np.arange(problem.topology.n_devices)
  rank = _schedule_ranks(problem, devices)
  return _heft_schedule(problem, devices, rank)


def m_etf(graph: Graph, topology: Topology, *, costs=None,
          seed: int = 0) -> np.ndarray:
  """Baechi's m-ETF: memory-constrained earliest-task-first scheduling.

  See :func:`_etf_schedule`; ties between equally early nodes go to the one
  with the larger upward rank. Uses every device of the topology.
  :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_m_etf(_prepare(graph, topology, costs)).placement


def heft(graph: Graph, topology: Topology, *, costs=None,
         seed: int = 0) -> np.ndarray:
  """HEFT (Topcuoglu et al. 2002), made memory-aware.

  Nodes in decreasing upward rank (mean op time over devices, mean transfer
  time over device pairs), each on the device where it finishes earliest with
  insertion into idle gaps; devices without room are skipped. Uses every
  device of the topology. :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_heft(_prepare(graph, topology, costs)).placement


# -- Baechi m-SCT --------------------------------------------------------------


def _sct_lp(n_nodes: int, op_time: np.ndarray, src: np.ndarray,
            dst: np.ndarray, comm: np.ndarray) -> np.ndarray | None:
  """Solves the favourite-child LP relaxation; returns ``[E]`` x or None.

  Variables: start ``s_i >= 0`` per node, ``x_e in [0, 1]`` per edge (1: the
  edge pays its communication, 0: its consumer is the producer's favourite
  child and runs on the same device), makespan ``w``. Minimize ``w`` subject
  to

  * ``s_i + p_i + c_e x_e <= s_j`` for every edge ``e = (i, j)``;
  * ``sum_{e out of i} x_e >= outdeg(i) - 1`` (at most one favourite child);
  * ``sum_{e into j} x_e >= indeg(j) - 1`` (at most one favourite parent);
  * ``s_i + p_i <= w``.

  Times are in microseconds for conditioning. Rounding ``x_e < 0.5`` to 0 keeps
  at most one favourite per node (two values below 0.5 would break the sums).
  """
  from scipy import optimize, sparse  # pylint: disable=g-import-not-at-top
  n, m = n_nodes, src.size
  if m == 0:
    return np.ones(0)
  p = op_time * 1e6
  c = comm * 1e6
  rows, cols, vals, rhs = [], [], [], []
  e = np.arange(m)
  # Precedence: s_src - s_dst + c x <= -p_src.
  rows += [e, e, e]
  cols += [src, dst, n + e]
  vals += [np.ones(m), -np.ones(m), c]
  rhs.append(-p[src])
  row0 = m
  for ends_at in (src, dst):
    degree = np.bincount(ends_at, minlength=n)
    multi = degree >= 2
    node_row = np.full(n, -1)
    node_row[multi] = row0 + np.arange(int(multi.sum()))
    keep = multi[ends_at]
    rows.append(node_row[ends_at[keep]])
    cols.append(n + e[keep])
    vals.append(-np.ones(int(keep.sum())))
    rhs.append(-(degree[multi] - 1.0))
    row0 += int(multi.sum())
  # Makespan, for sinks only (every other node is bounded by a successor).
  sinks = np.flatnonzero(np.bincount(src, minlength=n) == 0)
  rows.append(row0 + np.arange(sinks.size))
  cols.append(sinks)
  vals.append(np.ones(sinks.size))
  rows.append(row0 + np.arange(sinks.size))
  cols.append(np.full(sinks.size, n + m))
  vals.append(-np.ones(sinks.size))
  rhs.append(-p[sinks])
  row0 += sinks.size
  a_ub = sparse.csr_matrix(
      (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
      shape=(row0, n + m + 1))
  objective = np.zeros(n + m + 1)
  objective[-1] = 1.0
  bounds = np.zeros((n + m + 1, 2))
  bounds[:, 1] = np.inf
  bounds[n:n + m, 1] = 1.0
  result = optimize.linprog(objective, A_ub=a_ub, b_ub=np.concatenate(rhs),
                            bounds=bounds, method="highs")
  if result.status != 0 or result.x is None:
    return None
  return result.x[n:n + m]


def _favourite_parents(problem: _Problem, devices) -> np.ndarray:
  """``[N]`` favourite producer of each node (-1: none), from the SCT LP.

  Only non-input nodes and the edges between them take part (inputs follow
  their consumers anyway). ``p_i`` is the mean op time over ``devices`` and
  ``c_e`` the mean transfer time over their pairs. Graphs of at most
  SCT_LP_MAX_NODES such nodes get one LP; bigger ones are cut into windows of
  that many consecutive node ids (edges across windows are left out, which
  only drops constraints that couple windows), solved in order while
  SCT_LP_TIME_BUDGET_S lasts. Windows left over, and any LP that fails, use
  the greedy rule: each node's favourite child is its consumer with the
  largest transfer time that has no favourite parent yet.
  """
  graph = problem.graph
  n = graph.n_nodes
  favourite = np.full(n, -1, np.int64)
  keep_edge = graph.kind[graph.edge_src] != NODE_INPUT
  src = graph.edge_src[keep_edge].astype(np.int64)
  dst = graph.edge_dst[keep_edge].astype(np.int64)
  if src.size == 0 or len(devices) < 2:
    return favourite
  op_time = problem.costs[:, devices].mean(axis=1)
  comm = _mean_transfer_s(problem.topology, devices,
                          graph.edge_bytes[keep_edge])
  scheduled = np.flatnonzero(graph.kind != NODE_INPUT)
  window_of = np.full(n, -1, np.int64)
  window_of[scheduled] = np.arange(scheduled.size) // SCT_LP_MAX_NODES
  n_windows = int(window_of.max()) + 1
  edge_window = np.where(window_of[src] == window_of[dst], window_of[src], -1)
  deadline = time.perf_counter() + SCT_LP_TIME_BUDGET_S
  solved = np.zeros(src.size, bool)
  is_favourite = np.zeros(src.size, bool)
  for w in range(n_windows):
    if time.perf_counter() > deadline:
      break
    nodes = scheduled[window_of[scheduled] == w]
    local = np.full(n, -1, np.int64)
    local[nodes] = np.arange(nodes.size)
    sel = np.flatnonzero(edge_window == w)
    x = _sct_lp(nodes.size, op_time[nodes], local[src[sel]], local[dst[sel]],
                comm[sel])
    if x is None:
      continue
    solved[sel] = True
    is_favourite[sel] = x < 0.5
  has_child = np.zeros(n, bool)
  fav_edges = np.flatnonzero(is_favourite)
  favourite[dst[fav_edges]] = src[fav_edges]
  has_child[src[fav_edges]] = True
  # Greedy for edges no LP saw: heaviest edges first.
  rest = np.flatnonzero(~solved)
  rest = rest[np.argsort(-comm[rest], kind="stable")]
  src_list, dst_list = src.tolist(), dst.tolist()
  for e in rest.tolist():
    i, j = src_list[e], dst_list[e]
    if not has_child[i] and favourite[j] < 0:
      favourite[j] = i
      has_child[i] = True
  return favourite


def _plan_m_sct(problem: _Problem) -> Plan:
  devices = problem.allowed
  favourite = _favourite_parents(problem, devices)
  rank = _schedule_ranks(problem, devices)
  return _etf_schedule(problem, devices, rank, favourite)


def m_sct(graph: Graph, topology: Topology, *, costs=None,
          seed: int = 0) -> np.ndarray:
  """Baechi's m-SCT: favourite-child LP, then m-ETF following the hints.

  See :func:`_favourite_parents` for the LP (and its size cap) and
  :func:`_etf_schedule` for how the hints are used. Uses the GPUs only (all
  devices if there is none): SCT assumes identical processors, and on a CPU
  plus GPUs mix the hints drag whole favourite-child chains onto the CPU
  whenever one of their ops landed there (2x slower steps on Inception-V3 and
  BERT at paper size). The LP averages op and transfer times over the GPUs.
  :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  return _plan_m_sct(_prepare(graph, topology, costs)).placement


# -- registry ------------------------------------------------------------------


_BASELINES: dict[str, Baseline] = {
    "single_device": single_device,
    "round_robin": round_robin,
    "random": random,
    "expert": expert,
    "metis": metis,
    "m_topo": m_topo,
    "m_etf": m_etf,
    "m_sct": m_sct,
    "heft": heft,
    "ordered_eft": ordered_eft,
}


_PLANNERS = {"m_etf": _plan_m_etf, "m_sct": _plan_m_sct, "heft": _plan_heft,
             "ordered_eft": _plan_ordered_eft}


def names() -> list[str]:
  """Names of all baselines, in a fixed order (trivial ones first)."""
  return list(_BASELINES)


def get(name: str) -> Baseline:
  """The baseline called ``name``.

  Raises:
    ConfigError: unknown name; the message lists the known ones.
  """
  if name not in _BASELINES:
    raise ConfigError(f"Unknown baseline {name!r}; choose one of {names()}.")
  return _BASELINES[name]


def schedulers() -> list[str]:
  """Baselines that plan an op order as well as a placement (see plan)."""
  return list(_PLANNERS)


def plan(name: str, graph: Graph, topology: Topology, *, costs=None,
         seed: int = 0) -> Plan:
  """The placement of baseline ``name`` with its planned op order.

  List schedulers (:func:`schedulers`) order ops by their planned start,
  which is what Baechi and HEFT assume the runtime does (run ops as they
  become ready); ``gplace.simulate`` by default runs each device's ops in
  node-id order instead, so pass ``order=plan.order`` to simulate the plan
  as made. Other baselines get the id order and a NaN makespan.

  Raises:
    ConfigError: unknown name.
  """
  if name in _PLANNERS:
    return _PLANNERS[name](_prepare(graph, topology, costs))
  placement = get(name)(graph, topology, costs=costs, seed=seed)
  n = graph.n_nodes
  return Plan(placement, np.arange(n, dtype=np.int32), np.zeros(n),
              np.zeros(n), float("nan"),
              np.full(topology.n_devices, float("nan")))


def run_all(graph: Graph, topology: Topology, costs=None, *, seed: int = 0,
            only=None) -> dict[str, np.ndarray]:
  """``{name: [N] int32 placement}`` for all baselines, or those in ``only``."""
  return {name: get(name)(graph, topology, costs=costs, seed=seed)
          for name in (only if only is not None else names())}


__all__ = [
    "LAYER_PATTERN", "Plan", "expert", "get",
    "gpu_devices", "heft", "layer_index", "m_etf", "m_sct", "m_topo", "metis",
    "names", "ordered_eft", "plan", "random", "resident_bytes",
    "round_robin", "run_all", "schedulers", "single_device",
    "single_device_peak_bytes",
]
