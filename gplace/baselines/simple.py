"""Placements without a schedule: single device, round robin, random, the
expert's layer-wise rule and METIS min-cut.

Host-side numpy; nothing here is traced."""

from __future__ import annotations

import numpy as np

from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.sim.list_scheduler import PlanningProblem, prepare
from gplace.sim.topology import Topology
from gplace.baselines.common import (LAYER_PATTERN,
                                     inputs_with_first_consumer,
                                     respecting_constraints)
from gplace.baselines.scheduler import fastest_single_device


# Workloads an expert keeps on one GPU, matched as substrings of the
# lower-cased workload name. Every other workload is split by layer when its
# node names carry layer indices (gnmt, rnnlm, transformer_xl, bert, ...).
ONE_GPU_WORKLOADS = ("inception", "resnet", "wavenet", "amoeba", "vgg",
                      "alexnet", "cnn", "conv")


def _best_single(problem: PlanningProblem, candidates) -> int:
  """Fastest device among ``candidates`` whose memory holds the graph (see
  ``scheduler.fastest_single_device``); the largest-memory one if none
  does."""
  candidates = np.asarray(candidates)
  device = fastest_single_device(problem, [candidates])
  if device is not None:
    return device
  memory = problem.topology.memory_bytes[candidates]
  return int(candidates[int(np.argmax(memory))])


@respecting_constraints
def single_device(graph: Graph, topology: Topology, *, costs=None,
                  seed: int = 0) -> np.ndarray:
  """Everything on the best single device.

  The best is the one with the least total op time among devices whose memory
  holds the graph's peak live bytes in node-id order
  (:func:`single_device_peak_bytes`) and in the simulator's default
  schedule; if none does, the largest-memory one.

  Returns:
    ``[N]`` int32 placement.
  """
  del seed
  problem = prepare(graph, topology, costs)
  candidates = np.arange(topology.n_devices)
  if graph.allowed_devices is not None and graph.allowed_devices.all(0).any():
    candidates = np.flatnonzero(graph.allowed_devices.all(axis=0))
  device = _best_single(problem, candidates)
  return np.full(graph.n_nodes, device, np.int32)


@respecting_constraints
def round_robin(graph: Graph, topology: Topology, *, costs=None,
                seed: int = 0) -> np.ndarray:
  """Node ``i`` on device ``i mod D``; ``[N]`` int32."""
  del seed
  prepare(graph, topology, costs)
  return (np.arange(graph.n_nodes) % topology.n_devices).astype(np.int32)


@respecting_constraints
def random(graph: Graph, topology: Topology, *, costs=None,
           seed: int = 0) -> np.ndarray:
  """A uniformly random device per node; ``[N]`` int32."""
  prepare(graph, topology, costs)
  # Salted so that seed 0 does not replay the stream of random_dag(seed=0).
  rng = np.random.default_rng([seed, 0x9E3779B9])
  return rng.integers(0, topology.n_devices, graph.n_nodes).astype(np.int32)


# -- expert --------------------------------------------------------------------


def layer_index(name: str) -> int:
  """The outermost layer index in a node name (see LAYER_PATTERN), or -1."""
  match = LAYER_PATTERN.search(name)
  return int(match.group(1)) if match else -1


def _adopt_heaviest_neighbour(labels: list, kind: list, nodes, ptr: list,
                              neighbour: list, edge_bytes: list) -> None:
  """In ``nodes`` order, an unlabelled non-input node takes the label of the
  labelled CSR neighbour (``ptr``/``neighbour``) with the most bytes."""
  for i in nodes:
    if labels[i] >= 0 or kind[i] == NODE_INPUT:
      continue
    best, best_bytes = -1, -1
    for k in range(ptr[i], ptr[i + 1]):
      label = labels[neighbour[k]]
      if label >= 0 and edge_bytes[k] > best_bytes:
        best, best_bytes = label, edge_bytes[k]
    labels[i] = best


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
  _adopt_heaviest_neighbour(labels, kind, range(graph.n_nodes), ptr.tolist(),
                            graph.edge_src[eids].tolist(),
                            graph.edge_bytes[eids].tolist())
  _adopt_heaviest_neighbour(labels, kind, range(graph.n_nodes - 1, -1, -1),
                            graph.succ_csr[0].tolist(), graph.edge_dst.tolist(),
                            graph.edge_bytes.tolist())
  labels = np.asarray(labels, np.int64)
  known = labels[labels >= 0]
  if known.size:
    labels[(labels < 0) & (graph.kind != NODE_INPUT)] = known.min()
  return labels


@respecting_constraints
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
  problem = prepare(graph, topology, costs)
  gpus = problem.allowed
  single = _best_single(problem, gpus)
  family = (workload if workload is not None else graph.name).lower()
  placement = np.full(graph.n_nodes, single, np.int32)
  if any(key in family for key in ONE_GPU_WORKLOADS):
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
  return inputs_with_first_consumer(graph, placement, single)


# -- METIS ---------------------------------------------------------------------


def _integer_weights(values: np.ndarray, total: float) -> np.ndarray:
  """Scales non-negative ``values`` so they sum to about ``total``; >= 1."""
  values = np.asarray(values, np.float64)
  norm = values.sum()
  if norm <= 0:
    return np.ones(values.shape, np.int64)
  return 1 + np.floor(values * (total / norm)).astype(np.int64)


@respecting_constraints
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
  problem = prepare(graph, topology, costs)
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
