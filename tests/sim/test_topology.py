"""Tests of topologies: presets, local(), the roofline cost model, links and
the checks of a measured cost table."""

import jax
import numpy as np
import pytest

import gplace
from gplace.errors import TopologyError
from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.sim import presets
from gplace.sim import topology as topology_lib
from gplace.sim.presets import local, preset, preset_names
from gplace.sim.topology import Device, Topology, uniform_links, validate_costs


def tiny_graph() -> Graph:
  """input -> op (compute bound) -> op (memory bound) -> output."""
  return Graph.build(
      names=["x", "matmul", "add", "out"], op_type=["input", "dot", "add",
                                                    "output"],
      kind=[NODE_INPUT, NODE_OP, NODE_OP, NODE_OUTPUT],
      out_shapes=[(256,)] * 4, out_dtype=["float32"] * 4,
      out_bytes=[1024] * 4, flops=[0.0, 6e9, 1e3, 0.0],
      bytes_accessed=[0.0, 1e3, 6.8e8, 0.0],
      edges=[(0, 1, 1024), (1, 2, 1024), (2, 3, 1024)])


def test_preset_names_and_shapes():
  assert preset_names() == ["1cpu+2gpu", "1cpu+4gpu", "1cpu+8gpu", "2x8h100",
                            "4x8h100", "8xh100"]
  for name in preset_names():
    topology = preset(name)
    d = topology.n_devices
    assert topology.name == name
    assert topology.link_bandwidth.shape == (d, d)
    assert topology.link_latency.shape == (d, d)
    assert topology.compute_group.shape == (d,)
    assert topology.n_compute_groups == d          # nothing shares compute
    assert np.all(np.diag(topology.link_latency) == 0)
    assert len(topology.device_names) == d
  assert preset("1cpu+4gpu").device_names == [
      "cpu:0", "gpu:0", "gpu:1", "gpu:2", "gpu:3"]
  assert preset("8xh100").n_devices == 8


def test_hosts_of_h100_have_nvlink_inside_and_400_gbps_between():
  topology = preset("2x8h100")
  assert topology.n_devices == 16
  assert topology.device_names[8] == "host1:gpu:0"
  assert np.all(topology.peak_flops == preset("8xh100").peak_flops[0])
  assert topology.link_bandwidth[0, 7] == 450e9       # NVLink, one way
  assert topology.link_bandwidth[0, 8] == 400e9 / 8   # a 400 Gb/s port
  assert topology.link_latency[8, 0] > topology.link_latency[1, 0]
  assert preset("4x8h100").n_devices == 32


def test_preset_figures():
  topology = preset("1cpu+2gpu")
  np.testing.assert_allclose(topology.peak_flops, [0.66e12, 3.06e12, 3.06e12])
  np.testing.assert_allclose(topology.mem_bandwidth, [68e9, 240e9, 240e9])
  np.testing.assert_allclose(topology.launch_overhead_s, [5.7e-6, 1e-5, 1e-5])
  assert topology.memory_bytes[0] == 128 * 2**30
  assert topology.link_bandwidth[0, 1] == 12e9
  assert topology.link_latency[1, 2] == 25e-6


def test_unknown_preset_names_the_choices():
  with pytest.raises(TopologyError, match="1cpu\\+4gpu"):
    preset("2cpu")


def test_roofline_op_costs():
  topology = preset("1cpu+2gpu")
  graph = tiny_graph()
  costs = topology.op_costs(graph)
  assert costs.shape == (4, 3)
  # Inputs and outputs cost nothing, on every device.
  np.testing.assert_array_equal(costs[[0, 3]], 0.0)
  # The matmul is compute bound, the add memory bound; plus launch overhead.
  np.testing.assert_allclose(costs[1], 6e9 / topology.peak_flops
                             + topology.launch_overhead_s)
  np.testing.assert_allclose(costs[2], 6.8e8 / topology.mem_bandwidth
                             + topology.launch_overhead_s)
  scaled = topology.replace(time_scale=2.0).op_costs(graph)
  np.testing.assert_allclose(scaled[1], 2 * 6e9 / topology.peak_flops
                             + topology.launch_overhead_s)


def test_transfer_time_broadcasts_and_is_zero_on_device():
  topology = preset("1cpu+2gpu")
  times = topology.transfer_time(np.array([12e9, 0.0]), np.array([0, 1]),
                                 np.array([1, 1]))
  np.testing.assert_allclose(times, [1.0 + 25e-6, 0.0])


def test_uniform_links():
  bandwidth, latency = uniform_links(3, 5e9, 1e-5)
  assert np.all(np.diag(latency) == 0) and np.all(np.isinf(np.diag(
      bandwidth)))
  assert bandwidth[0, 2] == 5e9 and latency[2, 1] == 1e-5


