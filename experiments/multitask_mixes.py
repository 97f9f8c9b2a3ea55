"""GO's multi-task table: seven task mixes of placement (P), scheduling (S)
and fusion (F), each learnt by GO and searched at an equal budget.

Host-side helpers of ``experiments/multitask.py`` and
``experiments/multitask_measured.py``. A :class:`Plan` is one full
configuration (placement, op order, fusion labels) with its simulated
runtime; it runs as ``gplace.place(fn, graph, plan.placement,
schedule=plan.order, fusion=plan.fusion)``. Where placement is not a task
(S, F, S+F) it is held at the best classical placement: the policy sees the
graph with ``allowed_devices`` one-hot on it, the searches never move it.
"""

import time
from typing import NamedTuple, Optional

import numpy as np

import gplace
from gplace import baselines, report, rl
from gplace.graphs.fusion import default_fusion
from gplace.graphs.fusion_decisions import decision_labels
from gplace.search.fusion import fusion_annealing
from gplace.search.joint import joint_annealing, order_priority
from gplace.workloads import Workload


class Mix(NamedTuple):
  """One task mix: which of the three decisions are learnt / searched."""
  name: str
  placement: bool
  schedule: bool
  fusion: bool


#: Every mix, single tasks first.
MIXES = (Mix("P", True, False, False), Mix("S", False, True, False),
         Mix("F", False, False, True), Mix("P+S", True, True, False),
         Mix("P+F", True, False, True), Mix("S+F", False, True, True),
         Mix("P+S+F", True, True, True))

#: GO's shared encoder, small enough to train in seconds per graph.
ENCODER = dict(hidden_size=32, num_heads=4, segment_length=64,
               num_sage_layers=2, num_attention_layers=1, head_hidden_size=32,
               free_logits=256)
#: GO's scheduling head: priority levels per node.
PRIORITY_LEVELS = 2
#: Share of the fusion search's candidates that move the placement (P+F,
#: P+S+F) and of the joint search's that move the schedule (P+S, P+S+F).
PLACEMENT_SHARE = 0.3
SCHEDULE_SHARE = 0.5

#: How each mix's equal-budget search runs (for the study's text).
SEARCHES = {
    "P": "joint_annealing(schedule_share=0): placement moves in the start's "
         "schedule",
    "S": "joint_annealing(schedule_share=1): priority moves, placement kept",
    "F": "fusion_annealing(placement_share=0) in the start's order",
    "P+S": f"joint_annealing(schedule_share={SCHEDULE_SHARE})",
    "P+F": f"fusion_annealing(placement_share={PLACEMENT_SHARE}) in the "
           "start's order",
    "S+F": "half the budget joint_annealing(schedule_share=1), half "
           "fusion_annealing(placement_share=0) in its priorities",
    "P+S+F": f"half the budget joint_annealing(schedule_share="
             f"{SCHEDULE_SHARE}), half fusion_annealing(placement_share="
             f"{PLACEMENT_SHARE}) from its placement, in its priorities",
}


class Plan(NamedTuple):
  """One configuration, simulated.

  Attributes:
    placement: ``int32 [N]`` device per node.
    order: ``int32 [N]`` op order it runs in (the simulator's schedule).
    fusion: ``int64 [N]`` fusion labels (-1 alone), or None: no explicit
      fusion (XLA fuses each same-device cluster as it likes).
    runtime_s: simulated seconds (inf: out of memory).
  """
  placement: np.ndarray
  order: np.ndarray
  fusion: Optional[np.ndarray]
  runtime_s: float


class Problem(NamedTuple):
  """What a table is about: a graph on a topology, with measured costs
  (``[N, D]`` seconds) or None (the roofline)."""
  name: str
  graph: gplace.Graph
  topology: gplace.Topology
  costs: Optional[np.ndarray] = None


class Row(NamedTuple):
  """One row of the table: ``who`` found ``plan`` for ``mix``."""
  mix: str
  who: str
  plan: Plan
  evaluations: str
  wall_s: Optional[float]


