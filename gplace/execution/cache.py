"""Process-wide caches of the executor: compiled clusters and traced programs.

:func:`get_or_compile` keys a cluster's executable by what it computes
(:func:`cluster_key`: ops, wiring, device), so no placement compiles a
cluster twice, and :func:`get_or_compile_many` compiles a plan's new
clusters side by side; :func:`traced_program` keeps recent traces;
:func:`clear_cache`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax

from gplace.errors import BuildError, GplaceError, first_line
from gplace.execution.partition import Cluster, value_owner
from gplace.graphs.capture import (NodeRecord, Program, eval_node,
                                   trace_program)
from gplace.graphs.graph import NODE_INPUT


def _executable_budget(maps_path: str = "/proc/sys/vm/max_map_count",
                       ceiling: int = 20000) -> int:
  """How many compiled executables the cache may hold.

  An XLA CPU executable maps 3-4 memory regions of its own, and Linux caps
  the regions of a process at ``vm.max_map_count`` (65,530 by default):
  past it LLVM cannot allocate code memory and the process dies ("LLVM
  compilation error: Cannot allocate memory", then a segmentation fault;
  seen in ``experiments/fidelity.py --size small``, which compiles ~20,000
  clusters in one process). So the bound is an eighth of that limit (room
  for the executables that live placements still hold after the cache
  lets go of them), at most ``ceiling``; ``ceiling`` where the limit cannot
  be read (not Linux)."""
  try:
    with open(maps_path, encoding="ascii") as f:
      limit = int(f.read().strip())
  except (OSError, ValueError):
    return ceiling
  return max(1000, min(ceiling, limit // 8))


#: Compiled executables kept before the cache is emptied (a bound on memory
#: and on the process's memory maps: a process that places thousands of
#: fresh programs starts over).
MAX_EXECUTABLES = _executable_budget()
#: Traced programs kept (oldest dropped first).
MAX_PROGRAMS = 8

_EXECUTABLES: dict[Any, Any] = {}
_PROGRAMS: dict[Any, Program] = {}


class Lookup(NamedTuple):
  """One :func:`get_or_compile` answer.

  Attributes:
    executable: the compiled cluster (call it with the cluster's ``in_vars``
      values, on its device; it returns the ``out_vars`` values).
    compiled: true if it was compiled now, false if it came from the cache.
    compile_s: seconds spent compiling (0.0 from the cache).
  """
  executable: Any
  compiled: bool
  compile_s: float


def clear_cache() -> None:
  """Forgets every compiled cluster and op and every traced program."""
  _EXECUTABLES.clear()
  _PROGRAMS.clear()


def cache_size() -> int:
  """Number of compiled executables held."""
  return len(_EXECUTABLES)


def cluster_key(program: Program, signatures: Mapping[int, str],
                cluster: Cluster, device) -> tuple:
  """What a cluster computes, wiring included, on which device.

  Args:
    program: the traced program the cluster belongs to.
    signatures: ``{node: op_signature}`` for (at least) the cluster's nodes
      (:func:`gplace.execution.partition.op_signature`).
    cluster: the cluster.
    device: the ``jax.Device`` it runs on.

  Returns:
    A hashable key: two clusters with equal keys compute the same function
    of their inputs on the same device, so they can share an executable.
  """
  position = {var: ("in", i) for i, var in enumerate(cluster.in_vars)}
  body = []
  for local, node in enumerate(cluster.nodes):
    record = program.nodes[node]
    wiring = tuple(position.get(ref.var, "lit") for ref in record.inputs)
    body.append((signatures[node], wiring))
    for out_index, var in enumerate(record.outputs):
      if var >= 0:
        position[var] = (local, out_index)
  outs = tuple(position[var] for var in cluster.out_vars)
  return (device, tuple(body), outs)


def cluster_function(records: Sequence[NodeRecord], in_vars: Sequence[int],
                     out_vars: Sequence[int]) -> Callable:
  """A traceable function that replays ``records`` on its inputs.

  Returns:
    ``run(*inputs) -> tuple``: inputs are the values of ``in_vars``, in
    order; it returns the values of ``out_vars``.
  """

  def run(*inputs):
    env = dict(zip(in_vars, inputs))
    for record in records:
      values = [env[ref.var] if ref.var >= 0 else ref.literal
                for ref in record.inputs]
      for var, value in zip(record.outputs, eval_node(record, values)):
        if var >= 0:
          env[var] = value
    return tuple(env[var] for var in out_vars)

  return run


def _var_aval(program: Program, owner: Mapping[int, int], var: int):
  record = program.nodes[owner[var]]
  if record.kind == NODE_INPUT:
    source, payload = record.source
    if source == "arg":
      return program.in_avals[payload]
    return jax.typeof(payload)
  return record.eqn.outvars[record.outputs.index(var)].aval


def lower_cluster(program: Program, cluster: Cluster, device):
  """One cluster traced and lowered for ``device`` (``jax.stages.Lowered``),
  in the calling thread (so under its JAX configuration contexts).

  Raises:
    BuildError: the cluster cannot be traced or lowered.
  """
  sharding = jax.sharding.SingleDeviceSharding(device)
  owner = value_owner(program)
  in_specs = []
  for var in cluster.in_vars:
    aval = _var_aval(program, owner, var)
    in_specs.append(jax.ShapeDtypeStruct(aval.shape, aval.dtype,
                                         sharding=sharding,
                                         weak_type=aval.weak_type))
  run = cluster_function([program.nodes[n] for n in cluster.nodes],
                         cluster.in_vars, cluster.out_vars)
  with _as_build_error(program, cluster, device):
    return jax.jit(run, out_shardings=sharding).lower(*in_specs)


def compile_cluster(program: Program, cluster: Cluster, device,
                    lowered: Any = None):
  """Compiles one cluster ahead of time for ``device`` (no caching).

  Args:
    program, cluster, device: what to compile, and where.
    lowered: the cluster's :func:`lower_cluster`, if already lowered.

  Returns:
    The compiled executable; its results land on ``device``.

  Raises:
    BuildError: XLA could not compile it (e.g. the device is out of memory).
  """
  if lowered is None:
    lowered = lower_cluster(program, cluster, device)
  with _as_build_error(program, cluster, device):
    return lowered.compile()


@contextlib.contextmanager
def _as_build_error(program: Program, cluster: Cluster, device):
  try:
    yield
  except GplaceError:
    raise
  except Exception as err:  # pylint: disable=broad-except
    raise BuildError(
        f"Could not compile a cluster of {len(cluster.nodes)} ops (first "
        f"{program.graph.names[cluster.nodes[0]]!r}) for device {device}: "
        f"{first_line(err)}") from err


def get_or_compile(program: Program, signatures: Mapping[int, str],
                   cluster: Cluster, device) -> Lookup:
  """The cached executable of ``cluster`` on ``device``, compiled if new.

  Args:
    program, signatures, cluster, device: as for :func:`cluster_key`.

  Returns:
    A :class:`Lookup`.

  Raises:
    BuildError: as :func:`compile_cluster`.
  """
  (lookup,), _ = get_or_compile_many(program, signatures, [(cluster, device)])
  return lookup


#: Threads that compile clusters at once (XLA's compiler releases the GIL):
#: one per core. On an H200's 16-core host, a 2,834-op program split over
#: CPU + GPU compiled its 136 clusters one at a time in 46 s.
COMPILE_THREADS = max(1, os.cpu_count() or 1)


def get_or_compile_many(program: Program, signatures: Mapping[int, str],
                        items: Sequence[tuple[Cluster, Any]]
                        ) -> tuple[list[Lookup], float]:
  """:func:`get_or_compile` of each ``(cluster, device)`` in ``items``, the
  new ones compiled in up to :data:`COMPILE_THREADS` threads (each distinct
  cluster once).

  Returns:
    ``(lookups, seconds)``: a :class:`Lookup` per item, in order, and the
    wall-clock seconds spent compiling (0 when every one was cached).

  Raises:
    BuildError: as :func:`compile_cluster` (the first failing item's).
  """
  keys = [cluster_key(program, signatures, cluster, device)
          for cluster, device in items]
  cached, new = {}, {}
  for key, item in zip(keys, items):
    if key in _EXECUTABLES:
      cached[key] = _EXECUTABLES[key]
    elif key not in new:
      new[key] = item
  start = time.perf_counter()

  def timed(key, *lowered):
    began = time.perf_counter()
    return (compile_cluster(program, *new[key], *lowered),
            time.perf_counter() - began)

  if len(new) <= 1 or COMPILE_THREADS == 1:
    compiled = {key: timed(key) for key in new}
  else:
    # Traced and lowered here (under the caller's JAX contexts, e.g.
    # enable_x64); only XLA's compilation runs in the threads.
    lowered = {key: lower_cluster(program, *item)
               for key, item in new.items()}
    pool = concurrent.futures.ThreadPoolExecutor(
        min(COMPILE_THREADS, len(new)))
    try:
      futures = {key: pool.submit(timed, key, lowered[key]) for key in new}
      compiled = {key: future.result() for key, future in futures.items()}
    finally:      # a failure stops what has not started
      pool.shutdown(cancel_futures=True)
  seconds = time.perf_counter() - start if new else 0.0
  if len(_EXECUTABLES) + len(compiled) > MAX_EXECUTABLES:
    _EXECUTABLES.clear()
  lookups = []
  for key in keys:
    if key in compiled:
      executable, compile_s = compiled.pop(key)
      cached[key] = _EXECUTABLES[key] = executable
      lookups.append(Lookup(executable, True, compile_s))
    else:
      lookups.append(Lookup(cached[key], False, 0.0))
  return lookups, seconds


def traced_program(fn: Callable, args: tuple, kwargs: dict) -> Program:
  """``trace_program(fn, *args, **kwargs)``, cached by function and argument
  shapes, dtypes and weak types (unhashable functions, and arguments JAX
  cannot type, are traced every time)."""
  leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
  try:
    key = (fn, in_tree, tuple(str(jax.typeof(x)) for x in leaves))
    hash(key)
  except TypeError:
    return trace_program(fn, *args, **kwargs)
  program = _PROGRAMS.get(key)
  if program is None:
    program = trace_program(fn, *args, **kwargs)
    if len(_PROGRAMS) >= MAX_PROGRAMS:
      _PROGRAMS.pop(next(iter(_PROGRAMS)))
    _PROGRAMS[key] = program
  return program
