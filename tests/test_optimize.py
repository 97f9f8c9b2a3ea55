"""Tests of gplace.optimize: one call from a program or a graph to a placement.

Everything runs on one small captured function and a two-device topology
(the local CPU devices, each its own compute group), so that the simulator
compiles once for the whole file.
"""

import dataclasses
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import baselines, errors
from gplace.graphs import constraints, interchange
from gplace.graphs.graph import random_dag
from gplace.sim import graph_files
from gplace.autoplace import SOLVER_MAX_NODES, PlacementResult, baseline_rows
from gplace.autoplace import budget
from gplace.autoplace import inputs as autoplace_inputs
from gplace.execution import op_timing, profile_cache

SEARCH = dict(method="search", max_evaluations=256, budget_s=120.0,
              progress=False)


def two_branches(params, x):
  """Two parallel matmul branches joined: worth splitting over devices."""
  left = jnp.tanh(x @ params["left"])
  right = jax.nn.relu(x @ params["right"])
  return ((left + right) @ params["out"]).sum(axis=0)


@pytest.fixture(scope="module")
def program():
  keys = jax.random.split(jax.random.PRNGKey(0), 4)
  params = {name: jax.random.normal(key, (256, 256)) / 16
            for name, key in zip(("left", "right", "out"), keys)}
  x = jax.random.normal(keys[3], (256, 256))
  return two_branches, (params, x)


@pytest.fixture(scope="module")
def devices(two_devices):
  return two_devices


@pytest.fixture(scope="module")
def topology(two_device_topology):
  return two_device_topology


@pytest.fixture(scope="module")
def from_function(program, topology):
  fn, args = program
  return gplace.optimize(fn, *args, topology=topology, **SEARCH)


def padded_runtimes(graph, placements, topology):
  """Default-schedule runtimes (inf: infeasible) of [K <= 64, N] placements,
  simulated in the batch of 64 that optimize uses (no new compilation)."""
  k = placements.shape[0]
  result = gplace.simulate(graph, np.resize(placements, (64, graph.n_nodes)),
                           topology)
  runtime = np.asarray(result.runtime_s, np.float64)[:k]
  return np.where(np.asarray(result.oom)[:k], np.inf, runtime)


def test_a_function_a_graph_networkx_and_json_give_one_placement(
    from_function, topology, tmp_path):
  graph = from_function.graph
  path = str(tmp_path / "graph.json")
  graph_files.save(path, graph, topology=topology)
  results = [from_function,
             gplace.optimize(graph, topology=topology, **SEARCH),
             gplace.optimize(interchange.to_networkx(graph),
                             topology=topology, **SEARCH),
             gplace.optimize(path, **SEARCH)]     # the file's own topology
  for result in results:
    assert isinstance(result, PlacementResult)
    assert result.placement.dtype == np.int32
    assert result.placement.shape == (graph.n_nodes,)
    np.testing.assert_array_equal(result.placement, from_function.placement)
    assert result.runtime_s == from_function.runtime_s
    assert result.method == from_function.method
  assert results[3].topology.n_devices == 2


def test_result_includes_every_baseline_and_respects_the_bound(
    from_function, topology):
  graph = from_function.graph
  assert any(label.startswith("annealing from ")
             for label in from_function.candidates)
  placed = baselines.run_all(graph, topology)
  best_baseline = padded_runtimes(graph, np.stack(list(placed.values())),
                                  topology).min()
  assert from_function.runtime_s <= best_baseline
  bound = gplace.lower_bound(graph, topology)
  assert from_function.lower_bound_s >= bound
  assert from_function.runtime_s >= from_function.lower_bound_s * (1 - 1e-6)
  # The reported runtime is the simulator's, in the reported schedule.
  assert from_function.order is None
  again = padded_runtimes(graph, from_function.placement[None], topology)[0]
  assert again == pytest.approx(from_function.runtime_s, rel=1e-6)
  assert from_function.peak_bytes.shape == (2,)
  assert set(from_function.candidates) >= {
      f"{name} (default)" for name in ("single_device", "round_robin")}
  assert list(from_function.candidates.values()) == sorted(
      from_function.candidates.values())
  table = str(from_function)
  assert "* " + from_function.method in table and "lower bound" in table


