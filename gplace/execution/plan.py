"""The flattened dispatch plan of a placed program (host-side).

:func:`compile_plan` -> :class:`Plan`, steps over value slots that a call
replays without lookups; copies go as soon as a value exists, and
:func:`defer_host_copies` splits copies between platforms
(``docs/design.md#running-a-placement``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import numpy as np

from gplace.execution import cache
from gplace.execution import effects
from gplace.execution.partition import (Cluster, op_signature, partition,
                                        value_bytes, value_owner)
from gplace.graphs.capture import Program
from gplace.graphs.graph import NODE_INPUT


@dataclasses.dataclass
class Plan:
  """The compiled, flattened schedule of one placed program.

  Values live in ``slots``; a slot is one value on one device. Steps are
  ``("put", src_slots, dst_slots, device)`` (one batched copy),
  ``("fetch", src_slots)`` (start reading values back to the host) or
  ``("run", executable, in_slots, out_slots)``.
  """
  n_slots: int
  arg_slots: list[int]          # flat argument leaf -> slot (or -1: unused)
  arg_devices: list[Any]        # flat argument leaf -> home device
  arg_shardings: list[Any]      # ... as a SingleDeviceSharding
  const_slots: list[tuple[int, Any]]  # pre-staged constants
  steps: list[tuple]
  output_slots: list[int | tuple[Any, Any]]  # slot, or ("lit", value, device)
  clusters: list[Cluster]
  schedule: np.ndarray | None   # [N] order used (None: device-greedy)
  n_transfers: int
  transfer_bytes: int
  compile_s: float
  n_compiled: int
  n_cached: int


def compile_plan(program: Program, placement: np.ndarray, devices,
                 mode: str, order: list[int],
                 schedule: np.ndarray | None,
                 group_of: np.ndarray | None = None) -> Plan:
  """Partitions ``order`` (op nodes in dispatch order), compiles (or fetches
  from cache) and flattens the plan.

  A cluster runs when something reads its results or when it holds an op
  with side effects (as ``jax.jit`` keeps those).

  Args:
    program: the traced program.
    placement: ``[N]`` device index per node.
    devices: the ``jax.Device`` s indices refer to.
    mode: ``"cluster"`` or ``"op"``.
    order: the op node ids in dispatch order.
    schedule: the ``[N]`` schedule ``order`` follows (kept for reports).
    group_of: optional ``[N]`` fusion group per node
      (:mod:`gplace.execution.fusion`), each group contiguous in ``order``.

  Returns:
    The :class:`Plan`.

  Raises:
    BuildError: a cluster could not be compiled.
  """
  clusters = partition(program, placement, mode, order, group_of)
  effectful = set(effects.effectful_nodes(program))
  runs = [bool(c.out_vars) or not effectful.isdisjoint(c.nodes)
          for c in clusters]
  owner = value_owner(program)
  nodes = program.nodes
  slot_of: dict[tuple[int, int], int] = {}
  steps: list[tuple] = []
  n_transfers = 0
  transfer_bytes = 0
  var_bytes = value_bytes(program)

  slot_device: list[int] = []

  def new_slot(var, device_index):
    slot_of[(var, device_index)] = len(slot_of)
    slot_device.append(device_index)
    return slot_of[(var, device_index)]

  pending: dict[int, tuple[list[int], list[int]]] = {}

  def read(var, device_index):
    """The slot of ``var`` on a device, moving it there once if needed (the
    copy waits in ``pending`` so copies to one device go in one call)."""
    nonlocal n_transfers, transfer_bytes
    if (var, device_index) not in slot_of:
      home = int(placement[owner[var]])
      src = slot_of[(var, home)]
      srcs, dsts = pending.setdefault(device_index, ([], []))
      srcs.append(src)
      dsts.append(new_slot(var, device_index))
      n_transfers += 1
      transfer_bytes += var_bytes.get(var, 0)
    return slot_of[(var, device_index)]

  def flush():
    for device_index, (srcs, dsts) in pending.items():
      steps.append(("put", srcs, dsts, devices[device_index]))
    pending.clear()

  # Devices that read each value. Copies are sent as soon as the value
  # exists (parameters at the start, results right after their cluster), as
  # the simulator assumes; they then overlap with later dispatches.
  readers: dict[int, set[int]] = {}
  for cluster, run in zip(clusters, runs):
    if run:
      for var in cluster.in_vars:
        readers.setdefault(var, set()).add(cluster.device_index)
  for node in program.output_nodes:
    ref = nodes[node].inputs[0]
    if ref.var >= 0:
      readers.setdefault(ref.var, set()).add(int(placement[node]))

  def send(var):
    for device_index in sorted(readers.get(var, ())):
      read(var, device_index)

  n_leaves = len(program.in_avals)
  arg_slots = [-1] * n_leaves
  arg_devices: list[Any] = [devices[0]] * n_leaves
  const_slots = []
  for node, record in enumerate(nodes):
    if record.kind != NODE_INPUT:
      continue
    var = record.outputs[0]
    home = int(placement[node])
    slot = new_slot(var, home)
    source, payload = record.source
    if source == "arg":
      arg_slots[payload] = slot
      arg_devices[payload] = devices[home]
    else:
      const_slots.append((slot, jax.device_put(payload, devices[home])))

  for record in nodes:
    if record.kind == NODE_INPUT:
      send(record.outputs[0])
  flush()

  signatures = {}
  # A cluster whose results nobody reads, and without side effects, does
  # not run (as jax.jit drops it).
  ran = [cluster for cluster, run in zip(clusters, runs) if run]
  for cluster in ran:
    for node in cluster.nodes:
      if node not in signatures:
        signatures[node] = op_signature(nodes[node])
  lookups, compile_s = cache.get_or_compile_many(
      program, signatures,
      [(cluster, devices[cluster.device_index]) for cluster in ran])
  n_compiled = sum(lookup.compiled for lookup in lookups)
  n_cached = len(lookups) - n_compiled
  for cluster, lookup in zip(ran, lookups):
    in_slots = [read(var, cluster.device_index) for var in cluster.in_vars]
    out_slots = [new_slot(var, cluster.device_index)
                 for var in cluster.out_vars]
    flush()
    steps.append(("run", lookup.executable, in_slots, out_slots))
    for var in cluster.out_vars:
      send(var)
    flush()

  output_slots = []
  for node in program.output_nodes:
    ref = nodes[node].inputs[0]
    device_index = int(placement[node])
    if ref.var < 0:
      output_slots.append(("lit", ref.literal, devices[device_index]))
    else:
      output_slots.append(read(ref.var, device_index))
  flush()
  steps = defer_host_copies(
      steps, slot_device,
      lambda src, dst: crosses_platform(devices[src], devices[dst]),
      lambda src: devices[src].platform != "cpu")
  return Plan(n_slots=len(slot_of), arg_slots=arg_slots,
               arg_devices=arg_devices,
               arg_shardings=[jax.sharding.SingleDeviceSharding(d)
                              for d in arg_devices],
               const_slots=const_slots, steps=steps,
               output_slots=output_slots, clusters=clusters,
               schedule=schedule, n_transfers=n_transfers,
               transfer_bytes=transfer_bytes,
               compile_s=compile_s, n_compiled=n_compiled, n_cached=n_cached)


def crosses_platform(src: Any, dst: Any) -> bool:
  """Whether a copy from jax device ``src`` to ``dst`` goes between
  platforms (CPU and GPU are separate PJRT clients; ``jax.device_put``
  then reads the value back to the host, synchronously)."""
  return src.platform != dst.platform


def defer_host_copies(steps: list[tuple], slot_device: list[int],
                      crosses: Callable[[int, int], bool],
                      read_back: Callable[[int], bool] = lambda src: True
                      ) -> list[tuple]:
  """Splits off the copies that go through the host and defers them.

  ``jax.device_put`` of a value onto a device of another PJRT client reads
  the value back to the host first (``jax.Array._value``), one value after
  another, and waits for each: for the whole computation that produces it
  and then the copy (``docs/design.md#running-a-placement``). In its place
  this puts a ``("fetch", src_slots)`` step for the values that live on an
  accelerator (``copy_to_host_async`` of each: every read-back starts as
  soon as its value exists, and they overlap; a CPU value is read in place)
  and moves the ``put`` to right before the first step that reads one of
  its destination slots (or to the end, for program outputs), so the host
  waits for a value only when a reader needs it. Copies that stay inside
  one client keep their place.

  Args:
    steps: a plan's steps (see :class:`Plan`), in dispatch order.
    slot_device: ``[n_slots]`` device index of each slot.
    crosses: ``(src_device_index, dst_device_index) -> bool``, whether a
      copy between those devices goes through the host.
    read_back: ``src_device_index -> bool``, whether a value there is read
      back to the host asynchronously first (not on a CPU, where the host
      reads it in place; an early copy would only cost a memcpy).

  Returns:
    The new steps; the same copies, each destination slot written once
    before it is read.
  """
  out: list[tuple] = []
  waiting: list[tuple] = []             # deferred ("put", ...) steps

  def release(needed) -> None:
    keep = []
    for put in waiting:
      if needed is None or not needed.isdisjoint(put[2]):
        out.append(put)
      else:
        keep.append(put)
    waiting[:] = keep

  for step in steps:
    if step[0] == "put":
      _, srcs, dsts, device = step
      late = [crosses(slot_device[s], slot_device[d])
              for s, d in zip(srcs, dsts)]
      if any(late):
        near = [(s, d) for s, d, x in zip(srcs, dsts, late) if not x]
        far = [(s, d) for s, d, x in zip(srcs, dsts, late) if x]
        if near:
          out.append(("put", [s for s, _ in near], [d for _, d in near],
                      device))
        fetch = [s for s, _ in far if read_back(slot_device[s])]
        if fetch:
          out.append(("fetch", fetch))
        waiting.append(("put", [s for s, _ in far], [d for _, d in far],
                        device))
        continue
    elif step[0] == "run":
      release(set(step[2]))
    out.append(step)
  release(None)
  return out
