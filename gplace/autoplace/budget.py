"""How :func:`gplace.optimize` divides its time budget between its phases.

Which phases ``method="auto"`` runs and for how long: the solver's graph
sizes, the searches', the solver's and LNS's shares, the stall rule that
hands a stalled phase's time to the next, and the shares of measuring,
profiling and the fusion search. :mod:`gplace.autoplace.optimizer` reads
these at call time (tests patch them here).
"""

from __future__ import annotations

import math
from typing import Optional

from gplace.autoplace import candidates as candidates_lib
from gplace.search import moves

# method="solver" refuses larger graphs (CP-SAT's model grows with N^2
# ordering decisions per device; above this it rarely proves anything in a
# budget of seconds to minutes).
SOLVER_MAX_NODES = 300
# method="auto" runs the solver on graphs up to this size, when at least
# MIN_SOLVER_S seconds of the budget are left after the search.
AUTO_SOLVER_MAX_NODES = 120
MIN_SOLVER_S = 5.0
# ... and on graphs up to SOLVER_MAX_NODES when the baselines show memory
# pressure (MEMORY_PRESSURE of them infeasible), or when the best found is
# more than AUTO_SOLVER_GAP above the lower bound after the search.
MEMORY_PRESSURE = 0.25
AUTO_SOLVER_GAP = 0.10
# Share of the time left after the baselines that "auto" gives the search
# when the solver comes next.
SEARCH_SHARE = 0.5
# The search gets at least this share of the budget (and MIN_SEARCH_S
# seconds), even when the baselines (and compiling the simulator) took all of
# it.
SEARCH_FLOOR = 0.1
MIN_SEARCH_S = 0.5
# method="auto" then runs large-neighbourhood search (gplace.solvers.lns)
# from the best so far (its placement in its order) with what is left, when
# at least MIN_LNS_S seconds are and the exact solver did not prove its
# answer optimal (it did not run: a graph above its size; or it ran out of
# time). With LNS to follow, the solver gets SOLVER_SHARE of what is left.
MIN_LNS_S = 3.0
SOLVER_SHARE = 0.5
# Above AUTO_SOLVER_MAX_NODES the solver first gets SOLVER_PROBE_SHARE of
# its time (at least MIN_SOLVER_S) and the rest only when its answer beats
# the best so far in the simulator (else LNS gets it): its model's links
# carry any number of transfers at once, and under memory pressure its
# answers were no faster. From "auto"'s state after its searches at 60 s
# (42 s left; seeds 0-2): resnet50 tiny on 1 CPU + 4 acc. 0.856 ms mean
# with the solver's half, 0.829 with LNS alone; bert tiny 1.597 either way.
SOLVER_PROBE_SHARE = 0.2
# Without the solver, LNS gets this share of the time after the baselines
# (the searches the rest), and LNS_SHARE_LARGE of it on graphs of at least
# LNS_LARGE_MIN_NODES ops. An annealing move costs a simulation of the whole
# graph, an LNS window a model of its span, so the larger the graph, the
# more a second of LNS is worth against one of annealing. Measured at 60 s
# with two LNS threads (experiments/results/optimality/
# lns_share_2026-12-02): on 1,103-op gnmt2, 1 CPU + 2 / 4 acc., a share
# of 0.25 left 4.0% / 5.7% to the best 30-minute runs, 0.5 3.3% / 3.5%,
# 0.75 3.3% / 3.0%; on the
# 259-300-op bert and resnet50 tiny graphs 0.75 was 0-1.1% slower than
# 0.25; on the paper-size wavenet2 and resnet50 at 300 s, 0.75 was as fast
# or 0.9% faster than 0.25 had been with one thread.
LNS_SHARE = 0.25
LNS_SHARE_LARGE = 0.75
LNS_LARGE_MIN_NODES = 1_000
# ... and LNS_SHARE_PRESSURE of it there when at least LNS_PRESSURE of the
# baselines run out of memory: the searches' single-op moves then mostly
# overfill a device, and LNS's windows keep memory feasible. On gnmt2 small
# at 60 s (2 and 3 of the ten baselines out of memory on 1 CPU + 2 / 4
# acc.), 15 seeds of 0.9 against 10 of 0.75: a mean of 7.164 ms against
# 7.205 and 6.140 against 6.247, 1 run in 15 near 6.55 ms on 4 acc. against
# 3 in 10 (experiments/results/optimality/gnmt2_60s_share_2026-12-04,
# memory4acc_60s_share_seeds10_2026-12-04); five more seeds with this rule
# (gnmt2_60s_pressure_share_2026-12-04): 7.092-7.207 and 6.026-6.195 ms.
LNS_SHARE_PRESSURE = 0.9
LNS_PRESSURE = 0.1
# On those graphs, when GO did not run, the searches' best (single-op moves)
# is not always the better start for LNS: on 1,103-op gnmt2, LNS alone from
# HEFT for 31 s (two threads) reached 7.24 / 7.23 ms on 1 CPU + 2 acc.
# (seeds 0 / 1), ahead of optimize at 60 s, whose LNS ran 44 s from the
# searches' 8.23 ms (7.30); on 1 CPU + 4 acc. it reached 6.66 / 6.16, behind
# optimize's 6.08. So LNS races a chain from each (one thread each) for
# LNS_RACE_SHARE of its time, then goes on from the faster in two threads
# (60 s, seeds 0-1, four runs per graph: a mean of +1.9% over the best
# 30-minute runs against +2.3% without, within the runs' spread;
# experiments/results/optimality/gnmt2_60s_race_2026-12-03). Half, not a
# third: the plan's chain starts behind and needs the time to show its
# basin. From one captured state of gnmt2 small (LNS and the order search,
# 53 s): on 1 CPU + 2 acc. the plan's chain led after a half in 6 of 8 runs
# (7.11-7.20 ms after it; the other two 7.33-7.39) and never after a third
# (2 of 4 ended near 7.33); on 4 acc. 5.92-5.95 against 5.92-5.97.
LNS_FROM_PLAN_TOO = True
LNS_RACE_SHARE = 1 / 2
# On those graphs under memory pressure (LNS_PRESSURE), when gplace's
# critical-chain plan is ahead of the best classical plan, "auto" first runs
# LNS from the classical plan (two threads) for at most PLAN_PROBE_SHARE of
# the time after the baselines, until it beats the critical-chain plan. If
# it does, its basin is the one LNS descends: "auto" goes on from it with
# the rest and no searches or race; if not, that chain is the race's plan.
# LNS from the searches' answer can stall on a device it overloads: on
# gnmt2 small, 1 CPU + 2 acc., the joint annealing's 7.609 ms put 7.43 ms
# of work on the fast accelerator and LNS from it stopped near 7.4, while
# LNS alone from HEFT for 55 s reached 7.031-7.159 (experiments/results/
# lns_window/limits55_gnmt2_2acc_2026-12-06); on 4 acc. the critical chain
# (6.348 ms against HEFT's 7.273) is what LNS needs to start near. Five
# seeds at 60 s (optimality/gnmt2_60s_plan_probe_2026-12-06): 7.067-7.157
# ms, mean 7.118, against 7.12-7.305 (7.186) without; on 4 acc., where the
# probe never won, 5.896-5.967 (5.935) against 5.879-5.934 (5.906).
PLAN_PROBE = True
PLAN_PROBE_SHARE = 0.15
# Below LNS_LARGE_MIN_NODES ops the race's plan is the fastest plan no
# search made, gplace's critical-chain plans included (LNS_FROM_CHAIN_TOO):
# there the searches' single-op moves can lead LNS into a basin it does
# not leave, where the plan they began from does not. On 300-op resnet50
# tiny (1 CPU + 4 acc.; LNS and the order search from optimize's state
# after its searches, 40 s, seeds 0-2; two states, from optimize's seeds 0
# and 1): 0.8341 / 0.8243 / 0.8441 and 0.8339 / 0.8243 / 0.8441 ms with the
# race from the critical chain (0.9038), against 0.8339 / 0.8456 / 0.8401
# and 0.8724 on all three without (LNS stuck at 0.8728 from the searches'
# 0.8961). A race from the best classical plan (HEFT, 0.9518) reached
# 0.8695 on four seeds of 4 there.
LNS_FROM_CHAIN_TOO = True
# "auto" ends LNS's time with annealing over placements in the order the
# fastest so far runs in (LNS's answer's), for ORDER_SEARCH_SHARE of it,
# when at least MIN_ORDER_SEARCH_S seconds are left for it. By then LNS
# gains little per second: from 300 s answers, 45 s more of it gained
# 0.08% on rnnlm2 and 0.27% on transformer_xl4, 45 s of this search 1.3-1.5%
# and 1.1% (paper train steps, 1 CPU + 4 GPUs). The paper suite at 300 s:
# 15.24% / 15.21% faster than the best classical plan in two runs, against
# 14.71-15.03% in six before (experiments/results/optimality/
# paper_order_search_2026-12-06); gnmt4 (30k ops) alone slower, by 0.4-0.8%.
ORDER_SEARCH_SHARE = 0.25
MIN_ORDER_SEARCH_S = 1.0
# ... nor when the best is within this relative margin of the proven bound
# (the simulator's float32 error): nothing is left to find.
AT_BOUND = 1e-5
# "auto" weighs gplace's critical-chain plan (gplace.baselines.
# critical_chain) as a start for its searches; under memory pressure (at
# least LNS_PRESSURE of the baselines out of memory) only with
# CHAIN_PLAN_UNDER_PRESSURE. There, on gnmt2 small at 60 s (five seeds,
# experiments/results/optimality/gnmt2_60s_multichain_2026-12-05), it gave
# 5.927-5.993 ms on 1 CPU + 4 acc. against 6.026-6.195 without, and
# 7.159-7.251 on 1 CPU + 2 acc. against 7.092-7.207; hedging a search from
# the one-chain plan with one from the best baseline (each for half) did
# no better on 2 acc. (7.156-7.409).
CHAIN_PLAN = True
CHAIN_PLAN_UNDER_PRESSURE = True
# The searches' share of block moves (gplace.search.moves.block), and none
# under memory pressure (see memory_pressure), where a span sent to one
# device mostly overfills it: gnmt2 small on 1 CPU + 4 acc. (under
# pressure), optimize at 60 s, seed 0: 6.66 ms with blocks against 6.10
# without; the paper-size suite (no pressure) at 300 s: 13.9% faster than
# the best classical plan with them, 12.9% before.
BLOCK_SHARE = moves.BLOCK_SHARE
BLOCK_SHARE_UNDER_PRESSURE = 0.0
# The evidence rule that re-allocates "auto"'s budget: a phase (annealing,
# the joint search; LNS when fine-tuning follows it) stops once its best
# has not improved for STALL_SHARE of the budget (at least MIN_STALL_S
# seconds), and the time it gives back goes to the phases after it. LNS,
# the last search, otherwise keeps the rest of the budget.
STALL_SHARE = 0.1
MIN_STALL_S = 2.0
# method="auto" gives this share of its search to placement and schedule
# together (gplace.search.joint), after a search over placements.
JOINT_SHARE = 0.5
# On graphs of at least CHAIN_SEARCH_MIN_NODES ops whose op chains (an op
# with one consumer joins it: gplace.coarsen's "colocation" rule) number at
# most CHAIN_SEARCH_MAX_SHARE of the ops, "auto"'s placement search first
# moves whole chains for CHAIN_SEARCH_SHARE of its time, then single ops
# from there. A single op moved away from its only consumer always pays a
# transfer, so on big graphs most single moves are lost (resnet50's paper
# train step, 5,431 ops in 1,645 chains, annealing from METIS for 20,000
# evaluations: -2.3% over ops, -6.2% over chains then ops;
# experiments/chain_search.py).
CHAIN_SEARCH_MIN_NODES = 2_000
CHAIN_SEARCH_MAX_SHARE = 0.7
CHAIN_SEARCH_SHARE = 0.5
# On graphs of at least AUTO_POLICY_MIN_NODES ops, with at least
# AUTO_POLICY_MIN_S seconds of budget, method="auto" trains GO on the graph
# (the group-level policy, from scratch) for AUTO_POLICY_SHARE of what the
# baselines leave, then searches from the best so far. There a search over
# ops moves slowly (gnmt4, 30k ops: -2.4% for all of optimize in 300 s;
# GO trained for the same 300 s: -14.6%), and at 300 s the phase paid on
# rnnlm2 (2.5k ops: -17.8% against -11.6% without it) and bert (7.7k ops:
# -8.5% against -7.1%), not on wavenet2 (3.8k ops: -4.0% against -5.3%),
# where GO stays behind the baseline: hence AUTO_POLICY_PROBE_SHARE
# (experiments/results/optimality, docs/results.md "Gap to optimal").
AUTO_POLICY_MIN_NODES = 2_500
AUTO_POLICY_MIN_S = 120.0
AUTO_POLICY_SHARE = 0.7
# Evidence for giving GO's time back: when after this share of it (at most
# AUTO_POLICY_PROBE_MAX_S seconds) GO's best sample is not faster than the
# best so far (the baselines and the critical-chain plan), training stops
# and the search gets the rest. By 40 s of training, GO's best sample on
# the paper-size train steps is within 0.6-2.3 points of where 215 s take
# it (experiments/results/optimality/go_curve_2026-12-03), so a GO behind
# at 40 s stays behind: on bert, resnet50 and inception_v3 the
# critical-chain plans are 3-7 points ahead of it there.
AUTO_POLICY_PROBE_SHARE = 0.4
AUTO_POLICY_PROBE_MAX_S = 40.0
# ... and when its best sample stalls: not AUTO_POLICY_MIN_GAIN (relative)
# faster than it was AUTO_POLICY_STALL_SHARE of its time before. GO's
# curve flattens long before its time is spent: trained for 215 s
# (experiments/results/optimality/go_curve_2026-12-03), gnmt4's best sample
# was -14.2% against HEFT at 50 s and -15.0% at 175 s; rnnlm2's 301.5 ms
# at 106 s and 300.6 at 210 s, and optimize(budget_s=300) there ended at
# 284.1 ms with GO stopped at 106 s against 286.2 with all 210 s (one run
# each). The suite at 300 s: 13.1% against 12.8% (paper_gostall_2026-12-03).
AUTO_POLICY_STALL_SHARE = 0.1
AUTO_POLICY_MIN_GAIN = 0.005
# On this machine's devices (topology="local" with a function), this share
# of the budget (at least MIN_MEASURE_S seconds) measures the top
# candidates with the executor.
MEASURE_SHARE = 0.3
MIN_MEASURE_S = 2.0
# Before the searches, one device's placement is built (compiled) and run
# once; the measuring then keeps at least this many times that build's
# seconds (the other mandatory candidates' builds) plus MIN_MEASURE_S, so
# that a program whose builds are slow (a 2,870-op LM step: ~5 s each on
# two CPU cores) does not overrun the budget.
BUILD_RESERVE = 2.5
# profile=True: gplace.profile gets at most this share of the budget (a
# profile cached from an earlier call costs next to nothing).
PROFILE_SHARE = 0.5
#: Share of ``budget_s`` the fusion search gets (at least
#: :data:`MIN_FUSION_S` seconds).
FUSION_SHARE = 0.2
MIN_FUSION_S = 0.5


