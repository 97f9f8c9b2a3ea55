"""Per-placement schedules inside ``jit``: the list scheduler, vmapped.

:func:`dispatch_problem` ``(problem, placements [K, n], priority, *,
dynamic)`` -> :class:`SimResult` (jitted: ``simulate_dispatch``) gives each
placement its own order: the dynamic rule (a free group runs its arrived op
of highest priority) or the priority-respecting order, equal to the scan in
that order. Candidates sit in a ``W``-slot buffer (:func:`width_ladder`;
rank trees on CPU). ``gplace.simulate`` runs the compiled twin,
:mod:`gplace.sim.native`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import PlacementError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OUTPUT
from gplace.sim.problem import (SimResult, check_serial_links,
                                check_simulable, send_bytes,
                                transfer_seconds)
from gplace.sim.kernel import one_kernel_active, per_member_kernel
from gplace.sim.list_kernel import (GraphArrays, LaneArrays, init_state,
                                    run_steps)
from gplace.sim.tree_kernel import ranks, tree_size, tree_steps
from gplace.sim.topology import Topology, cost_table

#: Candidate buffer slots per placement (see :func:`dispatch_problem`).
BUFFER_WIDTH = 64

#: A batch whose buffer overflows is scheduled again with this many times
#: the slots (then again, up to one slot per node; see :func:`width_ladder`).
WIDTH_GROWTH = 8

#: Priority for padding nodes of a budget-padded problem: below any real
#: node's, so they never change a schedule.
PAD_PRIORITY = np.float32(-3e38)


class DispatchProblem(NamedTuple):
  """A graph, topology and costs as padded arrays for :func:`simulate_dispatch`.

  ``M = n_nodes + 1``: the extra last node is a sentinel (never dispatched,
  no bytes) that padding edge slots point to. Shapes depend only on the
  budget ``(n_nodes, n_edges)`` and the topology, so problems of one budget
  stack and vmap. Padding nodes (beyond the graph's) cost nothing, have no
  edges and no bytes.

  Attributes:
    costs: ``[M, D]`` float32 seconds (0 for inputs, padding, sentinel).
    send_s: ``[M, D, D]`` float32 seconds of one transfer of the node's
      output on each link.
    executed: ``[M]`` bool, the node runs on a compute group (not an input).
    succ_ptr: ``[M + 1]`` int32, consumers of ``v`` are
      ``succ_dst[succ_ptr[v]:succ_ptr[v + 1]]``.
    succ_dst: ``[max(E, 1)]`` int32 consumer per edge, by producer
      (padding: the sentinel).
    in_degree: ``[M]`` int32 producers per node (sentinel: 1, so it never
      becomes a candidate).
    edge_src, edge_dst: ``[E]`` int32 edges (padding: the sentinel).
    own_bytes: ``[M]`` float32 bytes of the node's own output copy.
    send_bytes: ``[M]`` float32 bytes of one transfer of its output.
    kind: ``[M]`` int32 node kind (sentinel and padding: ``NODE_INPUT``).
    group_of_device: ``[D]`` int32 compute group in ``0..G-1``.
    group_ids: ``[G]`` int32 ``arange(G)``.
    memory_bytes: ``[D]`` float32 device capacity.
  """

  costs: jax.Array
  send_s: jax.Array
  executed: jax.Array
  succ_ptr: jax.Array
  succ_dst: jax.Array
  in_degree: jax.Array
  edge_src: jax.Array
  edge_dst: jax.Array
  own_bytes: jax.Array
  send_bytes: jax.Array
  kind: jax.Array
  group_of_device: jax.Array
  group_ids: jax.Array
  memory_bytes: jax.Array


def make_dispatch_problem(graph: Graph, topology: Topology, costs=None,
                          n_nodes: int | None = None,
                          n_edges: int | None = None,
                          host: bool = False) -> DispatchProblem:
  """Builds the arrays of :func:`simulate_dispatch` (host-side numpy).

  Args:
    graph: the op graph (``N`` nodes, ``E`` edges).
    topology: the devices (at most 32).
    costs: optional ``[N, D]`` measured seconds; default the roofline.
    n_nodes, n_edges: budgets ``>= N, E`` (default: the graph's), so that
      problems of several graphs stack.
    host: keep the arrays in numpy (the same dtypes), for the host list
      scheduler (:mod:`gplace.sim.native`), which would copy them back.

  Returns:
    A :class:`DispatchProblem`.

  Raises:
    PlacementError: an empty graph or a budget below the graph's size.
    TopologyError: a bad cost table or more than 32 devices.
  """
  check_simulable(graph, topology)
  if not host:
    check_serial_links(topology, "gplace.sim.make_dispatch_problem")
  n, e, d = graph.n_nodes, graph.n_edges, topology.n_devices
  n_pad = n if n_nodes is None else int(n_nodes)
  e_pad = e if n_edges is None else int(n_edges)
  if n_pad < n or e_pad < e:
    raise PlacementError(
        f"The budget (n_nodes={n_pad}, n_edges={e_pad}) is smaller than the "
        f"graph ({n} nodes, {e} edges); pass larger budgets.")
  costs = cost_table(graph, topology, costs)
  m = n_pad + 1
  sentinel = n_pad
  kind = np.full(m, NODE_INPUT, np.int64)
  kind[:n] = graph.kind
  executed = kind != NODE_INPUT
  node_costs = np.zeros((m, d))
  node_costs[:n] = np.where(executed[:n, None], costs, 0.0)
  send_s = np.zeros((m, d, d))
  send_s[:n] = transfer_seconds(graph, topology)
  ptr = np.zeros(m + 1, np.int64)
  ptr[1:n + 1] = graph.succ_csr[0][1:]
  ptr[n + 1:] = e
  succ_dst = np.full(max(e_pad, 1), sentinel, np.int64)
  succ_dst[:e] = graph.edge_dst
  in_degree = np.zeros(m, np.int64)
  in_degree[:n] = graph.in_degree
  in_degree[sentinel] = 1
  edge_src = np.full(e_pad, sentinel, np.int64)
  edge_dst = np.full(e_pad, sentinel, np.int64)
  edge_src[:e], edge_dst[:e] = graph.edge_src, graph.edge_dst
  own = np.zeros(m)
  own[:n] = graph.out_bytes
  sent = np.zeros(m)
  sent[:n] = send_bytes(graph)
  _, group_of_device = np.unique(topology.compute_group, return_inverse=True)
  group_of_device = group_of_device.reshape(-1)
  xp = np if host else jnp
  i32 = lambda x: xp.asarray(x, np.int32)
  f32 = lambda x: xp.asarray(x, np.float32)
  return DispatchProblem(
      costs=f32(node_costs), send_s=f32(send_s),
      executed=xp.asarray(executed), succ_ptr=i32(ptr),
      succ_dst=i32(succ_dst), in_degree=i32(in_degree),
      edge_src=i32(edge_src), edge_dst=i32(edge_dst), own_bytes=f32(own),
      send_bytes=f32(sent), kind=i32(kind),
      group_of_device=i32(group_of_device),
      group_ids=i32(np.arange(int(group_of_device.max()) + 1)),
      memory_bytes=f32(topology.memory_bytes))


def peak_by_position(problem: DispatchProblem, placement: jax.Array,
                     position: jax.Array) -> jax.Array:
  """``[D]`` peak live bytes per device of one placement whose nodes run at
  dispatch ``position`` (``[M]``), in the simulator's memory model (own copy
  from its position to its last consumer on its device, or throughout for
  inputs, to the end for outputs; a received copy from the producer's
  position to its last consumer there)."""
  m = placement.shape[0]
  d = problem.group_of_device.shape[0]
  end = m - 2                                  # last position of a node
  src, dst = problem.edge_src, problem.edge_dst
  last = jnp.full((m * d,), -1, jnp.int32).at[
      src * d + placement[dst]].max(position[dst]).reshape(m, d)
  home = placement
  kind = problem.kind
  own_first = jnp.where(kind == NODE_INPUT, 0, position)
  own_last = jnp.where(
      (kind == NODE_INPUT) | (kind == NODE_OUTPUT), end,
      jnp.maximum(position, jnp.take_along_axis(last, home[:, None], 1)[:, 0]))
  remote = (last >= 0) & (jnp.arange(d)[None, :] != home[:, None])  # [M, D]
  width = m                                    # positions 0..end, then end+1
  rows = jnp.arange(d)[None, :] * width
  index = jnp.concatenate([
      home * width + own_first, home * width + own_last + 1,
      (rows + position[:, None]).reshape(-1),
      (rows + last + 1).reshape(-1)])
  sent = jnp.where(remote, problem.send_bytes[:, None], 0.0)
  delta = jnp.concatenate([problem.own_bytes, -problem.own_bytes,
                           sent.reshape(-1), -sent.reshape(-1)])
  live = jnp.zeros((d * width,), jnp.float32).at[index].add(delta)
  live = jnp.cumsum(live.reshape(d, width), axis=1)
  return jnp.maximum(jnp.max(live, axis=1), 0.0)


def width_ladder(width: int, n_nodes: int) -> tuple[int, ...]:
  """The candidate-buffer widths :func:`dispatch_problem` tries in turn:
  ``width``, then ``WIDTH_GROWTH`` times the last while that is below half
  of ``n_nodes``, then ``n_nodes`` (which cannot overflow). A step costs
  ``O(W)``, so a graph whose frontier outgrows the first buffer (the
  optimizer-update ops of a train step) is not scheduled at ``O(N)`` per
  step. E.g. ``width_ladder(64, 2560) == (64, 512, 2560)``."""
  n_nodes = max(1, int(n_nodes))
  widths = [max(1, min(int(width), n_nodes))]
  while widths[-1] < n_nodes:
    wider = widths[-1] * WIDTH_GROWTH
    widths.append(wider if 2 * wider < n_nodes else n_nodes)
  return tuple(widths)


def dispatch_problem(problem: DispatchProblem, placements: jax.Array,
                     priority: jax.Array, *, dynamic: bool,
                     width: int = BUFFER_WIDTH) -> SimResult:
  """List-schedules and simulates ``K`` placements (pure; jit and vmap).

  Args:
    problem: from :func:`make_dispatch_problem` (``n_nodes`` budget ``n``).
    placements: ``[K, n]`` int device per node (padding: any in range).
    priority: ``[K, n]`` or ``[n]`` float32, larger first (ties: lower id).
    dynamic: the dynamic rule; else the priority-respecting order.
    width: ``W``, candidate buffer slots per placement. If more executed
      nodes than that are ever candidates at once, the batch is scheduled
      again with a wider buffer (:func:`width_ladder`: ``8 W``, ...,
      ``n``; same results, slower), or, on CPU within
      :func:`gplace.sim.kernel.one_kernel_loops`, with the rank trees of
      :mod:`gplace.sim.tree_kernel`.

  Returns:
    :class:`SimResult` with ``start_s``, ``finish_s`` ``[K, n]`` and
    ``order`` ``[K, n]`` (the dispatch order, a topological order).
  """
  k, n = placements.shape
  placements = jnp.concatenate(
      [placements.astype(jnp.int32), jnp.zeros((k, 1), jnp.int32)], 1)
  priority = jnp.broadcast_to(jnp.asarray(priority, jnp.float32), (k, n))
  priority = jnp.concatenate(
      [priority, jnp.full((k, 1), -jnp.inf, jnp.float32)], 1)

  m = n + 1
  in_stream = ~problem.executed & (problem.in_degree == 0)
  lanes = LaneArrays(
      placement=placements, priority=priority,
      group=problem.group_of_device[placements],
      group_key=jnp.where(problem.executed[None],
                          problem.group_of_device[placements], -1),
      cost=problem.costs[jnp.arange(m)[None, :], placements],
      stream=jnp.argsort(jnp.where(in_stream[None], -priority, jnp.inf),
                         axis=1, stable=True).astype(jnp.int32),
      n_stream=jnp.full((k,), jnp.sum(in_stream, dtype=jnp.int32)))
  graph = GraphArrays(succ_ptr=problem.succ_ptr, succ_dst=problem.succ_dst,
                      executed=problem.executed, send_s=problem.send_s,
                      in_degree=problem.in_degree)
  n_groups = problem.group_ids.shape[0]

  def schedules(slots: int):
    state = run_steps(init_state(graph, lanes, n_groups, slots), lanes,
                      graph, dynamic=dynamic)
    return (state.start, state.finish, state.order, state.position,
            state.overflow)

  def buffer_ladder(_):
    result = schedules(ladder[0])
    for wider in ladder[1:]:
      result = jax.lax.cond(jnp.any(result[-1]),
                            lambda _, slots=wider: schedules(slots),
                            lambda same: same, result)
    return result

  def trees(_):
    """One native kernel per placement that never overflows, after the
    first (cheaper) buffer overflowed."""
    order_ranks = ranks(priority, tree_size(m))
    state = per_member_kernel(
        functools.partial(tree_steps, n_groups=n_groups, dynamic=dynamic),
        (lanes, order_ranks), (graph,))
    return (state.start, state.finish, state.order, state.position,
            jnp.zeros((k,), bool))

  def buffer_then_trees(_):
    first = schedules(ladder[0])
    return jax.lax.cond(jnp.any(first[-1]), trees, lambda same: same, first)

  ladder = width_ladder(width, n)
  if one_kernel_active() and len(ladder) > 1:
    result = jax.lax.platform_dependent(None, cpu=buffer_then_trees,
                                        default=buffer_ladder)
  else:
    result = buffer_ladder(None)
  start, finish, order, position, _ = result
  peak = jax.vmap(functools.partial(peak_by_position, problem))(
      placements, position)
  runtime = jnp.max(finish, axis=1)
  oom = jnp.any(peak > problem.memory_bytes[None, :], -1)
  return SimResult(runtime_s=runtime, peak_bytes=peak, oom=oom,
                   start_s=start[:, :n], finish_s=finish[:, :n], order=order)


simulate_dispatch = jax.jit(dispatch_problem,
                            static_argnames=("dynamic", "width"))
simulate_dispatch.__doc__ = dispatch_problem.__doc__
