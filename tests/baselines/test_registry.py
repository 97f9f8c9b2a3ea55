"""Tests of the baseline registry (gplace.baselines): names, get, plan, run_all."""


from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from gplace import baselines
from gplace import simulate
from gplace.errors import BaselineError, GplaceError, GraphError, TopologyError
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset

from baseline_cases import SIM_NODES, make_topology, gpu, cpu, check_schedule


def test_names_and_get():
  assert baselines.names() == [
      "single_device", "round_robin", "random", "expert", "metis", "m_topo",
      "m_etf", "m_sct", "heft", "ordered_eft"]
  assert baselines.schedulers() == ["m_etf", "m_sct", "heft", "ordered_eft"]
  for name in baselines.names():
    assert callable(baselines.get(name))
  with pytest.raises(GplaceError, match="m_etf"):
    baselines.get("nope")


def test_bad_inputs_raise_gplace_errors():
  graph = random_dag(40, seed=0)
  topology = preset("1cpu+2gpu")
  with pytest.raises(GraphError):
    baselines.m_etf("not a graph", topology)
  with pytest.raises(TopologyError):
    baselines.heft(graph, "1cpu+2gpu")
  with pytest.raises(TopologyError, match="costs"):
    baselines.m_topo(graph, topology, costs=np.ones((3, 3)))
  with pytest.raises(TopologyError):
    make_topology([])


# -- every baseline on random DAGs ---------------------------------------------


@pytest.mark.parametrize("topology_name", ["1cpu+2gpu", "1cpu+4gpu", "8xh100"])
def test_every_baseline_returns_valid_placement(topology_name):
  topology = preset(topology_name)
  for seed in (0, 1):
    graph = random_dag(300, seed=seed)
    placements = baselines.run_all(graph, topology)
    assert list(placements) == baselines.names()
    for name, placement in placements.items():
      assert placement.shape == (graph.n_nodes,), name
      assert placement.dtype == np.int32, name
      assert placement.min() >= 0 and placement.max() < topology.n_devices
    resident = baselines.resident_bytes(graph, placements["random"],
                                        topology.n_devices)
    assert resident.sum() == graph.out_bytes.sum()


@settings(max_examples=15, deadline=None)
@given(n_nodes=st.integers(2, 60), seed=st.integers(0, 10**6),
       avg_degree=st.floats(1.0, 4.0), n_gpus=st.integers(1, 3))
def test_tiny_graphs_any_baseline(n_nodes, seed, avg_degree, n_gpus):
  graph = random_dag(n_nodes, seed=seed, avg_degree=avg_degree)
  topology = make_topology([cpu()] + [gpu(i) for i in range(n_gpus)])
  for name, placement in baselines.run_all(graph, topology).items():
    assert placement.shape == (n_nodes,), name
    assert placement.min() >= 0 and placement.max() <= n_gpus, name
  for name in baselines.schedulers():
    check_schedule(graph, topology, topology.op_costs(graph),
                   baselines.plan(name, graph, topology))


def test_one_device_topology():
  topology = make_topology([gpu(0)])
  graph = random_dag(100, seed=3)
  for name, placement in baselines.run_all(graph, topology).items():
    assert np.all(placement == 0), name


def test_deterministic_for_a_seed():
  graph = random_dag(200, seed=4)
  topology = preset("1cpu+4gpu")
  first = baselines.run_all(graph, topology, seed=7)
  second = baselines.run_all(graph, topology, seed=7)
  for name in baselines.names():
    np.testing.assert_array_equal(first[name], second[name])
  other = baselines.random(graph, topology, seed=8)
  assert not np.array_equal(other, first["random"])


def test_plan_of_a_non_scheduler_is_id_order():
  graph = random_dag(50, seed=0)
  plan = baselines.plan("metis", graph, preset("1cpu+2gpu"))
  np.testing.assert_array_equal(plan.order, np.arange(50))
  assert np.isnan(plan.makespan_s)


def test_schedulers_beat_round_robin_under_simulator():
  topology = preset("1cpu+2gpu")
  for seed in (0, 1):
    graph = random_dag(SIM_NODES, seed=seed)
    names = ("round_robin", "m_etf", "heft", "m_sct", "ordered_eft")
    placements = baselines.run_all(graph, topology, only=names)
    result = simulate(graph, np.stack([placements[n] for n in names]),
                      topology)
    runtime = dict(zip(names, np.asarray(result.runtime_s)))
    for name in names[1:]:
      assert runtime[name] < runtime["round_robin"], runtime


def test_get_knows_the_baselines_only():
  # The searches and the solver are gplace.placers' (tests/test_placers.py).
  from gplace import search  # pylint: disable=g-import-not-at-top
  for name in search.PLACERS:
    assert name not in baselines.names()
    with pytest.raises(GplaceError, match="gplace.placers.get"):
      baselines.get(name)


def test_only_takes_one_name_or_a_list_and_checks_them_first():
  graph = random_dag(20, seed=0)
  topology = preset("1cpu+2gpu")
  one = baselines.run_all(graph, topology, only="heft")  # was "Unknown 'h'"
  assert list(one) == ["heft"]
  np.testing.assert_array_equal(
      one["heft"], baselines.run_all(graph, topology, only=["heft"])["heft"])
  assert baselines.best(graph, topology, only="heft").default.name == "heft"
  for call in (baselines.run_all, baselines.best):
    for only, words in ((3, "a list of them"), ([], "empty"),
                        ({"heft"}, "a list of them"),
                        (["heft", "nope"], "'nope'")):
      with pytest.raises(BaselineError) as info:
        call(graph, topology, only=only)
      assert words in str(info.value)