def measure_reserve_s(budget_s: float, build_s: float = 0.0) -> float:
  """Seconds kept at the end of ``budget_s`` for measuring on this machine,
  given the seconds ``build_s`` one placement took to build and run once."""
  return max(MEASURE_SHARE * budget_s, MIN_MEASURE_S,
             BUILD_RESERVE * build_s + MIN_MEASURE_S)


def fusion_budget_s(budget_s: float) -> float:
  """Seconds of ``budget_s`` kept for the fusion search."""
  return max(FUSION_SHARE * budget_s, min(MIN_FUSION_S, budget_s / 2))


def memory_pressure(baselines: list, share: Optional[float] = None) -> bool:
  """Whether at least ``share`` (default :data:`MEMORY_PRESSURE`) of the
  baselines' candidates run out of memory (or break constraints): there,
  moving one op at a time stalls, and an exact model pays."""
  if not baselines:
    return False
  share = MEMORY_PRESSURE if share is None else share
  infeasible = sum(not math.isfinite(c.runtime_s) for c in baselines)
  return infeasible >= share * len(baselines)


def lns_share(n_nodes: int, pressure: bool = False) -> float:
  """Share of the time after the baselines that ``"auto"`` gives LNS (the
  searches before it the rest) on a graph of ``n_nodes`` ops, without the
  solver; ``pressure``: at least :data:`LNS_PRESSURE` of the baselines
  run out of memory (:func:`memory_pressure`)."""
  if n_nodes < LNS_LARGE_MIN_NODES:
    return LNS_SHARE
  return LNS_SHARE_PRESSURE if pressure else LNS_SHARE_LARGE


def policy_probe_s(policy_s: float) -> float:
  """Seconds after which GO trained for ``policy_s`` seconds inside
  ``"auto"`` stops unless its best sample is ahead of the best so far
  (:data:`AUTO_POLICY_PROBE_SHARE` of them, at most
  :data:`AUTO_POLICY_PROBE_MAX_S`)."""
  return min(AUTO_POLICY_PROBE_SHARE * policy_s, AUTO_POLICY_PROBE_MAX_S)


def evaluation_share(evaluations: Optional[int],
                     share: float) -> Optional[int]:
  """``share`` of an evaluation budget (at least one batch), or None."""
  if evaluations is None:
    return None
  return max(candidates_lib.BATCH, int(evaluations * share))
