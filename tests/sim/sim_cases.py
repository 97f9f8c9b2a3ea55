"""Shared helpers of the simulator tests (tests/sim): random topologies,
fixed padding budgets and one jitted ``simulate_problem``, so that test
modules and hypothesis examples reuse compiled simulators."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, settings

from gplace.sim.scan import simulate_problem
from gplace.sim.topology import Device, Topology

RTOL = 1e-6
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
# Fixed budgets, so hypothesis examples reuse compiled simulators.
BUDGET = dict(n_nodes=48, n_steps=320, n_slots=48)
jit_simulate = jax.jit(simulate_problem, static_argnames="return_schedule")


def padded(placements, n_nodes=48):
  """``[K, n]`` placements padded with device 0 to ``[K, n_nodes]``."""
  placements = np.asarray(placements)
  width = n_nodes - placements.shape[1]
  return jnp.asarray(np.pad(placements, ((0, 0), (0, width))))


def random_topology(rng: np.random.Generator, n_devices: int) -> Topology:
  """Random devices, links and shared compute groups."""
  devices = tuple(
      Device(f"dev:{i}", "gpu", peak_flops=float(rng.uniform(0.5, 5) * 1e12),
             mem_bandwidth=float(rng.uniform(50, 500) * 1e9),
             memory_bytes=float(rng.uniform(2e6, 3e7)),
             launch_overhead_s=float(rng.uniform(0, 2e-5)))
      for i in range(n_devices))
  bandwidth = rng.uniform(1e9, 2e10, (n_devices, n_devices))
  latency = rng.uniform(0, 5e-5, (n_devices, n_devices))
  np.fill_diagonal(bandwidth, np.inf)
  np.fill_diagonal(latency, 0.0)
  group = rng.integers(0, n_devices, n_devices)     # shared compute groups
  return Topology(devices=devices, link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=group, name="random")


def is_topological(graph, order) -> bool:
  """Whether every edge of ``graph`` goes forward in ``order`` ``[N]``."""
  position = np.empty(graph.n_nodes, np.int64)
  position[np.asarray(order)] = np.arange(graph.n_nodes)
  return bool(np.all(position[graph.edge_src] < position[graph.edge_dst]))


def assert_close_to_reference(result, k: int, ref) -> None:
  """Placement ``k`` of a jitted ``result`` (runtime, per-node times, peak
  bytes) equals the reference's ``ref`` to ``RTOL`` (times: relative to the
  runtime)."""
  scale = max(ref.runtime_s, 1e-30)
  np.testing.assert_allclose(float(result.runtime_s[k]), ref.runtime_s,
                             rtol=RTOL, atol=1e-30)
  np.testing.assert_allclose(np.asarray(result.start_s[k]), ref.start_s,
                             rtol=0, atol=RTOL * scale)
  np.testing.assert_allclose(np.asarray(result.finish_s[k]), ref.finish_s,
                             rtol=0, atol=RTOL * scale)
  np.testing.assert_allclose(np.asarray(result.peak_bytes[k]),
                             ref.peak_bytes, rtol=RTOL)


def assert_runs_as_the_reference(graph, placements, topology,
                                 schedule: str):
  """``gplace.simulate`` of ``placements`` (``[K, N]``) in ``schedule``
  equals the event-driven reference run in the order it chose; returns
  the simulator's result."""
  from gplace.sim.reference import simulate_reference  # pylint: disable=g-import-not-at-top
  from gplace.sim.simulator import simulate  # pylint: disable=g-import-not-at-top
  result = simulate(graph, placements, topology, schedule=schedule,
                    return_schedule=True)
  for k in range(len(placements)):
    ref = simulate_reference(graph, placements[k], topology,
                             order=result.order[k])
    assert_close_to_reference(result, k, ref)
  return result
