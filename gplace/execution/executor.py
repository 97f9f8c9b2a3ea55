"""Executor: run a placement for real on local JAX devices, and time it.

Where the simulator *predicts* a placement's runtime, the executor *runs* it:
:func:`place` turns ``(fn, graph, placement)`` into a :class:`PlacedFunction`,
a drop-in replacement for ``fn`` that computes each op on the device the
placement gives it; :func:`gplace.execution.timing.measure` times a placed
(or plain) function, and :func:`gplace.execution.timing.measure_placements`
scores many placements in a row, e.g. as the host reward of an RL loop. The
dispatch order and the clustering live in :mod:`gplace.execution.partition`,
the executable cache in :mod:`gplace.execution.cache`.

How a placement is run (host-side Python; nothing here is traced except the
sub-programs it compiles):

1. ``fn`` is traced once with :func:`gplace.graphs.capture.trace_program`;
   node ids of the program and of ``graph`` agree.
2. A *schedule* (a topological order of the nodes; default: the simulator's
   default schedule of this placement, ``gplace.simulate(graph, placement,
   topology, return_schedule=True)``) fixes the order in which each device
   runs its ops. The devices' sequences are interleaved into one topological
   order that stays on a device while its next op is ready, and that order
   is cut into maximal same-device *clusters*, dispatched in that order (see
   :mod:`gplace.execution.partition`). Every device thus runs its ops in
   schedule order, and the cluster graph is acyclic.
   Executor device ``i`` is topology device ``i``: the default topology is
   :func:`gplace.sim.topology.local` ``(devices)``; a calibrated one (e.g.
   ``Profile.topology``) must have one device per entry of ``devices``.
3. Each cluster is one jitted sub-program that replays its nodes with
   :func:`~gplace.graphs.capture.eval_node`, compiled ahead of time for its
   device (``out_shardings=SingleDeviceSharding(device)``) and cached
   process-wide by what it computes (:mod:`gplace.execution.cache`), so
   placing the same program again, or another placement that cuts the same
   cluster, does not compile again.
4. At call time arguments are put on the device of their input node (where
   the parameter lives); a value read on another device is moved there once
   per destination (``jax.device_put``); outputs land on the device of their
   output node.

Two partitioning modes:

* ``mode="cluster"`` (default): one executable per same-device run of ops.
  XLA fuses inside a cluster and there is one dispatch per cluster, so it
  *runs* fastest; every new cluster costs one compile, so building a fresh
  placement is slow (seconds for a few hundred ops).
* ``mode="op"``: one executable per op, cached by op signature (primitive,
  params, input shapes) and device, so identical layers share executables
  and after the first placement almost nothing compiles again. It *builds*
  fastest when many placements of one program are measured in a row, but
  every op is its own dispatch without fusion, so it runs slower and ranks
  placements by a different cost than the one a clustered run pays.

On resnet50 (tiny, inference, 300 nodes, 2 forced CPU devices;
``experiments/bench_executor.py`` has the table) ``"cluster"`` runs ~2.5x
faster and is what the calibrated simulator models, so it wins whenever a
placement runs more than a few hundred times or its true runtime matters;
``"op"`` wins for sweeps over many fresh placements of one program, e.g. an
RL reward, where a warm build takes milliseconds instead of seconds (but
ranks placements by an unfused cost).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np

from gplace.errors import ExecutionError
from gplace.execution import cache
from gplace.execution import partition as partitioning
from gplace.execution.partition import (Cluster, op_signature, value_bytes,
                                        value_owner)
from gplace.graphs.capture import Program
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.graphs.placement import check_placements
from gplace.sim.topology import Topology

MODES = ("cluster", "op")


def default_devices() -> list[jax.Device]:
  """All local devices: the CPU devices first, then any accelerators."""
  devices = list(jax.devices("cpu"))
  try:
    if jax.default_backend() != "cpu":
      devices += [d for d in jax.devices() if d.platform != "cpu"]
  except RuntimeError:
    pass
  return devices


# -- the placed function ----------------------------------------------------------


@dataclasses.dataclass
class _Plan:
  """The compiled, flattened schedule of one placed program.

  Values live in ``slots``; a slot is one value on one device. Steps are
  ``("put", src_slots, dst_slots, device)`` (one batched copy) or ``("run", executable,
  in_slots, out_slots)``.
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