def test_baseline_rows_list_each_baseline_once_fastest_first(from_function,
                                                           topology):
  rows = baseline_rows(from_function.graph, topology)
  assert len(rows) == len(baselines.names())
  assert [r for _, r in rows] == sorted(r for _, r in rows)
  for label, runtime in rows:
    assert from_function.candidates[label] == runtime


def test_auto_runs_baselines_and_search_within_the_budget(from_function,
                                                          topology):
  result = gplace.optimize(from_function.graph, topology=topology,
                           budget_s=3.0, progress=False)
  assert any(label.startswith("annealing from ")
             for label in result.candidates)
  assert result.runtime_s == min(result.candidates.values())
  assert result.runtime_s <= from_function.candidates["single_device (default)"]
  assert result.wall_s < 60


def test_a_named_baseline_runs_alone_in_its_best_schedule(from_function,
                                                          topology):
  result = gplace.optimize(from_function.graph, topology=topology,
                           method="heft", progress=False)
  assert list(result.candidates) == [result.method]
  assert result.method.startswith("heft (")
  same = gplace.optimize(from_function.graph, topology=topology,
                         method="baseline:heft", progress=False)
  np.testing.assert_array_equal(same.placement, result.placement)


def test_the_solver_tightens_the_bound_and_never_loses(from_function,
                                                       topology):
  result = gplace.optimize(from_function.graph, topology=topology,
                           method="solver", budget_s=5.0, progress=False)
  assert any(label.startswith("solver (CP-SAT") for label in result.candidates)
  assert result.runtime_s <= min(
      v for k, v in result.candidates.items() if not k.startswith("solver"))
  assert result.lower_bound_s >= gplace.lower_bound(from_function.graph,
                                                     topology)
  assert result.runtime_s >= result.lower_bound_s * (1 - 1e-6)


def test_the_solver_refuses_a_graph_above_its_limit():
  graph = random_dag(SOLVER_MAX_NODES + 1, seed=0)
  with pytest.raises(errors.SearchError,
                     match=f"at most {SOLVER_MAX_NODES} nodes.*coarsen.*"
                           "method='search'"):
    gplace.optimize(graph, method="solver", progress=False)


def test_device_constraints_are_kept(from_function, topology):
  graph = from_function.graph
  allowed = np.ones((graph.n_nodes, 2), bool)
  only_first = np.flatnonzero(graph.kind == gplace.NODE_OP)[::2]
  allowed[only_first, 1] = False
  assert np.any(from_function.placement[only_first] == 1)   # it binds
  constrained = graph.replace(allowed_devices=allowed)
  result = gplace.optimize(constrained, topology=topology, budget_s=2.0,
                           progress=False)
  assert np.all(result.placement[only_first] == 0)
  assert not constraints.violations(constrained, result.placement[None])[0]
  assert np.isfinite(result.runtime_s)


def test_auto_weighs_the_critical_chain_plan_apart(from_function, topology):
  graph = from_function.graph
  result = gplace.optimize(graph, topology=topology, budget_s=2.0,
                           progress=False)
  chain = {label: runtime for label, runtime in result.candidates.items()
           if label.startswith("critical chain (")}
  assert chain and all(np.isfinite(r) for r in chain.values())
  assert result.runtime_s <= min(chain.values()) * (1 + 1e-9)
  searched = gplace.optimize(graph, topology=topology, method="annealing",
                             budget_s=1.0, progress=False)
  assert not any(label.startswith("critical chain")
                 for label in searched.candidates)


