"""Tests of Topology.pipelined_links: a link is busy for a transfer's bytes
only and its latency overlaps the next transfer (on every link, or per
link), the same in the compiled host scheduler and both references; the
jitted kernels refuse it."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace.errors import ConfigError, TopologyError
from gplace.execution import fitting
from gplace.graphs.graph import Graph, NODE_OP, random_dag
from gplace.rl import checks
from gplace.rl.settings import RLSettings, TrainSettings
from gplace.sim import list_scheduler
from gplace.sim import topology_json
from gplace.sim.dispatch import make_dispatch_problem
from gplace.sim.priority import order_priority
from gplace.sim.problem import (link_hold_seconds, make_problem,
                                transfer_seconds)
from gplace.sim.reference import simulate_reference
from gplace.sim.simulator import simulate
from gplace.sim.presets import local, preset
from gplace.sim.topology import Device
from sim_cases import SETTINGS, assert_runs_as_the_reference, random_topology


def pipelining(rng: np.random.Generator, n_devices: int, per_link: bool):
  """True, or a random ``[D, D]`` bool array with both kinds of links."""
  if not per_link:
    return True
  mask = rng.random((n_devices, n_devices)) < 0.5
  mask[0, 1], mask[1, 0] = True, False
  return mask


@settings(SETTINGS, max_examples=14)
@given(n_nodes=st.integers(4, 40), n_devices=st.integers(2, 4),
       seed=st.integers(0, 10_000), batched=st.booleans(),
       per_link=st.booleans(),
       schedule=st.sampled_from(["static", "dynamic", "planned", "best"]))
def test_fast_paths_match_the_reference(n_nodes, n_devices, seed, batched,
                                        per_link, schedule):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, n_inputs=3, seed=seed)
  topology = random_topology(rng, n_devices).replace(
      pipelined_links=pipelining(rng, n_devices, per_link),
      batched_inputs=batched)
  assert topology.has_pipelined_links
  placements = rng.integers(0, n_devices, (3, graph.n_nodes))
  result = assert_runs_as_the_reference(graph, placements, topology,
                                        schedule)
  if schedule == "dynamic":    # the reference's own list scheduler agrees
    for k in range(3):
      own = simulate_reference(graph, placements[k], topology,
                               schedule="dynamic")
      np.testing.assert_array_equal(result.order[k], own.order)


@settings(SETTINGS, max_examples=8)
@given(n_nodes=st.integers(4, 60), n_devices=st.integers(2, 5),
       seed=st.integers(0, 10_000), per_link=st.booleans())
def test_a_fixed_order_is_never_slower_pipelined(n_nodes, n_devices, seed,
                                                 per_link):
  # In a fixed order every time is a max and sum of earlier ones, so a link
  # freed sooner cannot delay anything.
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  serial = random_topology(rng, n_devices)
  pipelined = serial.replace(
      pipelined_links=pipelining(rng, n_devices, per_link))
  placements = rng.integers(0, n_devices, (8, graph.n_nodes))
  order = np.arange(graph.n_nodes)
  fast = np.asarray(simulate(graph, placements, pipelined,
                             order=order).runtime_s)
  slow = np.asarray(simulate(graph, placements, serial,
                             order=order).runtime_s)
  assert np.all(fast <= slow * (1 + 1e-6))


def test_two_values_on_one_link_by_hand():
  # a and b (device 1) feed c and e (device 2): one link, two transfers of
  # 0.1 s of bytes and 1 s of latency each.
  graph = Graph.build(
      names=["a", "b", "c", "e"], op_type=["op"] * 4, kind=[NODE_OP] * 4,
      out_shapes=[(1000,)] * 4, out_dtype=["float32"] * 4,
      out_bytes=[4000] * 4, flops=[0.0] * 4, bytes_accessed=[0.0] * 4,
      edges=[(0, 2, 4000), (1, 3, 4000)])
  base = preset("1cpu+2gpu")
  serial = base.replace(link_latency=np.ones((3, 3)),
                        link_bandwidth=np.full((3, 3), 40_000.0))
  pipelined = serial.replace(pipelined_links=True)
  # Per link: only the link 1 -> 2 that the values take, or every link but
  # that one.
  this_link = np.zeros((3, 3), bool)
  this_link[1, 2] = True
  only_this = serial.replace(pipelined_links=this_link)
  all_others = serial.replace(pipelined_links=~this_link)
  costs = np.zeros((4, 3))
  placement = np.array([1, 1, 2, 2])
  for topology, want in ((serial, 2.2), (pipelined, 1.2), (only_this, 1.2),
                         (all_others, 2.2)):
    # serial: a holds the link 0-1.1 s, b 1.1-2.2 s; pipelined: a holds it
    # 0-0.1 s and arrives at 1.1 s, b holds it 0.1-0.2 s, arrives at 1.2 s.
    result = simulate(graph, placement, topology, costs=costs)
    assert float(result.runtime_s) == pytest.approx(want, rel=1e-6)
    ref = simulate_reference(graph, placement, topology, costs=costs)
    assert ref.runtime_s == pytest.approx(want, rel=1e-12)
    # The baselines' planners book the link the same way.
    plan = list_scheduler.heft_schedule(
        list_scheduler.prepare(graph, topology, costs), np.arange(3),
        order_priority(np.arange(4)), placement=placement)
    assert plan.makespan_s == pytest.approx(want, rel=1e-12)
  hold = link_hold_seconds(graph, pipelined)
  np.testing.assert_allclose(hold[:2, 1, 2], 0.1)   # c, e send nothing
  np.testing.assert_allclose(transfer_seconds(graph, pipelined)[:2, 1, 2],
                             1.1)
  np.testing.assert_array_equal(link_hold_seconds(graph, serial),
                                transfer_seconds(graph, serial))
  np.testing.assert_allclose(link_hold_seconds(graph, only_this)[:2, 1, 2],
                             0.1)
  np.testing.assert_allclose(link_hold_seconds(graph, all_others)[:2, 1, 2],
                             1.1)


@pytest.mark.parametrize("per_link", [False, True])
def test_the_jitted_kernels_refuse_pipelined_links(per_link):
  graph = random_dag(12, seed=0)
  topology = preset("1cpu+2gpu").replace(
      pipelined_links=pipelining(np.random.default_rng(0), 3, per_link))
  with pytest.raises(TopologyError, match="pipelined_links"):
    make_problem(graph, topology)
  with pytest.raises(TopologyError, match="pipelined_links"):
    make_dispatch_problem(graph, topology)
  make_dispatch_problem(graph, topology, host=True)   # the host scheduler's
  assert checks.ignores_host_costs("simulator", topology)
  assert not checks.ignores_host_costs("simulator_host", topology)
  assert not checks.ignores_host_costs("simulator", preset("1cpu+2gpu"))


def test_the_in_step_reward_is_refused_with_pipelined_links():
  settings = TrainSettings(rl=RLSettings(reward="simulator"))
  topology = preset("1cpu+2gpu").replace(pipelined_links=True)
  with pytest.raises(ConfigError, match="pipelined links True"):
    checks.check_reward_topology(settings, topology)


def test_pipelined_links_survive_the_json_format_and_profiles(tmp_path):
  mask = np.zeros((3, 3), bool)
  mask[0, 1] = True
  for value in (True, False, mask):
    topology = preset("1cpu+2gpu").replace(pipelined_links=value)
    back = topology_json.topology_from_dict(
        topology_json.topology_to_dict(topology), "topology")
    np.testing.assert_array_equal(back.pipelined_mask,
                                  topology.pipelined_mask)
    assert back.has_pipelined_links == (value is not False)
  # One value on every link is that bool (the diagonal does not count).
  assert preset("1cpu+2gpu").replace(
      pipelined_links=~np.eye(3, dtype=bool)).pipelined_links is True
  assert preset("1cpu+2gpu").replace(
      pipelined_links=np.eye(3, dtype=bool)).pipelined_links is False
  # gplace.profile's measured topology pipelines the executor's links.
  measured = fitting.measured_topology(
      local(), np.full(len(local().devices), 1e-5),
      np.zeros((len(local().devices),) * 2),
      np.full((len(local().devices),) * 2, 1e10), 1.0)
  assert measured.pipelined_links is True       # host devices only


def test_the_executor_pipelines_every_link():
  devices = [Device(name, kind, 1e12, 1e11, 1e9)
             for name, kind in (("cpu:0", "cpu"), ("gpu:0", "gpu"),
                                ("gpu:1", "gpu"))]
  assert fitting.executor_pipelining(devices).shape == (3, 3)
  assert fitting.executor_pipelining(devices).all()
  # Before its read-backs overlapped: held from an accelerator into the CPU.
  mask = fitting.executor_pipelining(devices, overlapped_host_reads=False)
  np.testing.assert_array_equal(mask, [[True, True, True],
                                       [False, True, True],
                                       [False, True, True]])
  assert fitting.executor_pipelining(devices[:1], False).all()


@pytest.mark.parametrize("value, match", [
    ("yes", "True, False or a"), (np.ones((3, 3), np.int32), "bool array"),
    (np.ones((2, 2), bool), "shape"), (None, "True, False or a")])
def test_bad_pipelined_links_are_refused(value, match):
  with pytest.raises(TopologyError, match=match):
    preset("1cpu+2gpu").replace(pipelined_links=value)
