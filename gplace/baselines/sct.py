"""Baechi's m-SCT: the favourite-child LP (scipy HiGHS), solved in windows on
big graphs, then earliest-task-first scheduling with those hints.

Host-side numpy and scipy; nothing here is traced."""

from __future__ import annotations

import time

import numpy as np

from gplace.graphs.graph import NODE_INPUT
from gplace.baselines.common import placer_from_planner
from gplace.sim.list_scheduler import Plan, PlanningProblem
from gplace.sim.priority import mean_transfer_s
from gplace.baselines.list_scheduling import etf_schedule, schedule_ranks
from gplace.baselines.scheduler import plan_within_memory

# The LP of m-SCT is solved whole up to this many scheduled nodes; larger
# graphs are cut into windows of consecutive node ids of this size, one LP
# each, until SCT_LP_TIME_BUDGET_S is spent; later windows use the greedy
# favourite-child rule (see favourite_parents).
SCT_LP_MAX_NODES = 2000
SCT_LP_TIME_BUDGET_S = 4.0


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



def favourite_parents(problem: PlanningProblem, devices) -> np.ndarray:
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
  comm = mean_transfer_s(problem.topology, devices,
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


def plan_m_sct(problem: PlanningProblem) -> Plan:
  devices = problem.allowed
  others = np.setdiff1d(np.arange(problem.topology.n_devices), devices)
  favourite = favourite_parents(problem, devices)
  rank = schedule_ranks(problem, devices)
  return plan_within_memory(
      lambda p: etf_schedule(p, devices, rank, favourite, spill=others),
      problem, devices)


m_sct = placer_from_planner(
    plan_m_sct, "m_sct", """Baechi's m-SCT: favourite-child LP, then m-ETF following the hints.

  See :func:`favourite_parents` for the LP (and its size cap) and
  :func:`etf_schedule` for how the hints are used. Uses the GPUs only (all
  devices if there is none): SCT assumes identical processors, and on a CPU
  plus GPUs mix the hints drag whole favourite-child chains onto the CPU
  whenever one of their ops landed there (2x slower steps on Inception-V3 and
  BERT at paper size). The LP averages op and transfer times over the GPUs.
  :func:`plan` also returns the planned op order.

  Returns:
    ``[N]`` int32 placement.
  """)


# -- registry ------------------------------------------------------------------