@pytest.mark.parametrize("switch, pressure, weighed", [
    (dict(CHAIN_PLAN=False), False, False),
    (dict(CHAIN_PLAN_UNDER_PRESSURE=False), True, False),
    (dict(CHAIN_PLAN_UNDER_PRESSURE=False), False, True),
    (dict(CHAIN_PLAN_UNDER_PRESSURE=True), True, True),
])
def test_the_critical_chain_plan_follows_its_switches(
    monkeypatch, from_function, topology, switch, pressure, weighed):
  for name, value in switch.items():
    monkeypatch.setattr(budget, name, value)
  asked = []

  def memory_pressure(runs, share=None):
    asked.append(share)
    return pressure

  monkeypatch.setattr(budget, "memory_pressure", memory_pressure)
  result = gplace.optimize(from_function.graph, topology=topology,
                           budget_s=1.0, progress=False)
  assert weighed == any(label.startswith("critical chain (")
                        for label in result.candidates)
  if switch.get("CHAIN_PLAN_UNDER_PRESSURE") is False:
    assert budget.LNS_PRESSURE in asked   # the threshold of LNS's share


def test_no_feasible_placement_is_a_clear_error(from_function, topology):
  tiny = topology.replace(devices=tuple(
      dataclasses.replace(d, memory_bytes=1.0) for d in topology.devices))
  with pytest.raises(errors.PlacementError,
                     match="no placement .* fits in the memory"):
    gplace.optimize(from_function.graph, topology=tiny, method="heft",
                    progress=False)


def test_place_runs_the_result_like_jit(program, from_function, devices):
  fn, args = program
  expected = jax.jit(fn)(*args)
  placed = from_function.place(fn, devices=devices)
  np.testing.assert_allclose(placed(*args), expected, rtol=1e-5, atol=1e-5)
  # The same through gplace.place itself.
  placed = gplace.place(fn, from_function.graph, from_function.placement,
                        devices, schedule=from_function.schedule())
  np.testing.assert_allclose(placed(*args), expected, rtol=1e-5, atol=1e-5)
  # And gplace.place(fn, result): the result's placement in its schedule.
  placed = gplace.place(fn, from_function, devices=devices)
  np.testing.assert_array_equal(placed.placement, from_function.placement)
  np.testing.assert_allclose(placed(*args), expected, rtol=1e-5, atol=1e-5)
  with pytest.raises(errors.PlacementError, match="drop placement="):
    gplace.place(fn, from_function, from_function.placement, devices)
  with pytest.raises(errors.PlacementError, match="needs a placement"):
    gplace.place(fn, from_function.graph)


def _malformed_json(tmp_path):
  path = tmp_path / "bad.json"
  path.write_text(json.dumps({"nodes": [{"id": "a", "out_bytes": -5}],
                              "edges": []}))
  return str(path)