class PlacedFunction:
  """``fn`` with every op pinned to the device its placement gives it.

  Call it like ``fn``; it returns the same output pytree. The first call (or
  :meth:`build`) traces ``fn``, partitions and compiles; later calls only
  dispatch. Arguments must have the shapes and dtypes of the first call.

  Attributes:
    fn: the wrapped function.
    graph: the graph the placement refers to.
    placement: ``[N]`` int32, device index per node.
    devices: the ``jax.Device`` s that placement indices refer to.
    mode: ``"cluster"`` or ``"op"``.
    topology: the topology the default schedule is simulated on (None:
      ``local(devices)``).
    build_s: seconds spent tracing, partitioning and compiling (0 before the
      first call).
    compile_s: the part of ``build_s`` spent compiling.
  """

  def __init__(self, fn: Callable, graph: Graph, placement: np.ndarray,
               devices: Sequence[jax.Device], mode: str, schedule=None,
               topology: Topology | None = None):
    self.fn = fn
    self.graph = graph
    self.placement = placement
    self.devices = list(devices)
    self.mode = mode
    self.topology = topology
    self._schedule = schedule   # checked: None, DEVICE_GREEDY or [N] order
    self.program: Program | None = None
    self.build_s = 0.0
    self._plan: _Plan | None = None

  # -- building ---------------------------------------------------------------

  @property
  def is_built(self) -> bool:
    return self._plan is not None

  def build(self, *args, **kwargs) -> "PlacedFunction":
    """Traces ``fn`` with example arguments (arrays or
    ``jax.ShapeDtypeStruct``), partitions and compiles. Idempotent."""
    if self._plan is not None:
      return self
    start = time.perf_counter()
    program = cache.traced_program(self.fn, args, kwargs)
    if (program.graph.n_nodes != self.graph.n_nodes
        or not np.array_equal(program.graph.op_type, self.graph.op_type)):
      raise ExecutionError(
          f"The graph was captured from a different function/arguments: "
          f"tracing {getattr(self.fn, '__name__', 'fn')!r} with these "
          f"arguments gives {program.graph.n_nodes} nodes, the graph has "
          f"{self.graph.n_nodes} (or their op types differ). Capture the "
          "graph from the same function and argument shapes you place.")
    self.program = program
    schedule, order = partitioning.dispatch_order(
        self.graph, self.placement, self._schedule, self.devices,
        self.topology)
    self._plan = _compile_plan(program, self.placement, self.devices,
                               self.mode, order, schedule)
    self.build_s = time.perf_counter() - start
    return self

  @property
  def clusters(self) -> list[Cluster]:
    return self._require_plan().clusters

  @property
  def schedule(self) -> np.ndarray | None:
    """``[N]`` int64, the topological order of the nodes whose per-device
    order the executor follows (None for ``schedule="device_greedy"``)."""
    return self._require_plan().schedule

  @property
  def n_clusters(self) -> int:
    return len(self._require_plan().clusters)

  @property
  def n_transfers(self) -> int:
    """Device-to-device copies per call (an argument read on a device other
    than its home counts; putting arguments on their home does not)."""
    return self._require_plan().n_transfers

  @property
  def transfer_bytes(self) -> int:
    return self._require_plan().transfer_bytes

  @property
  def compile_s(self) -> float:
    return self._require_plan().compile_s if self._plan else 0.0

  @property
  def n_compiled(self) -> int:
    """Executables this placed function compiled (others came from cache)."""
    return self._require_plan().n_compiled

  def _require_plan(self) -> _Plan:
    if self._plan is None:
      raise ExecutionError("This placed function has not been built yet; call "
                           "it once or call .build(*example_args).")
    return self._plan

  # -- running -----------------------------------------------------------------

  def _flat_args(self, args, kwargs) -> list[Any]:
    leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
    program = self.program
    if in_tree != program.in_tree:
      raise ExecutionError(
          f"The arguments' pytree structure differs from the one the program "
          f"was traced with.\n  got:      {in_tree}\n  expected: "
          f"{program.in_tree}")
    for i, (leaf, aval) in enumerate(zip(leaves, program.in_avals)):
      shape = tuple(np.shape(leaf))
      dtype = getattr(leaf, "dtype", None)
      if shape != tuple(aval.shape) or (
          dtype is not None and np.dtype(dtype) != np.dtype(aval.dtype)):
        raise ExecutionError(
            f"Argument leaf {i} ({self.graph.names[self._arg_node(i)]}) has "
            f"shape {shape} and dtype {dtype}, but the program was traced "
            f"with {aval.str_short()}; place the function again for new "
            "shapes.")
    return leaves

  def _arg_node(self, leaf_index: int) -> int:
    for node, record in enumerate(self.program.nodes):
      if record.kind == NODE_INPUT and record.source == ("arg", leaf_index):
        return node
    return 0

  def stage_args(self, *args, **kwargs):
    """Returns ``(args, kwargs)`` with every leaf already on the device of its
    input node, so that timing a call does not time putting parameters where
    they live."""
    if self._plan is None:
      self.build(*args, **kwargs)
    leaves = self._flat_args(args, kwargs)
    return jax.tree_util.tree_unflatten(self.program.in_tree,
                                        self._staged(leaves))

  def _staged(self, leaves: list[Any]) -> list[Any]:
    """Leaves on their home devices; leaves already there are not touched
    (a ``device_put`` of a placed array still costs ~20 us)."""
    shardings = self._plan.arg_shardings
    move = [i for i, (leaf, sharding) in enumerate(zip(leaves, shardings))
            if not (isinstance(leaf, jax.Array)
                    and leaf.sharding == sharding)]
    if move:
      leaves = list(leaves)
      moved = jax.device_put([leaves[i] for i in move],
                             [shardings[i] for i in move])
      for i, value in zip(move, moved):
        leaves[i] = value
    return leaves

  def __call__(self, *args, **kwargs):
    if self._plan is None:
      self.build(*args, **kwargs)
    plan = self._plan
    leaves = self._flat_args(args, kwargs)
    slots: list[Any] = [None] * plan.n_slots
    for slot, value in zip(plan.arg_slots, self._staged(leaves)):
      if slot >= 0:
        slots[slot] = value
    for slot, value in plan.const_slots:
      slots[slot] = value
    for step in plan.steps:
      if step[0] == "run":
        _, executable, in_slots, out_slots = step
        results = executable(*[slots[s] for s in in_slots])
        for slot, value in zip(out_slots, results):
          slots[slot] = value
      else:
        _, srcs, dsts, device = step
        moved = jax.device_put([slots[i] for i in srcs], device)
        for slot, value in zip(dsts, moved):
          slots[slot] = value
    outputs = []
    for out in plan.output_slots:
      if isinstance(out, tuple):
        outputs.append(jax.device_put(np.asarray(out[1]), out[2]))
      else:
        outputs.append(slots[out])
    return jax.tree_util.tree_unflatten(self.program.out_tree, outputs)

  def __repr__(self) -> str:
    built = (f", clusters={self.n_clusters}, transfers={self.n_transfers}"
             if self._plan else ", not built")
    return (f"PlacedFunction({getattr(self.fn, '__name__', 'fn')!r}, "
            f"mode={self.mode!r}, devices={len(self.devices)}{built})")


