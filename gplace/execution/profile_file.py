"""The saved result of :func:`gplace.profile`: a :class:`Profile`, the
measurements next to the topology and costs fitted from them, in one
``.npz`` (written atomically) to reuse or refit.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from gplace.errors import ExecutionError
from gplace.graphs.graph import Graph
from gplace.sim.topology import Device, Topology, pipelined_to_json

_FORMAT = "gplace.Profile"
#: Profile fields saved only when set (older profiles lack them).
_OPTIONAL_ARRAYS = ("launch_scales", "copy_scales", "calibration_placements",
                    "calibration_orders", "calibration_s")


@dataclasses.dataclass(frozen=True, eq=False)
class Profile:
  """Measured costs of one program on the local devices.

  Attributes:
    graph: the program's op graph (``N`` nodes).
    topology: the calibrated topology (``D`` devices, in ``devices`` order).
    costs: ``[N, D]`` float64 seconds per node and device, for
      ``gplace.simulate(graph, placements, topology, costs=costs)``.
    op_time_s: ``[N, D]`` float64 raw median time of each op alone,
      dispatch included (0 for input/output nodes).
    dispatch_s: ``[D]`` float64 seconds to dispatch a trivial executable.
    fusion_factor: ``[D]`` float64 whole-program time over the sum of op
      compute times on that device.
    whole_program_s: ``[D]`` float64 time of the whole program placed on
      that device alone (one cluster, so one ``jit``): the fastest call of
      all calibration rounds.
    transfer_latency_s: ``[D, D]`` float64 fitted device_put latency.
    transfer_bandwidth: ``[D, D]`` float64 fitted bytes/s.
    link_scale: the one factor that fits the calibration runs best when
      applied to every link's latency and per-byte time (1.0 without
      calibration placements).
    link_scales: ``[D, D]`` float64 factor applied to each link (refined per
      pair of device kinds where the devices differ in kind, e.g. CPU to GPU
      and GPU to CPU; else ``link_scale`` everywhere; ones on the diagonal).
      None in profiles saved before it existed (read: ``link_scale``).
    launch_scales: ``[D]`` float64 factor on each device's measured
      dispatch that gives its ``Device.cluster_launch_s`` (one per device
      kind); None in profiles saved before clusters were charged.
    copy_scales: ``[D]`` float64 factor on each device's measured dispatch
      that gives its ``Device.copy_issue_s``, the host time of issuing one
      copy into it (one per device kind); None in profiles saved before
      copies were charged.
    calibration_placements: ``[C, N]`` int32 the placements the
      calibration ran, or None (none ran, or an older profile).
    calibration_orders: ``[C, N]`` int64 the orders they ran in.
    calibration_s: ``[C]`` float64 their measured seconds (NaN: failed):
      with these a model can be refitted offline.
    profile_s: seconds the profiling took.
    meta: how it was made (JSON-able; ``{}`` in older profiles):
      ``time_s`` (the budget, or None), ``complete`` (every op, placement
      and round asked for was done), ``phases_s`` (seconds per phase),
      ``op_signatures`` / ``op_signatures_timed``, ``repeats``,
      ``calibration_placements`` / ``calibration_rounds`` (used) and
      ``*_asked``, ``fit_grid`` (``"full"`` or ``"coarse"``) and
      ``cache`` (``key``, ``hit``, ``path``) where a cache was used.
  """

  graph: Graph
  topology: Topology
  costs: np.ndarray
  op_time_s: np.ndarray
  dispatch_s: np.ndarray
  fusion_factor: np.ndarray
  whole_program_s: np.ndarray
  transfer_latency_s: np.ndarray
  transfer_bandwidth: np.ndarray
  link_scale: float = 1.0
  link_scales: np.ndarray | None = None
  launch_scales: np.ndarray | None = None
  copy_scales: np.ndarray | None = None
  calibration_placements: np.ndarray | None = None
  calibration_orders: np.ndarray | None = None
  calibration_s: np.ndarray | None = None
  profile_s: float = 0.0
  meta: dict = dataclasses.field(default_factory=dict)

  def save(self, path: str | os.PathLike) -> None:
    """Writes the profile (graph included) to one ``.npz`` file."""
    path = os.fspath(path)
    topo = self.topology
    meta = {
        "format": _FORMAT, "version": 1, "profile_s": self.profile_s,
        "link_scale": self.link_scale, "profile_meta": self.meta,
        "topology": {
            "name": topo.name, "time_scale": topo.time_scale,
            "batched_inputs": topo.batched_inputs,
            "pipelined_links": pipelined_to_json(topo.pipelined_links),
            "devices": [dataclasses.asdict(d) for d in topo.devices]},
    }
    graph_path = path + ".graph.tmp.npz"
    self.graph.save(graph_path)
    with np.load(graph_path, allow_pickle=False) as data:
      graph_arrays = {f"graph__{k}": data[k] for k in data.files}
    os.remove(graph_path)
    tmp = path + ".tmp.npz"
    np.savez_compressed(
        tmp, meta=np.asarray(json.dumps(meta)), costs=self.costs,
        op_time_s=self.op_time_s, dispatch_s=self.dispatch_s,
        fusion_factor=self.fusion_factor,
        whole_program_s=self.whole_program_s,
        transfer_latency_s=self.transfer_latency_s,
        transfer_bandwidth=self.transfer_bandwidth,
        link_bandwidth=topo.link_bandwidth, link_latency=topo.link_latency,
        compute_group=topo.compute_group,
        **({} if self.link_scales is None
           else {"link_scales": self.link_scales}),
        **{k: getattr(self, k) for k in _OPTIONAL_ARRAYS
           if getattr(self, k) is not None},
        **graph_arrays)
    os.replace(tmp, path)

  @classmethod
  def load(cls, path: str | os.PathLike) -> "Profile":
    """Reads a profile written by :meth:`save`."""
    path = os.fspath(path)
    try:
      with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        if meta.get("format") != _FORMAT:
          raise ExecutionError(f"{path} does not hold a gplace profile.")
        arrays = {k: data[k] for k in data.files}
    except (OSError, KeyError, ValueError) as err:
      raise ExecutionError(f"Cannot read a gplace profile from {path}: "
                           f"{err}") from err
    graph_tmp = path + ".graph.tmp.npz"
    np.savez(graph_tmp, **{k[len("graph__"):]: v for k, v in arrays.items()
                           if k.startswith("graph__")})
    try:
      graph = Graph.load(graph_tmp)
    finally:
      os.remove(graph_tmp)
    topo_meta = meta["topology"]
    topology = Topology(
        devices=tuple(Device(**d) for d in topo_meta["devices"]),
        link_bandwidth=arrays["link_bandwidth"],
        link_latency=arrays["link_latency"],
        compute_group=arrays["compute_group"], name=topo_meta["name"],
        time_scale=topo_meta["time_scale"],
        batched_inputs=topo_meta.get("batched_inputs", False),
        pipelined_links=topo_meta.get("pipelined_links", False))
    return cls(graph=graph, topology=topology, costs=arrays["costs"],
               op_time_s=arrays["op_time_s"], dispatch_s=arrays["dispatch_s"],
               fusion_factor=arrays["fusion_factor"],
               whole_program_s=arrays["whole_program_s"],
               transfer_latency_s=arrays["transfer_latency_s"],
               transfer_bandwidth=arrays["transfer_bandwidth"],
               link_scale=float(meta.get("link_scale", 1.0)),
               link_scales=arrays.get("link_scales"),
               **{k: arrays.get(k) for k in _OPTIONAL_ARRAYS},
               profile_s=float(meta.get("profile_s", 0.0)),
               meta=meta.get("profile_meta", {}))