@pytest.mark.parametrize("make_input, error, message", [
    (lambda tmp: 42, errors.GraphError,
     "cannot place a value of type int.*pass a jittable function"),
    (lambda tmp: str(tmp / "missing.json"), errors.GraphError,
     "No graph file at path .*missing.json"),
    (_malformed_json, errors.GraphError, "out_bytes"),
    (lambda tmp: "rnnlm2", errors.GraphError,
     "not a graph file path.*gplace.workloads.get"),
])
def test_bad_inputs_raise_gplace_errors(make_input, error, message, tmp_path):
  with pytest.raises(error, match=message):
    gplace.optimize(make_input(tmp_path), progress=False)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(method="magic"), errors.SearchError,
     "unknown method 'magic'.*'auto'.*heft"),
    (dict(method="baseline:nope"), errors.SearchError, "unknown method"),
    (dict(topology="2tpu"), errors.TopologyError,
     "unknown topology '2tpu'.*1cpu\\+4gpu.*'local'"),
    (dict(budget_s=-1.0), errors.SearchError,
     "budget_s must be a positive.*budget_s=30"),
    (dict(budget_s=float("nan")), errors.SearchError, "budget_s"),
    (dict(seed=1.5), errors.SearchError, "seed must be an integer"),
    (dict(seed=-1), errors.SearchError, "seed must be an integer in"),
    (dict(method="pretrained", topology="1cpu+2gpu"), errors.SearchError,
     "needs a pretrained policy for '1cpu\\+2gpu'.*policy="),
    (dict(method="pretrained", policy=5), errors.SearchError,
     "policy must be the path"),
    (dict(method="search", policy="p.npz"), errors.SearchError,
     "policy= is used by methods"),
    (dict(method="finetune", policy=False), errors.SearchError,
     "policy=False turns it off"),
    (dict(method="pretrained", policy="missing.npz"), errors.PolicyError,
     "no policy file"),
    (dict(max_evaluations=0), errors.SearchError, "max_evaluations"),
    (dict(progress="yes"), errors.SearchError, "progress must be True"),
    (dict(costs=np.ones((3, 3))), errors.TopologyError, "costs has shape"),
])
def test_bad_settings_raise_gplace_errors(kwargs, error, message):
  with pytest.raises(error, match=message):
    gplace.optimize(random_dag(12, seed=0), **{"progress": False, **kwargs})


def test_a_function_that_does_not_trace_raises_the_capture_error(program):
  fn, (params, _) = program
  with pytest.raises(errors.CaptureError, match="Could not trace"):
    gplace.optimize(fn, params, jnp.ones((3, 5)), progress=False)
  with pytest.raises(errors.GraphError, match="only for a function"):
    gplace.optimize(random_dag(12, seed=0), params, progress=False)
  with pytest.raises(errors.CaptureError, match="profile=True .* function"):
    gplace.optimize(random_dag(12, seed=0), topology="local", profile=True,
                    progress=False)


@pytest.mark.skipif(not os.environ.get("GPLACE_SLOW_TESTS"),
                    reason="trains GO for a minute; GPLACE_SLOW_TESTS=1")
def test_policy_trains_go_on_the_graph_its_topology_and_costs():
  # A custom topology and a measured cost table: the training loop scores
  # with exactly them (the candidates' runtimes are the simulator's with
  # these costs).
  graph = random_dag(40, seed=1)
  topology = gplace.topology.preset("1cpu+2gpu").replace(name="mine")
  costs = np.random.default_rng(1).uniform(1e-4, 1e-3,
                                           (graph.n_nodes, 3))
  result = gplace.optimize(graph, topology=topology, costs=costs,
                           method="policy", budget_s=30.0, progress=False)
  trained = [label for label in result.candidates
             if label.startswith("GO trained on this graph")]
  assert trained
  for label in trained:
    again = gplace.simulate(graph, result.placement_of(label), topology,
                            costs=costs)
    np.testing.assert_allclose(float(again.runtime_s),
                               result.candidates[label], rtol=1e-6)
  assert np.isfinite(result.runtime_s)


def small_policy_file(directory, config_name="pretrain", **policy):
  """A small GO policy file for 1cpu+2gpu (freshly initialised; what a
  pretraining run of ``experiments/configs/<config_name>.py`` writes, minus
  the training); ``policy`` overrides ``config.policy``."""
  import importlib  # pylint: disable=import-outside-toplevel
  from gplace.rl import data, policy_file  # pylint: disable=import-outside-toplevel
  from gplace.rl import settings as settings_lib  # pylint: disable=import-outside-toplevel
  from gplace.rl.types import GraphSetup  # pylint: disable=import-outside-toplevel
  config = importlib.import_module(
      f"experiments.configs.{config_name}").get_config()
  config.topology = "1cpu+2gpu"
  config.policy.update(hidden_size=8, num_sage_layers=1,
                       num_attention_layers=1, num_heads=2, segment_length=16,
                       op_embedding_size=4, head_hidden_size=8, **policy)
  config.rl.num_samples = 4
  experiment = settings_lib.from_config(config)
  topology = gplace.topology.preset("1cpu+2gpu")
  setup = GraphSetup("g", random_dag(20, seed=3), None, None, {}, {}, 1.0,
                     1.0)
  batch = data.make_batch([setup], topology)
  module = experiment.policy.create(topology.n_devices)
  params = module.init(jax.random.PRNGKey(0),
                       jax.tree.map(lambda x: x[0], batch.graphs))
  return policy_file.save_policy(str(directory / "policy.npz"), params,
                                 experiment.policy, experiment.settings,
                                 topology, steps=0)


