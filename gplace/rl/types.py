"""The data that flows through learning: :class:`Batch`, :class:`Rollout`,
:class:`GraphSetup`, :data:`SimulateFn` (in-step), :data:`RewardFn` (host).
Shapes: ``B`` graphs, ``K`` samples, ``N`` padded nodes, ``D`` devices.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jraph
import numpy as np

from gplace.graphs.graph import Graph

# apply_fn(params, graphs, device_mask) -> logits f32 [N, D]: the policy
# interface of gplace.policies.
ApplyFn = Callable[[Any, jraph.GraphsTuple, jax.Array], jax.Array]

# simulate_fn(problem, placements int32 [K, N], priority=None) ->
# (runtime_s f32 [K], failed bool [K]); jittable (e.g.
# gplace.rl.rewards.simulator_reward). ``priority`` f32 [K, N]: rank each
# placement's arrived ops by it in the dynamic schedule (ordering policies).
SimulateFn = Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]

# reward_fn(placements int32 [K, N_graph], numpy, priority=None) -> runtime_s
# float64 [K]; host-side, a failed run reports inf or NaN (e.g.
# gplace.rl.scoring.Scorer). Called with ``priority`` (f32 [K, N_graph], the
# dynamic schedule's priority of each placement) only for policies that
# schedule (ordering policies, priority levels), and with ``fusion`` (int32
# [K, N_graph], 1 where a node fuses into its consumer) only for policies
# that choose the fusion (GOPolicy fusion_head).
RewardFn = Callable[[np.ndarray], np.ndarray]


class Batch(NamedTuple):
  """``B`` graphs to place, every leaf with a leading ``[B]`` axis.

  Attributes:
    graphs: stacked same-budget ``GraphsTuple`` s (``N_pad`` nodes each).
    problems: stacked simulator problems (``gplace.sim.simulator.SimProblem``)
      whose node order is the graphs' node order, or ``None`` with host
      rewards.
    failing_runtime_s: ``f32 [B]``, runtime charged to failed placements.
    device_mask: ``bool [B, D]`` or ``[B, N_pad, D]``, allowed devices.
    group_of: ``int32 [B, N_sim]``, with group-level actions
      (:mod:`gplace.rl.grouping`): ``graphs`` are the coarse graphs (``N_pad``
      = padded groups) and node ``n`` of graph ``b``'s ``problems`` runs on
      the device of group ``group_of[b, n]``; None (default): the policy
      places the nodes of ``problems`` one by one.
    critical_path: ``f32 [B, N_sim]``, each simulated node's critical-path
      priority (:func:`gplace.sim.priority.bottom_level`, 0 on padding):
      the default schedule's, which a policy's priority levels refine
      (:func:`gplace.rl.grouping.level_priority`); None if not built.
  """

  graphs: jraph.GraphsTuple
  problems: Any
  failing_runtime_s: jax.Array
  device_mask: jax.Array
  group_of: Any = None
  critical_path: Any = None


class Rollout(NamedTuple):
  """Sampled placements of one step, on one device of the axis.

  Attributes:
    placements: ``int32 [B, K_local, N]``.
    node_log_probs: ``f32 [B, K_local, A]``, per-action log-probabilities
      under the sampling policy (zero on padding); for a one-shot policy the
      actions are the placements (``A = N``).
    runtime_s: ``f32 [B, K_local]`` (filled after scoring).
    failed: ``bool [B, K_local]``.
    actions: ``int32 [B, K_local, A]``, the actions where they are not
      the placements (sequential policies, a one-shot policy with priority
      levels; :mod:`gplace.rl.policy_fns`); None: the actions are
      ``placements``.
    priority: ``f32 [B, K_local, N]``, a policy's own schedule of each
      placement (the dynamic schedule's priority: an ordering policy's
      :func:`gplace.rl.grouping.order_priority`, or priority levels'
      :func:`gplace.rl.grouping.level_priority`); None: the default,
      critical-path one.
    fusion: ``int32 [B, K_local, N]``, 1 where a node fuses into its
      consumer (a policy with a fusion head,
      :func:`gplace.graphs.fusion_decisions.decision_labels`); None: no
      fusion decision (XLA's own clusters).
  """

  placements: jax.Array
  node_log_probs: jax.Array
  runtime_s: jax.Array
  failed: jax.Array
  actions: Any = None
  priority: Any = None
  fusion: Any = None


class GraphSetup(NamedTuple):
  """Everything host-side about one graph of the batch.

  Attributes:
    name: workload name.
    graph: the op graph.
    fn, args: the runnable workload (None for random DAGs).
    baselines: ``{name: [N] int32}`` placements.
    baseline_runtime_s: ``{name: float}`` (simulated or measured; inf = OOM /
      failed).
    lower_bound_s: a lower bound on the runtime.
    failing_runtime_s: the runtime charged to failed placements.
    coarsening: the groups the policy places
      (:func:`gplace.rl.grouping.coarsen_for_policy`), or None: it places
      ops.
    costs: ``[N, D]`` float64 measured seconds per node and device (a graph
      file's ``cost_s``), or None: the topology's roofline.
    planned_runtime_s: ``{name: float}`` for each list scheduler among
      ``baselines`` (``gplace.baselines.schedulers()``): its placement
      simulated in its own planned op order (inf = OOM), the runtime it was
      planned for; None where not scored (measured rewards: the executor
      runs its own dispatch order). ``baseline_runtime_s`` stays the default
      schedule's, which warm starts and pretraining read; reports compare
      with the best of both (``gplace.rl.reports.classical_runtimes``).
    planned_orders: ``{name: [N] int32}``, the op order each list scheduler
      of ``planned_runtime_s`` planned (what ``best_placement.json``
      records when its plan is the fastest placement), or None.
  """

  name: str
  graph: Graph
  fn: Any
  args: Any
  baselines: dict
  baseline_runtime_s: dict
  lower_bound_s: float
  failing_runtime_s: float
  coarsening: Any = None
  costs: Optional[np.ndarray] = None
  planned_runtime_s: Optional[dict] = None
  planned_orders: Optional[dict] = None
