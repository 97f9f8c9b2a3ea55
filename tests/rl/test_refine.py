"""The per-op refinement (gplace.rl.refine): its policy learns single-op moves
from per-move credit, spends exactly its budget, keeps to allowed devices,
and refuses bad arguments with a ConfigError that names them."""

import numpy as np
import pytest

from gplace.errors import ConfigError
from gplace.graphs.graph import random_dag
from gplace.rl import refine
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from tests.rl.test_learning import heavy_chain, two_heavy_chains


class CountingReward:
  """A simulator reward that records every placement it scores."""

  def __init__(self, graph, topology, allowed=None):
    self.graph, self.topology, self.allowed = graph, topology, allowed
    self.scored = 0

  def __call__(self, placements):
    placements = np.asarray(placements)
    assert placements.ndim == 2 and placements.shape[1] == self.graph.n_nodes
    if self.allowed is not None:  # every proposal keeps to allowed devices
      rows = np.arange(self.graph.n_nodes)
      assert self.allowed[rows, placements].all()
    self.scored += placements.shape[0]
    result = simulate(self.graph, placements, self.topology)
    return np.where(np.asarray(result.oom), np.inf,
                    np.asarray(result.runtime_s, np.float64))


def test_learns_the_known_optimum_of_a_chain_from_the_cpu():
  # Every op on the CPU is the worst start: each op is 10x+ faster on a GPU
  # and the chain's tensors are tiny, so the optimum runs it on one GPU. With
  # the second GPU not allowed that optimum is unique (two GPUs would leave
  # a split chain whose boundary no single move improves).
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  allowed = np.ones((graph.n_nodes, topology.n_devices), bool)
  allowed[:, 2] = False
  best = float(simulate(graph, np.ones(graph.n_nodes, int),
                        topology).runtime_s)
  reward = CountingReward(graph, topology, allowed)
  result = refine.refine_placement(reward, np.zeros(graph.n_nodes, int),
                                   topology.n_devices, evaluations=1200,
                                   num_samples=16, allowed=allowed, seed=0)
  assert result.start_runtime_s > 3 * best
  assert result.greedy_runtime_s == pytest.approx(best, rel=1e-6)
  np.testing.assert_array_equal(result.greedy_placement[1:-1], 1)
  assert result.moved_ops >= 12


def test_spends_its_budget_exactly_and_reports_it():
  graph, topology = two_heavy_chains(6), preset("1cpu+2gpu")
  reward = CountingReward(graph, topology)
  result = refine.refine_placement(reward, np.zeros(graph.n_nodes, int),
                                   topology.n_devices, evaluations=203,
                                   num_samples=16, seed=1)
  assert reward.scored == result.evaluations == 203
  assert result.curve[0][-1] == result.evaluations


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_greedy_placement_never_gets_slower(seed):
  # A random DAG from a random placement: plenty of moves help alone and
  # hurt together; the line search keeps every accepted update.
  graph, topology = random_dag(60, seed=seed), preset("1cpu+4gpu")
  start = np.random.default_rng(seed).integers(0, 5, graph.n_nodes)
  result = refine.refine_placement(CountingReward(graph, topology), start,
                                   topology.n_devices, evaluations=640,
                                   num_samples=16, learning_rate=8.0,
                                   seed=seed)
  greedy = np.concatenate([[result.start_runtime_s], result.curve[1]])
  assert np.all(np.diff(greedy) <= 1e-12)
  assert result.greedy_runtime_s == pytest.approx(float(simulate(
      graph, result.greedy_placement, topology).runtime_s), rel=1e-6)
  assert result.greedy_runtime_s < result.start_runtime_s


def test_a_start_at_the_optimum_stays_there():
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  start = np.ones(graph.n_nodes, int)
  result = refine.refine_placement(CountingReward(graph, topology), start,
                                   topology.n_devices, evaluations=400,
                                   num_samples=16)
  assert result.greedy_runtime_s <= result.start_runtime_s * (1 + 1e-6)
  # Every sample moves an op, so none is faster than the optimum.
  assert result.best_sample_runtime_s >= result.start_runtime_s * (1 - 1e-6)


def test_keeps_every_op_on_its_allowed_devices():
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  allowed = np.ones((graph.n_nodes, topology.n_devices), bool)
  allowed[3:6, 1:] = False  # three ops may only run on the CPU
  reward = CountingReward(graph, topology, allowed)
  result = refine.refine_placement(reward, np.zeros(graph.n_nodes, int),
                                   topology.n_devices, evaluations=600,
                                   num_samples=16, allowed=allowed)
  assert (result.greedy_placement[3:6] == 0).all()
  assert result.greedy_runtime_s < result.start_runtime_s / 2


def test_failed_samples_count_as_the_worst_change():
  graph, topology = heavy_chain(8), preset("1cpu+2gpu")
  inner = CountingReward(graph, topology)

  def reward(placements):  # GPU 2 "runs out of memory"
    runtime = inner(placements)
    return np.where((np.asarray(placements) == 2).any(1), np.inf, runtime)

  result = refine.refine_placement(reward, np.zeros(graph.n_nodes, int),
                                   topology.n_devices, evaluations=600,
                                   num_samples=16)
  assert np.isfinite(result.greedy_runtime_s)
  assert 2 not in result.greedy_placement
  assert (result.greedy_placement[1:-1] == 1).all()


