"""The list scheduler of :mod:`gplace.sim.dispatch` as compiled host code
(numba): what :func:`gplace.simulate` runs for per-placement schedules.

Per compute group an *arrived* set over priority ranks
(:func:`priority_ranks`) and a *pending* heap keyed by ready time; the next
node is the least ``(t, group, -priority, id)``, as in the jitted one.
:func:`schedule_batch` schedules rows of a batch with the GIL released, in
the jitted scheduler's float32 operations, so schedules are bit-identical
to it (``docs/design.md#making-it-fast``; ``GPLACE_NATIVE=0``: the jitted one).
"""

from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple

import numpy as np

from gplace.graphs.graph import NODE_INPUT, NODE_OUTPUT
from gplace.sim.dispatch import DispatchProblem, make_dispatch_problem
from gplace.sim.problem import link_hold_seconds

#: Largest graph the bit sets hold: four levels of 64-bit words.
MAX_NODES = 64 ** 4

#: Whether numba is installed (then the compiled kernels are imported).
HAS_NUMBA = importlib.util.find_spec("numba") is not None
if HAS_NUMBA:  # else gplace.simulate keeps to the jitted scheduler
  from gplace.sim import native_kernels  # pylint: disable=g-import-not-at-top


def available() -> bool:
  """Whether :func:`gplace.simulate` uses this module: numba is installed
  and the environment variable ``GPLACE_NATIVE`` is not ``0``."""
  return HAS_NUMBA and os.environ.get("GPLACE_NATIVE", "1") != "0"


class NativeProblem(NamedTuple):
  """The arrays of a :class:`~gplace.sim.dispatch.DispatchProblem` as numpy
  (``M = N + 1`` nodes with the sentinel, ``D`` devices, ``E`` edges).
  Node and device indices are unsigned (as are the placements and ranks
  that :func:`schedule_batch` passes on): numba indexes with an unsigned
  integer without a test for a negative one, about a tenth of a step."""
  costs: np.ndarray            # [M, D] float32
  send_s: np.ndarray           # [M, D, D] float32
  hold_s: np.ndarray           # [M, D, D] float32 link busy per transfer
  executed: np.ndarray         # [M] bool
  succ_ptr: np.ndarray         # [M + 1] int32
  succ_dst: np.ndarray         # [E] uint32
  in_degree: np.ndarray        # [M] int32
  edge_src: np.ndarray         # [E] uint32
  edge_dst: np.ndarray         # [E] uint32
  own_bytes: np.ndarray        # [M] float32
  send_bytes: np.ndarray       # [M] float32
  is_input: np.ndarray         # [M] bool NODE_INPUT (sentinel included)
  is_output: np.ndarray        # [M] bool NODE_OUTPUT
  group_of_device: np.ndarray  # [D] uint32
  n_groups: int


def native_problem(problem: DispatchProblem,
                   hold_s: np.ndarray | None = None) -> NativeProblem:
  """``problem`` (unpadded: built with the graph's own budgets) as numpy.
  ``hold_s``: ``[N, D, D]`` seconds each transfer keeps its link busy
  (:func:`~gplace.sim.problem.link_hold_seconds`); default the whole
  transfer, ``send_s``."""
  as_np = lambda x, dtype: np.ascontiguousarray(np.asarray(x, dtype))
  kind = np.asarray(problem.kind)
  send_s = as_np(problem.send_s, np.float32)
  if hold_s is None:
    hold = send_s
  else:                                # the sentinel row holds nothing
    hold = np.zeros_like(send_s)
    hold[:len(hold_s)] = hold_s
  return NativeProblem(
      costs=as_np(problem.costs, np.float32),
      send_s=send_s, hold_s=hold,
      executed=as_np(problem.executed, np.bool_),
      succ_ptr=as_np(problem.succ_ptr, np.int32),
      succ_dst=as_np(problem.succ_dst, np.uint32),
      in_degree=as_np(problem.in_degree, np.int32),
      edge_src=as_np(problem.edge_src, np.uint32),
      edge_dst=as_np(problem.edge_dst, np.uint32),
      own_bytes=as_np(problem.own_bytes, np.float32),
      send_bytes=as_np(problem.send_bytes, np.float32),
      is_input=kind == NODE_INPUT, is_output=kind == NODE_OUTPUT,
      group_of_device=as_np(problem.group_of_device, np.uint32),
      n_groups=int(np.asarray(problem.group_ids).shape[0]))


