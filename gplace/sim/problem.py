"""Host-side half of the simulator: :func:`make_problem` lays a graph,
topology and costs out as the padded arrays of a :class:`SimProblem` (scan
steps in schedule order); :class:`SimResult` (``runtime_s [K]``,
``peak_bytes [K, D]``, ``oom [K]``) is what the scan returns.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import PlacementError, ScheduleError, TopologyError
from gplace.graphs import constraints
from gplace.graphs.constraints import check_device_count
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.sim.topology import Topology, cost_table

DEFAULT_WIDTH = 8
_MAX_DEVICES = 32                # consumer sets are unsigned bitmasks
#: Steps per inner scan of :mod:`gplace.sim.scan` (``n_steps`` is a multiple).
BLOCK = 32


class SimResult(NamedTuple):
  """Simulated outcome of ``K`` placements.

  Attributes:
    runtime_s: ``[K]`` float32 seconds, the latest finish time.
    peak_bytes: ``[K, D]`` float32 peak live bytes per device.
    oom: ``[K]`` bool, infeasible: peak above some device's
      ``memory_bytes``, or a device constraint broken (see
      ``constraint_violated``).
    start_s: ``[K, N]`` float32 start time of each node, or None.
    finish_s: ``[K, N]`` float32 finish time of each node, or None.
    order: ``[K, N]`` int32 priority order each placement ran in, or None
      (without ``return_schedule``): the shared order (node ids by default)
      or, for per-placement schedules, the list scheduler's dispatch order.
      A topological order; ``simulate(..., order=order[k])`` reproduces the
      result of placement ``k``, and each compute group runs its nodes in
      this order filtered by placement.
    constraint_violated: ``[K]`` bool, the placement breaks the graph's
      device constraints (a node on a device it does not allow, or a
      co-location class split); such placements are also ``oom``, so every
      consumer that treats OOM as infeasible treats them so. Filled in by
      ``gplace.simulate`` (None from the jitted simulators).
  """

  runtime_s: jax.Array
  peak_bytes: jax.Array
  oom: jax.Array
  start_s: Optional[jax.Array] = None
  finish_s: Optional[jax.Array] = None
  order: Optional[np.ndarray] = None
  constraint_violated: Optional[np.ndarray] = None


class SimProblem(NamedTuple):
  """A graph, topology and cost table as padded arrays for the simulator.

  Shapes depend only on the budget ``(n_nodes, n_steps, n_slots, width)``
  and the topology's ``D`` devices and ``G`` compute groups, so problems built
  with the same budget stack along a leading axis and vmap. ``S = n_steps``,
  ``W = width``; a node takes one scan step per ``W`` inputs / consumers.

  Attributes:
    step_node: ``[S]`` int32 node of each step (``n_nodes``: padding).
    step_flags: ``[S, 4]`` int32: first chunk of its node, last chunk (the
      node runs here), node is an input, node's own copy is never freed.
    step_write: ``[S]`` int32 arrival-table row written on the last chunk.
    step_sizes: ``[S, 2]`` float32 own bytes (0 for inputs, counted up
      front) and transfer bytes of the node (on its last chunk step).
    step_times: ``[S, D + D * D]`` float32 cost on each device, then transfer
      seconds of the node's output on each link ``[D(src), D(dst)]``.
    chunk_index: ``[S]`` int32 index of the step among its node's chunks.
    pred_row: ``[S, W]`` int32 arrival-table rows of this chunk's inputs
      (``n_slots``: an always-zero row).
    pred_edge: ``[S, W]`` int32 position of each input edge in the consumer
      layout ``succ_node`` flattened (``S * W``: none).
    pred_sizes: ``[S, W, 2]`` float32 bytes each input's copy frees when
      its last consumer on a device has run: own copy (0 for inputs, which
      stay resident), received copy.
    succ_node: ``[S, W]`` int32 consumers of this chunk, latest position
      first within each node (``n_nodes``: none).
    max_chain: ``[]`` int32 most chunks of any node, minus one.
    commit_step: ``[n_nodes]`` int32 step at which each node runs (``S`` for
      padding nodes).
    input_sizes: ``[n_nodes]`` float32 bytes of ``NODE_INPUT`` nodes (they
      stay resident).
    group_of_device: ``[D]`` int32 compute group id in ``0..G-1``.
    group_ids: ``[G]`` int32 ``arange(G)``.
    memory_bytes: ``[D]`` float32 device capacity.
    slot_ids: ``[n_slots + 2]`` int32 ``arange`` (carries the table size).
  """

  step_node: jax.Array
  step_flags: jax.Array
  step_write: jax.Array
  step_sizes: jax.Array
  step_times: jax.Array
  chunk_index: jax.Array
  pred_row: jax.Array
  pred_edge: jax.Array
  pred_sizes: jax.Array
  succ_node: jax.Array
  max_chain: jax.Array
  commit_step: jax.Array
  input_sizes: jax.Array
  group_of_device: jax.Array
  group_ids: jax.Array
  memory_bytes: jax.Array
  slot_ids: jax.Array



def check_order(order, n_nodes: int, graph: Graph) -> np.ndarray:
  """Validates a priority order; returns it as ``[N]`` int64.

  Raises:
    ScheduleError: not a permutation of the nodes, or not topological.
  """
  order = np.asarray(order)
  if order.shape != (n_nodes,) or not np.issubdtype(order.dtype, np.integer):
    raise ScheduleError(
        f"order must be a 1-D integer permutation of the {n_nodes} nodes, got "
        f"shape {order.shape} and dtype {order.dtype}.")
  order = order.astype(np.int64)
  seen = np.zeros(n_nodes, bool)
  if order.size and (order.min() < 0 or order.max() >= n_nodes):
    raise ScheduleError(f"order names a node outside 0..{n_nodes - 1}.")
  seen[order] = True
  if not seen.all():
    raise ScheduleError("order is not a permutation: node "
                         f"{int(np.argmin(seen))} is missing.")
  pos = np.empty(n_nodes, np.int64)
  pos[order] = np.arange(n_nodes)
  bad = pos[graph.edge_src] >= pos[graph.edge_dst]
  if np.any(bad):
    e = int(np.argmax(bad))
    raise ScheduleError(
        f"order is not a topological order: node {graph.edge_src[e]} feeds "
        f"node {graph.edge_dst[e]} but comes after it. Use a topological "
        "order (node ids are one).")
  return order


def check_orders(rows, n_nodes: int, graph: Graph) -> np.ndarray:
  """:func:`check_order` of each row of ``[K, N]`` ``rows`` at once;
  returns them as ``[K, N]`` int64 (an error names the first bad row)."""
  rows = np.asarray(rows)
  if (rows.ndim != 2 or rows.shape[1] != n_nodes
      or not np.issubdtype(rows.dtype, np.integer)):
    raise ScheduleError(
        f"orders must be [K, {n_nodes}] integer permutations of the nodes, "
        f"got shape {rows.shape} and dtype {rows.dtype}.")
  rows = rows.astype(np.int64)
  k = rows.shape[0]
  if not k:
    return rows
  inside = (rows >= 0) & (rows < n_nodes)
  seen = np.zeros((k, n_nodes), bool)
  row_of = np.broadcast_to(np.arange(k)[:, None], rows.shape)
  seen[row_of[inside], rows[inside]] = True
  pos = np.zeros((k, n_nodes), np.int64)
  pos[row_of[inside], rows[inside]] = np.broadcast_to(
      np.arange(n_nodes), rows.shape)[inside]
  bad = (~inside.all(axis=1) | ~seen.all(axis=1)
         | np.any(pos[:, graph.edge_src] >= pos[:, graph.edge_dst], axis=1))
  if np.any(bad):
    row = int(np.argmax(bad))
    try:
      check_order(rows[row], n_nodes, graph)
    except ScheduleError as err:
      raise ScheduleError(f"order row {row}: {err}") from None
    raise AssertionError("check_orders and check_order disagree")
  return rows


def send_bytes(graph: Graph) -> np.ndarray:
  """``[N]`` int64, bytes of one transfer of each node's output: the largest
  ``edge_bytes`` among its out-edges (0 for nodes without consumers)."""
  out = np.zeros(graph.n_nodes, np.int64)
  np.maximum.at(out, graph.edge_src, graph.edge_bytes)
  return out


def check_simulable(graph: Graph, topology: Topology) -> None:
  """Raises PlacementError for an empty graph and TopologyError for more
  devices than the simulator's device bitmasks hold (32)."""
  if graph.n_nodes == 0:
    raise PlacementError("The graph has no nodes; there is nothing to "
                         "simulate.")
  if topology.n_devices > _MAX_DEVICES:
    raise TopologyError(f"The simulator supports at most {_MAX_DEVICES} "
                        f"devices, the topology has {topology.n_devices}.")


