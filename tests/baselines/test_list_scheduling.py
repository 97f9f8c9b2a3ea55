"""Tests of m-TOPO, m-ETF, HEFT and ordered EFT (gplace.baselines.list_scheduling)."""

import numpy as np
import pytest

from gplace import baselines
from gplace.sim import priority
from gplace import simulate
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim.presets import preset
from gplace.sim.topology import Topology, uniform_links

from baseline_cases import SIM_NODES, gpu, cpu, check_schedule


def test_m_topo_fills_gpus_in_topological_blocks():
  graph = random_dag(400, seed=1)
  topology = preset("1cpu+4gpu")
  placement = baselines.m_topo(graph, topology)
  ops = placement[graph.kind != NODE_INPUT]
  assert np.all(ops >= 1)
  assert np.all(np.diff(ops) >= 0)  # contiguous blocks, in order
  assert np.unique(ops).size == 4


@pytest.mark.parametrize("name", ["m_etf", "m_sct", "heft", "ordered_eft"])
def test_list_schedules_are_feasible(name):
  graph = random_dag(400, seed=8)
  topology = preset("1cpu+2gpu")
  costs = topology.op_costs(graph)
  plan = baselines.plan(name, graph, topology)
  np.testing.assert_array_equal(plan.placement,
                                baselines.get(name)(graph, topology))
  check_schedule(graph, topology, costs, plan)
  # The order is a topological order (a permutation, edges go forward).
  position = np.empty(graph.n_nodes, np.int64)
  position[plan.order] = np.arange(graph.n_nodes)
  assert np.all(position[graph.edge_src] < position[graph.edge_dst])
  # A list schedule is no shorter than the longest chain of fastest ops.
  fastest = costs.min(axis=1)
  assert plan.makespan_s >= priority.upward_rank(
      graph, fastest, np.zeros(graph.n_edges)).max() - 1e-12


@pytest.mark.parametrize("name", ["m_etf", "m_sct", "heft", "ordered_eft"])
def test_list_schedules_serialize_shared_compute_groups(name):
  graph = random_dag(300, seed=4)
  bandwidth, latency = uniform_links(3, 10e9, 20e-6)
  # Two CPU "devices" on the same cores, one GPU.
  topology = Topology(
      devices=(cpu(), cpu(i=1), gpu(0)), link_bandwidth=bandwidth,
      link_latency=latency, compute_group=np.array([0, 0, 1]), name="shared")
  plan = baselines.plan(name, graph, topology)
  check_schedule(graph, topology, topology.op_costs(graph), plan)


def test_plans_predict_simulated_runtime():
  topology = preset("1cpu+2gpu")
  graph = random_dag(SIM_NODES, seed=3)
  for name in baselines.schedulers():
    plan = baselines.plan(name, graph, topology)
    order = None if name == "ordered_eft" else plan.order
    runtime = float(simulate(graph, plan.placement, topology,
                             order=order).runtime_s)
    # Same model up to link-queue order and the send sizes: close, not equal.
    assert 0.7 * plan.makespan_s < runtime < 1.5 * plan.makespan_s, (
        name, runtime, plan.makespan_s)


# -- expert --------------------------------------------------------------------
