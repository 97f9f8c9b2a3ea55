"""Tests of gplace.execution.profiler: a calibrated profile has the right
shapes, feeds the simulator, survives save/load, and its transfer fit
recovers a line; within a budget it does what fits (a clock driven by
hand); a cached profile is reused for the same program and devices."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.errors import ExecutionError
from gplace.execution import cache as cache_lib
from gplace.execution import calibration
from gplace.execution import fitting
from gplace.execution import op_timing
from gplace.execution import profile_cache
from gplace.execution import profiler
from gplace.execution.profile_file import Profile
from gplace.graphs.capture import trace_program
from gplace.sim import clusters
from gplace.sim import simulator
from gplace.sim import presets
from gplace.graphs.graph import NODE_OP


def _mlp(params, x):
  for w in params:
    x = jnp.tanh(x @ w)
  return jnp.sum(x)


@pytest.fixture(scope="module")
def mlp_profile():
  params = [jnp.full((16, 16), 0.1) for _ in range(3)]
  x = jnp.ones((4, 16))
  devices = jax.devices()[:2]
  prof = gplace.profile(_mlp, params, x, devices=devices, repeats=2,
                        transfer_repeats=2, calibration_placements=3,
                        calibration_rounds=1)
  return prof, (params, x), devices


def test_profile_needs_real_arrays_not_shapes():
  # InvalidInputException from deep inside JAX before (issue 47); refused
  # before any device work.
  params = [jax.ShapeDtypeStruct((16, 16), jnp.float32)]
  with pytest.raises(ExecutionError,
                     match=r"needs real arrays, but argument arg0\[0\] is a "
                     r"jax.ShapeDtypeStruct \(16, 16\) float32"):
    gplace.profile(_mlp, params, jnp.ones((4, 16)))
  with pytest.raises(ExecutionError, match="argument x is"):
    gplace.profile(_mlp, params=[jnp.ones((16, 16))],
                   x=jax.ShapeDtypeStruct((4, 16), jnp.float32))


def test_profile_shapes_and_groups(mlp_profile):
  prof, _, devices = mlp_profile
  graph = prof.graph
  assert prof.costs.shape == (graph.n_nodes, len(devices))
  assert np.all(np.isfinite(prof.costs)) and np.all(prof.costs >= 0)
  is_op = graph.kind == NODE_OP
  assert np.all(prof.costs[~is_op] == 0) and np.all(prof.costs[is_op] > 0)
  # Forced CPU devices share cores: one compute group, timed alike.
  assert prof.topology.n_compute_groups == 1
  np.testing.assert_array_equal(prof.costs[:, 0], prof.costs[:, 1])
  # A single-device placement (one cluster: its ops and one launch) costs
  # the measured whole program, unless the launch alone would exceed 90%.
  launch = np.array([d.cluster_launch_s for d in prof.topology.devices])
  np.testing.assert_allclose(
      prof.costs.sum(0),
      np.maximum(prof.whole_program_s - launch, 0.1 * prof.whole_program_s),
      rtol=1e-6)
  assert prof.fusion_factor.shape == (2,) and np.all(prof.fusion_factor > 0)
  assert prof.topology.link_latency[0, 1] > 0
  assert np.all(prof.dispatch_s > 0) and prof.link_scale > 0
  # Each cluster costs the device's dispatch times its fitted factor.
  np.testing.assert_allclose(
      [dev.cluster_launch_s for dev in prof.topology.devices],
      prof.dispatch_s * prof.launch_scales)
  # ... and each copy into a device its dispatch times the copy factor.
  np.testing.assert_allclose(
      [dev.copy_issue_s for dev in prof.topology.devices],
      prof.dispatch_s * prof.copy_scales)


def test_profile_feeds_the_simulator(mlp_profile):
  prof, _, _ = mlp_profile
  graph = prof.graph
  placements = np.stack([np.zeros(graph.n_nodes, int),
                         np.arange(graph.n_nodes) % 2])
  runtime = np.asarray(simulator.simulate(graph, placements, prof.topology,
                                          costs=prof.costs).runtime_s)
  assert runtime.shape == (2,) and runtime[1] > runtime[0] > 0


def test_refit_on_the_same_measurements_gives_the_same_profile(mlp_profile):
  prof, _, _ = mlp_profile
  again = fitting.refit(prof, prof.calibration_s, prof.whole_program_s)
  np.testing.assert_array_equal(again.costs, prof.costs)
  assert again.topology.devices == prof.topology.devices
  np.testing.assert_array_equal(again.topology.link_latency,
                                prof.topology.link_latency)
  assert again.topology.batched_inputs == prof.topology.batched_inputs
  np.testing.assert_array_equal(again.copy_scales, prof.copy_scales)
  # A host twice as slow: twice the fusion factor, the same op times.
  slower = fitting.refit(prof, 2 * prof.calibration_s,
                          2 * prof.whole_program_s)
  np.testing.assert_allclose(slower.fusion_factor, 2 * prof.fusion_factor)
  np.testing.assert_array_equal(slower.op_time_s, prof.op_time_s)
  np.testing.assert_array_equal(slower.calibration_s, 2 * prof.calibration_s)


def test_calibration_runs_are_what_refit_takes(mlp_profile):
  prof, _, _ = mlp_profile
  runs = fitting.calibration_runs(prof)
  assert len(runs) == 2 + len(prof.calibration_placements)
  for j in range(2):
    np.testing.assert_array_equal(runs[j][0], j)
  np.testing.assert_array_equal(runs[2][1], prof.calibration_orders[0])


def test_refit_refuses_bad_measurements(mlp_profile):
  prof, _, _ = mlp_profile
  with pytest.raises(gplace.GplaceError, match="calibration seconds"):
    fitting.refit(prof, prof.calibration_s[:-1], prof.whole_program_s)
  bare = dataclasses.replace(prof, calibration_placements=None,
                             calibration_orders=None, calibration_s=None)
  with pytest.raises(gplace.GplaceError, match="no calibration runs"):
    fitting.refit(bare, np.ones(3), prof.whole_program_s)


def test_profile_save_load_round_trip(mlp_profile, tmp_path):
  prof, _, _ = mlp_profile
  path = tmp_path / "profile.npz"
  prof.save(path)
  loaded = Profile.load(path)
  assert loaded.graph == prof.graph
  np.testing.assert_array_equal(loaded.costs, prof.costs)
  np.testing.assert_array_equal(loaded.topology.link_latency,
                                prof.topology.link_latency)
  assert loaded.topology.devices == prof.topology.devices
  assert loaded.link_scale == prof.link_scale
  np.testing.assert_array_equal(loaded.launch_scales, prof.launch_scales)
  np.testing.assert_array_equal(loaded.copy_scales, prof.copy_scales)
  # The calibration's own runs travel along, for refitting offline.
  assert prof.calibration_placements.shape == (3, prof.graph.n_nodes)
  for field in ("calibration_placements", "calibration_orders",
                "calibration_s"):
    np.testing.assert_array_equal(getattr(loaded, field),
                                  getattr(prof, field))
  with pytest.raises(gplace.GplaceError, match="profile"):
    Profile.load(tmp_path / "missing.npz")
  # Links pipelined on some links only (an accelerator's profile) too.
  mask = np.ones((2, 2), bool)
  mask[1, 0] = False
  dataclasses.replace(prof, topology=prof.topology.replace(
      pipelined_links=mask)).save(path)
  np.testing.assert_array_equal(
      Profile.load(path).topology.pipelined_mask, mask)


def test_transfer_fit_is_positive():
  latency, bandwidth = op_timing.fit_transfer(
      jax.devices()[0], jax.devices()[1], repeats=2)
  assert latency >= 0 and bandwidth > 0


def test_block_placements_have_long_runs():
  rng = np.random.default_rng(0)
  placements = calibration.block_placements(100, 3, 5, rng, max_blocks=4)
  assert placements.shape == (5, 100)
  assert placements.min() >= 0 and placements.max() < 3
  switches = np.sum(placements[:, 1:] != placements[:, :-1], axis=1)
  assert np.all(switches <= 3)


def _link_fit_problem(topology, true_factors, count=24):
  """A captured MLP, block placements and their runtimes simulated on
  ``topology`` with its links scaled by ``true_factors`` ([D, D])."""
  params = [jnp.full((16, 16), 0.1) for _ in range(4)]
  graph = gplace.capture(_mlp, params, jnp.ones((4, 16)))
  rng = np.random.default_rng(0)
  is_op = graph.kind == NODE_OP
  costs = np.where(is_op[:, None],
                   rng.uniform(1e-5, 1e-4, (graph.n_nodes, topology.n_devices)),
                   0.0)
  placements = calibration.block_placements(graph.n_nodes, topology.n_devices,
                                         count, rng, max_blocks=8)
  orders = np.tile(np.arange(graph.n_nodes), (count, 1))
  truth = calibration.rescaled(topology, true_factors)
  measured = np.array([simulator.simulate(graph, p, truth, costs=costs,
                                          order=o).runtime_s
                       for p, o in zip(placements, orders)])
  return graph, costs, placements, orders, measured


def test_link_calibration_fits_each_direction_between_device_kinds():
  # CPU + 2 GPUs: host-to-device copies cheaper than the bare copy, device
  # to host dearer, GPU to GPU as measured. One factor for all cannot
  # match; one per (source kind, destination kind) recovers them.
  topology = presets.preset("1cpu+2gpu")
  true = np.array([[1.0, 0.5, 0.5], [4.0, 1.0, 1.0], [4.0, 1.0, 1.0]])
  graph, costs, placements, orders, measured = _link_fit_problem(topology,
                                                                 true)
  fitted, net, common, factors, launch, _ = calibration.calibrate_links(
      graph, topology, costs, placements, orders, measured)
  np.testing.assert_allclose(factors, true, rtol=1e-6)
  np.testing.assert_array_equal(launch, 1.0)   # no launch costs to scale
  np.testing.assert_array_equal(net, costs)
  assert common in np.geomspace(1 / 16, 16.0, 33)
  np.testing.assert_allclose(fitted.link_latency, topology.link_latency * true)
  simulated = np.array([simulator.simulate(graph, p, fitted, costs=costs,
                                           order=o).runtime_s
                        for p, o in zip(placements, orders)])
  np.testing.assert_allclose(simulated, measured, rtol=1e-6)


def test_held_links_of_a_pipelined_topology_cost_at_least_a_bare_copy():
  # As gplace.profile modelled CPU + GPUs before the executor's read-backs
  # overlapped: links pipelined but those from a GPU into the CPU, whose
  # copies wait for each other, each at least a bare copy: their factor is
  # not fitted below 1 (the others are).
  base = presets.preset("1cpu+2gpu")
  topology = base.replace(pipelined_links=fitting.executor_pipelining(
      base.devices, overlapped_host_reads=False))
  for into_cpu, want in ((4.0, 4.0), (0.25, 1.0)):
    true = np.array([[1.0, 0.5, 0.5], [into_cpu, 1.0, 1.0],
                     [into_cpu, 1.0, 1.0]])
    graph, costs, placements, orders, measured = _link_fit_problem(
        topology, true)
    fitted, _, _, factors, _, _ = calibration.calibrate_links(
        graph, topology, costs, placements, orders, measured)
    np.testing.assert_allclose(factors[1:, 0], want, rtol=1e-6)
    if into_cpu >= 1:      # within the bound: the fit reproduces the runs
      simulated = np.array([simulator.simulate(graph, p, fitted, costs=costs,
                                               order=o).runtime_s
                            for p, o in zip(placements, orders)])
      np.testing.assert_allclose(simulated, measured, rtol=1e-6)
  # Where every link is held (presets), nothing bounds the fit.
  graph, costs, placements, orders, measured = _link_fit_problem(base, true)
  factors = calibration.calibrate_links(
      graph, base, costs, placements, orders, measured)[3]
  np.testing.assert_allclose(factors, true, rtol=1e-6)


def test_link_calibration_keeps_one_factor_for_one_kind_of_device():
  topology = presets.local(jax.devices()[:2])
  graph, costs, placements, orders, measured = _link_fit_problem(
      topology, np.full((2, 2), 2.0))
  _, _, common, factors, _, _ = calibration.calibrate_links(
      graph, topology, costs, placements, orders, measured)
  assert common == pytest.approx(2.0)
  np.testing.assert_allclose(factors, [[1.0, 2.0], [2.0, 1.0]])


def _launch_fit_problem(topology, true_links, true_launch, seed,
                        true_copy=None):
  """A captured MLP, 16 calibration placements and their runtimes simulated
  on ``topology`` with links scaled by ``true_links`` ([D, D]), cluster
  launches by ``true_launch`` ([D]) and (optionally) ``true_copy`` ([D])
  seconds of host time per copy into each device; also the costs net of
  those launches."""
  params = [jnp.full((16, 16), 0.1) for _ in range(6)]
  graph = gplace.capture(_mlp, params, jnp.ones((4, 16)))
  rng = np.random.default_rng(seed)
  is_op = graph.kind == NODE_OP
  costs = np.where(is_op[:, None],
                   rng.uniform(1e-5, 1e-4, (graph.n_nodes, 2)), 0.0)
  placements = calibration.calibration_blocks(graph.n_nodes, 2, 16, rng)
  orders = np.tile(np.arange(graph.n_nodes), (16, 1))
  truth = calibration.rescaled(topology, true_links, true_launch,
                             copy_issue_s=true_copy)
  truth_costs = calibration.net_of_launch(costs, truth)
  measured = np.array([simulator.simulate(graph, p, truth, costs=truth_costs,
                                          order=o).runtime_s
                       for p, o in zip(placements, orders)])
  return graph, costs, placements, orders, measured, truth_costs


def test_few_noisy_runs_fit_factors_that_agree_across_repeats(monkeypatch):
  # Two or three runs with 2% noise cannot tell links from launches: many
  # factor pairs fit them about equally. Without the prior each repeat's
  # noise picks a different trade (links 1/16..2x here, launches 0..1.7x);
  # with it the fits stay near the measured costs and agree.
  topology = presets.local(jax.devices()[:2])
  topology = topology.replace(devices=tuple(
      dataclasses.replace(dev, cluster_launch_s=2e-5)
      for dev in topology.devices))
  graph, costs, placements, orders, measured, _ = _launch_fit_problem(
      topology, np.ones((2, 2)), np.ones(2), seed=1)
  def spreads():
    links, launches = [], []
    for few in (slice(0, 2), slice(1, 3), slice(2, 5)):
      for noise in ((1.02, 0.98, 1.0), (0.98, 1.02, 1.01)):
        runs = measured[few] * np.array(noise[:len(measured[few])])
        fit = calibration.calibrate_links(graph, topology, costs,
                                          placements[few], orders[few], runs)
        links.append(fit[3][0, 1])
        launches.append(fit[4][0])
    return (max(links) / min(links),
            max(launches) / max(min(launches), 1e-9))
  link_spread, launch_spread = spreads()
  assert link_spread <= 8.0 and launch_spread <= 8.0
  monkeypatch.setattr(calibration, "PRIOR_PER_OCTAVE", 0.0)
  free_links, free_launches = spreads()
  assert free_links > 8.0 and free_launches > 8.0


def test_launch_calibration_recovers_a_per_cluster_cost():
  # Two CPU devices whose clusters cost 4x the measured dispatch and whose
  # links cost 2x the bare copy: placements with 2-64 blocks tell the two
  # apart.
  topology = presets.local(jax.devices()[:2])
  topology = topology.replace(devices=tuple(
      dataclasses.replace(dev, cluster_launch_s=2e-5)
      for dev in topology.devices))
  graph, costs, placements, orders, measured, truth_costs = (
      _launch_fit_problem(topology, np.full((2, 2), 2.0), np.full(2, 4.0),
                          seed=0))
  fitted, net, _, factors, launch, _ = calibration.calibrate_links(
      graph, topology, costs, placements, orders, measured)
  np.testing.assert_allclose(launch, [4.0, 4.0])
  np.testing.assert_allclose(factors, [[1.0, 2.0], [2.0, 1.0]])
  assert [d.cluster_launch_s for d in fitted.devices] == pytest.approx(
      [8e-5, 8e-5])
  np.testing.assert_allclose(net, truth_costs)
  # A single-device placement (one cluster) still costs the column's sum.
  alone = simulator.simulate(graph, np.zeros(graph.n_nodes, int), fitted,
                             costs=net).runtime_s
  assert alone == pytest.approx(costs[:, 0].sum(), rel=1e-5)


def test_calibration_recovers_a_host_cost_per_copy():
  # Forced CPU devices as measured on this machine: every copy costs the
  # executor's thread twice the bare dispatch, on top of the link time
  # (which overlaps compute). The fit finds it next to links and launches.
  topology = presets.local(jax.devices()[:2])
  topology = topology.replace(devices=tuple(
      dataclasses.replace(dev, launch_overhead_s=1e-5, cluster_launch_s=1e-5)
      for dev in topology.devices))
  graph, costs, placements, orders, measured, truth_costs = (
      _launch_fit_problem(topology, np.full((2, 2), 0.5), np.full(2, 4.0),
                          seed=2, true_copy=np.full(2, 2e-5)))
  assert len({tuple(row) for row in clusters.count_copies(
      graph, placements, 2)}) > 4                 # the copies vary
  fitted, net, _, factors, launch, copy = calibration.calibrate_links(
      graph, topology, costs, placements, orders, measured)
  np.testing.assert_allclose(copy, [2.0, 2.0])
  np.testing.assert_allclose(launch, [4.0, 4.0])
  np.testing.assert_allclose(factors, [[1.0, 0.5], [0.5, 1.0]])
  assert [d.copy_issue_s for d in fitted.devices] == pytest.approx(
      [2e-5, 2e-5])
  np.testing.assert_allclose(net, truth_costs)
  simulated = np.array([simulator.simulate(graph, p, fitted, costs=net,
                                           order=o).runtime_s
                        for p, o in zip(placements, orders)])
  np.testing.assert_allclose(simulated, measured, rtol=1e-6)
  # Without the copy cost the same runs are matched worse.
  fitted_without = calibration.rescaled(fitted, copy_issue_s=np.zeros(2))
  without = np.array([simulator.simulate(graph, p, fitted_without, costs=net,
                                         order=o).runtime_s
                      for p, o in zip(placements, orders)])
  assert np.median(np.abs(without - measured) / measured) > 0.01


def test_calibration_fits_links_and_launches_of_two_device_kinds_jointly():
  # CPU + GPU as measured on an H200 machine: a value the GPU computed costs
  # the CPU 8x the bare copy, a parameter the GPU reads 2x, and CPU clusters
  # launch at 16x the bare dispatch while GPU ones cost a quarter of it.
  # Every factor is recovered; a descent from one factor for all links
  # (the search before 2026-11-27) stopped elsewhere on this problem.
  gpus = presets.preset("1cpu+2gpu")
  topology = gpus.replace(
      devices=tuple(dataclasses.replace(dev, cluster_launch_s=launch)
                    for dev, launch in zip(gpus.devices[:2], (1e-5, 6e-5))),
      link_latency=gpus.link_latency[:2, :2],
      link_bandwidth=gpus.link_bandwidth[:2, :2],
      compute_group=gpus.compute_group[:2], batched_inputs=True)
  true_links = np.array([[1.0, 2.0], [8.0, 1.0]])
  graph, costs, placements, orders, measured, _ = _launch_fit_problem(
      topology, true_links, np.array([16.0, 0.25]), seed=1)
  fitted, net, _, factors, launch, _ = calibration.calibrate_links(
      graph, topology, costs, placements, orders, measured)
  np.testing.assert_allclose(factors, true_links)
  np.testing.assert_allclose(launch, [16.0, 0.25])
  assert fitted.batched_inputs
  simulated = np.array([simulator.simulate(graph, p, fitted, costs=net,
                                           order=o).runtime_s
                        for p, o in zip(placements, orders)])
  np.testing.assert_allclose(simulated, measured, rtol=1e-6)


def test_calibration_blocks_span_few_and_many_clusters():
  rng = np.random.default_rng(0)
  placements = calibration.calibration_blocks(400, 2, 16, rng)
  blocks = 1 + np.sum(placements[:, 1:] != placements[:, :-1], axis=1)
  # 6 with 2-16 blocks, 6 with 17-64 (neighbours may share a device), and
  # 4 cut once, both directions.
  assert np.all(blocks[:6] <= 16) and np.all(blocks[6:12] <= 64)
  assert blocks[6:12].max() > 16
  np.testing.assert_array_equal(blocks[12:], 2)
  assert {(p[0], p[-1]) for p in placements[12:]} == {(0, 1), (1, 0)}


def test_refit_in_rounds_fits_on_each_runs_fastest_call(mlp_profile):
  prof, _, _ = mlp_profile
  measured = np.concatenate([prof.whole_program_s, prof.calibration_s])
  rounds = np.stack([3 * measured, measured, 2 * measured])
  again = fitting.refit_in_rounds(prof, rounds, [0, 1])
  same = fitting.refit(prof, prof.calibration_s, prof.whole_program_s)
  np.testing.assert_array_equal(again.costs, same.costs)
  np.testing.assert_array_equal(again.fusion_factor, same.fusion_factor)
  # Devices timed alike share the fastest of their single-device runs.
  rounds[:, 1] = 2 * rounds[:, 0]
  shared = fitting.refit_in_rounds(prof, rounds, [0, 0])
  np.testing.assert_array_equal(shared.whole_program_s,
                                [prof.whole_program_s[0]] * 2)


# -- within a budget, and cached ---------------------------------------------


def _drive_clock(monkeypatch, op_compile_s, cluster_compile_s):
  """Drives ``profiler``'s clock by hand: it stands still, except that each
  compile of one op costs ``op_compile_s`` and of a larger cluster
  ``cluster_compile_s`` (the compiled-cluster cache is emptied first, so
  every compile happens). Returns the primitives of the one-op clusters it
  compiled, in order."""
  now = [0.0]
  compile_cluster = cache_lib.compile_cluster
  compiled_ops = []

  def compiling(program, cluster, device):
    now[0] += op_compile_s if len(cluster.nodes) == 1 else cluster_compile_s
    if len(cluster.nodes) == 1:
      compiled_ops.append(
          program.nodes[cluster.nodes[0]].eqn.primitive.name)
    return compile_cluster(program, cluster, device)

  cache_lib.clear_cache()
  monkeypatch.setattr(cache_lib, "compile_cluster", compiling)
  monkeypatch.setattr(profiler, "_now", lambda: now[0])
  return compiled_ops


def _chain(params, x):
  for w in params:
    x = jnp.sin(x @ w) + jnp.cos(x) * 2.0
  return jnp.sum(x * x)


def _chain_args(width=16):
  return [jnp.full((width, width), 0.1) for _ in range(3)], jnp.ones((4, width))


def test_a_budget_always_keeps_the_single_device_runs(monkeypatch):
  # Each placement's compile costs far more than the budget: only the
  # single-device run (one for devices timed alike) is built and timed, and
  # the profile is still whole.
  _drive_clock(monkeypatch, op_compile_s=0.0, cluster_compile_s=10.0)
  params, x = _chain_args()
  prof = gplace.profile(_chain, params, x, devices=jax.devices()[:2],
                        time_s=5.0)
  meta = prof.meta
  assert meta["time_s"] == 5.0 and not meta["complete"]
  assert meta["calibration_placements"] == 0
  assert meta["calibration_placements_asked"] == 16
  assert meta["op_signatures_timed"] == meta["op_signatures"]
  assert prof.calibration_placements is None and meta["fit_grid"] == "none"
  assert np.all(np.isfinite(prof.whole_program_s))
  assert np.all(np.isfinite(prof.costs))
  assert set(meta["phases_s"]) >= {"trace", "ops", "transfers",
                                   "calibration_build", "calibration_runs",
                                   "fit"}


def test_a_budget_times_the_costliest_ops_and_estimates_the_rest(
    monkeypatch):
  # Each op compile costs 1 s and ops get OPS_SHARE of 10 s: a few
  # signatures are timed, the costliest (by roofline) first; the others
  # cost the dispatch plus their roofline times the timed ops' ratio.
  compiled_ops = _drive_clock(monkeypatch, op_compile_s=1.0,
                              cluster_compile_s=0.0)
  params, x = _chain_args(64)
  devices = jax.devices()[:2]
  prof = gplace.profile(_chain, params, x, devices=devices, time_s=10.0,
                        calibration_placements=2, calibration_rounds=2)
  meta = prof.meta
  timed = meta["op_signatures_timed"]
  assert 0 < timed < meta["op_signatures"] and not meta["complete"]
  assert timed <= profiler.OPS_SHARE * 10.0 + 1
  graph = prof.graph
  is_op = graph.kind == NODE_OP
  roofline = presets.local(devices).op_costs(graph)
  estimated = op_timing.estimated_op_times(prof.op_time_s, roofline,
                                           prof.dispatch_s, ~is_op)
  matches = np.isclose(prof.op_time_s, estimated, rtol=1e-9)[:, 0] & is_op
  assert 0 < matches.sum() < is_op.sum()
  # The matmuls (the costliest ops) were timed, first, not estimated. (A
  # timed op whose ratio is the median of the timed ones also equals its
  # estimate, so matching the estimate cannot tell timed from estimated.)
  assert compiled_ops and compiled_ops[0] == "dot_general"


def test_an_ample_budget_does_everything_asked(monkeypatch):
  _drive_clock(monkeypatch, op_compile_s=0.0, cluster_compile_s=0.0)
  params, x = _chain_args()
  prof = gplace.profile(_chain, params, x, devices=jax.devices()[:2],
                        time_s=1e6, calibration_placements=3,
                        calibration_rounds=2)
  meta = prof.meta
  assert meta["complete"] and meta["calibration_placements"] == 3
  assert meta["calibration_rounds"] == 2 and meta["repeats"] == 3
  assert prof.calibration_placements.shape == (3, prof.graph.n_nodes)


def test_profile_without_budget_records_what_it_did(mlp_profile):
  prof, _, _ = mlp_profile
  meta = prof.meta
  assert meta["time_s"] is None and meta["complete"]
  assert (meta["calibration_placements"], meta["calibration_rounds"],
          meta["repeats"]) == (3, 1, 2)
  assert "cache" not in meta and prof.profile_s > 0


@pytest.mark.parametrize("kwargs,message", [
    (dict(time_s=0), "time_s must be a positive"),
    (dict(time_s=float("inf")), "time_s must be a positive"),
    (dict(time_s="10"), "time_s must be a positive"),
    (dict(cache=3), "cache must be True, False or a directory"),
])
def test_profile_rejects_a_bad_budget_or_cache(kwargs, message):
  params, x = _chain_args()
  with pytest.raises(gplace.GplaceError, match=message):
    gplace.profile(_chain, params, x, **kwargs)


_CHEAP = dict(repeats=1, transfer_repeats=1, calibration_placements=1,
              calibration_rounds=1)


def test_a_cached_profile_is_reused_for_the_same_program(tmp_path,
                                                         monkeypatch):
  params, x = _chain_args()
  devices = jax.devices()[:2]
  first = gplace.profile(_chain, params, x, devices=devices, cache=tmp_path,
                         **_CHEAP)
  assert first.meta["cache"]["hit"] is False
  assert os.listdir(tmp_path) == [os.path.basename(first.meta["cache"]["path"])]
  # Other argument values of the same shapes: the same program, not run.
  monkeypatch.setattr(op_timing, "time_ops", None)   # would fail if called
  again = gplace.profile(_chain, [p + 1 for p in params], x, devices=devices,
                         cache=tmp_path, **_CHEAP)
  assert again.meta["cache"]["hit"] is True
  assert again.meta["cache"]["key"] == first.meta["cache"]["key"]
  assert again.graph == first.graph
  for field in ("costs", "op_time_s", "dispatch_s", "whole_program_s",
                "calibration_placements", "calibration_s"):
    np.testing.assert_array_equal(getattr(again, field),
                                  getattr(first, field))
  assert again.topology.devices == first.topology.devices
  np.testing.assert_array_equal(again.topology.link_latency,
                                first.topology.link_latency)
  assert again.profile_s == first.profile_s


def test_a_changed_shape_or_device_set_misses_the_cache(tmp_path):
  params, x = _chain_args()
  devices = jax.devices()[:2]
  first = gplace.profile(_chain, params, x, devices=devices, cache=tmp_path,
                         **_CHEAP)
  wider = gplace.profile(_chain, params, jnp.ones((8, 16)), devices=devices,
                         cache=tmp_path, **_CHEAP)
  assert wider.meta["cache"]["hit"] is False
  assert wider.meta["cache"]["key"] != first.meta["cache"]["key"]
  others = gplace.profile(_chain, params, x, devices=jax.devices()[1:3],
                          cache=tmp_path, **_CHEAP)
  assert others.meta["cache"]["hit"] is False
  assert len(os.listdir(tmp_path)) == 3


def test_the_cache_directory_comes_from_the_environment(tmp_path,
                                                        monkeypatch):
  monkeypatch.setenv(profile_cache.CACHE_DIR_ENV, str(tmp_path / "env"))
  assert profile_cache.cache_dir(True) == str(tmp_path / "env")
  assert profile_cache.cache_dir(False) is None
  assert profile_cache.cache_dir(tmp_path) == str(tmp_path)
  monkeypatch.delenv(profile_cache.CACHE_DIR_ENV)
  assert profile_cache.cache_dir(True).endswith(
      os.path.join(".cache", "gplace", "profiles"))


def test_a_budgeted_profile_answers_requests_with_no_more_budget(
    mlp_profile, tmp_path):
  prof, _, _ = mlp_profile
  partial = dataclasses.replace(prof, meta={"time_s": 10.0,
                                            "complete": False})
  assert profile_cache.good_enough(partial, 10.0)
  assert profile_cache.good_enough(partial, 5.0)
  assert not profile_cache.good_enough(partial, 20.0)
  assert not profile_cache.good_enough(partial, None)
  assert profile_cache.good_enough(prof, None)        # complete
  profile_cache.store(str(tmp_path), "k", partial)
  assert profile_cache.load(str(tmp_path), "k", 20.0) is None
  loaded = profile_cache.load(str(tmp_path), "k", 5.0)
  assert loaded.meta == partial.meta
  # Written atomically: no temporary file is left behind.
  assert os.listdir(tmp_path) == ["k.npz"]


def test_program_fingerprint_sees_ops_and_constants_not_values():
  params, x = _chain_args()
  trace = lambda fn, *args: trace_program(fn, *args)
  base = profile_cache.program_fingerprint(trace(_chain, params, x))
  assert base == profile_cache.program_fingerprint(
      trace(_chain, [p * 3 for p in params], x + 1))
  assert base != profile_cache.program_fingerprint(
      trace(_chain, params, x.astype(jnp.bfloat16)))
  scaled = lambda c: (lambda p, v: _chain(p, v * c))
  assert profile_cache.program_fingerprint(
      trace(scaled(np.full((4, 16), 2.0, np.float32)), params, x)) != (
          profile_cache.program_fingerprint(
              trace(scaled(np.full((4, 16), 3.0, np.float32)), params, x)))
