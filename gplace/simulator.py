"""Fast simulated runtime and memory of placements: the RL reward.

Where it sits: a policy proposes ``K`` placements of a :class:`~gplace.Graph`
on a :class:`~gplace.Topology`; :func:`simulate_problem` scores all of them in
one jitted call, inside the training step. :func:`make_problem` is the
host-side (numpy) half that turns a graph, a topology and a cost table into a
padded :class:`SimProblem` of arrays; :func:`simulate` is the convenience
wrapper that validates its arguments, builds the problem and runs a cached
jitted simulation. ``gplace.sim_reference`` holds a plain-Python,
event-driven implementation of exactly the same model; tests check that the
two agree to 1e-6 relative (graphs of up to 40 nodes; see Precision).

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

Implementation: everything that depends on the placement but not on time
(which devices hold consumers of each node, which consumer is the last one
on its device) comes from a first ``lax.scan`` over nodes, as a device
bitmask per node and two-bit codes per consumer slot (no ``[steps, width,
K]`` temporaries); one second ``lax.scan`` over nodes in priority order then
carries device-group, link and arrival times, and live and peak bytes (memory
does not depend on time; it shares the pass only to share its masks), with
the ``K`` placements as the minor (vector) axis of every array. Nodes with
more than ``width`` inputs or consumers take several scan steps, so no array
grows with the largest degree. Rows of the arrival table are reused once
their last reader has run (``n_slots`` rows instead of one per node). On CPU
each scan is compiled as a single kernel (see ``_one_kernel``;
``ONE_KERNEL_LOOPS = False`` turns that off; only :func:`simulate` and code
traced inside ``one_kernel_loops()`` use it), which avoids XLA's per-op
launch overhead inside the loops.

Precision: float32 throughout. Times carry a relative rounding error that
grows like ``sqrt(path length) * 6e-8``; byte counts are exact while live
bytes stay below 2**24 bytes or are multiples of a large power of two (as
in ``random_dag``), otherwise within ~1e-7 relative per step.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import heapq
import os
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import PlacementError, TopologyError
from gplace.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.topology import Topology, validate_costs

DEFAULT_WIDTH = 8
_MAX_DEVICES = 32                # consumer sets are unsigned bitmasks
_BLOCK = 32                      # steps per inner scan; n_steps is a multiple


class SimResult(NamedTuple):
  """Simulated outcome of ``K`` placements.

  Attributes:
    runtime_s: ``[K]`` float32 seconds, the latest finish time.
    peak_bytes: ``[K, D]`` float32 peak live bytes per device.
    oom: ``[K]`` bool, peak above some device's ``memory_bytes``.
    start_s: ``[K, N]`` float32 start time of each node, or None.
    finish_s: ``[K, N]`` float32 finish time of each node, or None.
  """

  runtime_s: jax.Array
  peak_bytes: jax.Array
  oom: jax.Array
  start_s: Optional[jax.Array] = None
  finish_s: Optional[jax.Array] = None


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


# -- host side -----------------------------------------------------------------


def check_order(order, n_nodes: int, graph: Graph) -> np.ndarray:
  """Validates a priority order; returns it as ``[N]`` int64.

  Raises:
    PlacementError: not a permutation of the nodes, or not topological.
  """
  order = np.asarray(order)
  if order.shape != (n_nodes,) or not np.issubdtype(order.dtype, np.integer):
    raise PlacementError(
        f"order must be a 1-D integer permutation of the {n_nodes} nodes, got "
        f"shape {order.shape} and dtype {order.dtype}.")
  order = order.astype(np.int64)
  seen = np.zeros(n_nodes, bool)
  if order.size and (order.min() < 0 or order.max() >= n_nodes):
    raise PlacementError(f"order names a node outside 0..{n_nodes - 1}.")
  seen[order] = True
  if not seen.all():
    raise PlacementError("order is not a permutation: node "
                         f"{int(np.argmin(seen))} is missing.")
  pos = np.empty(n_nodes, np.int64)
  pos[order] = np.arange(n_nodes)
  bad = pos[graph.edge_src] >= pos[graph.edge_dst]
  if np.any(bad):
    e = int(np.argmax(bad))
    raise PlacementError(
        f"order is not a topological order: node {graph.edge_src[e]} feeds "
        f"node {graph.edge_dst[e]} but comes after it. Use a topological "
        "order (node ids are one).")
  return order


def send_bytes(graph: Graph) -> np.ndarray:
  """``[N]`` int64, bytes of one transfer of each node's output: the largest
  ``edge_bytes`` among its out-edges (0 for nodes without consumers)."""
  out = np.zeros(graph.n_nodes, np.int64)
  np.maximum.at(out, graph.edge_src, graph.edge_bytes)
  return out


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
  n = graph.n_nodes
  d = topology.n_devices
  if n == 0:
    raise PlacementError("The graph has no nodes; there is nothing to "
                         "simulate.")
  if d > _MAX_DEVICES:
    raise TopologyError(f"The simulator supports at most {_MAX_DEVICES} "
                        f"devices, the topology has {d}.")
  exact = n_nodes is None
  n_pad = n if exact else int(n_nodes)
  if n_pad < n:
    raise PlacementError(f"n_nodes={n_pad} is smaller than the graph's {n} "
                         "nodes; pass a larger node budget.")
  if width < 1:
    raise PlacementError(f"width must be at least 1, got {width}.")
  costs = (topology.op_costs(graph) if costs is None
           else validate_costs(costs, graph, topology))
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
  n_steps = _round_up(max(int(n_steps), 1), _BLOCK)
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

  eye = np.eye(d, dtype=bool)
  latency = np.where(eye, 0.0, topology.link_latency)
  inv_bw = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0,
                                             topology.link_bandwidth))
  send_s = latency[None] + nbytes_send.astype(np.float64)[:, None, None] * (
      inv_bw[None])                                             # [N, D, D]
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


# -- device side ---------------------------------------------------------------


class _Carry(NamedTuple):
  arrival: jax.Array      # [R, D, K] when each row's output is on each device
  group_free: jax.Array   # [G, K] finish of the group's latest node
  link_free: jax.Array    # [D, D, K] end of the link's latest transfer
  ready: jax.Array        # [K] inputs' arrival, accumulated over chunks
  live: jax.Array         # [D, K] live bytes (parameters excluded)
  peak: jax.Array         # [D, K] peak of ``live``
  resident: jax.Array     # [D, K] bytes of parameters (always live)
  freed: jax.Array        # [K] bytes of inputs last used, over chunks


class _StepInputs(NamedTuple):
  node_flags: jax.Array   # [4] int32, see SimProblem.step_flags
  write: jax.Array        # [] int32
  times: jax.Array        # [D + D * D] float32
  pred_row: jax.Array     # [W] int32
  device: jax.Array       # [K] int8 device of the node
  consumers: jax.Array    # [K] unsigned, bit d set: a consumer is on device d
  sizes: jax.Array        # [3] float32 own, transfer, input (resident) bytes
  code_row: jax.Array     # [W] int32 row of each input's code, see
  code_shift: jax.Array   # [W] int32 its bit shift; _code_address
  pred_sizes: jax.Array   # [W, 2] float32, see SimProblem.pred_sizes


class _ConsumerInputs(NamedTuple):
  first: jax.Array        # [] int32, first chunk of its node
  succ_node: jax.Array    # [W] int32, see SimProblem.succ_node
  device: jax.Array       # [K] int8 device of the node


def _consumer_sets(problem: SimProblem, placement_t: jax.Array,
                   step_device: jax.Array):
  """Which devices hold consumers, and which consumer is the last one of
  its device.

  Placement-dependent but time-independent: one pass over the steps (a
  single kernel on CPU, see :func:`_one_kernel`) that carries the consumer
  bits of the node's earlier chunks (which hold its later consumers, as
  consumers are sorted latest first). Nothing larger than its outputs is
  materialized.

  Returns:
    ``consumers [S, K]`` unsigned device bitmask of each node's consumers
    (complete on its last chunk step) and ``codes [S * n_words, K]`` uint16,
    two bits per consumer slot (slot ``j`` of step ``s`` is bits ``2 * (j %
    8)`` of row ``s * n_words + j // 8``, see :func:`_code_address`): 0 not
    the last consumer of the node on its device (or no consumer), 1 the last
    there (a received copy dies there), 2 the last there and that is the
    node's own device (its own copy dies there).
  """
  n_steps, width = problem.succ_node.shape
  n_words = -(-width // _CODES_PER_WORD)
  n_nodes = placement_t.shape[0] - 1
  bits_dtype = _bits_dtype(problem.group_of_device.shape[0])
  one = jnp.ones((), bits_dtype)

  def step(carried, xs: _ConsumerInputs, placement_t):
    carried = jnp.where(xs.first == 1, jnp.zeros_like(carried), carried)
    seen = carried
    words = [jnp.zeros(carried.shape, jnp.uint16) for _ in range(n_words)]
    for j in range(width):
      node = xs.succ_node[j]
      device = jax.lax.dynamic_index_in_dim(placement_t, node, 0,
                                            keepdims=False)     # [K] int8
      bit = jnp.left_shift(one, device.astype(bits_dtype))
      is_last = (node < n_nodes) & ((seen & bit) == 0)
      code = jnp.where(is_last, jnp.where(device == xs.device, 2, 1),
                       0).astype(jnp.uint16)
      word, shift = divmod(j, _CODES_PER_WORD)
      words[word] = words[word] | jnp.left_shift(code, jnp.uint16(2 * shift))
      seen = jnp.where(node < n_nodes, seen | bit, seen)
    return seen, (seen, jnp.stack(words))

  xs = _ConsumerInputs(first=problem.step_flags[:, 0],
                       succ_node=problem.succ_node, device=step_device)
  _, (consumers, codes) = _one_kernel(
      functools.partial(_blocked_scan, step), jnp.zeros(
          step_device.shape[1:], bits_dtype), xs, placement_t)
  return consumers, codes.reshape((n_steps * n_words,) + codes.shape[2:])


_CODES_PER_WORD = 8              # two-bit codes per uint16


def _code_address(pred_edge: jax.Array, width: int):
  """Row of the codes table and bit shift of each input edge's code (see
  :func:`_consumer_sets`); padding edges (``pred_edge = S * W``) get an
  out-of-range row, which a clamped read maps to some real code, harmless
  as padding edges free no bytes."""
  n_words = -(-width // _CODES_PER_WORD)
  step, slot = pred_edge // width, pred_edge % width
  word, shift = slot // _CODES_PER_WORD, slot % _CODES_PER_WORD
  return step * n_words + word, 2 * shift


def _rows(table: jax.Array, index: jax.Array) -> jax.Array:
  """``table[index]`` for in-range indices. (The default out-of-bounds
  "fill" mode makes XLA's CPU gather check every element: ~10x slower.)"""
  return jnp.take(table, index, axis=0, mode="clip")


def _bits_dtype(n_devices: int):
  """Smallest unsigned integer type with a bit per device."""
  for dtype in (jnp.uint8, jnp.uint16, jnp.uint32):
    if n_devices <= jnp.iinfo(dtype).bits:
      return dtype
  raise TopologyError(f"At most 32 devices are supported, got {n_devices}.")


def _sum_rows_axis1(x):
  total = x[:, 0]
  for j in range(1, x.shape[1]):
    total = total + x[:, j]
  return total


def _memory_step(carry: _Carry, xs: _StepInputs, codes: jax.Array,
                 on_dev: jax.Array, has_consumer: jax.Array,
                 need: jax.Array):
  """Live and peak bytes after one step: ``(live, peak, resident, freed)``.

  Memory is by priority position, not by time, so it needs nothing of the
  schedule; it shares the time loop's pass only to share its masks.
  Parameters are resident at every position, so they are summed separately
  (``resident``) and added to the peak of everything else at the end.
  """
  first, last, is_input, keep = (xs.node_flags[i] == 1 for i in range(4))
  mine = on_dev & last
  # Bytes of this chunk's input copies whose last consumer on that device
  # is this node (padding columns have no bytes).
  freed_here = None
  for w in range(xs.code_row.shape[0]):
    word = jax.lax.dynamic_index_in_dim(codes, xs.code_row[w], 0,
                                        keepdims=False)         # [K] uint16
    code = jnp.right_shift(word, xs.code_shift[w].astype(jnp.uint16)) & 3
    term = jnp.where(code == 2, xs.pred_sizes[w, 0],
                     jnp.where(code == 1, xs.pred_sizes[w, 1], 0.0))
    freed_here = term if freed_here is None else freed_here + term
  freed = jnp.where(first, 0.0, carry.freed) + freed_here       # [K]
  # Allocate, record the peak, then free.
  home_consumer = jnp.any(has_consumer & on_dev, 0)             # [K]
  release = freed + jnp.where(keep | home_consumer, 0.0, xs.sizes[0])
  live = (carry.live + jnp.where(need, xs.sizes[1], 0.0)
          + jnp.where(mine, xs.sizes[0], 0.0))
  peak = jnp.maximum(carry.peak, live)
  live = live - jnp.where(mine, release[None], 0.0)
  resident = carry.resident + jnp.where(mine & is_input, xs.sizes[2], 0.0)
  return live, peak, resident, freed


def _blocked_scan(step, carry, xs, *aux):
  """``lax.scan(step, carry, xs)`` as blocks of ``_BLOCK`` steps, each an
  inner scan. (Under XLA's per-op CPU runtime, slicing the whole ``[S, ...]``
  inputs inside one flat scan makes XLA count them as operands of the tiny
  fused ops and split those over threads, which costs far more than it
  saves; as one kernel, see :func:`_one_kernel`, blocking costs nothing.)"""
  n_steps = jax.tree_util.tree_leaves(xs)[0].shape[0]
  blocks = jax.tree_util.tree_map(
      lambda x: x.reshape((n_steps // _BLOCK, _BLOCK) + x.shape[1:]), xs)
  body = lambda c, x: step(c, x, *aux)
  carry, ys = jax.lax.scan(
      lambda c, block: jax.lax.scan(body, c, block), carry, blocks)
  return carry, jax.tree_util.tree_map(
      lambda y: y.reshape((n_steps,) + y.shape[2:]), ys)


try:
  import inspect as _inspect
  from jax.experimental.xla_metadata import set_xla_metadata as _set_metadata
  _HAS_OP_METADATA = "x" in _inspect.signature(_set_metadata).parameters
except (ImportError, TypeError, ValueError):      # older jax
  _HAS_OP_METADATA = False

#: Compile the simulator's sequential loops as single CPU kernels (see
#: :func:`_one_kernel`). Set to False to fall back to XLA's default per-op
#: CPU runtime (about 2x slower); it takes effect at the next trace. The
#: environment variable ``GPLACE_SIM_ONE_KERNEL=0`` sets it to False at import
#: (a safety valve: that compilation path is XLA-internal).
ONE_KERNEL_LOOPS = os.environ.get("GPLACE_SIM_ONE_KERNEL", "1") != "0"

# The one-kernel path is used only where it is traced inside
# ``one_kernel_loops()``: by :func:`simulate` (its own jit, whose program
# shapes are the tested ones) and the benchmark. The compilation path is
# XLA-internal and CHECK-failed on other loop shapes during development, so
# inside other programs (a user's jit, a training step under ``jax.pmap``)
# the plain scan runs; results are the same.
_ONE_KERNEL_SCOPE = contextvars.ContextVar("gplace_one_kernel", default=False)


@contextlib.contextmanager
def one_kernel_loops(enabled: bool = True):
  """Within this context, traces of :func:`simulate_problem` compile their
  loops as single CPU kernels (see :func:`_one_kernel`); outside it they use
  the plain ``lax.scan`` (same results)."""
  token = _ONE_KERNEL_SCOPE.set(enabled)
  try:
    yield
  finally:
    _ONE_KERNEL_SCOPE.reset(token)


def _one_kernel(fn, *args):
  """``fn(*args)``; on CPU, compiled as one kernel. ``fn`` must not close
  over traced values (pass them in ``args``).

  XLA's CPU runtime runs every fused op of a loop body as a separate kernel
  launch, and the simulator's loops run ~20 tiny ops per step, so launch
  overhead and poorly vectorized small fusions dominate. XLA compiles a
  ``call`` tagged ``xla_cpu_small_call`` (and kept from inlining) as one
  function with native loops, as it does for small while loops on its own;
  here the loop is wrapped that way. Other platforms, older jax, and
  ``ONE_KERNEL_LOOPS = False`` run ``fn`` unchanged: same results.

  Under ``vmap`` on CPU the batch runs one member at a time (``lax.map``),
  each as one kernel: a batched loop would write per-member dynamic rows
  (scatters), which that compilation path does not support.
  """
  if not (_HAS_OP_METADATA and ONE_KERNEL_LOOPS and _ONE_KERNEL_SCOPE.get()):
    return fn(*args)

  def one_kernel(*args):
    return _set_metadata(jax.jit(fn)(*args), xla_cpu_small_call="true",
                         inlineable="false")

  @jax.custom_batching.custom_vmap
  def run(*args):
    return jax.lax.platform_dependent(*args, cpu=one_kernel, default=fn)

  @run.def_vmap
  def run_batched(axis_size, in_batched, *args):
    del axis_size
    leaves, tree = jax.tree_util.tree_flatten(args)
    batched = jax.tree_util.tree_leaves(in_batched)

    def mapped(*args):
      leaves = jax.tree_util.tree_leaves(args)

      def member(values):
        values = iter(values)
        return run(*jax.tree_util.tree_unflatten(
            tree, [next(values) if b else x for x, b in zip(leaves, batched)]))

      return jax.lax.map(member, [x for x, b in zip(leaves, batched) if b])

    def vmapped(*args):
      in_axes = jax.tree_util.tree_map(lambda b: 0 if b else None,
                                       tuple(in_batched))
      return jax.vmap(fn, in_axes=in_axes)(*args)

    out = jax.lax.platform_dependent(*args, cpu=mapped, default=vmapped)
    return out, jax.tree_util.tree_map(lambda _: True, out)

  return run(*args)


def _materialize(value):
  """``value`` (non-negative; a pytree), computed once: XLA does not fuse a
  reduction into its users, so ``max`` over ``[value, 0]`` stays one loop
  instead of being recomputed inside every consumer; it is exact for
  ``value >= 0``."""
  return jax.tree_util.tree_map(
      lambda x: jnp.max(jnp.stack([x, jnp.zeros_like(x)]), axis=0), value)


def simulate_problem(problem: SimProblem, placements: jax.Array, *,
                     return_schedule: bool = False) -> SimResult:
  """Simulates ``K`` placements of one problem (pure; jit and vmap freely).

  Args:
    problem: from :func:`make_problem`.
    placements: ``[K, n_nodes]`` int device per node (padding nodes: any
      value in range). Not validated here; see :func:`simulate`.
    return_schedule: also return per-node start and finish times.

  Returns:
    A :class:`SimResult` with leading dimension ``K``.
  """
  n_steps, width = problem.pred_row.shape
  d = problem.group_of_device.shape[0]
  g = problem.group_ids.shape[0]
  n_rows = problem.slot_ids.shape[0]
  k = placements.shape[0]
  # [n_nodes + 1, K] int8; the extra row is the padding node.
  placement_t = jnp.concatenate(
      [placements.T.astype(jnp.int8), jnp.zeros((1, k), jnp.int8)], 0)
  step_device = _rows(placement_t, problem.step_node)           # [S, K]
  consumers, codes = _consumer_sets(problem, placement_t, step_device)

  zeros = jnp.zeros((d, k), jnp.float32)
  carry = _Carry(
      arrival=jnp.zeros((n_rows, d, k), jnp.float32),
      group_free=jnp.zeros((g, k), jnp.float32),
      link_free=jnp.zeros((d, d, k), jnp.float32),
      ready=jnp.zeros((k,), jnp.float32),
      live=zeros, peak=zeros, resident=zeros,
      freed=jnp.zeros((k,), jnp.float32))

  def step(carry: _Carry, xs: _StepInputs, group_of_device, group_ids,
           codes):
    first, last, is_input = (xs.node_flags[i] == 1 for i in range(3))
    devices = jnp.arange(d, dtype=jnp.int32)[:, None]           # [D, 1]
    dev = xs.device.astype(jnp.int32)                           # [K]
    on_dev = dev[None, :] == devices                            # [D, K]
    cost_row, send_s = xs.times[:d], xs.times[d:]

    # Reads pick one row per lane with vectorized selects (XLA's gathers
    # are scalar loops). Padding columns read the always-zero row.
    # The latest input per device, then one pick (max is exact, so this
    # equals the max of the per-input picks).
    latest = None
    for w in range(width):
      row = jax.lax.dynamic_index_in_dim(carry.arrival, xs.pred_row[w], 0,
                                         keepdims=False)        # [D, K]
      latest = row if latest is None else jnp.maximum(latest, row)
    ready = jnp.maximum(jnp.where(first, 0.0, carry.ready),
                        _pick(on_dev, latest))

    # Run the node (meaningful on its last chunk only).
    group = _rows(group_of_device, dev)                         # [K]
    on_group = group[None, :] == group_ids[:, None]             # [G, K]
    start = jnp.where(is_input, 0.0, jnp.maximum(
        ready, _pick(on_group, carry.group_free)))
    cost = _pick(on_dev, jnp.broadcast_to(cost_row[:, None], (d, k)))
    finish = _materialize(jnp.where(is_input, 0.0, start + cost))
    group_free = jnp.where(on_group & (last & ~is_input), finish[None],
                           carry.group_free)

    # Eager transfers to every other device holding a consumer: the link
    # (p[v], t) of lane k starts at max(finish, its previous end). Computed
    # for every source row and kept only on the node's own row, which needs
    # no per-lane gather or scatter.
    has_consumer = (jnp.right_shift(xs.consumers[None, :], devices.astype(
        xs.consumers.dtype)) & 1) == 1
    need = has_consumer & ~on_dev & last                        # [D, K]
    src = on_dev[:, None]                                       # [D, 1, K]
    sent = (jnp.maximum(finish[None, None], carry.link_free)
            + send_s.reshape(d, d, 1))                          # [D, D, K]
    link_free = jnp.where(src & need[None], sent, carry.link_free)
    arrive = _pick(src, sent)                                   # [D, K]
    arrival_table = jax.lax.dynamic_update_slice(
        carry.arrival, jnp.where(on_dev, finish[None], arrive)[None],
        (xs.write, 0, 0))

    live, peak, resident, freed = _memory_step(carry, xs, codes, on_dev,
                                               has_consumer, need)
    new = _Carry(arrival=arrival_table, group_free=group_free,
                 link_free=link_free, ready=ready, live=live, peak=peak,
                 resident=resident, freed=freed)
    out = jnp.stack([start, finish]) if return_schedule else None
    return new, out

  inputs = jnp.take(problem.input_sizes, problem.step_node, mode="clip")
  sizes = jnp.concatenate([problem.step_sizes, inputs[:, None]], 1)
  code_row, code_shift = _code_address(problem.pred_edge, width)
  xs = _StepInputs(
      node_flags=problem.step_flags, write=problem.step_write,
      times=problem.step_times, pred_row=problem.pred_row,
      device=step_device, consumers=consumers, sizes=sizes,
      code_row=code_row, code_shift=code_shift,
      pred_sizes=problem.pred_sizes)
  carry, times = _one_kernel(functools.partial(_blocked_scan, step), carry,
                             xs, problem.group_of_device, problem.group_ids,
                             codes)
  runtime = jnp.max(carry.group_free, 0)
  peak = (carry.resident + carry.peak).T                        # [K, D]
  oom = jnp.any(peak > problem.memory_bytes[None, :], -1)
  start = finish = None
  if return_schedule:
    times = jnp.concatenate([times, jnp.zeros((1, 2, k), times.dtype)], 0)
    per_node = _rows(times, problem.commit_step)                # [N, 2, K]
    start, finish = per_node[:, 0].T, per_node[:, 1].T
  return SimResult(runtime_s=runtime, peak_bytes=peak, oom=oom,
                   start_s=start, finish_s=finish)


def _pick(mask, x):
  """The row of ``x`` that ``mask`` selects, per lane; ``mask`` must select
  exactly one row in every lane (then this equals ``sum(where(mask, x, 0),
  0)`` exactly, with one select per row instead of a select and an add)."""
  mask = jnp.broadcast_to(mask, x.shape)
  total = x[-1]
  for row in range(x.shape[0] - 2, -1, -1):
    total = jnp.where(mask[row], x[row], total)
  return total


def _cpu_compiler_options() -> dict[str, str]:
  """Per-compile XLA options for the simulator on CPUs with AVX-512.

  The one-kernel loops vectorize over the K placements; XLA's CPU backend
  emits 256-bit vectors by default, and preferring 512-bit ones runs a
  10k-node, K=256 call about 1.5x faster on AVX-512 machines with
  bit-identical results (measured: ``experiments/bench_simulator.py``). The
  option is passed to this module's own ``jax.jit`` only (never through
  ``XLA_FLAGS``, which would change the user's whole program); callers who
  jit :func:`simulate_problem` themselves can pass
  ``compiler_options=COMPILER_OPTIONS`` too.
  """
  try:
    with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as cpuinfo:
      has_avx512 = " avx512f" in cpuinfo.read()
  except OSError:
    has_avx512 = False
  return {"xla_cpu_prefer_vector_width": "512"} if has_avx512 else {}


#: XLA options ``simulate`` compiles with (see :func:`_cpu_compiler_options`).
COMPILER_OPTIONS = _cpu_compiler_options()

_simulate_jit = jax.jit(simulate_problem, static_argnames=("return_schedule",),
                        compiler_options=COMPILER_OPTIONS or None)


# -- public wrapper ------------------------------------------------------------


def check_placements(placements, graph: Graph, topology: Topology
                     ) -> np.ndarray:
  """Validates placements; returns them as ``[K, N]`` int32.

  Raises:
    PlacementError: wrong rank or length, non-integer, device out of range.
  """
  if not isinstance(topology, Topology):
    raise TopologyError(f"topology must be a gplace.Topology, got "
                        f"{type(topology).__name__}.")
  if topology.n_devices < 1:
    raise TopologyError("The topology has no devices; placements need at "
                        "least one.")
  array = np.asarray(placements)
  if array.ndim not in (1, 2):
    raise PlacementError(
        f"placements must be [n_nodes] or [K, n_nodes], got shape "
        f"{array.shape}.")
  if array.shape[-1] != graph.n_nodes:
    raise PlacementError(
        f"A placement has length {array.shape[-1]} but the graph has "
        f"{graph.n_nodes} nodes; give one device index per node.")
  if array.size and not np.issubdtype(array.dtype, np.integer):
    if not (np.issubdtype(array.dtype, np.floating)
            and np.all(np.isfinite(array)) and np.all(array == np.round(array))):
      raise PlacementError(
          f"placements must hold integer device indices, got dtype "
          f"{array.dtype}.")
  array = np.atleast_2d(array).astype(np.int64)
  bad = (array < 0) | (array >= topology.n_devices)
  if np.any(bad):
    row, node = np.argwhere(bad)[0]
    raise PlacementError(
        f"Placement {row} puts node {node} on device {array[row, node]}, but "
        f"the topology {topology.name!r} has devices 0..{topology.n_devices - 1}"
        f" ({', '.join(topology.device_names)}).")
  return array.astype(np.int32)


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
    PlacementError: bad placements or order.
    TopologyError: bad topology or cost table.
  """
  single = np.ndim(placements) == 1
  array = check_placements(placements, graph, topology)
  problem = make_problem(graph, topology, costs=costs, order=order)
  with one_kernel_loops():
    result = _simulate_jit(problem, jnp.asarray(array),
                           return_schedule=return_schedule)
  if single:
    result = jax.tree_util.tree_map(lambda x: x[0], result)
  return result