def test_a_start_that_fails_is_left_for_one_that_runs():
  graph, topology = heavy_chain(8), preset("1cpu+2gpu")
  inner = CountingReward(graph, topology)

  def reward(placements):  # op 5 "runs out of memory" on GPU 2
    runtime = inner(placements)
    return np.where(np.asarray(placements)[:, 5] == 2, np.inf, runtime)

  result = refine.refine_placement(reward, np.full(graph.n_nodes, 2),
                                   topology.n_devices, evaluations=200,
                                   num_samples=16)
  assert not np.isfinite(result.start_runtime_s)
  assert np.isfinite(result.greedy_runtime_s)
  assert result.greedy_placement[5] != 2


@pytest.mark.parametrize("kwargs, named", [
    (dict(evaluations=2), "evaluations"),
    (dict(num_samples=0), "num_samples"),
    (dict(max_moves=0), "max_moves"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(learning_rate=float("nan")), "learning_rate"),
    (dict(init_logit=-1.0), "init_logit"),
    (dict(placement=np.zeros((2, 14), int)), r"int \[N\]"),
    (dict(placement=np.full(14, 3)), "topology has 3"),
    (dict(placement=np.zeros(14)), "integer"),
    (dict(allowed=np.ones((14, 2), bool)), "allowed"),
    (dict(allowed=np.zeros((14, 3), bool)), "does not allow"),
])
def test_bad_arguments_raise_a_config_error_naming_them(kwargs, named):
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  args = dict(placement=np.zeros(graph.n_nodes, int), evaluations=100)
  args.update(kwargs)
  placement = args.pop("placement")
  with pytest.raises(ConfigError, match=named):
    refine.refine_placement(CountingReward(graph, topology), placement,
                            topology.n_devices, **args)


def test_proposals_move_one_to_max_moves_ops_off_the_greedy_device():
  import jax  # pylint: disable=g-import-not-at-top
  logits = np.zeros((50, 4), np.float32)
  logits[np.arange(50), np.arange(50) % 4] = 5.0
  allowed = np.ones((50, 4), bool)
  allowed[:10] = [True, False, False, False]  # immovable ops
  placements, moved = jax.tree.map(np.asarray, refine.propose_moves(
      logits, allowed, jax.random.PRNGKey(0), num_samples=200, max_moves=3))
  greedy = np.where(np.arange(50) < 10, 0, np.arange(50) % 4)
  counts = moved.sum(1)
  assert counts.min() == 1 and counts.max() == 3
  assert not moved[:, :10].any()
  np.testing.assert_array_equal(placements[~moved],
                                np.broadcast_to(greedy, moved.shape)[~moved])
  assert (placements[moved] != np.broadcast_to(greedy, moved.shape)[moved]
          ).all()


def test_starts_at_the_fastest_alternative_and_counts_its_scoring():
  # All on the CPU is the given (slow) start; the all-GPU alternative is
  # the chain's optimum, so the refinement starts and stays there.
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  on_gpu = np.ones(graph.n_nodes, int)
  reward = CountingReward(graph, topology)
  result = refine.refine_placement(
      reward, np.zeros(graph.n_nodes, int), topology.n_devices,
      evaluations=101, num_samples=16,
      alternatives={"round_robin": np.arange(graph.n_nodes) % 3,
                    "one_gpu": on_gpu})
  assert result.start_name == "one_gpu"
  np.testing.assert_array_equal(result.start_placement, on_gpu)
  assert result.start_runtime_s == pytest.approx(
      float(simulate(graph, on_gpu, topology).runtime_s), rel=1e-9)
  assert result.greedy_runtime_s <= result.start_runtime_s
  assert reward.scored == result.evaluations == 101
  assert result.record()["refine_start"] == "one_gpu"


def test_an_alternative_no_faster_leaves_the_given_start():
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  start = np.ones(graph.n_nodes, int)
  result = refine.refine_placement(
      CountingReward(graph, topology), start, topology.n_devices,
      evaluations=50, num_samples=16,
      alternatives={"copy": start.copy(), "cpu": np.zeros_like(start)})
  assert result.start_name == refine.START_GIVEN


@pytest.mark.parametrize("alternatives, named", [
    ({"short": np.zeros(5, int)}, "alternative start 'short'"),
    ({"far": np.full(14, 7)}, "alternative start 'far'.*topology has 3"),
    ({"a": np.zeros(14, int), "b": np.ones(14, int)}, "evaluations=4"),
])
def test_bad_alternatives_raise_a_config_error_naming_them(alternatives,
                                                           named):
  graph, topology = heavy_chain(12), preset("1cpu+2gpu")
  with pytest.raises(ConfigError, match=named):
    refine.refine_placement(CountingReward(graph, topology),
                            np.zeros(graph.n_nodes, int), topology.n_devices,
                            evaluations=4, alternatives=alternatives)