def test_uniform_links_refuses_links_no_topology_takes():
  # Negative bandwidths and latencies came back before (issue 47).
  for args, match in [((2, -1.0, 1e-5), "bandwidth must be a positive"),
                      ((2, 0.0, 1e-5), "bandwidth must be a positive"),
                      ((2, float("nan"), 1e-5), "bandwidth"),
                      ((2, "fast", 1e-5), "bandwidth"),
                      ((2, 1e9, -1.0), "latency_s must be finite"),
                      ((2, 1e9, float("inf")), "latency_s"),
                      ((0, 1e9, 1e-5), "n_devices must be a positive"),
                      ((2.5, 1e9, 1e-5), "n_devices"),
                      ((True, 1e9, 1e-5), "n_devices")]:
    with pytest.raises(TopologyError, match=match):
      uniform_links(*args)
  bandwidth, _ = uniform_links(2, np.inf, 0.0)    # infinitely fast: allowed
  assert bandwidth[0, 1] == np.inf


def test_validate_costs():
  topology = preset("1cpu+2gpu")
  graph = tiny_graph()
  ok = validate_costs(np.ones((4, 3), np.float32), graph, topology)
  assert ok.dtype == np.float64 and ok.shape == (4, 3)
  with pytest.raises(TopologyError, match="shape"):
    validate_costs(np.ones((4, 2)), graph, topology)
  with pytest.raises(TopologyError, match="NaN"):
    validate_costs(np.full((4, 3), np.nan), graph, topology)
  with pytest.raises(TopologyError, match="NaN or infinite"):
    validate_costs(np.full((4, 3), np.inf), graph, topology)
  with pytest.raises(TopologyError, match="negative"):
    validate_costs(-np.ones((4, 3)), graph, topology)


def test_validate_costs_refuses_what_is_not_real_seconds():
  # float64 conversion would drop the imaginary part (with a warning only),
  # or parse strings of digits (issue 47).
  topology = preset("1cpu+2gpu")
  graph = tiny_graph()
  with pytest.raises(TopologyError, match=r"real seconds, got ndarray of "
                     r"dtype complex128; pass floats \(np\.real"):
    validate_costs(np.ones((4, 3), complex), graph, topology)
  with pytest.raises(TopologyError, match="real seconds"):
    validate_costs(np.array([[1j] * 3] * 4, object), graph, topology)
  with pytest.raises(TopologyError, match="dtype <U3"):
    validate_costs(np.full((4, 3), "1.0"), graph, topology)
  # Booleans, integers and lists of numbers are real.
  for costs in (np.ones((4, 3), bool), np.ones((4, 3), int),
                np.ones((4, 3)).tolist()):
    assert validate_costs(costs, graph, topology).dtype == np.float64


def _devices(n):
  return tuple(Device(f"gpu:{i}", "gpu", peak_flops=1e12, mem_bandwidth=1e11,
                      memory_bytes=1e9) for i in range(n))


def test_topology_checks_its_fields():
  bandwidth, latency = uniform_links(2, 1e9, 1e-5)
  ok = dict(devices=_devices(2), link_bandwidth=bandwidth,
            link_latency=latency, compute_group=[0, 1])
  assert Topology(**ok).n_devices == 2
  with pytest.raises(TopologyError, match="at least one device"):
    Topology(**{**ok, "devices": (), "link_bandwidth": np.zeros((0, 0)),
                "link_latency": np.zeros((0, 0)), "compute_group": []})
  with pytest.raises(TopologyError, match="link_bandwidth has shape"):
    Topology(**{**ok, "link_bandwidth": np.ones((3, 3))})
  with pytest.raises(TopologyError, match="positive between every pair"):
    Topology(**{**ok, "link_bandwidth": np.zeros((2, 2))})
  with pytest.raises(TopologyError, match="non-negative"):
    Topology(**{**ok, "link_latency": -np.ones((2, 2))})
  with pytest.raises(TopologyError, match="compute_group"):
    Topology(**{**ok, "compute_group": [0]})
  with pytest.raises(TopologyError, match="peak_flops"):
    Topology(**{**ok, "devices": (Device("a", "gpu", 0.0, 1.0, 1.0),
                                  _devices(1)[0])})
  with pytest.raises(TopologyError, match="launch_overhead_s"):
    Topology(**{**ok, "devices": (Device("a", "gpu", 1.0, 1.0, 1.0, -1.0),
                                  _devices(1)[0])})
  with pytest.raises(TopologyError, match="time_scale"):
    Topology(**{**ok, "time_scale": 0.0})
  # Two devices of one name (saved, then refused on load) and a kind the
  # baselines cannot tell apart: accepted before (issue 47).
  twin = Device("gpu:0", "gpu", 1e12, 1e11, 1e9)
  with pytest.raises(TopologyError, match=r"names \['gpu:0'\] repeat"):
    Topology(**{**ok, "devices": (twin, twin)})
  with pytest.raises(TopologyError, match="kind 'quantum'.*'cpu', 'gpu', "
                     "'tpu'"):
    Topology(**{**ok, "devices": (Device("q:0", "quantum", 1e12, 1e11, 1e9),
                                  _devices(1)[0])})
  with pytest.raises(TopologyError, match="compute_group.*outside int32"):
    Topology(**{**ok, "compute_group": [2**32, 0]})   # one group before
  for kind in topology_lib.DEVICE_KINDS:
    assert Topology(**{**ok, "devices": (
        Device("a", kind, 1e12, 1e11, 1e9), _devices(1)[0])}).n_devices == 2
  # Arrays are frozen copies.
  topology = Topology(**ok)
  assert not topology.link_bandwidth.flags.writeable