@pytest.fixture(scope="module")
def small_policy(tmp_path_factory):
  return small_policy_file(tmp_path_factory.mktemp("policy"))


def test_a_policy_given_a_plan_starts_from_the_best_default_baseline(
    tmp_path):
  # hint_init 100 dwarfs the fresh head's logits: the greedy placement is
  # the plan it was given, the fastest baseline in the default schedule.
  path = small_policy_file(tmp_path, "pretrain_hint", hint_init=100.0)
  graph = random_dag(30, seed=5)
  result = gplace.optimize(graph, topology="1cpu+2gpu", method="pretrained",
                           policy=path, progress=False)
  from gplace.autoplace import candidates  # pylint: disable=import-outside-toplevel
  from gplace.autoplace.inputs import Problem  # pylint: disable=import-outside-toplevel
  plan = candidates.best_of(candidates.baseline_runs(
      Problem(graph, result.topology)).default)
  greedy = f"pretrained GO zero-shot (given the {plan.label} plan): greedy"
  assert greedy in result.candidates
  assert result.candidates[greedy] == pytest.approx(plan.runtime_s, rel=1e-6)
  np.testing.assert_array_equal(result.placement_of(greedy), plan.placement)


def test_pretrained_runs_the_policy_zero_shot_next_to_the_baselines(
    small_policy):
  graph = random_dag(30, seed=5)
  result = gplace.optimize(graph, topology="1cpu+2gpu", method="pretrained",
                           policy=small_policy, progress=False)
  labels = list(result.candidates)
  assert "pretrained GO zero-shot: greedy" in labels
  assert "pretrained GO zero-shot: best of 16 samples" in labels
  baseline_best = min(v for k, v in result.candidates.items()
                      if not k.startswith("pretrained"))
  assert result.runtime_s <= baseline_best + 1e-12
  assert not any(label.startswith(("annealing", "solver"))
                 for label in labels)
  auto = gplace.optimize(graph, topology="1cpu+2gpu", policy=small_policy,
                         budget_s=5.0, progress=False, max_evaluations=64)
  assert "pretrained GO zero-shot: greedy" in auto.candidates
  without = gplace.optimize(graph, topology="1cpu+2gpu", policy=False,
                            budget_s=5.0, progress=False, max_evaluations=64)
  assert not any("pretrained" in label for label in without.candidates)
  # The solver and LNS run only with enough seconds left (a 5 s budget on
  # a loaded machine may leave them out of either call).
  timed = ("solver", "lns")
  assert ({k for k in without.candidates if not k.startswith(timed)}
          < {k for k in auto.candidates if not k.startswith(timed)})
  # Without policy=, "auto" applies none (not even a shipped one).
  default = gplace.optimize(random_dag(30, seed=5), budget_s=5.0,
                            progress=False, max_evaluations=64)
  assert default.topology.name == "1cpu+4gpu"
  assert not any("pretrained" in label for label in default.candidates)


def test_a_policy_for_other_devices_is_refused(small_policy):
  with pytest.raises(errors.SearchError, match="places on 3 devices"):
    gplace.optimize(random_dag(12, seed=0), topology="1cpu+4gpu",
                    method="pretrained", policy=small_policy, progress=False)


