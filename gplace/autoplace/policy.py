"""``method="policy"``: GO trained by RL on this one graph, for a time budget.

Where it sits: :func:`gplace.optimize` calls :func:`policy_candidate`, which
runs the training loop of ``experiments/run.py``
(:func:`gplace.rl.train.train_and_evaluate`) unchanged, on the quickstart
config (``experiments/configs/quickstart.py``: GO over op groups, PPO,
rewards from the simulator's default schedule) with the graph passed as a
saved graph file (``config.workload`` accepts paths, see
:mod:`gplace.workloads.resolve`). The run is stopped between chunks once the
budget is spent (at least one chunk always runs: the first includes
compiling the training step), and the best placement it sampled is read
back from its ``best_placement.json``.

No pretrained policy ships yet, so every call trains from scratch: expect
minutes, not seconds, before a policy beats the baselines (see
``experiments/RESULTS.md``). Host-side orchestration.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Optional

import numpy as np

from gplace.errors import ConfigError, SearchError
from gplace.autoplace.candidates import Candidate, score
from gplace.autoplace.inputs import LOCAL, Problem
from gplace.sim.topology import preset_names

# Steps per jitted chunk: how often the budget is checked.
CHUNK_STEPS = 10
# An upper bound on steps; the budget stops the run long before.
MAX_STEPS = 1_000_000


class _BudgetSpent(Exception):
  """Raised from the progress hook to stop training between chunks."""


def check_policy_problem(topology_spec, problem_costs) -> str:
  """The ``config.topology`` string for the training run.

  Raises:
    SearchError: a custom :class:`~gplace.Topology` or a measured cost
      table, which the training configs cannot carry.
  """
  if not isinstance(topology_spec, str) or (
      topology_spec != LOCAL and topology_spec not in preset_names()):
    raise SearchError(
        "gplace.optimize: method='policy' trains with experiments/run.py's "
        "loop, which takes a preset topology or 'local', not a custom "
        f"Topology; pass topology= one of {preset_names()} or 'local', or "
        "use method='search' or 'auto' on this topology.")
  if problem_costs is not None:
    raise SearchError(
        "gplace.optimize: method='policy' scores placements with the "
        "topology's roofline costs; it cannot use a measured cost table "
        "(costs=, profile=True, or costs in the graph file). Use "
        "method='search' or 'auto' with measured costs.")
  return topology_spec


def _quickstart_config():
  try:
    from experiments.configs import quickstart  # pylint: disable=g-import-not-at-top
  except ImportError as err:
    raise ConfigError(
        "gplace.optimize: method='policy' trains with the quickstart config "
        "(experiments/configs/quickstart.py), which is not importable here; "
        "run from a gplace checkout with `pip install -e \".[dev]\"` (it "
        "needs ml_collections), or use method='search'.") from err
  return quickstart.get_config()


def policy_candidate(problem: Problem, topology_name: str, *, time_s: float,
                     seed: int, workdir: Optional[str] = None
                     ) -> Optional[Candidate]:
  """The best placement GO samples while training on ``problem.graph`` for
  about ``time_s`` seconds (at least one chunk of :data:`CHUNK_STEPS`).

  Args:
    problem: the graph; its topology must be what ``topology_name`` makes.
    topology_name: a preset name or ``"local"``.
    time_s: wall-clock seconds for set-up and training.
    seed: the run's seed.
    workdir: where the run writes (default: a temporary directory, deleted).

  Returns:
    A candidate labelled ``"policy (GO, <steps> steps)"``, scored in the
    default schedule; None if no placement it sampled fitted in memory.

  Raises:
    ConfigError: the quickstart config cannot be imported.
  """
  from gplace.rl import reports, train  # pylint: disable=g-import-not-at-top
  config = _quickstart_config()
  deadline = time.perf_counter() + time_s
  steps = [0]

  def stop_when_spent(step: int, metrics: dict) -> None:
    del metrics
    steps[0] = step
    if time.perf_counter() > deadline:
      raise _BudgetSpent()

  with tempfile.TemporaryDirectory(prefix="gplace_optimize_") as tmp:
    graph_path = os.path.join(tmp, "graph.npz")
    problem.graph.save(graph_path)
    config.workload = graph_path
    config.topology = topology_name
    config.seed = seed
    config.pmap = False
    config.progress_bar = config.print_table = False
    config.train.update(num_steps=MAX_STEPS, chunk_steps=CHUNK_STEPS,
                        checkpoint_every=MAX_STEPS, resume=False)
    run_dir = workdir or os.path.join(tmp, "run")
    try:
      train.train_and_evaluate(config, run_dir, progress_fn=stop_when_spent,
                               log=lambda line: None)
    except _BudgetSpent:
      pass
    path = os.path.join(run_dir, reports.BEST_PLACEMENT_FILE)
    record = reports.read_json(path) if os.path.exists(path) else None
  if record is None:
    return None   # nothing it sampled fitted in memory.
  index = {name: i for i, name in enumerate(problem.topology.device_names)}
  placement = np.array([index[node["device"]]
                        for node in record["graphs"][0]["placement"]],
                       np.int32)
  runtime = float(score(problem, placement[None]).runtime_s[0])
  return Candidate(f"policy (GO, {steps[0]} steps)", placement, None, runtime)