def test_local_describes_the_cpu_devices():
  devices = jax.devices("cpu")
  topology = local(devices)
  assert topology.name == "local"
  assert topology.n_devices == len(devices)
  assert topology.device_names == [f"cpu:{d.id}" for d in devices]
  # CPU devices run on the same cores: one compute group.
  assert topology.n_compute_groups == 1
  assert np.all(topology.memory_bytes > 0)
  assert local().n_devices == len(jax.devices())
  # Names, None, a single device or a device twice: an AttributeError or
  # TypeError, or silently accepted, before.
  for devices, message in [([], "devices is empty"),
                           (["cpu:0"], r"devices\[0\] is str 'cpu:0'"),
                           ([None], "devices must be a list"),
                           ("cpu", "devices must be a list"),
                           (3, "devices must be a list"),
                           (devices[0], "got one device"),
                           ([devices[0], devices[0]], "listed 2 times")]:
    with pytest.raises(TopologyError, match=message):
      local(devices)


def test_local_of_a_multi_process_run_prices_links_between_processes(
    monkeypatch):
  # What jax.devices() lists in a run of 2 processes of 2 CPU devices.
  class FakeDevice:
    platform = "cpu"

    def __init__(self, id_, process_index):
      self.id, self.process_index = id_, process_index

  fake = [FakeDevice(i, i // 2) for i in range(4)]
  monkeypatch.setattr(presets.jax, "devices", lambda: fake)
  topology = local()
  assert topology.device_names == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
  # Each process's devices share its cores; processes do not.
  assert list(topology.compute_group) == [0, 0, 1, 1]
  assert topology.link_bandwidth[0, 1] == 10e9
  assert topology.link_bandwidth[1, 2] == presets.NETWORK_BANDWIDTH
  assert topology.link_latency[3, 0] == presets.NETWORK_LATENCY_S


def test_local_prices_an_accelerator_from_the_gpu_loans(monkeypatch):
  # What jax.devices() lists on a machine with a GPU beside the CPU.
  class FakeDevice:
    process_index = 0

    def __init__(self, platform, id_):
      self.platform, self.id = platform, id_

    def memory_stats(self):
      return {"bytes_limit": 80e9}

  fake = [FakeDevice("cpu", 0), FakeDevice("cpu", 1), FakeDevice("gpu", 0)]
  monkeypatch.setattr(presets.jax, "devices", lambda: fake)
  topology = local()
  cpu, gpu = topology.devices[0], topology.devices[2]
  assert topology.device_names == ["cpu:0", "cpu:1", "gpu:0"]
  assert gpu.memory_bytes == 80e9 and gpu.kind == "gpu"
  # An op inside a GPU cluster costs little; a cluster's launch and a copy
  # through the host cost what the H200 loans measured.
  assert gpu.launch_overhead_s == presets.ACCELERATOR_OP_S < (
      cpu.launch_overhead_s)
  assert gpu.cluster_launch_s == presets.ACCELERATOR_CLUSTER_S > 0
  assert topology.link_latency[0, 2] == topology.link_latency[2, 1] == (
      presets.CROSS_PLATFORM_LATENCY_S)
  assert topology.link_latency[0, 1] < presets.CROSS_PLATFORM_LATENCY_S
  assert np.all(np.diag(topology.link_latency) == 0)
  # So a chain split between CPU and GPU is simulated slower than on the
  # GPU alone, as it ran there.
  graph = random_dag(200, seed=0)
  alone = gplace.simulate(graph, np.full(graph.n_nodes, 2), topology)
  split = gplace.simulate(
      graph, np.where(np.arange(graph.n_nodes) % 20 < 10, 0, 2), topology)
  assert float(split.runtime_s) > 3 * float(alone.runtime_s)


def test_gplace_topology_has_the_presets_and_what_builds_a_topology():
  assert gplace.topology is presets
  assert gplace.topology.preset is preset and gplace.topology.local is local
  assert gplace.topology.preset_names is preset_names
  assert gplace.topology.Topology is Topology
  assert gplace.topology.Device is Device
  assert gplace.topology.uniform_links is uniform_links