def _compile_plan(program: Program, placement: np.ndarray, devices,
                  mode: str, order: list[int],
                  schedule: np.ndarray | None) -> _Plan:
  """Partitions ``order`` (op nodes in dispatch order), compiles (or fetches
  from cache) and flattens the plan."""
  clusters = partitioning.partition(program, placement, mode, order)
  owner = value_owner(program)
  nodes = program.nodes
  slot_of: dict[tuple[int, int], int] = {}
  steps: list[tuple] = []
  n_transfers = 0
  transfer_bytes = 0
  var_bytes = value_bytes(program)

  def new_slot(var, device_index):
    slot_of[(var, device_index)] = len(slot_of)
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
  for cluster in clusters:
    if cluster.out_vars:
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
  compile_s = 0.0
  n_compiled = n_cached = 0
  for cluster in clusters:
    if not cluster.out_vars:
      continue  # nothing it computes is used
    device = devices[cluster.device_index]
    for node in cluster.nodes:
      if node not in signatures:
        signatures[node] = op_signature(nodes[node])
    in_slots = [read(var, cluster.device_index) for var in cluster.in_vars]
    lookup = cache.get_or_compile(program, signatures, cluster, device)
    executable = lookup.executable
    compile_s += lookup.compile_s
    n_compiled += lookup.compiled
    n_cached += not lookup.compiled
    out_slots = [new_slot(var, cluster.device_index)
                 for var in cluster.out_vars]
    flush()
    steps.append(("run", executable, in_slots, out_slots))
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
  return _Plan(n_slots=len(slot_of), arg_slots=arg_slots,
               arg_devices=arg_devices,
               arg_shardings=[jax.sharding.SingleDeviceSharding(d)
                              for d in arg_devices],
               const_slots=const_slots, steps=steps,
               output_slots=output_slots, clusters=clusters,
               schedule=schedule, n_transfers=n_transfers,
               transfer_bytes=transfer_bytes,
               compile_s=compile_s, n_compiled=n_compiled, n_cached=n_cached)


