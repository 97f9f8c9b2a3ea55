"""Calibration: measure local devices so the simulator predicts the executor.

``gplace.profile(fn, *args)`` times what the executor
(:mod:`gplace.execution.executor`) pays to run a program on the local devices
and turns it into the two things ``gplace.simulate`` takes: a
:class:`~gplace.sim.topology.Topology` whose numbers are measured instead of
guessed, and a cost table ``costs [N, D]``.

What is measured (host-side Python; every timing is the median of
``repeats`` calls, each waited for with ``block_until_ready``):

* **Op times.** Every op node is compiled alone for each device (the
  executor's op-mode executables, from :mod:`gplace.execution.cache`, so
  they are shared with ``place(..., mode="op")``) and run on the real intermediate
  values of the program (so while loops take their real trip counts). Devices
  of the same platform and kind that share compute (forced CPU devices) are
  timed once and share the result.
* **Dispatch overhead**: the time of a trivial executable on each device;
  it is subtracted from op times (what remains is compute) and, scaled by
  the calibration, charged once per cluster (see below).
* **Fusion factor** per device: the whole program's time (placed on that
  device alone: one executor cluster, i.e. one ``jit``) over the sum of its
  op compute times. XLA fuses elementwise chains into neighbours, so a
  program runs faster than its ops one by one.
* **Transfers**: ``jax.device_put`` between every ordered device pair for a
  few sizes; a least-squares fit of ``latency + bytes / bandwidth``.
* **Compute groups**: CPU devices share the host's cores (one group); each
  accelerator is its own group.
* **Link, launch and copy calibration**: random placements cut once or
  into 2-64 same-device blocks are run with the executor, and factors on
  the links' latency and per-byte time, on the per-cluster launch cost and
  on the host's cost of issuing each copy are fitted so the simulator
  matches them (a placed transfer costs more than a bare copy, a cluster
  more than a bare dispatch; one link factor per pair of device kinds, e.g.
  CPU to GPU and GPU to CPU, one launch factor and one copy factor per
  device kind: see :func:`calibrate_links`). Each runs with
  the simulator's default schedule on the uncalibrated topology and costs,
  and is simulated in that same order, so the fit compares like with like.
  Placed runs are timed in interleaved rounds, and each is represented by
  its fastest call of all rounds: load on a shared machine only ever adds
  time, so the fastest call is what the program costs when nothing else
  runs, which is what the simulator models. (On a 2-core machine the
  fastest call of six placed runs reproduced to 2% between two processes,
  where the median over rounds of each round's fastest call moved by up to
  12%, and by up to 1.7x in a run under load: RESULTS.md, "Copies cost the
  host, and one statistic for calibration and fidelity".)

How the measurements enter the simulator's model (which charges each node
its cost on its device, each cross-device value one link transfer and one
copy issue, and each cluster one launch):

* ``costs[v, d] = fusion_factor[d] * compute_s[v, d]`` for op nodes (zero for
  inputs and outputs), so a single-device placement costs what ``jax.jit``
  of the whole program costs;
* the topology's ``link_latency`` is the fitted transfer latency times the
  calibrated link factor; ``link_bandwidth`` the fitted bandwidth over that
  factor; its links are pipelined (``Topology.pipelined_links``: a link is
  busy for a transfer's bytes only, as the executor's one ``device_put``
  per step and device overlaps the copies' latencies, and its read-backs
  of accelerator values overlap: :func:`executor_pipelining`);
* ``Device.cluster_launch_s`` is the dispatch overhead times the
  calibrated launch factor: ``gplace.simulate`` adds it once per cluster
  the executor launches (:mod:`gplace.sim.clusters`);
* ``Device.copy_issue_s`` is the dispatch overhead times the calibrated
  copy factor: ``gplace.simulate`` adds it once per value copied into the
  device (host time, which the link's transfer time does not include);
* ``Device.launch_overhead_s`` records the dispatch overhead and
  ``Topology.time_scale`` the fusion factor (the simulator reads neither when
  it is given ``costs``; they make the topology's roofline usable alone).

A :class:`Profile` saves to a ``.npz`` (:meth:`Profile.save`) so that fidelity
runs can reuse a calibration.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import ExecutionError, check_seed
from gplace.execution import cache
from gplace.execution.calibration import calibrate_links, calibration_blocks
from gplace.execution import executor
from gplace.execution import inputs
from gplace.execution import partition
from gplace.execution import timing
from gplace.graphs.capture import Program, trace_program
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP
from gplace.sim import simulator
from gplace.sim.topology import (Device, Topology, local,
                                  pipelined_to_json)

_TRANSFER_BYTES = (256, 16 * 1024, 256 * 1024, 2 * 1024 * 1024)
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

  def save(self, path: str | os.PathLike) -> None:
    """Writes the profile (graph included) to one ``.npz`` file."""
    path = os.fspath(path)
    topo = self.topology
    meta = {
        "format": _FORMAT, "version": 1, "profile_s": self.profile_s,
        "link_scale": self.link_scale,
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
               profile_s=float(meta.get("profile_s", 0.0)))


# -- timing helpers -------------------------------------------------------------


def _median_time(call: Callable[[], Any], repeats: int, warmup: int = 1
                 ) -> float:
  for _ in range(warmup):
    jax.block_until_ready(call())
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(call())
    times.append(time.perf_counter() - start)
  return float(statistics.median(times))


def timing_classes(devices: Sequence[jax.Device]) -> list[int]:
  """Index of the representative device each device is timed as: devices of
  one platform and kind that share compute (CPU devices) time alike."""
  rep: dict[Any, int] = {}
  out = []
  for i, dev in enumerate(devices):
    key = (dev.platform, dev.device_kind) if dev.platform == "cpu" else i
    out.append(rep.setdefault(key, i))
  return out


def dispatch_overhead(device: jax.Device, repeats: int = 50) -> float:
  """Median seconds to run a trivial compiled executable on ``device``."""
  sharding = jax.sharding.SingleDeviceSharding(device)
  x = jax.device_put(jnp.zeros((), jnp.float32), device)
  add = jax.jit(lambda v: v + 1.0, out_shardings=sharding).lower(x).compile()
  return _median_time(lambda: add(x), repeats, warmup=3)


def fit_transfer(src: jax.Device, dst: jax.Device, repeats: int = 5,
                 sizes: Sequence[int] = _TRANSFER_BYTES) -> tuple[float, float]:
  """``(latency_s, bandwidth)`` of ``jax.device_put`` from ``src`` to
  ``dst``, by least squares over a few sizes."""
  times = []
  for nbytes in sizes:
    x = jax.device_put(jnp.zeros((max(nbytes // 4, 1),), jnp.float32), src)
    times.append(_median_time(lambda: jax.device_put(x, dst), repeats))
  # Relative least squares (rows weighted by 1/time): small copies, which
  # dominate a program's transfers, fix the latency; large ones the bandwidth.
  times = np.asarray(times)
  design = np.stack([np.ones(len(sizes)), np.asarray(sizes, np.float64)], 1)
  (latency, per_byte), *_ = np.linalg.lstsq(design / times[:, None],
                                           np.ones_like(times), rcond=None)
  latency = max(float(latency), 0.0)
  per_byte = max(float(per_byte), 1e-13)
  return latency, 1.0 / per_byte


def _time_ops(program: Program, args, kwargs, devices, repeats: int,
              timing_class: list[int]) -> np.ndarray:
  """``[N, D]`` median seconds of every op alone, on real values."""
  n, d = program.graph.n_nodes, len(devices)
  op_time = np.zeros((n, d))
  leaves = jax.tree_util.tree_leaves((args, kwargs))
  home = devices[0]
  values: dict[int, Any] = {}
  measured: dict[tuple[str, int], float] = {}
  for node, record in enumerate(program.nodes):
    if record.kind == NODE_INPUT:
      source, payload = record.source
      value = leaves[payload] if source == "arg" else payload
      values[record.outputs[0]] = jax.device_put(value, home)
      continue
    if record.kind != NODE_OP:
      continue
    cluster = partition.Cluster(0, (node,), tuple(dict.fromkeys(
        r.var for r in record.inputs if r.var >= 0)), tuple(
            v for v in record.outputs if v >= 0))
    signature = partition.op_signature(record)
    for j, dev in enumerate(devices):
      rep = timing_class[j]
      if (signature, rep) in measured:
        op_time[node, j] = measured[(signature, rep)]
        continue
      compiled = _compiled_op(program, cluster, dev)
      inputs = [jax.device_put(values[v], dev) for v in cluster.in_vars]
      seconds = _median_time(lambda: compiled(*inputs), repeats)
      measured[(signature, rep)] = seconds
      op_time[node, j] = seconds
    compiled = _compiled_op(program, cluster, home)
    outs = compiled(*[values[v] for v in cluster.in_vars])
    for var, value in zip(cluster.out_vars, outs):
      values[var] = value
  return op_time


def _compiled_op(program: Program, cluster, device):
  """The op-mode executable of a one-op cluster (cached, shared with
  ``place(..., mode="op")``)."""
  signatures = {cluster.nodes[0]: partition.op_signature(
      program.nodes[cluster.nodes[0]])}
  return cache.get_or_compile(program, signatures, cluster,
                              device).executable


def profile(fn: Callable, *args, devices=None, repeats: int = 5,
            transfer_repeats: int = 5, calibration_placements: int = 16,
            calibration_rounds: int = 7, seed: int = 12345,
            **kwargs) -> Profile:
  """Calibrates the local devices against one program.

  Args:
    fn: a jittable function.
    *args, **kwargs: real arguments (arrays; the program is run).
    devices: ``jax.Device`` s, in placement-index order (default: all local
      devices, CPU first, as :func:`gplace.place` uses).
    repeats: timed calls per op and per placed run.
    transfer_repeats: timed copies per transfer size.
    calibration_placements: random placements (:func:`calibration_blocks`)
      that are run with the executor to fit the link and launch factors
      (see :func:`calibrate_links`); 0 keeps the microbenchmark fit.
    calibration_rounds: interleaved rounds those (and the single-device
      runs) are timed in.
    seed: seed of those placements.

  Returns:
    A :class:`Profile`: ``gplace.simulate(profile.graph, placements,
    profile.topology, costs=profile.costs)`` predicts what
    ``gplace.measure(gplace.place(fn, graph, placement))`` measures.

  Raises:
    ExecutionError: a count below its minimum (``repeats``,
      ``transfer_repeats`` and ``calibration_rounds`` >= 1,
      ``calibration_placements`` >= 0), a bad ``seed`` or bad ``devices``.
    CaptureError: ``fn`` cannot be traced with these arguments.
  """
  start = time.perf_counter()
  repeats = inputs.check_count(repeats, "gplace.profile: repeats", 1)
  transfer_repeats = inputs.check_count(
      transfer_repeats, "gplace.profile: transfer_repeats", 1)
  calibration_placements = inputs.check_count(
      calibration_placements, "gplace.profile: calibration_placements", 0)
  calibration_rounds = inputs.check_count(
      calibration_rounds, "gplace.profile: calibration_rounds", 1)
  seed = check_seed(seed, "gplace.profile", ExecutionError)
  devices = (inputs.check_devices(devices, "gplace.profile")
             if devices is not None else executor.default_devices())
  program = trace_program(fn, *args, **kwargs)
  graph = program.graph
  d = len(devices)
  timing_class = timing_classes(devices)

  dispatch = np.zeros(d)
  for j, dev in enumerate(devices):
    rep = timing_class[j]
    dispatch[j] = dispatch[rep] if rep != j else dispatch_overhead(dev)

  op_time = _time_ops(program, args, kwargs, devices, repeats, timing_class)
  compute = _compute_times(graph, op_time, dispatch)

  latency = np.zeros((d, d))
  bandwidth = np.full((d, d), np.inf)
  for i, src in enumerate(devices):
    for j, dst in enumerate(devices):
      if i != j:
        latency[i, j], bandwidth[i, j] = fit_transfer(
            src, dst, transfer_repeats)

  # The executor's own costs: the whole program on each device (one
  # cluster), and random placements with long same-device runs that the link
  # calibration fits, each run in the simulator's default schedule on the
  # uncalibrated topology and compute times. Placed programs are timed in
  # interleaved rounds (the fastest call of all rounds), so a burst
  # of load on a shared machine hits all of them alike instead of one.
  singles = [j for j in range(d) if timing_class[j] == j]
  rng = np.random.default_rng(seed)
  blocks = (calibration_blocks(graph.n_nodes, d, calibration_placements, rng)
            if d > 1 else np.zeros((0, graph.n_nodes), np.int32))
  uncalibrated = _measured_topology(local(devices), dispatch, latency,
                                    bandwidth, 1.0)
  schedules = (partition.schedule_orders(simulator.simulate(
      graph, blocks, uncalibrated, costs=compute, return_schedule=True))
               if len(blocks) else np.zeros((0, graph.n_nodes), np.int64))
  runs = [(np.full(graph.n_nodes, j, np.int32), np.arange(graph.n_nodes))
          for j in singles] + list(zip(blocks, schedules))
  placed = [executor.place(fn, graph, p, devices, schedule=order)
            for p, order in runs]
  rounds = np.full((calibration_rounds, len(placed)), np.nan)
  for r in range(calibration_rounds):
    for i in rng.permutation(len(placed)):
      result = timing.measure(placed[i], *args, repeats=max(repeats, 3),
                                warmup=1, **kwargs)
      rounds[r, i] = result.min_s
  executor_s = rounds.min(axis=0)       # NaN (a failed run) stays NaN
  whole = np.zeros(d)
  for i, j in enumerate(singles):
    whole[j] = executor_s[i]
  return _fitted(graph, local(devices), op_time, dispatch, latency,
                 bandwidth, whole[timing_class], blocks, schedules,
                 executor_s[len(singles):], time.perf_counter() - start)


def refit(prof: Profile, calibration_s: np.ndarray,
          whole_program_s: np.ndarray,
          pipelined_links: bool | np.ndarray | None = None) -> Profile:
  """``prof`` calibrated again on new measurements of its own runs.

  The op times, dispatch overheads and bare copies stay; the fusion
  factors, link, launch and copy factors are fitted again, exactly as
  :func:`profile` fits them. Use it where the host's speed drifts: measure
  the calibration runs (:func:`calibration_runs`) in the same interleaved
  rounds as the placements to predict, so that the fit and what it predicts
  see the same machine (``experiments/fidelity.py --calibrate-in-rounds``).

  Args:
    prof: a profile with calibration runs (``gplace.profile`` with
      ``calibration_placements > 0`` on two or more devices).
    calibration_s: ``[C]`` seconds of ``prof.calibration_placements`` run
      in ``prof.calibration_orders`` (NaN: failed, left out).
    whole_program_s: ``[D]`` seconds of the whole program on each device
      alone (one cluster).
    pipelined_links: the ``Topology.pipelined_links`` to fit with (default:
      the executor's now, :func:`executor_pipelining`); measurements taken
      by an older executor want the links it had (``experiments/
      fidelity_refit.py`` passes them).

  Returns:
    A new :class:`Profile` with the new measurements.

  Raises:
    ExecutionError: ``prof`` has no calibration runs, or the measurements
      have the wrong shape.
  """
  if prof.calibration_placements is None:
    raise ExecutionError(
        "This profile has no calibration runs to fit again; profile with "
        "calibration_placements > 0 on two or more devices.")
  calibration_s = np.asarray(calibration_s, np.float64)
  whole_program_s = np.asarray(whole_program_s, np.float64)
  if calibration_s.shape != (len(prof.calibration_placements),) or (
      whole_program_s.shape != (prof.topology.n_devices,)):
    raise ExecutionError(
        f"refit wants [{len(prof.calibration_placements)}] calibration "
        f"seconds and [{prof.topology.n_devices}] whole-program seconds, "
        f"got shapes {calibration_s.shape} and {whole_program_s.shape}.")
  return _fitted(prof.graph, prof.topology, prof.op_time_s, prof.dispatch_s,
                 prof.transfer_latency_s, prof.transfer_bandwidth,
                 whole_program_s, prof.calibration_placements,
                 prof.calibration_orders, calibration_s, prof.profile_s,
                 pipelined_links)


def calibration_runs(prof: Profile) -> list[tuple[np.ndarray, np.ndarray]]:
  """``(placement [N], order [N])`` of each run :func:`refit` takes:
  the whole program on each device alone (in node-id order), then each
  calibration placement in its order."""
  n = prof.graph.n_nodes
  singles = [(np.full(n, j, np.int32), np.arange(n))
             for j in range(prof.topology.n_devices)]
  if prof.calibration_placements is None:
    return singles
  return singles + list(zip(prof.calibration_placements,
                            prof.calibration_orders))


def _compute_times(graph: Graph, op_time: np.ndarray,
                   dispatch: np.ndarray) -> np.ndarray:
  """``[N, D]`` op compute seconds: what remains of each op's time after
  the dispatch, with a floor of a tenth so no op is free; 0 for inputs and
  outputs."""
  is_op = graph.kind == NODE_OP
  return np.where(is_op[:, None],
                  np.maximum(op_time - dispatch[None, :], 0.1 * op_time),
                  0.0)


def _fitted(graph: Graph, base: Topology, op_time: np.ndarray,
            dispatch: np.ndarray, latency: np.ndarray,
            bandwidth: np.ndarray, whole: np.ndarray, blocks: np.ndarray,
            schedules: np.ndarray, measured: np.ndarray,
            profile_s: float,
            pipelined_links: bool | np.ndarray | None = None) -> Profile:
  """The profile of these measurements: fusion factors from the whole
  program on each device (``whole [D]``; NaN, a failed run: 1x), then links,
  launches and copies fitted on the calibration runs (``blocks`` run in
  ``schedules``, ``measured [C]`` seconds)."""
  is_op = graph.kind == NODE_OP
  compute = _compute_times(graph, op_time, dispatch)
  whole = np.where(np.isfinite(whole), whole, compute.sum(0))  # failed: 1x
  fusion = whole / np.maximum(compute.sum(0), 1e-12)
  costs = compute * fusion[None, :]
  d = len(dispatch)
  topology = _measured_topology(base, dispatch, latency, bandwidth,
                                float(np.median(fusion)), pipelined_links)
  link_scale, link_scales = 1.0, np.ones((d, d))
  launch_scales, copy_scales = np.ones(d), np.zeros(d)
  if np.isfinite(measured).any():
    (topology, costs, link_scale, link_scales, launch_scales,
     copy_scales) = calibrate_links(graph, topology, costs, blocks,
                                     schedules, measured)
  return Profile(graph=graph, topology=topology, costs=costs,
                 op_time_s=np.where(is_op[:, None], op_time, 0.0),
                 dispatch_s=dispatch, fusion_factor=fusion,
                 whole_program_s=whole, transfer_latency_s=latency,
                 transfer_bandwidth=bandwidth, link_scale=link_scale,
                 link_scales=link_scales, launch_scales=launch_scales,
                 copy_scales=copy_scales,
                 calibration_placements=blocks if len(blocks) else None,
                 calibration_orders=schedules if len(blocks) else None,
                 calibration_s=measured if len(blocks) else None,
                 profile_s=profile_s)


def _measured_topology(base: Topology, dispatch: np.ndarray,
                       latency: np.ndarray, bandwidth: np.ndarray,
                       time_scale: float,
                       pipelined_links: bool | np.ndarray | None = None
                       ) -> Topology:
  """``base`` (``local(devices)``) with measured dispatch overheads and
  links: a link costs the fitted copy latency, each cluster one dispatch of
  its device (``Device.cluster_launch_s``, before calibration scales it),
  and a copy no issue cost until calibration fits one. Links are
  pipelined as the executor's copies are (:func:`executor_pipelining`),
  unless ``pipelined_links`` says otherwise."""
  topo_devices = tuple(
      dataclasses.replace(dev, launch_overhead_s=float(dispatch[j]),
                          cluster_launch_s=float(dispatch[j]),
                          copy_issue_s=0.0)
      for j, dev in enumerate(base.devices))
  link_latency = np.array(latency, np.float64)
  np.fill_diagonal(link_latency, 0.0)
  return Topology(
      devices=topo_devices, link_bandwidth=bandwidth,
      link_latency=link_latency, compute_group=base.compute_group,
      name="local-calibrated", time_scale=time_scale, batched_inputs=True,
      pipelined_links=(executor_pipelining(topo_devices)
                       if pipelined_links is None else pipelined_links))


def executor_pipelining(devices: Sequence[Device],
                        overlapped_host_reads: bool = True) -> np.ndarray:
  """``[D, D]`` bool ``Topology.pipelined_links`` of the executor's copies
  between ``devices``.

  The executor issues a step's copies to one device in one
  ``jax.device_put``; into an accelerator (and between host devices) their
  latencies overlap. A value an accelerator computed reaches the CPU
  through the host: ``jax.device_put`` reads it back, one value after
  another, each its whole latency. On CPU + H200 (2026-11-28),
  list-scheduled resnet50 placements that copied 74-160 GPU values to the
  CPU that way ran 27-41 ms where links pipelined both ways predicted 7-11
  ms (0.18-0.27 ms more per value); holding that direction took the
  default schedule's Spearman from 0.71 to 0.93 (RESULTS.md, "Copies out
  of the GPU wait for each other"). The executor now starts those
  read-backs as soon as each value exists, all overlapping
  (:func:`gplace.execution.plan.defer_host_copies`), so every link is
  pipelined.

  Args:
    devices: the topology's devices (``Device.kind``).
    overlapped_host_reads: False for measurements of the executor before
      that change (every link pipelined but those from an accelerator into
      a CPU).
  """
  into_cpu = np.array([dev.kind == "cpu" for dev in devices])
  if overlapped_host_reads:
    return np.ones((len(devices),) * 2, bool)
  from_accelerator = ~into_cpu
  return ~(from_accelerator[:, None] & into_cpu[None, :])
