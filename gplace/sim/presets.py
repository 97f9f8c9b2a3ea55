"""Ready-made topologies: the papers' hardware by name, and this machine.

:func:`preset` builds a named :class:`~gplace.sim.topology.Topology`
(:func:`preset_names`; ``docs/design.md#topology-and-op-costs``),
:func:`local` describes the local JAX devices with rough, uncalibrated
defaults. ``gplace.topology`` is this module: it also carries
:class:`~gplace.sim.topology.Topology`, :class:`~gplace.sim.topology.Device`
and :func:`~gplace.sim.topology.uniform_links` for building one by hand.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import jax
import numpy as np

from gplace.errors import TopologyError
from gplace.sim.jax_devices import check_devices
from gplace.sim.topology import (DEVICE_KINDS, GB, GiB, Device, Topology,
                                 uniform_links)

__all__ = ["Device", "NETWORK_BANDWIDTH", "NETWORK_LATENCY_S", "Topology",
           "local", "preset", "preset_names", "uniform_links"]


def _haswell_k80(n_gpus: int) -> Topology:
  cpu = Device("cpu:0", "cpu", peak_flops=0.66e12, mem_bandwidth=68 * GB,
               memory_bytes=128 * GiB, launch_overhead_s=5.7e-6)
  gpus = [Device(f"gpu:{i}", "gpu", peak_flops=3.06e12, mem_bandwidth=240 * GB,
                 memory_bytes=12 * GB, launch_overhead_s=10e-6)
          for i in range(n_gpus)]
  bandwidth, latency = uniform_links(n_gpus + 1, 12 * GB, 25e-6)
  return Topology(devices=(cpu, *gpus), link_bandwidth=bandwidth,
                  link_latency=latency,
                  compute_group=np.arange(n_gpus + 1),
                  name=f"1cpu+{n_gpus}gpu")


def _h100x8() -> Topology:
  gpus = [Device(f"gpu:{i}", "gpu", peak_flops=200e12, mem_bandwidth=3350 * GB,
                 memory_bytes=80 * GB, launch_overhead_s=5e-6)
          for i in range(8)]
  bandwidth, latency = uniform_links(8, 450 * GB, 8e-6)
  return Topology(devices=tuple(gpus), link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(8),
                  name="8xh100")


def _hosts_of_8_h100(n_hosts: int) -> Topology:
  """``n_hosts`` DGX H100-like hosts of 8 GPUs (the ``8xh100`` GPU).

  Inside a host, NVLink 4 through NVSwitch: 900 GB/s per GPU both ways
  together, so 450 GB/s each way (https://www.nvidia.com/en-us/data-center/
  h100/, "NVLink: 900GB/s"). Between hosts, one 400 Gb/s ConnectX-7
  (InfiniBand NDR) per GPU, 50 GB/s each way ("eight single-port NVIDIA
  ConnectX-7 VPI, up to 400 Gb/s InfiniBand/Ethernet": the DGX BasePOD
  reference architecture, infrastructure foundation, "Core Components",
  https://docs.nvidia.com/dgx-basepod/).
  Latencies (8 us inside, 15 us across, RDMA plus a launch) are estimates,
  not measured.
  """
  host = _h100x8()
  gpus = [dataclasses.replace(gpu, name=f"host{h}:gpu:{i}")
          for h in range(n_hosts) for i, gpu in enumerate(host.devices)]
  n = len(gpus)
  same_host = np.equal.outer(np.arange(n) // 8, np.arange(n) // 8)
  bandwidth = np.where(same_host, 450 * GB, 50 * GB)
  latency = np.where(same_host, 8e-6, 15e-6)
  np.fill_diagonal(bandwidth, np.inf)
  np.fill_diagonal(latency, 0.0)
  return Topology(devices=tuple(gpus), link_bandwidth=bandwidth,
                  link_latency=latency, compute_group=np.arange(n),
                  name=f"{n_hosts}x8h100")


_PRESETS = {
    "1cpu+2gpu": lambda: _haswell_k80(2),
    "1cpu+4gpu": lambda: _haswell_k80(4),
    "1cpu+8gpu": lambda: _haswell_k80(8),
    "8xh100": _h100x8,
    "2x8h100": lambda: _hosts_of_8_h100(2),
    "4x8h100": lambda: _hosts_of_8_h100(4),
}


def preset_names() -> list[str]:
  return sorted(_PRESETS)


def preset(name: str) -> Topology:
  """A named topology: one of :func:`preset_names`."""
  if not isinstance(name, str) or name not in _PRESETS:
    raise TopologyError(f"Unknown topology preset {name!r}; choose one of "
                        f"{preset_names()}.")
  return _PRESETS[name]()


def local(devices: Sequence | None = None) -> Topology:
  """Describes local JAX devices with rough, uncalibrated defaults.

  CPU devices (``--xla_force_host_platform_device_count``) share one compute
  group because they run on the same cores. GPU capacity comes from
  ``memory_stats()`` where the runtime reports it. Use
  ``gplace.profile`` to replace these guesses with measurements.

  In a multi-process run (``jax.distributed``) the default is every
  device of every process: each process's CPU devices are a compute group
  of their own, and links between devices of different processes are
  priced as a 400 Gb/s network (another host, or at best another process).

  Raises:
    TopologyError: ``devices`` is not a non-empty list of distinct
      ``jax.Device`` s.
  """
  devices = (check_devices(devices, "gplace.topology.local", TopologyError)
             if devices is not None else list(jax.devices()))
  cores = os.cpu_count() or 1
  try:
    host_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    host_memory = 16 * GiB
  out, group = [], []
  for dev in devices:
    # An accelerator of a platform gplace has no kind for (e.g. METAL)
    # is priced and placed as a GPU.
    kind = dev.platform if dev.platform in DEVICE_KINDS else "gpu"
    if dev.platform == "cpu":
      out.append(Device(f"cpu:{dev.id}", "cpu", peak_flops=cores * 2e10,
                        mem_bandwidth=10 * GB, memory_bytes=float(host_memory),
                        launch_overhead_s=5e-6))
      group.append(("cpu", dev.process_index))
    else:
      stats = {}
      try:
        stats = dev.memory_stats() or {}
      except Exception:  # pylint: disable=broad-except
        pass
      memory = float(stats.get("bytes_limit", 16 * GiB))
      out.append(Device(f"{dev.platform}:{dev.id}", kind,
                        peak_flops=50e12, mem_bandwidth=1000 * GB,
                        memory_bytes=memory,
                        launch_overhead_s=ACCELERATOR_OP_S,
                        cluster_launch_s=ACCELERATOR_CLUSTER_S))
      group.append(("device", len(group)))
  bandwidth, latency = uniform_links(len(out), 10 * GB, 20e-6)
  on_cpu = np.array([dev.platform == "cpu" for dev in devices])
  latency = np.where(np.not_equal.outer(on_cpu, on_cpu),
                     CROSS_PLATFORM_LATENCY_S, latency)
  process = np.asarray([dev.process_index for dev in devices])
  across = ~np.equal.outer(process, process)
  bandwidth = np.where(across, NETWORK_BANDWIDTH, bandwidth)
  latency = np.where(across, NETWORK_LATENCY_S, latency)
  labels = {label: i for i, label in enumerate(dict.fromkeys(group))}
  return Topology(devices=tuple(out), link_bandwidth=bandwidth,
                  link_latency=latency,
                  compute_group=np.asarray([labels[g] for g in group]),
                  name="local")


#: :func:`local`'s uncalibrated accelerator costs, from the H200 loans
#: (``experiments/results/device_h200``): an op inside a cluster (XLA fuses
#: a cluster into one executable: a 2,834-op flax LM train step ran in 4.7
#: ms on one H200, under 1.7 us an op with its compute; at 10 us an op it
#: was simulated at 24.9 ms), one cluster's launch from the host (fitted
#: 0.09 ms), and a copy between the CPU and an accelerator (60-265 us a
#: value measured, through the host; at 20 us, split placements of that LM
#: were simulated at 12.4 ms and ran in 114-147 ms).
ACCELERATOR_OP_S = 1.5e-6
ACCELERATOR_CLUSTER_S = 90e-6
CROSS_PLATFORM_LATENCY_S = 150e-6

#: A link between processes of a multi-process run in :func:`local`: a 400
#: Gb/s port (uncalibrated, as the rest of ``local``).
NETWORK_BANDWIDTH = 400e9 / 8
NETWORK_LATENCY_S = 30e-6