def transfer_seconds(graph: Graph, topology: Topology) -> np.ndarray:
  """``[N, D, D]`` float64 seconds of one transfer of each node's output on
  each link: ``link_latency + send_bytes / link_bandwidth`` (0 on the
  diagonal; without the latency for graph inputs where
  ``topology.batched_inputs``)."""
  eye = np.eye(topology.n_devices, dtype=bool)
  latency = np.where(eye, 0.0, topology.link_latency)
  inv_bw = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0,
                                             topology.link_bandwidth))
  nbytes = send_bytes(graph).astype(np.float64)
  pays = np.ones(graph.n_nodes)
  if topology.batched_inputs:
    pays[graph.kind == NODE_INPUT] = 0.0
  return (pays[:, None, None] * latency[None]
          + nbytes[:, None, None] * inv_bw[None])


def link_hold_seconds(graph: Graph, topology: Topology) -> np.ndarray:
  """``[N, D, D]`` float64 seconds a transfer of each node's output keeps
  its link busy: :func:`transfer_seconds`, less the latency on the links
  that ``topology.pipelined_links`` pipelines (the latency then only delays
  the value's arrival, overlapping the link's next transfer)."""
  if topology.has_pipelined_links:
    topology = topology.replace(link_latency=topology.link_hold_latency)
  return transfer_seconds(graph, topology)