def place(fn: Callable, graph: Graph, placement, devices=None,
          mode: str = "cluster", *, schedule=None,
          topology: Topology | None = None,
          example_args: tuple | None = None,
          example_kwargs: dict | None = None) -> PlacedFunction:
  """Pins each op of ``fn`` to the device that ``placement`` gives it, and
  runs each device's ops in the order ``schedule`` gives them.

  Args:
    fn: the jittable function ``graph`` was captured from.
    graph: its op graph (``gplace.capture(fn, *args)``).
    placement: ``[N]`` device index per node of ``graph``; input nodes say
      where parameters live, output nodes where results land.
    devices: ``jax.Device`` s that indices refer to (default: all local
      devices, CPU first, then accelerators).
    mode: ``"cluster"`` (fast runs) or ``"op"`` (fast builds); see the
      module docstring.
    schedule: the order in which each device runs its ops: ``[N]`` int, a
      topological order of the nodes (each device runs its ops in this
      order; see :mod:`gplace.execution.partition`), or the ``SimResult`` of
      ``gplace.simulate(graph, placement, topology, return_schedule=True)``
      for this one placement (its ``order``, or its nodes by start time, ties
      by node id). Default None: the simulator's default schedule of this
      placement on ``topology``, simulated when the function is built.
      ``"device_greedy"``: no schedule, the executor's original order.
    topology: what the default schedule is simulated on; device ``i`` must
      describe ``devices[i]`` (default ``gplace.sim.topology.local(devices)``;
      pass ``Profile.topology`` for calibrated costs).
    example_args, example_kwargs: if given, build (trace and compile) now
      instead of on the first call.

  Returns:
    A :class:`PlacedFunction` with ``fn`` 's signature and output pytree.

  Raises:
    PlacementError: a placement of the wrong length or a device index out of
      range.
    ScheduleError: a schedule that is not a topological order of the nodes
      (wrong length, not a permutation, a node before one of its inputs).
    TopologyError: a topology without one device per entry of ``devices``.
    ExecutionError: an unknown mode, or (when building) ``graph`` was not
      captured from ``fn`` with arguments of these shapes.
  """
  if mode not in MODES:
    raise ExecutionError(f"Unknown mode {mode!r}; choose one of {MODES}.")
  devices = list(devices) if devices is not None else default_devices()
  if not devices:
    raise ExecutionError("No devices to place on.")
  placement = check_placements(placement, graph, len(devices),
                               batched=False)
  schedule = partitioning.check_schedule(schedule, graph)
  if topology is not None:
    topology = partitioning.check_topology(topology, devices)
  placed = PlacedFunction(fn, graph, placement, devices, mode, schedule,
                          topology)
  if example_args is not None or example_kwargs is not None:
    placed.build(*(example_args or ()), **(example_kwargs or {}))
  return placed
