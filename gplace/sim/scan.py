"""Device half of the simulator: the scan that scores ``K`` placements.

:func:`simulate_problem` ``(problem, placements int32 [K, n_nodes])`` ->
:class:`SimResult` is pure (jit and vmap it in a training step); the ``K``
placements are the vector axis (``docs/design.md#making-it-fast``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gplace.errors import TopologyError
from gplace.sim.kernel import one_kernel
from gplace.sim.problem import BLOCK, SimProblem, SimResult


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
  single kernel on CPU, see :func:`one_kernel`) that carries the consumer
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
  _, (consumers, codes) = one_kernel(
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
  """``lax.scan(step, carry, xs)`` as blocks of ``BLOCK`` steps, each an
  inner scan. (Under XLA's per-op CPU runtime, slicing the whole ``[S, ...]``
  inputs inside one flat scan makes XLA count them as operands of the tiny
  fused ops and split those over threads, which costs far more than it
  saves; as one kernel, see :func:`one_kernel`, blocking costs nothing.)"""
  n_steps = jax.tree_util.tree_leaves(xs)[0].shape[0]
  blocks = jax.tree_util.tree_map(
      lambda x: x.reshape((n_steps // BLOCK, BLOCK) + x.shape[1:]), xs)
  body = lambda c, x: step(c, x, *aux)
  carry, ys = jax.lax.scan(
      lambda c, block: jax.lax.scan(body, c, block), carry, blocks)
  return carry, jax.tree_util.tree_map(
      lambda y: y.reshape((n_steps,) + y.shape[2:]), ys)



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
  carry, times = one_kernel(functools.partial(_blocked_scan, step), carry,
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

