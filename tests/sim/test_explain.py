"""Tests of gplace.explain: a placement's critical path taken apart adds up
to its simulated runtime, and names compute, transfers and device waits
where they are, and the faster moves of its ops that memory blocks."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import gplace
from gplace.errors import GplaceError, PlacementError
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.sim.explain import DEVICE_ORDER, SAME_DEVICE, TRANSFER
from gplace.sim.presets import preset
from gplace.sim.simulator import simulate
from gplace.sim.topology import Device, Topology, uniform_links
from sim_cases import SETTINGS, random_topology

RTOL = 1e-5


def _graph(n: int, edges) -> Graph:
  return Graph.build(
      names=[f"op{i}" for i in range(n)], op_type=["op"] * n,
      kind=[NODE_OP] * n, out_shapes=[(1000,)] * n,
      out_dtype=["float32"] * n, out_bytes=[4000] * n, flops=[0.0] * n,
      bytes_accessed=[0.0] * n, edges=[(a, b, 4000) for a, b in edges],
      name="small")


def _adds_up(explanation) -> None:
  total = (explanation.start_s + explanation.compute_s
           + explanation.transfer_s + explanation.wait_s)
  assert total == pytest.approx(explanation.runtime_s, rel=RTOL, abs=1e-9)


def _chain_of_three(placement):
  """``gplace.explain`` of a chain of three 1-ms ops on 1cpu+4gpu."""
  topology = preset("1cpu+4gpu")
  costs = np.full((3, topology.n_devices), 1e-3)
  return gplace.explain(_graph(3, [(0, 1), (1, 2)]), np.array(placement),
                        topology, costs)


def test_a_chain_on_one_device_is_all_compute():
  result = _chain_of_three([1, 1, 1])
  np.testing.assert_array_equal(result.path, [0, 1, 2])
  np.testing.assert_array_equal(result.step_kind,
                                [SAME_DEVICE] * 2)
  assert result.compute_s == pytest.approx(3e-3, rel=RTOL)
  assert result.transfer_s == 0.0 and result.behind_s == 0.0
  assert result.device_changes == 0
  assert result.device_ops.tolist() == [0, 3, 0, 0, 0]
  _adds_up(result)


def test_a_value_sent_between_devices_is_a_transfer_on_the_path():
  result = _chain_of_three([1, 2, 2])
  np.testing.assert_array_equal(result.path, [0, 1, 2])
  assert result.step_kind.tolist() == [TRANSFER,
                                       SAME_DEVICE]
  sent = float(preset("1cpu+4gpu").transfer_time(4000, 1, 2))
  assert sent > 0
  assert result.transfer_s == pytest.approx(sent, rel=RTOL)
  assert result.runtime_s == pytest.approx(3e-3 + sent, rel=RTOL)
  _adds_up(result)


def test_independent_ops_on_one_device_wait_behind_each_other():
  # Two ops with no edge on one device: the second waits for the device.
  graph = _graph(2, [])
  topology = preset("1cpu+4gpu")
  costs = np.full((2, topology.n_devices), 2e-3)
  result = gplace.explain(graph, np.array([3, 3]), topology, costs,
                          order=np.array([0, 1]))
  np.testing.assert_array_equal(result.path, [0, 1])
  assert result.step_kind.tolist() == [DEVICE_ORDER]
  assert result.behind_s == pytest.approx(2e-3, rel=RTOL)
  assert result.runtime_s == pytest.approx(4e-3, rel=RTOL)
  assert result.schedule == "given order"
  _adds_up(result)


@SETTINGS
@given(n_nodes=st.integers(2, 40), n_devices=st.integers(1, 5),
       seed=st.integers(0, 10**6), ordered=st.booleans())
def test_the_split_adds_up_along_a_real_path(n_nodes, n_devices, seed,
                                             ordered):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, seed=seed)
  topology = random_topology(rng, n_devices)
  placement = rng.integers(0, n_devices, n_nodes)
  order = None
  if ordered:
    order = np.asarray(simulate(graph, placement, topology,
                                return_schedule=True).order).reshape(-1)
  result = gplace.explain(graph, placement, topology, order=order)
  _adds_up(result)
  assert result.runtime_s >= result.bound_s * (1 - 1e-6)
  assert 0 <= result.behind_s <= result.compute_s * (1 + RTOL)
  assert result.device_busy_s.sum() >= result.compute_s * (1 - RTOL) - 1e-12
  # Every step follows an edge of the graph or a shared compute group.
  edges = set(zip(graph.edge_src.tolist(), graph.edge_dst.tolist()))
  group = np.asarray(topology.compute_group)[placement]
  for (a, b), kind in zip(zip(result.path[:-1], result.path[1:]),
                          result.step_kind):
    if kind == DEVICE_ORDER:
      assert group[a] == group[b]
    else:
      assert (int(a), int(b)) in edges


def test_a_larger_proven_bound_is_reported():
  graph = _graph(2, [(0, 1)])
  topology = preset("1cpu+4gpu")
  result = gplace.explain(graph, np.array([1, 1]), topology, bound_s=10.0)
  assert result.bound_s == 10.0
  assert "lower bound 10 s" in result.table()


def test_bad_placements_raise_gplace_errors():
  graph = _graph(3, [(0, 1), (1, 2)])
  topology = preset("1cpu+4gpu")
  with pytest.raises(PlacementError, match="one placement"):
    gplace.explain(graph, np.zeros((2, 3), np.int32), topology)
  with pytest.raises(GplaceError):
    gplace.explain(graph, np.array([0, 1, 9]), topology)
  with pytest.raises(GplaceError):
    gplace.explain(graph, np.array([0, 1]), topology)


def test_optimize_explains_its_winner_in_its_schedule():
  graph = random_dag(30, seed=4)
  result = gplace.optimize(graph, topology="1cpu+4gpu", method="heft",
                           budget_s=5, progress=False)
  explained = result.explain()
  assert explained.runtime_s == pytest.approx(result.runtime_s, rel=RTOL)
  assert explained.bound_s == pytest.approx(result.lower_bound_s)
  text = str(explained)
  assert "critical path" in text and "transfers" in text
  _adds_up(explained)


# -- moves that memory blocks ---------------------------------------------------

MIB = 1 << 20
CPU, FAST, SLOW = 0, 1, 2


def _reads_a_weight() -> Graph:
  """``x -> a -> b -> out``; ``b`` reads the 1 MiB weight ``w``."""
  names = ["w", "x", "a", "b", "out"]
  graph = Graph.build(
      names=names, op_type=["dot"] * 5,
      kind=[NODE_INPUT, NODE_INPUT, NODE_OP, NODE_OP, NODE_OUTPUT],
      out_shapes=[(1,)] * 5, out_dtype=["float32"] * 5,
      out_bytes=[MIB, 4, 4, 4, 4], flops=[1.0] * 5,
      bytes_accessed=[8.0] * 5,
      edges=[(1, 2, 4), (2, 3, 4), (0, 3, MIB), (3, 4, 4)], name="weight")
  assert list(graph.names) == names
  return graph


def _fast_and_slow(fast_bytes: float) -> Topology:
  """A CPU, a fast accelerator with ``fast_bytes`` of memory and a slow
  one with room for everything."""
  devs = tuple(Device(name, kind, peak_flops=1e12, mem_bandwidth=1e11,
                      memory_bytes=memory, launch_overhead_s=0.0)
               for name, kind, memory in (("cpu:0", "cpu", 1e12),
                                          ("acc:0", "gpu", fast_bytes),
                                          ("acc:1", "gpu", 1e12)))
  bandwidth, latency = uniform_links(3, 1e11, 1e-6)
  return Topology(devices=devs, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(3),
                  name="cpu+fast+slow")


def _weight_costs() -> np.ndarray:
  """``b`` takes 1 ms on the fast accelerator, 3 on the slow, 10 on the
  CPU; ``a`` a tenth of that."""
  table = np.zeros((5, 3))
  table[2] = (1e-3, 1e-4, 3e-4)
  table[3] = (1e-2, 1e-3, 3e-3)
  table[4] = 1e-6
  return table


@pytest.mark.parametrize("fast_bytes", [0.5 * MIB, 4 * MIB])
def test_a_faster_move_of_a_path_op_that_memory_blocks_is_named(fast_bytes):
  graph, topology = _reads_a_weight(), _fast_and_slow(fast_bytes)
  placement = np.array([SLOW, CPU, FAST, SLOW, SLOW])
  result = gplace.explain(graph, placement, topology, _weight_costs())
  assert not result.oom and 3 in result.path.tolist()
  moved = placement.copy()
  moved[3] = FAST
  alone = simulate(graph, moved, topology, _weight_costs())
  assert float(alone.runtime_s) < result.runtime_s
  if bool(alone.oom):       # the weight does not fit next to a
    assert result.blocked.tolist() == [[3, FAST]]
    assert result.blocked_runtime_s[0] == pytest.approx(
        float(alone.runtime_s))
    assert "b to acc:0" in str(result) and "does not fit" in str(result)
  else:
    assert result.blocked.shape == (0, 2)
    assert "memory blocks" not in str(result)
  assert bool(alone.oom) == (fast_bytes < MIB)


def test_a_placement_out_of_memory_names_no_blocked_moves():
  graph, topology = _reads_a_weight(), _fast_and_slow(0.5 * MIB)
  result = gplace.explain(graph, np.array([FAST, CPU, FAST, FAST, FAST]),
                          topology, _weight_costs())
  assert result.oom and result.blocked.shape == (0, 2)