def test_the_shipped_policy_places_zero_shot_by_default():
  result = gplace.optimize(random_dag(40, seed=2), method="pretrained",
                           progress=False)
  assert result.topology.name == "1cpu+4gpu"
  # The shipped policy is given the best default-schedule baseline's plan
  # (experiments/configs/pretrain_hint.py), and its labels say so.
  greedy = [k for k in result.candidates
            if re.fullmatch(r"pretrained GO zero-shot \(given the .+ "
                            r"\(default\) plan\): greedy", k)]
  assert len(greedy) == 1, list(result.candidates)
  assert np.isfinite(result.candidates[greedy[0]])


@pytest.mark.parametrize("launch_s", [0.0, 2e-4])
def test_finetune_trains_the_pretrained_policy_on_the_graph(small_policy,
                                                            launch_s):
  # With a per-cluster launch cost (a profiled topology) it trains on the
  # host reward, which charges it (the jitted ones do not).
  topology = gplace.topology.preset("1cpu+2gpu")
  topology = topology.replace(devices=tuple(
      dataclasses.replace(dev, cluster_launch_s=launch_s)
      for dev in topology.devices))
  result = gplace.optimize(random_dag(30, seed=6), topology=topology,
                           method="finetune", policy=small_policy,
                           budget_s=600.0, progress=False)
  tuned = [k for k in result.candidates if "fine-tuned" in k]
  assert sorted(tuned) == ["pretrained GO fine-tuned (50 steps): best sampled",
                           "pretrained GO fine-tuned (50 steps): greedy"]
  assert all(np.isfinite(result.candidates[k]) for k in tuned)


@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_a_policy_file_with_non_finite_weights_is_refused(small_policy,
                                                          tmp_path, poison):
  # NaN logits make every node's argmax device 0: the "greedy" placement
  # was single_device's, listed as the policy's.
  from gplace.rl import policy_file  # pylint: disable=import-outside-toplevel
  with np.load(small_policy) as data:
    arrays = {k: data[k] for k in data.files}
  leaf = sorted(k for k in arrays if k.endswith("kernel"))[0]
  arrays[leaf] = arrays[leaf].copy()
  arrays[leaf].flat[1] = poison
  path = str(tmp_path / "poisoned.npz")
  np.savez(path, **arrays)
  with pytest.raises(errors.PolicyError,
                     match=re.escape(f"{leaf} (1 of {arrays[leaf].size} "
                                     "entries)")):
    policy_file.load_policy(path)
  with pytest.raises(errors.PolicyError, match="non-finite"):
    gplace.optimize(random_dag(30, seed=5), topology="1cpu+2gpu",
                    method="pretrained", policy=path, progress=False)
  # Nor is such a policy written (a diverged pretraining).
  from gplace.rl import settings as settings_lib  # pylint: disable=import-outside-toplevel
  params = policy_file._unflatten(  # pylint: disable=protected-access
      {k: v for k, v in arrays.items() if k != policy_file.META_KEY})
  out = tmp_path / "diverged.npz"
  with pytest.raises(errors.PolicyError, match=re.escape(
      f"the policy to be written to {out} has non-finite")):
    policy_file.save_policy(str(out), params, settings_lib.DEFAULT_POLICY,
                            settings_lib.TrainSettings(),
                            gplace.topology.preset("1cpu+2gpu"))
  assert not out.exists()


@pytest.mark.parametrize("method", ["finetune", "policy"])
def test_a_budget_too_small_to_train_says_so(small_policy, monkeypatch,
                                             method):
  # A first call compiles the training step (20-40 s on two CPU cores);
  # budget_s=2 left no room for it, and training ran past the budget
  # (budget_s=20 took 51 s). Now the result has what was found before and
  # says why training is missing.
  from gplace.autoplace import policy as learned  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(learned, "_first_chunk_s", {})  # nothing timed yet
  result = gplace.optimize(
      random_dag(30, seed=6), topology="1cpu+2gpu", method=method,
      policy=small_policy if method == "finetune" else None, budget_s=2.0,
      progress=False)
  label = ("pretrained GO fine-tuned" if method == "finetune"
           else "GO trained on this graph")
  assert not any(k.startswith(label) for k in result.candidates)
  if method == "finetune":
    assert "pretrained GO zero-shot: greedy" in result.candidates
  (note,) = result.notes
  assert note.startswith(f"{label}: not trained: ")
  assert "compiling included" in note and "raise budget_s" in note
  assert f"note: {note}" in str(result)
  assert np.isfinite(result.runtime_s)
  assert result.wall_s < 120  # generous: no training step was compiled