def priority_ranks(priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Each node's place in ``(-priority, id)`` order, and its inverse.

  Args:
    priority: ``[N]``, ``[1, N]`` or ``[K, N]`` float32, larger first.

  Returns:
    ``(rank, node_of_rank)``, ``[R, N]`` int32 each (``R``: 1 or ``K``).
  """
  priority = np.atleast_2d(np.asarray(priority, np.float32))
  node_of_rank = np.argsort(-priority, axis=1, kind="stable").astype(
      np.int32)
  rank = np.empty_like(node_of_rank)
  np.put_along_axis(rank, node_of_rank,
                    np.arange(priority.shape[1], dtype=np.int32)[None], 1)
  return rank, node_of_rank


class Schedules(NamedTuple):
  """What :func:`schedule_batch` fills (``K`` placements, ``N`` nodes,
  ``D`` devices)."""
  order: np.ndarray     # [K, N] int32 dispatched node per step
  start: np.ndarray     # [K, N] float32
  finish: np.ndarray    # [K, N] float32
  peak: np.ndarray      # [K, D] float32


def empty_schedules(k: int, problem: NativeProblem) -> Schedules:
  """Output arrays for ``k`` placements of ``problem``."""
  n, d = problem.costs.shape[0] - 1, problem.costs.shape[1]
  return Schedules(order=np.empty((k, n), np.int32),
                   start=np.empty((k, n), np.float32),
                   finish=np.empty((k, n), np.float32),
                   peak=np.empty((k, d), np.float32))


def schedule_batch(problem: NativeProblem, placements: np.ndarray,
                   ranks: tuple[np.ndarray, np.ndarray], dynamic: bool,
                   out: Schedules, rows: slice) -> None:
  """List-schedules rows ``rows`` of ``placements`` into ``out``.

  Args:
    problem: from :func:`native_problem`.
    placements: ``[K, N]`` int32 device per node (C-contiguous).
    ranks: :func:`priority_ranks` of the ``[K, N]`` or ``[1, N]`` (shared)
      priorities.
    dynamic: the dynamic rule; else the priority-respecting order.
    out: from :func:`empty_schedules`, written in place.
    rows: the contiguous rows to schedule (runs without the GIL, so parts
      of a batch can run from threads of their own).
  """
  lo, hi, _ = rows.indices(placements.shape[0])
  p = problem
  # Non-negative int32 read as uint32 (no copy): see NativeProblem.
  unsigned = lambda x: np.ascontiguousarray(x, np.int32).view(np.uint32)
  rank, node_of_rank = map(unsigned, ranks)
  native_kernels.schedule_rows(
      lo, hi, unsigned(placements), rank, node_of_rank, p.costs, p.send_s,
      p.hold_s, p.executed, p.succ_ptr, p.succ_dst, p.in_degree, p.group_of_device,
      p.n_groups, bool(dynamic), p.edge_src, p.edge_dst, p.own_bytes,
      p.send_bytes, p.is_input, p.is_output, out.order, out.start,
      out.finish, out.peak)


def make_native_problem(graph, topology, costs=None) -> NativeProblem:
  """:func:`native_problem` of the graph's unpadded dispatch problem (a
  builder for :func:`gplace.sim.cache.cached_problem`)."""
  return native_problem(make_dispatch_problem(graph, topology, costs,
                                              host=True),
                        link_hold_seconds(graph, topology))
