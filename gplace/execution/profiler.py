"""Calibration: measure the local devices so the simulator predicts the
executor.

:func:`profile` ``(fn, *args) -> Profile``: op times, fusion factors, bare
copies, and calibration placements run by the executor (each scored by its
fastest call), fitted by :mod:`gplace.execution.fitting`
(``docs/design.md#calibration-making-the-simulator-predict-the-executor``).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import ExecutionError, check_seed
from gplace.execution import cache
from gplace.execution import executor
from gplace.execution import fitting
from gplace.execution import inputs
from gplace.execution import partition
from gplace.execution import timing
from gplace.execution.calibration import calibration_blocks
from gplace.execution.profile_file import Profile
from gplace.graphs.capture import Program, trace_program
from gplace.graphs.graph import NODE_INPUT, NODE_OP
from gplace.sim import simulator
from gplace.sim.topology import local

_TRANSFER_BYTES = (256, 16 * 1024, 256 * 1024, 2 * 1024 * 1024)


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
      (see :func:`~gplace.execution.calibration.calibrate_links`); 0
      keeps the microbenchmark fit.
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
      ``calibration_placements`` >= 0), a bad ``seed`` or bad ``devices``,
      or an argument that is a ``jax.ShapeDtypeStruct`` (profiling runs
      the program: it needs real arrays).
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
  inputs.check_concrete(args, kwargs, "gplace.profile")
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
  compute = fitting.compute_times(graph, op_time, dispatch)

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
  uncalibrated = fitting.measured_topology(local(devices), dispatch,
                                           latency, bandwidth, 1.0)
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
  return fitting.fitted_profile(
      graph, local(devices), op_time, dispatch, latency, bandwidth,
      whole[timing_class], blocks, schedules, executor_s[len(singles):],
      time.perf_counter() - start)