def test_the_budget_stops_fine_tuning_after_its_first_chunk(small_policy,
                                                            monkeypatch):
  from gplace.autoplace import policy as learned  # pylint: disable=import-outside-toplevel
  from gplace.autoplace.inputs import Problem  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(learned, "FIRST_CHUNK_S", 0.0)  # start whatever is left
  monkeypatch.setattr(learned, "_first_chunk_s", {})
  topology = gplace.topology.preset("1cpu+2gpu")
  loaded = learned.resolve_policy_file(small_policy, topology)
  notes = []
  found = learned.finetune_candidates(
      Problem(random_dag(30, seed=6), topology), loaded, time_s=1e-3,
      seed=0, notes=notes)
  assert sorted(c.label for c in found) == [
      "pretrained GO fine-tuned (10 of 50 steps, budget spent): best sampled",
      "pretrained GO fine-tuned (10 of 50 steps, budget spent): greedy"]
  (note,) = notes
  assert note.startswith("pretrained GO fine-tuned: the budget stopped "
                         "training after 10 of 50 steps (the first 10, "
                         "compiling included, took ")
  # The first chunk was timed: a later call with less left does not start.
  (timed,) = learned._first_chunk_s.values()  # pylint: disable=protected-access
  monkeypatch.setattr(learned, "FIRST_CHUNK_S", 1e9)
  assert learned.finetune_candidates(
      Problem(random_dag(30, seed=6), topology), loaded, time_s=timed / 2,
      seed=0, notes=notes) == []
  assert notes[-1].startswith("pretrained GO fine-tuned: not trained: ")


def test_profile_true_profiles_within_half_the_budget_from_the_cache(
    program, monkeypatch):
  # gplace.optimize hands gplace.profile its share of the budget and the
  # profile cache (the profile itself replaced: no timing here).
  fn, args = program
  measured = gplace.profile(fn, *args, repeats=1, transfer_repeats=1,
                            calibration_placements=0, calibration_rounds=1)
  calls = []

  def fake_profile(fn_, *args_, **kwargs):
    calls.append((fn_, kwargs))
    return measured

  monkeypatch.setattr(autoplace_inputs, "profile", fake_profile)
  result = gplace.optimize(fn, *args, topology="local", profile=True,
                           budget_s=8.0, method="single_device",
                           progress=False)
  assert calls == [(fn, dict(time_s=budget.PROFILE_SHARE * 8.0,
                             cache=True))]
  assert budget.PROFILE_SHARE <= 0.5
  assert result.topology is measured.topology
  np.testing.assert_array_equal(result.costs, measured.costs)


def test_a_second_profiled_optimize_reuses_the_cached_profile(
    program, monkeypatch, tmp_path):
  fn, args = program
  monkeypatch.setenv(profile_cache.CACHE_DIR_ENV, str(tmp_path))
  kwargs = dict(topology="local", profile=True, budget_s=4.0,
                method="single_device", progress=False)
  first = gplace.optimize(fn, *args, **kwargs)
  assert len(os.listdir(tmp_path)) == 1
  # Profiling again would time ops; the cached profile needs none.
  monkeypatch.setattr(op_timing, "time_ops", None)
  again = gplace.optimize(fn, *args, **kwargs)
  np.testing.assert_array_equal(again.costs, first.costs)
  np.testing.assert_array_equal(again.placement, first.placement)