def method_lines(num_samples: int) -> list[str]:
  """What the rows are and how each search runs, for a study's text."""
  searches = [f"- {name}: {how}" for name, how in SEARCHES.items()]
  return ["Rows per mix: the policy's own greedy decision, the best "
          "decision it sampled in training, and the equal-budget search "
          "from the best classical plan (its start counted as one "
          "evaluation, kept if nothing beat it: '= the start'). S, F and "
          "S+F hold the placement at the best classical one (policy: "
          "allowed_devices one-hot on it). GO: priority_levels="
          f"{PRIORITY_LEVELS} for S, fusion_head=True for F; {num_samples} "
          "samples per step. Searches:", ""] + searches


def simulate_plan(problem: Problem, placement, *, order=None, priority=None,
                  fusion=None) -> Plan:
  """``placement`` in ``order`` (or the default schedule steered by
  ``priority``), with ``fusion`` labels or None, simulated; the plan
  carries the op order the simulator ran, so ``simulate(..., order=)``
  and the executor repeat it."""
  placement = np.asarray(placement, np.int32)
  result = gplace.simulate(
      problem.graph, placement, problem.topology, costs=problem.costs,
      order=order, priority=None if priority is None else np.asarray(
          priority, np.float32), fusion=fusion, return_schedule=True)
  runtime_s = np.inf if bool(result.oom) else float(result.runtime_s)
  return Plan(placement, np.asarray(result.order, np.int32),
              None if fusion is None else np.asarray(fusion, np.int64),
              runtime_s)


def classical(problem: Problem, seed: int = 0) -> tuple[str, Plan]:
  """``(label, plan)``: the best classical placement in its best schedule
  (a list scheduler's own plan or the default), XLA's own fusion."""
  fastest = baselines.best(problem.graph, problem.topology,
                           costs=problem.costs, seed=seed).any
  return (f"{fastest.name} ({fastest.schedule})",
          simulate_plan(problem, fastest.placement, order=fastest.order))


def default_rows(problem: Problem, label: str, start: Plan) -> list[Row]:
  """The defaults: the best classical plan with XLA's clusters (no explicit
  fusion) and with ``default_fusion`` (XLA's producer-into-consumer rule),
  and everything on device 0."""
  fused = simulate_plan(problem, start.placement, order=start.order,
                        fusion=default_fusion(problem.graph, start.placement))
  single = simulate_plan(problem, np.zeros(problem.graph.n_nodes, np.int32))
  return [Row("default", f"{label}, XLA's clusters", start, "–", None),
          Row("default", f"{label}, default_fusion", fused, "–", None),
          Row("default", "one device (device 0), XLA's clusters", single,
              "–", None)]


def fixed_graph(graph: gplace.Graph, placement, n_devices: int
                ) -> gplace.Graph:
  """``graph`` whose ops each allow only their device in ``placement``
  (``allowed_devices`` one-hot): the policy cannot move them."""
  allowed = np.zeros((graph.n_nodes, n_devices), bool)
  allowed[np.arange(graph.n_nodes), np.asarray(placement)] = True
  return graph.replace(allowed_devices=allowed)


def go_hyperparameters(mix: Mix) -> dict:
  """GO's hyperparameters for ``mix``: the shared encoder, and the
  scheduling and fusion heads of its tasks."""
  return dict(ENCODER, fusion_head=mix.fusion,
              priority_levels=PRIORITY_LEVELS if mix.schedule else 0)


def policy_plan(problem: Problem, placement, order, choices) -> Plan:
  """The plan of a policy's decision: its placement, in its own order
  (as priorities of the default schedule) or the default schedule, with the
  legal labels of its fusion ``choices`` or XLA's clusters."""
  placement = np.asarray(placement, np.int32)
  labels = (None if choices is None else decision_labels(
      problem.graph, placement, np.asarray(choices)))
  priority = None if order is None else order_priority(order)
  return simulate_plan(problem, placement, priority=priority, fusion=labels)


