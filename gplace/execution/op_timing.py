"""Timing single ops and copies on real values, for :func:`gplace.profile`.

``time_ops`` times every op signature once per timing class (within a time
budget the costliest first, the rest estimated from the roofline);
``fit_transfer`` fits a copy's latency and bandwidth.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.execution import cache as cluster_cache
from gplace.execution import partition
from gplace.graphs.capture import Program
from gplace.graphs.graph import NODE_INPUT, NODE_OP

_TRANSFER_BYTES = (256, 16 * 1024, 256 * 1024, 2 * 1024 * 1024)


def median_time(call: Callable[[], Any], repeats: int, warmup: int = 1
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
  return median_time(lambda: add(x), repeats, warmup=3)


def fit_transfer(src: jax.Device, dst: jax.Device, repeats: int = 5,
                 sizes: Sequence[int] = _TRANSFER_BYTES) -> tuple[float, float]:
  """``(latency_s, bandwidth)`` of ``jax.device_put`` from ``src`` to
  ``dst``, by least squares over a few sizes."""
  times = []
  for nbytes in sizes:
    x = jax.device_put(jnp.zeros((max(nbytes // 4, 1),), jnp.float32), src)
    times.append(median_time(lambda: jax.device_put(x, dst), repeats))
  # Relative least squares (rows weighted by 1/time): small copies, which
  # dominate a program's transfers, fix the latency; large ones the bandwidth.
  times = np.asarray(times)
  design = np.stack([np.ones(len(sizes)), np.asarray(sizes, np.float64)], 1)
  (latency, per_byte), *_ = np.linalg.lstsq(design / times[:, None],
                                           np.ones_like(times), rcond=None)
  latency = max(float(latency), 0.0)
  per_byte = max(float(per_byte), 1e-13)
  return latency, 1.0 / per_byte


def _zeros_like_output(record, var: int, device):
  """Zeros in the shape of an op's output value ``var`` on ``device`` (the
  input of later ops when this op is not timed), or None where zeros cannot
  stand in (an extended dtype such as a PRNG key)."""
  aval = record.eqn.outvars[record.outputs.index(var)].aval
  try:
    return jax.device_put(jnp.zeros(aval.shape, aval.dtype), device)
  except Exception:  # pylint: disable=broad-except
    return None


def time_ops(program: Program, args, kwargs, devices, repeats: int,
              timing_class: list[int], clock: Any = None,
              time_s: float | None = None,
              roofline: np.ndarray | None = None,
              dispatch: np.ndarray | None = None
              ) -> tuple[np.ndarray, int, int]:
  """``([N, D] median seconds of every op alone, on real values; signatures;
  signatures timed)``.

  Each op signature is timed once per timing class. With ``time_s`` (and
  ``clock``, ``roofline [N, D]`` and ``dispatch [D]``), signatures are
  timed while the time lasts, the costliest first (roofline seconds times
  occurrences); the others are not compiled, their results are zeros, and
  their time is the dispatch plus their roofline times the median ratio of
  measured compute to roofline of the timed ops.
  """
  n, d = program.graph.n_nodes, len(devices)
  op_time = np.zeros((n, d))
  leaves = jax.tree_util.tree_leaves((args, kwargs))
  home = devices[0]
  values: dict[int, Any] = {}
  synthetic: set[int] = set()        # values that are zeros, not computed
  measured: dict[tuple[str, int], float] = {}
  measured_any: set[str] = set()
  signatures = {node: partition.op_signature(record)
                for node, record in enumerate(program.nodes)
                if record.kind == NODE_OP}
  skipped: set[str] = set()
  rank: dict[str, int] = {}
  if time_s is not None:
    weight: dict[str, float] = {}
    for node, sig in signatures.items():
      weight[sig] = weight.get(sig, 0.0) + float(roofline[node].max())
    rank = {sig: i for i, sig in enumerate(
        sorted(weight, key=lambda sig: -weight[sig]))}
    began = clock.now()
    decided: set[str] = set()
    done_by_rank = np.zeros(len(rank), bool)
    timed = 0
  for node, record in enumerate(program.nodes):
    if record.kind == NODE_INPUT:
      source, payload = record.source
      value = leaves[payload] if source == "arg" else payload
      values[record.outputs[0]] = jax.device_put(value, home)
      continue
    if record.kind != NODE_OP:
      continue
    signature = signatures[node]
    outs = tuple(v for v in record.outputs if v >= 0)
    reads_zeros = any(r.var in synthetic for r in record.inputs)
    zeros = None
    if reads_zeros and record.eqn.primitive.name == "while":
      # Zeros may never end a loop: neither run nor time it.
      zeros = [_zeros_like_output(record, v, home) for v in outs]
      if any(z is None for z in zeros):
        zeros = None
    if time_s is not None and signature not in decided:
      decided.add(signature)
      spent = clock.now() - began
      per_signature = spent / timed if timed else 0.0
      # Time it if the signatures that outrank it and are still to come
      # (and it) fit in what is left at the pace so far.
      ahead = int(np.count_nonzero(~done_by_rank[:rank[signature]]))
      done_by_rank[rank[signature]] = True
      if zeros is None and spent + (ahead + 1) * per_signature > time_s:
        zeros = [_zeros_like_output(record, v, home) for v in outs]
        if any(z is None for z in zeros):
          zeros = None
      if zeros is not None:
        skipped.add(signature)
      else:
        timed += 1
    if zeros is not None or signature in skipped:
      for j in range(d):
        op_time[node, j] = measured.get((signature, timing_class[j]), 0.0)
      if signature not in measured_any:
        skipped.add(signature)
      for i, var in enumerate(outs):
        values[var] = (zeros[i] if zeros is not None
                       else _zeros_like_output(record, var, home))
        synthetic.add(var)
      continue
    cluster = partition.Cluster(0, (node,), tuple(dict.fromkeys(
        r.var for r in record.inputs if r.var >= 0)), outs)
    for j, dev in enumerate(devices):
      rep = timing_class[j]
      if (signature, rep) in measured:
        op_time[node, j] = measured[(signature, rep)]
        continue
      compiled = compiled_op(program, cluster, dev)
      inputs = [jax.device_put(values[v], dev) for v in cluster.in_vars]
      seconds = median_time(lambda: compiled(*inputs), repeats)
      measured[(signature, rep)] = seconds
      measured_any.add(signature)
      op_time[node, j] = seconds
    compiled = compiled_op(program, cluster, home)
    outs_values = compiled(*[values[v] for v in cluster.in_vars])
    for var, value in zip(cluster.out_vars, outs_values):
      values[var] = value
      if any(r.var in synthetic for r in record.inputs):
        synthetic.add(var)
  n_signatures = len(set(signatures.values()))
  if skipped:
    estimated = np.array([signatures.get(node) in skipped
                          for node in range(n)])
    op_time[estimated] = estimated_op_times(
        op_time, roofline, dispatch, estimated)[estimated]
  return op_time, n_signatures, n_signatures - len(skipped)


def estimated_op_times(op_time: np.ndarray, roofline: np.ndarray,
                        dispatch: np.ndarray, estimated: np.ndarray
                        ) -> np.ndarray:
  """``[N, D]`` op times from the roofline: the dispatch plus the roofline
  times the median ratio of measured compute (op time less dispatch) to
  roofline over the timed ops (1 where none was timed)."""
  timed = (~estimated) & (op_time[:, 0] > 0) & (roofline[:, 0] > 0)
  ratio = np.ones(op_time.shape[1])
  if timed.any():
    compute = np.maximum(op_time[timed] - dispatch[None, :], 0.0)
    ratio = np.median(compute / roofline[timed], axis=0)
  return dispatch[None, :] + ratio[None, :] * roofline


def compiled_op(program: Program, cluster, device):
  """The op-mode executable of a one-op cluster (cached, shared with
  ``place(..., mode="op")``)."""
  signatures = {cluster.nodes[0]: partition.op_signature(
      program.nodes[cluster.nodes[0]])}
  return cluster_cache.get_or_compile(program, signatures, cluster,
                              device).executable
