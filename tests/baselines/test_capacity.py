"""Capacity sweep: memory-aware baselines fit whenever one device could.

A big CPU and small GPUs (issue 13): m-ETF, HEFT and ordered EFT used to
return OOM placements with GPUs at 0.3-0.4x the single-device peak, m-TOPO
and m-SCT at 0.6-0.8x on two GPUs, although everything fits on the CPU.
Once the simulator's default became the dynamic schedule (another order
than node ids, with 1.3-1.5x the single-device peak on these graphs), every
one of them OOMed again there at some capacity; they fit in both now.
"""

import numpy as np
import pytest

from gplace import baselines
from gplace import simulate
from gplace.baselines import scheduler
from gplace.graphs.graph import random_dag
from gplace.sim.list_scheduler import prepare
from gplace.sim.topology import GiB, Device, Topology, uniform_links

MEMORY_AWARE = ("single_device", "m_topo", "m_etf", "m_sct", "heft",
                "ordered_eft")
GPU_FRACTIONS = (0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0)


def cpu_and_gpus(cpu_memory: float, gpu_memory: float,
                 n_gpus: int) -> Topology:
  """One CPU and ``n_gpus`` K80-class GPUs, with the given capacities."""
  cpu = Device("cpu:0", "cpu", peak_flops=0.66e12, mem_bandwidth=68e9,
               memory_bytes=cpu_memory, launch_overhead_s=5.7e-6)
  gpus = [Device(f"gpu:{i}", "gpu", peak_flops=3.06e12, mem_bandwidth=240e9,
                 memory_bytes=gpu_memory, launch_overhead_s=10e-6)
          for i in range(n_gpus)]
  bandwidth, latency = uniform_links(n_gpus + 1, 12e9, 25e-6)
  return Topology(devices=(cpu, *gpus), link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(n_gpus + 1),
                  name=f"cpu+{n_gpus}gpu")


def default_schedule_peak(graph, topology, placement):
  """The peak of ``placement`` under simulate's default schedule (one at a
  time: the shape the baselines compiled)."""
  return np.asarray(simulate(graph, placement, topology).peak_bytes)


@pytest.mark.parametrize("n_gpus,cpu_memory,schedules", [
    (2, 128 * GiB, ("static", "default")),   # the set-up
    # A CPU that just holds the single-device peak in both schedules ...
    (4, "both", ("static", "default")),
    # ... or in node-id order only: then the baselines fit there.
    (4, "id order", ("static",)),
])
def test_memory_aware_baselines_fit_when_the_cpu_holds_everything(
    n_gpus, cpu_memory, schedules):
  graph = random_dag(300, seed=0)
  peak = baselines.single_device_peak_bytes(graph)
  on_cpu = np.zeros(graph.n_nodes, np.int32)
  both = max(peak, default_schedule_peak(
      graph, cpu_and_gpus(peak, peak, n_gpus), on_cpu)[0])
  assert both > 1.3 * peak  # the default schedule runs another order
  cpu_memory = {"both": 1.05 * both, "id order": 1.05 * peak}.get(
      cpu_memory, cpu_memory)
  failures = []
  for fraction in GPU_FRACTIONS:
    topology = cpu_and_gpus(cpu_memory, fraction * peak, n_gpus)
    placements = np.stack([baselines.get(name)(graph, topology)
                           for name in MEMORY_AWARE])
    used = {"static": np.asarray(simulate(graph, placements, topology,
                                          schedule="static").peak_bytes)}
    if "default" in schedules:
      used["default"] = np.stack([default_schedule_peak(graph, topology, p)
                                  for p in placements])
    for schedule in schedules:
      for name, peaks in zip(MEMORY_AWARE, used[schedule]):
        overshoot = float(np.max(peaks / topology.memory_bytes))
        if overshoot > 1:
          failures.append((name, schedule, fraction, overshoot))
  assert not failures, (
      f"(baseline, schedule, GPU memory / peak, overshoot): {failures}")


@pytest.mark.parametrize("fraction", [0.3, 0.6])
def test_planned_orders_fit_too(fraction):
  # gplace.plan's order (pass it as simulate(order=plan.order)) is checked
  # as well as node-id order; the exact twin of the simulator's count says so.
  graph = random_dag(300, seed=1)
  peak = baselines.single_device_peak_bytes(graph)
  topology = cpu_and_gpus(128 * GiB, fraction * peak, 2)
  for name in baselines.schedulers():
    plan = baselines.plan(name, graph, topology)
    for order in (None, plan.order):
      used = baselines.simulated_peak_bytes(graph, plan.placement,
                                            topology.n_devices, order)
      assert np.all(used <= topology.memory_bytes), (name, order is None)
    assert np.all(plan.peak_bytes <= topology.memory_bytes), name


def test_gpu_only_baselines_spill_to_the_cpu_only_when_gpus_are_full():
  graph = random_dag(300, seed=0)
  peak = baselines.single_device_peak_bytes(graph)
  roomy = cpu_and_gpus(128 * GiB, 2 * peak, 2)
  tight = cpu_and_gpus(128 * GiB, 0.3 * peak, 2)  # GPUs hold 0.6x together
  for name in ("m_topo", "m_sct"):
    placement = baselines.get(name)(graph, roomy)
    assert not np.any(placement == 0), name
    placement = baselines.get(name)(graph, tight)
    assert np.any(placement == 0) and np.any(placement > 0), name


def test_repair_falls_back_to_the_one_device_that_holds_the_graph(
    monkeypatch):
  graph = random_dag(200, seed=3)
  peak = baselines.single_device_peak_bytes(graph)
  topology = cpu_and_gpus(1.01 * peak, 0.2 * peak, 2)
  monkeypatch.setattr(scheduler, "MEMORY_REPAIR_ROUNDS", 0)
  # A planner that ignores memory: everything on GPU 1, which cannot hold it.
  problem = prepare(graph, topology, None)
  n = graph.n_nodes
  greedy = lambda _: baselines.Plan(
      np.ones(n, np.int32), np.arange(n, dtype=np.int32), np.zeros(n),
      np.zeros(n), 0.0, np.zeros(topology.n_devices))
  plan = scheduler.plan_within_memory(greedy, problem, [1, 2])
  assert np.all(plan.placement == 0)  # the CPU, the only device that fits
  assert not bool(simulate(graph, plan.placement, topology,
                           schedule="static").oom)
  np.testing.assert_allclose(plan.makespan_s,
                             problem.costs[:, 0].sum(), rtol=1e-12)


def test_repair_returns_the_least_overflowing_try_when_nothing_fits():
  graph = random_dag(200, seed=3)
  peak = baselines.single_device_peak_bytes(graph)
  topology = cpu_and_gpus(0.3 * peak, 0.3 * peak, 2)  # 0.9x in all
  plan = baselines.plan("m_etf", graph, topology)
  result = simulate(graph, plan.placement, topology, schedule="static")
  assert bool(result.oom)  # nothing can fit; the plan says so honestly
  assert np.all(np.asarray(result.peak_bytes)
                <= plan.peak_bytes * (1 + 1e-6))
  assert np.any(plan.peak_bytes > topology.memory_bytes)