def train_mix(problem: Problem, mix: Mix, start: Plan, *, samples: int,
              num_samples: int, seed: int) -> tuple[Row, Row]:
  """GO trained from scratch on ``mix`` (``samples`` simulator evaluations,
  ``num_samples`` per step): the rows of its own greedy decision and of the
  best decision it sampled in training. A mix without placement trains on
  :func:`fixed_graph` of ``start``'s placement."""
  n = problem.graph.n_nodes
  graph = (problem.graph if mix.placement else fixed_graph(
      problem.graph, start.placement, problem.topology.n_devices))
  steps = max(1, samples // num_samples)
  settings = rl.TrainSettings(
      seed=seed, progress_bar=False, print_table=False).replace(
          rl=dict(num_samples=num_samples, reward="simulator_host",
                  reward_schedule="best"),
          train=dict(num_steps=steps, chunk_steps=steps),
          groups=dict(max_groups=0))
  policy = rl.PolicySettings("go", go_hyperparameters(mix))
  began = time.time()
  result = rl.train([Workload(problem.name, graph, costs=problem.costs)],
                    problem.topology, policy, settings,
                    log=lambda line: None)
  wall_s = time.time() - began
  own = result.policy[0]
  greedy = policy_plan(problem, own.greedy_placement, own.greedy_order,
                       own.greedy_fusion)
  state = result.state
  best_order = (None if state.best_priority is None else np.argsort(
      -np.asarray(state.best_priority)[0, :n], kind="stable"))
  best = policy_plan(problem, result.best_placements[0], best_order,
                     None if state.best_fusion is None
                     else np.asarray(state.best_fusion)[0, :n])
  spent = steps * num_samples
  return (Row(mix.name, "policy: greedy", greedy, f"{spent} + 1", wall_s),
          Row(mix.name, "policy: best sampled in training", best,
              str(spent), None))


def _joint(problem, start, budget, share, seed):
  return joint_annealing(problem.graph, problem.topology, costs=problem.costs,
                         seed=seed, budget=budget, init=start.placement,
                         init_order=start.order, schedule_share=share)


def _fusion(problem, placement, budget, share, seed, order=None,
            priority=None):
  return fusion_annealing(problem.graph, problem.topology,
                          placement=placement, costs=problem.costs,
                          order=order, priority=priority, seed=seed,
                          budget=budget, placement_share=share)


def search_mix(problem: Problem, mix: Mix, start: Plan, *, budget: int,
               seed: int) -> Row:
  """The equal-budget search over ``mix``'s decisions from ``start``
  (:data:`SEARCHES`); its plan is the fastest it saw, the start (the best
  classical plan, scored as one of the ``budget`` evaluations) included,
  so never slower than the start."""
  began = time.time()
  rest = budget - 1
  candidates = [start]
  if not mix.fusion:
    share = {"P": 0.0, "S": 1.0}.get(mix.name, SCHEDULE_SHARE)
    found = _joint(problem, start, rest, share, seed)
    candidates.append(simulate_plan(problem, found.placement,
                                    priority=found.priority))
    spent = found.evaluations
  elif not mix.schedule:
    share = PLACEMENT_SHARE if mix.placement else 0.0
    found = _fusion(problem, start.placement, rest, share, seed,
                    order=start.order)
    candidates.append(simulate_plan(problem, found.placement,
                                    order=start.order, fusion=found.fusion))
    spent = found.evaluations
  else:
    joint = _joint(problem, start, rest // 2,
                   SCHEDULE_SHARE if mix.placement else 1.0, seed)
    candidates.append(simulate_plan(problem, joint.placement,
                                    priority=joint.priority))
    found = _fusion(problem, joint.placement, rest - joint.evaluations,
                    PLACEMENT_SHARE if mix.placement else 0.0, seed,
                    priority=joint.priority)
    candidates.append(simulate_plan(problem, found.placement,
                                    priority=joint.priority,
                                    fusion=found.fusion))
    spent = joint.evaluations + found.evaluations
  best = min(candidates, key=lambda plan: plan.runtime_s)
  who = "search" + (" (= the start)" if best is start else "")
  return Row(mix.name, who, best, str(spent + 1), time.time() - began)


def mix_rows(problem: Problem, mix: Mix, start: Plan, *, samples: int,
             num_samples: int, seed: int) -> list[Row]:
  """A mix's three rows: the policy's greedy decision, its best sample in
  training, and the equal-budget search's result."""
  greedy, best = train_mix(problem, mix, start, samples=samples,
                           num_samples=num_samples, seed=seed)
  budget = max(1, samples // num_samples) * num_samples
  return [greedy, best, search_mix(problem, mix, start, budget=budget,
                                   seed=seed)]


def table(problem: Problem, *, samples: int, num_samples: int, seed: int,
          mixes=MIXES, log=print) -> tuple[Plan, list[Row]]:
  """``(the best classical plan, every row)`` of one graph: the defaults,
  then each mix's rows (printed through ``log`` as they come)."""
  label, start = classical(problem, seed)
  rows = default_rows(problem, label, start)
  for row in rows:
    log(format_row(problem, row, start))
  for mix in mixes:
    for row in mix_rows(problem, mix, start, samples=samples,
                        num_samples=num_samples, seed=seed):
      rows.append(row)
      log(format_row(problem, row, start))
  return start, rows


HEADER = ["| graph | mix | decision by | runtime (ms, simulated) | "
          "vs best classical | evaluations | wall (s) |",
          "|---|---|---|---:|---:|---:|---:|"]


def format_row(problem: Problem, row: Row, start: Plan) -> str:
  """One markdown row; the change is against the best classical plan."""
  wall = "–" if row.wall_s is None else f"{row.wall_s:.0f}"
  return (f"| {problem.name} ({problem.graph.n_nodes} ops) | {row.mix} | "
          f"{row.who} | {row.plan.runtime_s * 1e3:.4f} | "
          f"{report.percent_change(row.plan.runtime_s, start.runtime_s)} | "
          f"{row.evaluations} | {wall} |")


def policy_best(rows: list[Row], mix: str) -> float:
  """The faster of the policy's two decisions for ``mix`` (seconds)."""
  return min(r.plan.runtime_s for r in rows
             if r.mix == mix and r.who.startswith("policy"))


def search_best(rows: list[Row], mix: str) -> float:
  return min(r.plan.runtime_s for r in rows
             if r.mix == mix and r.who.startswith("search"))


def verdicts(name: str, rows: list[Row]) -> list[str]:
  """Plain sentences: does each joint mix's policy beat the best
  single-task mix it contains (each side: the faster of greedy and best
  sampled), does each mix's policy beat the same-mix search, and does the
  best policy beat the best search."""
  lines = []
  present = {r.mix for r in rows}
  for mix in MIXES:
    tasks = mix.name.split("+")
    if len(tasks) < 2 or mix.name not in present:
      continue
    singles = {t: policy_best(rows, t) for t in tasks if t in present}
    if not singles:
      continue
    single = min(singles, key=singles.get)
    joint = policy_best(rows, mix.name)
    word = "beats" if joint < singles[single] else "does NOT beat"
    lines.append(f"- {name}: joint {mix.name} {word} its best single task "
                 f"({single}): {report.percent_change(joint, singles[single])}"
                 f" vs {single}.")
  beaten = [m.name for m in MIXES if m.name in present
            and policy_best(rows, m.name) < search_best(rows, m.name)]
  lines.append(f"- {name}: the policy beats the same-mix search in "
               f"{len(beaten)} of {len(present - {'default'})} mixes"
               + (f" ({', '.join(beaten)})." if beaten else "."))
  policy = min(policy_best(rows, m.name) for m in MIXES if m.name in present)
  search = min(search_best(rows, m.name) for m in MIXES if m.name in present)
  word = "beats" if policy < search else "does NOT beat"
  lines.append(f"- {name}: the best policy decision {word} the best "
               f"search ({report.percent_change(policy, search)} vs the "
               "search).")
  return lines
