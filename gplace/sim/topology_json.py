"""The ``topology`` object of a JSON graph file
(:mod:`gplace.graphs.json_format`) to and from a :class:`~gplace.Topology`:
:func:`topology_from_dict`, :func:`topology_to_dict` (round trip exact).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from gplace.errors import GraphError, TopologyError
from gplace.graphs.records import number
from gplace.sim.topology import Device, Topology, pipelined_to_json

#: The fields of a device object, in the order they are written.
DEVICE_FIELDS = ("name", "kind", "peak_flops", "mem_bandwidth",
                 "memory_bytes", "launch_overhead_s", "cluster_launch_s",
                 "copy_issue_s")


def _matrix(value: Any, where: str, n_devices: int, diagonal: float):
  """A link field: one number for every pair, or a ``[D][D]`` matrix."""
  if not isinstance(value, list):
    matrix = np.full((n_devices, n_devices), float(number(value, where)))
    np.fill_diagonal(matrix, diagonal)
    return matrix
  if len(value) != n_devices or not all(
      isinstance(row, list) and len(row) == n_devices for row in value):
    raise GraphError(f"{where} must be one number or a {n_devices} x "
                     f"{n_devices} matrix (a list of {n_devices} rows).")
  matrix = np.empty((n_devices, n_devices))
  for i, row in enumerate(value):
    for j, entry in enumerate(row):
      matrix[i, j] = (diagonal if i == j and entry is None else
                      number(entry, f"{where}[{i}][{j}]"))
  return matrix


def topology_from_dict(value: Any, where: str) -> Topology:
  """A :class:`~gplace.Topology` from the format's ``topology`` object.

  Raises:
    GraphError: a missing or malformed field (named), or values the
      topology rejects (its message quoted).
  """
  if not isinstance(value, dict):
    raise GraphError(f"{where} must be an object with devices and links.")
  devices = value.get("devices")
  if not isinstance(devices, list) or not devices:
    raise GraphError(f"{where}.devices must be a non-empty list of device "
                     f"objects with fields {', '.join(DEVICE_FIELDS)}.")
  out = []
  for i, dev in enumerate(devices):
    at = f"{where}.devices[{i}]"
    if not isinstance(dev, dict):
      raise GraphError(f"{at} must be an object with fields "
                       f"{', '.join(DEVICE_FIELDS)}.")
    unknown = sorted(set(dev) - set(DEVICE_FIELDS))
    if unknown:
      raise GraphError(f"{at} has unknown fields {unknown}; device fields "
                       f"are {', '.join(DEVICE_FIELDS)}.")
    for text in ("name", "kind"):
      if not isinstance(dev.get(text), str):
        raise GraphError(f"{at}.{text} is {dev.get(text)!r}; give a string "
                         "(e.g. name 'gpu:0', kind 'gpu').")
    numbers = {f: number(dev.get(f), f"{at}.{f}") for f in
               ("peak_flops", "mem_bandwidth", "memory_bytes")}
    overheads = {f: number(dev.get(f), f"{at}.{f}", default=0.0) for f in
                 ("launch_overhead_s", "cluster_launch_s", "copy_issue_s")}
    out.append(Device(dev["name"], dev["kind"], **numbers, **overheads))
  names = [d.name for d in out]
  if len(set(names)) != len(names):
    raise GraphError(f"{where}.devices: device names {names} repeat; give "
                     "every device a unique name.")
  d = len(out)
  links = value.get("links")
  if links is None and d == 1:
    links = {"bandwidth": 1.0, "latency_s": 0.0}
  if not isinstance(links, dict) or set(links) != {"bandwidth", "latency_s"}:
    raise GraphError(f"{where}.links must be an object with exactly "
                     "'bandwidth' (bytes/s) and 'latency_s', each one number "
                     "or a [D][D] matrix.")
  bandwidth = _matrix(links["bandwidth"], f"{where}.links.bandwidth", d,
                      np.inf)
  latency = _matrix(links["latency_s"], f"{where}.links.latency_s", d, 0.0)
  group = value.get("compute_group", list(range(d)))
  if not isinstance(group, list) or len(group) != d:
    raise GraphError(f"{where}.compute_group must list one integer per "
                     f"device ({d}); devices with equal values share compute.")
  group = [number(g, f"{where}.compute_group[{i}]", integer=True)
           for i, g in enumerate(group)]
  name = value.get("name", "topology")
  if not isinstance(name, str):
    raise GraphError(f"{where}.name is {name!r}; give a string.")
  try:
    return Topology(devices=tuple(out), link_bandwidth=bandwidth,
                    link_latency=latency, compute_group=np.asarray(group),
                    name=name,
                    time_scale=number(value.get("time_scale"),
                                      f"{where}.time_scale", default=1.0),
                    batched_inputs=value.get("batched_inputs", False),
                    pipelined_links=value.get("pipelined_links", False))
  except TopologyError as err:
    raise GraphError(f"{where}: {err}") from err


def _json_number(value: float) -> Optional[float]:
  return float(value) if np.isfinite(value) else None


def topology_to_dict(topology: Topology) -> dict:
  """The format's ``topology`` object of ``topology`` (exact round trip)."""
  matrix = lambda m: [[_json_number(v) for v in row] for row in m]
  return dict(
      name=topology.name,
      devices=[{f: (getattr(dev, f) if f in ("name", "kind")
                    else float(getattr(dev, f))) for f in DEVICE_FIELDS}
               for dev in topology.devices],
      links=dict(bandwidth=matrix(topology.link_bandwidth),
                 latency_s=matrix(topology.link_latency)),
      compute_group=topology.compute_group.tolist(),
      time_scale=float(topology.time_scale),
      batched_inputs=topology.batched_inputs,
      pipelined_links=pipelined_to_json(topology.pipelined_links))
