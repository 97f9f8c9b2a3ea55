"""GO's multi-task table (``experiments/multitask_mixes.py``) and its
measured subset (``experiments/multitask_measured.py``) on a tiny real
program: every mix's search yields its row, GO trained on three mixes (P,
S+F with the placement held, P+S+F: every head; about 12 s of compiling
each) yields its rows, the placement-fixed mixes keep the classical
placement, the searches never lose to their start, and the chosen plans run
and are timed with the executor on two devices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from experiments import multitask_measured as measured
from experiments import multitask_mixes as mixes


def _program():
  rng = np.random.default_rng(0)
  w1 = jnp.asarray(rng.normal(size=(32, 32)) / 8, jnp.float32)
  w2 = jnp.asarray(rng.normal(size=(32, 32)) / 8, jnp.float32)
  x = jnp.asarray(rng.normal(size=(16, 32)), jnp.float32)

  def forward(w1, w2, x):
    h = jax.nn.relu(x @ w1 + 1.0)
    return jnp.tanh(h @ w2).sum() + jnp.exp(x).mean()
  return forward, (w1, w2, x)


@pytest.fixture(scope="module")
def program():
  return _program()


@pytest.fixture(scope="module")
def problem(program, two_device_topology):
  fn, args = program
  return mixes.Problem("tiny_mlp", gplace.capture(fn, *args),
                       two_device_topology)


#: The mixes GO trains on here: placement alone, the placement held with
#: both other heads, and all three tasks.
TRAINED = tuple(m for m in mixes.MIXES if m.name in ("P", "S+F", "P+S+F"))


@pytest.fixture(scope="module")
def table(problem):
  return mixes.table(problem, samples=4, num_samples=2, seed=0,
                     mixes=TRAINED, log=lambda line: None)


@pytest.fixture(scope="module")
def searches(problem, table):
  start, _ = table
  return [mixes.search_mix(problem, mix, start, budget=6, seed=0)
          for mix in mixes.MIXES]


def test_every_mix_yields_a_search_row(problem, table, searches):
  start, _ = table
  assert [r.mix for r in searches] == [m.name for m in mixes.MIXES]
  for mix, row in zip(mixes.MIXES, searches):
    assert row.who.startswith("search") and int(row.evaluations) <= 6
    assert row.plan.runtime_s <= start.runtime_s, mix     # never slower
    if not mix.placement:                                 # placement held
      np.testing.assert_array_equal(row.plan.placement, start.placement)
    if not mix.fusion:
      assert row.plan.fusion is None, mix


def test_trained_mixes_yield_a_policy_and_a_search_row(problem, table):
  start, rows = table
  assert rows[0].plan is start and np.isfinite(start.runtime_s)
  assert [r.mix for r in rows[:3]] == ["default"] * 3
  for mix in TRAINED:
    mine = [r for r in rows if r.mix == mix.name]
    assert [r.who.split(":")[0].split(" ")[0] for r in mine] == [
        "policy", "policy", "search"], mix
    for row in mine:
      assert row.plan.placement.shape == (problem.graph.n_nodes,)
      assert np.isfinite(row.plan.runtime_s), (mix, row.who)
      assert sorted(row.plan.order) == list(range(problem.graph.n_nodes))
      # A fusion decision exactly where fusion is a task.
      assert (row.plan.fusion is not None) == (
          mix.fusion and row.plan is not start), (mix, row.who)


def test_placement_fixed_mixes_keep_the_classical_placement(table):
  start, rows = table
  fixed = [r for r in rows if r.mix == "S+F"]
  assert len(fixed) == 3
  for row in fixed:       # the policy's (rl.train on the one-hot mask) too
    np.testing.assert_array_equal(row.plan.placement, start.placement,
                                  err_msg=f"{row.mix} {row.who}")


def test_searches_are_never_slower_than_their_start(table):
  start, rows = table
  searches = [r for r in rows if r.who.startswith("search")]
  assert len(searches) == len(TRAINED)
  for row in searches:
    assert row.plan.runtime_s <= start.runtime_s, row.mix
    assert int(row.evaluations) <= 4, row.mix     # the equal budget


def test_a_plan_replays_in_its_order(problem, table, searches):
  _, rows = table
  for row in rows + searches:
    again = gplace.simulate(problem.graph, row.plan.placement,
                            problem.topology, order=row.plan.order,
                            fusion=row.plan.fusion)
    np.testing.assert_allclose(float(again.runtime_s), row.plan.runtime_s,
                               rtol=1e-5, err_msg=f"{row.mix} {row.who}")


def test_verdicts_compare_joint_mixes_with_their_single_tasks(table):
  _, rows = table
  said = "\n".join(mixes.verdicts("tiny_mlp", rows))
  assert "joint P+S+F " in said and "its best single task (P)" in said
  assert "joint S+F " not in said        # neither S nor F was trained
  assert "same-mix search in" in said and "of 3 mixes" in said


def test_fixed_graph_allows_one_device_per_op(problem):
  placement = np.arange(problem.graph.n_nodes) % 2
  graph = mixes.fixed_graph(problem.graph, placement, 2)
  assert graph.allowed_devices.shape == (problem.graph.n_nodes, 2)
  np.testing.assert_array_equal(graph.allowed_devices.argmax(1), placement)
  assert (graph.allowed_devices.sum(1) == 1).all()


def test_measured_path_times_the_chosen_plans(program, problem, table,
                                              searches, two_devices):
  fn, args = program
  _, rows = table
  rows = rows + [r for r in searches if r.mix not in {m.name for m in
                                                       TRAINED}]
  out = measured.measured_rows(
      problem, fn, args, two_devices, rows,
      type("Args", (), dict(rounds=1, repeats=2, warmup=1, seed=0)))
  assert out[0].mix == "default" and out[1].mix == "control"
  assert out[1].plan is out[0].plan
  keys = [measured._key(m.plan) for m in out[1:]]   # pylint: disable=protected-access
  assert len(set(keys)) == len(keys)                # each plan measured once
  assert all(np.isfinite(m.measured_s) and m.measured_s > 0 for m in out)
  lines = measured.format_measured(problem, out)
  assert len(lines) == len(out) and all(line.count("|") == 9
                                        for line in lines)
  said = "\n".join(measured.measured_verdicts("tiny_mlp", out))
  assert "measured twice" in said and "fastest measured" in said
