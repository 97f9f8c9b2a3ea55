"""Device topologies and the per-op cost model.

A :class:`Topology`: :class:`Device` s, latency and bandwidth per device
pair, compute groups. :meth:`Topology.op_costs` is the roofline ``[N, D]``
seconds (a measured ``costs=`` table replaces it). The papers' hardware and
this machine's devices are ready-made in :mod:`gplace.sim.presets`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from gplace.errors import TopologyError, check_type, first_line, is_int
from gplace.graphs.graph import Graph, NODE_OP
from gplace.graphs.placement import is_traced

GB = 1e9
GiB = 2**30

#: The device kinds the cost model and the baselines know (``Device.kind``).
DEVICE_KINDS = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class Device:
  """One device of a topology.

  Attributes:
    name: e.g. ``"cpu:0"`` or ``"gpu:1"``.
    kind: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
    peak_flops: attainable FLOP/s.
    mem_bandwidth: bytes/s between the device and its memory.
    memory_bytes: capacity available to tensors.
    launch_overhead_s: fixed cost of every op run on the device.
    cluster_launch_s: host seconds the executor spends launching one
      cluster on the device (one compiled executable of a maximal run of
      same-device ops, :mod:`gplace.sim.clusters`); ``gplace.simulate``
      adds it once per cluster a placement runs in. ``gplace.profile``
      fits it; 0 (presets) leaves it out.
    copy_issue_s: host seconds the executor spends issuing the copy of one
      value to this device (its ``jax.device_put`` s run on the one Python
      thread that also launches the clusters, so this time adds to a
      step's instead of overlapping it); ``gplace.simulate`` adds it once
      per value a placement copies to the device (the transfers of its
      model, :mod:`gplace.sim.clusters`). ``gplace.profile`` fits it; 0
      (presets) leaves it out.
  """

  name: str
  kind: str
  peak_flops: float
  mem_bandwidth: float
  memory_bytes: float
  launch_overhead_s: float = 0.0
  cluster_launch_s: float = 0.0
  copy_issue_s: float = 0.0


def _as_number(value: Any) -> float | None:
  """``value`` as a float if it is one real number (a Python or numpy
  scalar, a 0-d array; not a bool or a string), else None."""
  if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
    return None
  try:
    if np.ndim(value) != 0:
      return None
    return float(value)
  except (TypeError, ValueError):
    return None


def _check_devices(devices: Any) -> tuple[Device, ...]:
  """``devices`` as a tuple of valid :class:`Device`; TopologyError if not."""
  how = ("build each with gplace.sim.topology.Device(name, kind, "
         "peak_flops, mem_bandwidth, memory_bytes, launch_overhead_s)")
  if isinstance(devices, (str, bytes, Device)):
    raise TopologyError(f"devices must be a sequence of Device, got one "
                        f"{type(devices).__name__}; {how}.")
  try:
    devices = tuple(devices)
  except TypeError as err:
    raise TopologyError(f"devices must be a sequence of Device, got "
                        f"{type(devices).__name__}; {how}.") from err
  if not devices:
    raise TopologyError("A topology needs at least one device.")
  for i, dev in enumerate(devices):
    if not isinstance(dev, Device):
      raise TopologyError(f"devices[{i}] is a {type(dev).__name__}, not a "
                          f"Device; {how}.")
    for attr in ("name", "kind"):
      if not isinstance(getattr(dev, attr), str):
        raise TopologyError(f"devices[{i}].{attr} must be a str, got "
                            f"{getattr(dev, attr)!r}.")
    if dev.kind not in DEVICE_KINDS:
      # The baselines tell accelerators from the host by kind: an unknown
      # kind would be placed on as if it were one or the other.
      raise TopologyError(
          f"Device {dev.name!r}: kind {dev.kind!r} is not one gplace "
          f"knows; use one of {', '.join(map(repr, DEVICE_KINDS))} (the "
          "nearest: 'gpu' for any accelerator).")
    for attr in ("peak_flops", "mem_bandwidth", "memory_bytes"):
      value = _as_number(getattr(dev, attr))
      if value is None or not value > 0:
        raise TopologyError(f"Device {dev.name!r}: {attr} must be positive, "
                            f"got {getattr(dev, attr)!r}.")
    for attr in ("launch_overhead_s", "cluster_launch_s", "copy_issue_s"):
      value = _as_number(getattr(dev, attr))
      if value is None or not 0 <= value < math.inf:
        raise TopologyError(f"Device {dev.name!r}: {attr} must be "
                            f"finite and non-negative, got "
                            f"{getattr(dev, attr)!r}.")
  names = [dev.name for dev in devices]
  repeated = sorted({name for name in names if names.count(name) > 1})
  if repeated:
    raise TopologyError(
        f"Device names {repeated} repeat; give every device a unique name "
        "(graph files, cost tables and reports name devices by it), e.g. "
        "'gpu:0', 'gpu:1'.")
  return devices


def _check_pipelined(value: Any, d: int) -> bool | np.ndarray:
  """``pipelined_links`` as a bool, or as a read-only ``[d, d]`` bool array
  where its links differ; TopologyError if it is neither."""
  how = ("give True, False, or a [D, D] array of bools (one per link "
         "[src, dst])")
  if isinstance(value, (bool, np.bool_)):
    return bool(value)
  array = (np.asarray(value) if isinstance(value, (list, tuple, np.ndarray))
           else None)
  if array is None or array.dtype != np.bool_:
    raise TopologyError(f"pipelined_links must be True, False or a [{d}, "
                        f"{d}] bool array, got {value!r}; {how}.")
  if array.shape != (d, d):
    raise TopologyError(f"pipelined_links has shape {array.shape}, expected "
                        f"({d}, {d}) for {d} devices; {how}.")
  links = array[~np.eye(d, dtype=bool)]
  if not links.any() or links.all():
    return bool(links.size and links[0])
  array = array.copy()
  array.setflags(write=False)
  return array


def pipelined_to_json(value: bool | np.ndarray) -> bool | list:
  """A ``Topology.pipelined_links`` as JSON: the bool, or nested lists."""
  return value if isinstance(value, bool) else value.tolist()


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
  """Devices, links and shared-compute groups.

  Attributes:
    devices: ``D`` devices; a placement's values index this tuple.
    link_bandwidth: ``[D, D]`` float64 bytes/s for a transfer from row to
      column device (the diagonal is ignored).
    link_latency: ``[D, D]`` float64 seconds per transfer (diagonal ignored).
    compute_group: ``[D]`` int32; devices with the same value share compute
      and run one op at a time between them.
    name: label, e.g. ``"1cpu+4gpu"``.
    time_scale: multiplies every roofline op time (calibration's fusion
      factor; 1.0 for presets).
    batched_inputs: graph inputs (parameters) reach other devices in one
      batched copy per destination at the start of a step, as gplace's
      executor sends them, so their transfers pay ``bytes / bandwidth`` but
      no link latency (``gplace.profile``'s calibration decides). False
      (presets): every transfer pays the latency, as a runtime that copies
      each variable on its own does.
    pipelined_links: a link is busy for a transfer's ``bytes / bandwidth``
      only; its latency delays the value's arrival but overlaps the next
      transfer on that link, as the copies of one ``jax.device_put`` of
      many values do. False (presets): the link is busy for the latency
      too, one transfer at a time. True or False for every link, or a
      ``[D, D]`` bool array per link (``[src, dst]``; the diagonal is
      ignored; one that is the same on every link becomes that bool).
      ``gplace.profile`` sets it as the executor copies
      (:func:`gplace.execution.fitting.executor_pipelining`; why:
      ``docs/design.md#the-simulators-model``).
  """

  devices: tuple[Device, ...]
  link_bandwidth: np.ndarray
  link_latency: np.ndarray
  compute_group: np.ndarray
  name: str = "topology"
  time_scale: float = 1.0
  batched_inputs: bool = False
  pipelined_links: bool | np.ndarray = False

  def __post_init__(self):
    devices = _check_devices(self.devices)
    object.__setattr__(self, "devices", devices)
    d = len(devices)
    for field in ("link_bandwidth", "link_latency"):
      try:
        value = np.array(getattr(self, field), dtype=np.float64)
      except (TypeError, ValueError) as err:
        raise TopologyError(
            f"{field} must be a [{d}, {d}] array of numbers, got "
            f"{type(getattr(self, field)).__name__} ({first_line(err)}); see "
            "gplace.sim.topology.uniform_links.") from err
      if value.shape != (d, d):
        raise TopologyError(
            f"{field} has shape {value.shape}, expected ({d}, {d}) for {d} "
            "devices.")
      off = value[~np.eye(d, dtype=bool)]
      if np.any(np.isnan(off)) or np.any(off < 0):
        raise TopologyError(f"{field} must be non-negative and not NaN.")
      if field == "link_bandwidth" and np.any(off == 0):
        raise TopologyError("link_bandwidth must be positive between every "
                            "pair of distinct devices.")
      if field == "link_latency" and np.any(np.isinf(off)):
        raise TopologyError("link_latency must be finite between every pair "
                            "of distinct devices.")
      value.setflags(write=False)
      object.__setattr__(self, field, value)
    try:
      group = np.asarray(self.compute_group)
      if group.dtype.kind not in "biuf" or not np.all(
          np.isfinite(group) & (group == np.round(group))):
        raise TypeError(f"got values of dtype {group.dtype} that are not all "
                        "integers")
      if group.size and (group.min() < -2**31 or group.max() >= 2**31):
        # int32 would wrap it around, into another device's group.
        raise TypeError(f"got {group.max()}, outside int32")
      group = np.array(group, dtype=np.int32).reshape(-1)
    except (TypeError, ValueError) as err:
      raise TopologyError(
          f"compute_group must hold one integer per device ({d}): devices "
          f"with the same value share compute ({first_line(err)}).") from err
    if group.shape != (d,):
      raise TopologyError(f"compute_group must have one entry per device "
                          f"({d}), got shape {group.shape}.")
    group.setflags(write=False)
    object.__setattr__(self, "compute_group", group)
    time_scale = _as_number(self.time_scale)
    if time_scale is None or not 0 < time_scale < math.inf:
      raise TopologyError(f"time_scale must be a finite positive number, got "
                          f"{self.time_scale!r}; 1.0 keeps the roofline.")
    if not isinstance(self.batched_inputs, (bool, np.bool_)):
      raise TopologyError(f"batched_inputs must be True or False, got "
                          f"{self.batched_inputs!r}.")
    object.__setattr__(self, "batched_inputs", bool(self.batched_inputs))
    object.__setattr__(self, "pipelined_links",
                       _check_pipelined(self.pipelined_links, d))
    if not isinstance(self.name, str):
      raise TopologyError(f"A topology's name must be a str, got "
                          f"{type(self.name).__name__}.")

  @property
  def n_devices(self) -> int:
    return len(self.devices)

  @property
  def device_names(self) -> list[str]:
    return [dev.name for dev in self.devices]

  @property
  def memory_bytes(self) -> np.ndarray:
    """``[D]`` float64 capacity of each device."""
    return np.array([dev.memory_bytes for dev in self.devices], np.float64)

  @property
  def peak_flops(self) -> np.ndarray:
    return np.array([dev.peak_flops for dev in self.devices], np.float64)

  @property
  def mem_bandwidth(self) -> np.ndarray:
    return np.array([dev.mem_bandwidth for dev in self.devices], np.float64)

  @property
  def launch_overhead_s(self) -> np.ndarray:
    return np.array([dev.launch_overhead_s for dev in self.devices],
                    np.float64)

  @property
  def n_compute_groups(self) -> int:
    return int(np.unique(self.compute_group).size)

  def op_costs(self, graph: Graph) -> np.ndarray:
    """Roofline seconds of each node on each device.

    Returns:
      ``[N, D]`` float64: ``time_scale * max(flops / peak, bytes / bandwidth)
      + launch_overhead`` for op nodes, 0 for input and output nodes.
    """
    flops = graph.flops[:, None] / self.peak_flops[None, :]
    memory = graph.bytes_accessed[:, None] / self.mem_bandwidth[None, :]
    costs = self.time_scale * np.maximum(flops, memory)
    costs = costs + self.launch_overhead_s[None, :]
    return np.where((graph.kind == NODE_OP)[:, None], costs, 0.0)

  def transfer_time(self, nbytes, src, dst) -> np.ndarray:
    """Seconds to move ``nbytes`` from device ``src`` to ``dst`` (0 if equal).

    Broadcasts over array arguments.
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    t = self.link_latency[src, dst] + np.asarray(nbytes) / self.link_bandwidth[
        src, dst]
    return np.where(src == dst, 0.0, t)

  @property
  def pipelined_mask(self) -> np.ndarray:
    """``[D, D]`` bool: whether each link (``[src, dst]``) is pipelined
    (``pipelined_links``)."""
    if isinstance(self.pipelined_links, bool):
      return np.full((self.n_devices,) * 2, self.pipelined_links)
    return self.pipelined_links

  @property
  def has_pipelined_links(self) -> bool:
    """Whether any link between two distinct devices is pipelined."""
    return bool(self.pipelined_mask[~np.eye(self.n_devices, dtype=bool)]
                .any())

  @property
  def link_hold_latency(self) -> np.ndarray:
    """``[D, D]`` float64 of each link's latency that keeps the link busy:
    ``link_latency``, zero on the links that ``pipelined_links`` pipelines."""
    return np.where(self.pipelined_mask, 0.0, self.link_latency)

  def replace(self, **changes) -> "Topology":
    return dataclasses.replace(self, **changes)

  def __repr__(self) -> str:
    return (f"Topology(name={self.name!r}, devices="
            f"{[d.name for d in self.devices]})")


def check_topology(topology: Any, caller: str) -> None:
  """Raises TopologyError unless ``topology`` is a :class:`Topology`
  (``caller``: who needs it, for the message)."""
  check_type(topology, Topology, "topology", caller, TopologyError,
             "use gplace.topology.preset('1cpu+4gpu'), "
             "gplace.topology.local() or build one")


def validate_costs(costs, graph: Graph, topology: Topology) -> np.ndarray:
  """Checks a measured cost table; returns it as ``[N, D]`` float64.

  Raises:
    TopologyError: not an array of real numbers (complex, strings, or a
      traced array), wrong shape, NaN, infinite or negative entries.
  """
  if is_traced(costs):
    raise TopologyError(
        "costs is a traced JAX value (inside jax.jit, vmap or grad), but "
        "cost tables are checked on the host; pass a concrete array, and "
        "build problems outside jit (gplace.sim.make_problem).")
  try:
    given = np.asarray(costs)
    # Converting to float64 would drop an imaginary part, or parse
    # strings: only real numbers (and objects holding them) pass.
    if given.dtype.kind not in "biufO":
      raise TopologyError(
          f"costs must be an [n_nodes, n_devices] array of real seconds, "
          f"got {type(costs).__name__} of dtype {given.dtype}; pass floats"
          + (" (np.real(costs) if the imaginary parts are 0)."
             if given.dtype.kind == "c" else "."))
    costs = np.asarray(given, np.float64)
  except (TypeError, ValueError) as err:
    raise TopologyError(
        f"costs must be an [n_nodes, n_devices] array of real seconds, got "
        f"{type(costs).__name__} that is not one ({first_line(err)}).") from err
  want = (graph.n_nodes, topology.n_devices)
  if costs.shape != want:
    raise TopologyError(f"costs has shape {costs.shape}, expected {want} "
                        "(one column per device of the topology).")
  if not np.all(np.isfinite(costs)):
    raise TopologyError("costs contains NaN or infinite entries; measure or "
                        "fill them before simulating.")
  if np.any(costs < 0):
    raise TopologyError("costs contains negative entries.")
  return costs


def cost_table(graph: Graph, topology: Topology, costs=None) -> np.ndarray:
  """``[N, D]`` float64 seconds of each node on each device: ``costs``
  checked by :func:`validate_costs`, or the roofline
  (:meth:`Topology.op_costs`) when None."""
  return (topology.op_costs(graph) if costs is None
          else validate_costs(costs, graph, topology))


def uniform_links(n_devices: int, bandwidth: float, latency_s: float):
  """``(bandwidth [D, D], latency [D, D])`` with the same link everywhere.

  Raises:
    TopologyError: ``n_devices`` is not a positive integer, ``bandwidth``
      (bytes/s) not positive, or ``latency_s`` not finite and non-negative.
  """
  if not is_int(n_devices) or n_devices < 1:
    raise TopologyError(f"uniform_links: n_devices must be a positive "
                        f"integer, got {n_devices!r}.")
  bandwidth_value, latency_value = _as_number(bandwidth), _as_number(latency_s)
  if bandwidth_value is None or not bandwidth_value > 0:
    raise TopologyError(f"uniform_links: bandwidth must be a positive number "
                        f"of bytes/s, got {bandwidth!r}; e.g. 12e9 for PCIe "
                        "3.0 x16.")
  if latency_value is None or not 0 <= latency_value < math.inf:
    raise TopologyError(f"uniform_links: latency_s must be finite and "
                        f"non-negative seconds, got {latency_s!r}; e.g. "
                        "25e-6.")
  bandwidth_matrix = np.full((n_devices, n_devices), float(bandwidth))
  latency_matrix = np.full((n_devices, n_devices), float(latency_s))
  np.fill_diagonal(latency_matrix, 0.0)
  np.fill_diagonal(bandwidth_matrix, np.inf)
  return bandwidth_matrix, latency_matrix