def check_serial_links(topology: Topology, caller: str) -> None:
  """Raises TopologyError where ``topology.pipelined_links``: the jitted
  kernels (``caller``) hold a link for each transfer's latency too; only
  the host scheduler (:func:`gplace.simulate`) models pipelined links."""
  if topology.has_pipelined_links:
    raise TopologyError(
        f"{caller} runs the jitted simulator, which holds a link for each "
        f"transfer's latency, but topology {topology.name!r} has "
        "pipelined_links (as gplace.profile sets). Use gplace.simulate, or "
        "topology.replace(pipelined_links=False) for the jitted model.")


def make_problem(graph: Graph, topology: Topology, costs=None, order=None,
                 n_nodes: int | None = None, *, n_steps: int | None = None,
                 n_slots: int | None = None,
                 width: int = DEFAULT_WIDTH) -> SimProblem:
  """Builds the padded arrays of one simulation problem (host-side numpy).

  Args:
    graph: the op graph.
    topology: the devices (at most 32).
    costs: optional ``[N, D]`` measured seconds; default the roofline.
    order: optional ``[N]`` priority order (a topological order); default
      node id order.
    n_nodes: node budget ``>= graph.n_nodes``; padding nodes cost nothing,
      have no edges and no bytes, so their placement does not matter.
    n_steps: scan steps budget. A node takes ``max(1, ceil(in_degree /
      width), ceil(out_degree / width))`` steps. Default: what the graph needs
      when ``n_nodes`` is None, else ``n_nodes`` (a graph with many nodes of
      degree above ``width`` then needs a larger value; the error says so).
    n_slots: arrival-table rows budget; default: what the graph needs
      (rounded up to 8) when ``n_nodes`` is None, else ``n_nodes``.
    width: inputs and consumers handled per scan step.

  Returns:
    A :class:`SimProblem`; the same budget and topology give the same shapes.

  Raises:
    TopologyError: bad cost table, or more than 32 devices.
    PlacementError: bad order, or a budget too small for the graph.
  """
  check_simulable(graph, topology)
  check_serial_links(topology, "gplace.sim.make_problem")
  n = graph.n_nodes
  d = topology.n_devices
  exact = n_nodes is None
  n_pad = n if exact else int(n_nodes)
  if n_pad < n:
    raise PlacementError(f"n_nodes={n_pad} is smaller than the graph's {n} "
                         "nodes; pass a larger node budget.")
  if width < 1:
    raise PlacementError(f"width must be at least 1, got {width}.")
  costs = cost_table(graph, topology, costs)
  order = (np.arange(n) if order is None else check_order(order, n, graph))
  pos = np.empty(n, np.int64)
  pos[order] = np.arange(n)

  # Steps: each node's chunks are consecutive, nodes in priority order.
  in_deg = graph.in_degree.astype(np.int64)
  out_deg = graph.out_degree.astype(np.int64)
  chunks = np.maximum(1, np.maximum(-(-in_deg // width), -(-out_deg // width)))
  first_in_order = np.concatenate([[0], np.cumsum(chunks[order])[:-1]])
  needed_steps = int(chunks.sum())
  first_step = np.empty(n, np.int64)
  first_step[order] = first_in_order
  commit = first_step + chunks - 1
  if n_steps is None:
    n_steps = needed_steps if exact else n_pad
  n_steps = _round_up(max(int(n_steps), 1), BLOCK)
  if needed_steps > n_steps:
    raise PlacementError(
        f"The graph needs {needed_steps} simulator steps (nodes with more "
        f"than width={width} inputs or consumers take several) but "
        f"n_steps={n_steps}; pass n_steps>={needed_steps} or a larger width.")
  owner = np.repeat(order, chunks[order])                      # [needed]
  step_node = np.full(n_steps, n_pad, np.int64)
  step_node[:needed_steps] = owner
  chunk_index = np.zeros(n_steps, np.int64)
  chunk_index[:needed_steps] = np.arange(needed_steps) - first_step[owner]
  flags = np.zeros((n_steps, 4), np.int64)
  flags[:, 0] = 1
  flags[:needed_steps, 0] = chunk_index[:needed_steps] == 0
  flags[commit, 1] = 1
  kind = np.concatenate([graph.kind, np.full(n_pad - n + 1, -1)])
  flags[:, 2] = kind[step_node] == NODE_INPUT
  flags[:, 3] = (kind[step_node] == NODE_INPUT) | (
      kind[step_node] == NODE_OUTPUT)

  # Edges into chunk columns: inputs in producer order, consumers latest
  # position first (so a prefix OR finds the last consumer per device).
  src = graph.edge_src.astype(np.int64)
  dst = graph.edge_dst.astype(np.int64)
  pred_ptr, pred_edges = graph.pred_csr
  in_rank = np.empty(graph.n_edges, np.int64)
  in_rank[pred_edges] = np.arange(graph.n_edges) - np.repeat(
      pred_ptr[:-1], in_deg)
  by_consumer = np.lexsort((-pos[dst], src))
  succ_ptr, _ = graph.succ_csr
  out_rank = np.empty(graph.n_edges, np.int64)
  out_rank[by_consumer] = np.arange(graph.n_edges) - np.repeat(
      succ_ptr[:-1], out_deg)
  in_step, in_col = first_step[dst] + in_rank // width, in_rank % width
  out_step, out_col = first_step[src] + out_rank // width, out_rank % width

  # Arrival-table rows: a node's row is read by its consumers' chunk steps.
  last_read = np.full(n, -1, np.int64)
  np.maximum.at(last_read, src, in_step)
  slot, needed_slots = _assign_slots(commit, last_read)
  if n_slots is None:
    n_slots = _round_up(max(needed_slots, 1), 8) if exact else max(n_pad, 1)
  if needed_slots > n_slots:
    raise PlacementError(
        f"The graph needs {needed_slots} arrival-table rows but "
        f"n_slots={n_slots}; pass n_slots>={needed_slots}.")
  zero_row, sink_row = n_slots, n_slots + 1
  slot = np.where(slot < 0, sink_row, slot)
  step_write = np.full(n_steps, sink_row, np.int64)
  step_write[commit] = slot

  nbytes_send = send_bytes(graph)
  own_bytes = np.where(graph.kind == NODE_INPUT, 0, graph.out_bytes)
  step_sizes = np.zeros((n_steps, 2), np.float64)
  step_sizes[commit] = np.stack([own_bytes, nbytes_send], -1)
  # Bytes an input's copy frees after its last consumer on a device: the
  # producer's own copy (never, for parameters) or a received copy.
  pred_sizes = np.zeros((n_steps, width, 2), np.float64)
  pred_sizes[in_step, in_col] = np.stack([own_bytes, nbytes_send], -1)[src]
  pred_row = np.full((n_steps, width), zero_row, np.int64)
  pred_row[in_step, in_col] = slot[src]
  pred_edge = np.full((n_steps, width), n_steps * width, np.int64)
  pred_edge[in_step, in_col] = out_step * width + out_col
  succ_node = np.full((n_steps, width), n_pad, np.int64)
  succ_node[out_step, out_col] = dst

  send_s = transfer_seconds(graph, topology)                   # [N, D, D]
  step_times = np.zeros((n_steps, d + d * d), np.float64)
  step_times[commit, :d] = costs
  step_times[commit, d:] = send_s.reshape(n, d * d)

  commit_step = np.full(n_pad, n_steps, np.int64)
  commit_step[:n] = commit
  input_sizes = np.zeros(n_pad, np.float64)
  input_sizes[:n] = np.where(graph.kind == NODE_INPUT, graph.out_bytes, 0)
  _, group_of_device = np.unique(topology.compute_group, return_inverse=True)
  n_groups = int(group_of_device.max()) + 1
  i32 = lambda x: jnp.asarray(x, jnp.int32)
  return SimProblem(
      step_node=i32(step_node), step_flags=i32(flags),
      step_write=i32(step_write),
      step_sizes=jnp.asarray(step_sizes, jnp.float32),
      step_times=jnp.asarray(step_times, jnp.float32),
      chunk_index=i32(chunk_index), pred_row=i32(pred_row),
      pred_edge=i32(pred_edge),
      pred_sizes=jnp.asarray(pred_sizes, jnp.float32),
      succ_node=i32(succ_node), max_chain=i32(int(chunks.max()) - 1),
      commit_step=i32(commit_step),
      input_sizes=jnp.asarray(input_sizes, jnp.float32),
      group_of_device=i32(group_of_device.reshape(-1)),
      group_ids=i32(np.arange(n_groups)),
      memory_bytes=jnp.asarray(topology.memory_bytes, jnp.float32),
      slot_ids=i32(np.arange(n_slots + 2)))


def _round_up(x: int, multiple: int) -> int:
  return -(-x // multiple) * multiple


def _assign_slots(commit: np.ndarray, last_read: np.ndarray):
  """Greedy interval colouring of arrival-table rows.

  Node ``v`` writes its row at step ``commit[v]``; the row must survive until
  step ``last_read[v]`` (``-1``: never read, so no row). A row is reused by a
  node that writes strictly after the row's last read.

  Returns:
    ``(slot [N] int64, -1 where no row is needed; number of rows)``.
  """
  n = commit.shape[0]
  slot = np.full(n, -1, np.int64)
  free: list[int] = []
  busy: list[tuple[int, int]] = []   # (last read step, slot)
  n_rows = 0
  for v in np.argsort(commit, kind="stable"):
    if last_read[v] < 0:
      continue
    step = commit[v]
    while busy and busy[0][0] < step:
      heapq.heappush(free, heapq.heappop(busy)[1])
    if free:
      s = heapq.heappop(free)
    else:
      s = n_rows
      n_rows += 1
    slot[v] = s
    heapq.heappush(busy, (int(last_read[v]), s))
  return slot, n_rows


def flag_constraint_violations(graph: Graph, placements: np.ndarray,
                               result: SimResult) -> SimResult:
  """``result`` with ``constraint_violated`` set and such placements marked
  ``oom`` (infeasible), as :func:`gplace.simulate` returns it.

  Args:
    graph: the simulated graph, with or without device constraints.
    placements: ``[K, N]`` int32 validated placements.
    result: the simulator's result for them (``oom`` ``[K]``).

  Raises:
    PlacementError: the graph's allowed-device mask was written for
      another number of devices than ``result.peak_bytes`` has.
  """
  check_device_count(graph, int(np.shape(result.peak_bytes)[-1]),
                     "gplace.simulate")
  violated = constraints.violations(graph, placements)
  if not violated.any():
    return result._replace(constraint_violated=violated)
  return result._replace(oom=np.asarray(result.oom) | violated,
                         constraint_violated=violated)
