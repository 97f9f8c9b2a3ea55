"""Executor: run a placement for real on local JAX devices.

:func:`place` ``(fn, graph, placement [N], devices=None, mode="cluster", *,
schedule=None, topology=None, fusion=None) -> PlacedFunction``, a drop-in
for ``fn`` (executor device ``i`` is topology device ``i``).
``mode="cluster"`` runs fastest (one fused executable per same-device
cluster); ``mode="op"`` builds fastest but runs unfused; ``fusion=`` makes
each fusion group one executable. See ``docs/design.md#running-a-placement``
and ``docs/design.md#fusion``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol, Sequence

import jax
import numpy as np

from gplace.errors import ExecutionError, PlacementError
from gplace.execution import cache
from gplace.execution import effects
from gplace.execution import fusion as fusing
from gplace.execution import inputs
from gplace.execution import partition as partitioning
from gplace.execution import plan as plan_lib
from gplace.execution import weak_types
from gplace.execution.inputs import default_devices
from gplace.execution.partition import Cluster
from gplace.graphs.capture import Program, tree_difference
from gplace.graphs.fusion import Fusion
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.graphs.placement import check_placements
from gplace.sim.topology import Topology

MODES = inputs.MODES


class ScheduledPlacement(Protocol):
  """A placement with the op order it was simulated in, as
  ``gplace.place(fn, result)`` takes it: :func:`gplace.optimize`'s
  :class:`~gplace.PlacementResult` is one (the executor does not know it;
  any value with these attributes will do)."""

  graph: Graph             # the placed graph, N nodes
  placement: np.ndarray    # [N] int device per node

  def schedule(self) -> np.ndarray:
    """``[N]`` int topological op order (see :func:`place`'s ``schedule``)."""


def _is_scheduled_placement(value: Any) -> bool:
  return not isinstance(value, Graph) and all(
      hasattr(value, name) for name in ("graph", "placement", "schedule"))


# -- ops that span several devices --------------------------------------------

#: Primitives that run their body on every device of a mesh: ``shard_map``
#: (what ``jax.pmap`` also traces to inside a traced function) and the
#: older ``xla_pmap``.
MULTI_DEVICE_PRIMITIVES = frozenset({"shard_map", "xla_pmap"})


def _sub_jaxprs(value):
  """The jaxprs an equation parameter holds (a scan's body, a cond's
  branches)."""
  if hasattr(value, "eqns"):
    yield value
  elif hasattr(value, "jaxpr") and hasattr(getattr(value, "jaxpr"), "eqns"):
    yield value.jaxpr
  elif isinstance(value, (tuple, list)):
    for item in value:
      yield from _sub_jaxprs(item)


def _multi_device_eqns(eqn):
  """``eqn`` and the equations nested in its sub-jaxprs that are
  :data:`MULTI_DEVICE_PRIMITIVES`."""
  if eqn.primitive.name in MULTI_DEVICE_PRIMITIVES:
    yield eqn
    return
  for value in eqn.params.values():
    for jaxpr in _sub_jaxprs(value):
      for inner in jaxpr.eqns:
        yield from _multi_device_eqns(inner)


def _mesh_devices(eqn) -> tuple[list | None, int]:
  """``(devices or None where only abstract, size)`` of a multi-device
  equation's mesh."""
  if eqn.primitive.name == "xla_pmap":
    size = int(eqn.params.get("global_axis_size",
                              eqn.params.get("axis_size", 1)))
    devices = eqn.params.get("devices")
    return (list(devices) if devices else jax.devices()[:size]), size
  mesh = eqn.params.get("mesh")
  size = int(getattr(mesh, "size", 1))
  if isinstance(mesh, jax.sharding.Mesh):
    return list(np.asarray(mesh.devices).flat), size
  return None, size


def check_multi_device_ops(program: Program, placement: np.ndarray,
                           devices: Sequence[jax.Device]) -> None:
  """Raises ExecutionError for a ``shard_map`` or ``pmap`` that the
  placement cannot run: one over several devices (a placement pins each op
  to one device), or one whose single mesh device is not the device its
  node is placed on. A one-device ``shard_map`` placed on its own device
  runs, as under ``jax.jit``."""
  for node, record in enumerate(program.nodes):
    if record.eqn is None:
      continue
    for eqn in _multi_device_eqns(record.eqn):
      mesh_devices, size = _mesh_devices(eqn)
      name = str(program.graph.names[node])
      target = devices[int(placement[node])]
      kind = ("jax.pmap / shard_map" if eqn.primitive.name == "shard_map"
              else "jax.pmap")
      is_a = "is a" if eqn is record.eqn else "holds a"
      if size > 1:
        raise ExecutionError(
            f"Node {node} ({name!r}) {is_a} {kind} over {size} devices, and a "
            "placement runs each op on one device, so gplace cannot place "
            "it. Place the function without it (call the pmap / shard_map "
            "outside the placed function, on its results or before it), "
            "or write that part without pmap / shard_map and let the "
            "placement spread it.")
      if mesh_devices is not None and list(mesh_devices) != [target]:
        home = [i for i, d in enumerate(devices) if d in mesh_devices]
        where = (f"place node {node} on device {home[0]} (its mesh's "
                 "device)" if home else
                 f"give gplace.place the mesh's device {mesh_devices[0]}")
        raise ExecutionError(
            f"Node {node} ({name!r}) {is_a} {kind} over the mesh of device "
            f"{mesh_devices[0]}, but the placement puts it on {target}. "
            f"Either {where}, or call the {kind} outside the placed "
            "function.")


# -- the placed function -----------------------------------------------------


class PlacedFunction:
  """``fn`` with every op pinned to the device its placement gives it.

  Call it like ``fn``; it returns the same output pytree. The first call (or
  :meth:`build`) traces ``fn``, partitions and compiles; later calls only
  dispatch. Arguments must have the shapes and dtypes of the first call;
  their weak types may differ where that does not change the computation
  (:mod:`gplace.execution.weak_types`).

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
               topology: Topology | None = None, fusion=None,
               fused: Fusion | None = None):
    self.fn = fn
    self.graph = graph
    self.placement = placement
    self.devices = list(devices)
    self.mode = mode
    self.topology = topology
    self._schedule = schedule   # checked: None, DEVICE_GREEDY or [N] order
    self.fusion = fusion        # [N] labels as given, or None
    self._fused = fused         # ... checked and contracted
    self.program: Program | None = None
    # Weak-type differences of call arguments (leaf indices) checked to
    # compute what the program computes.
    self._weak_ok: set[tuple[int, ...]] = {()}
    self.build_s = 0.0
    self._plan: plan_lib.Plan | None = None

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
    program = weak_types.resolve_program(self.fn, self.graph, args, kwargs,
                                         cache.traced_program,
                                         self._leaf_name)
    check_multi_device_ops(program, self.placement, self.devices)
    self.program = program
    after = effects.effect_edges(program)
    if self._fused is None:
      schedule, order = partitioning.dispatch_order(
          self.graph, self.placement, self._schedule, self.devices,
          self.topology, after=after)
    else:
      fusing.check_effects(self._fused, effects.effectful_nodes(program),
                           self.graph)
      schedule, order = fusing.fused_dispatch_order(
          self.graph, self._fused, self.fusion, self.placement,
          self._schedule, self.devices, self.topology, after=after)
    self._plan = plan_lib.compile_plan(
        program, self.placement, self.devices, self.mode, order, schedule,
        None if self._fused is None else self._fused.group_of)
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

  def _require_plan(self) -> plan_lib.Plan:
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
          "The arguments' pytree structure differs from the one the program "
          f"was traced with: {tree_difference(program.in_tree, in_tree)}. "
          "Call it with arguments of that structure (the placement names "
          "the captured nodes), or capture and place again for these.")
    changed = inputs.check_leaves(leaves, program.in_avals, self._leaf_name)
    if changed not in self._weak_ok:
      weak_types.check_call_weak_types(program, self.fn, args, kwargs,
                                       changed, cache.traced_program,
                                       self._leaf_name)
      self._weak_ok.add(changed)
    return leaves

  def _leaf_name(self, leaf_index: int) -> str:
    """The graph's name of flat argument leaf ``leaf_index`` (capture makes
    argument leaves the first nodes, in order)."""
    if leaf_index < self.graph.n_nodes and (
        self.graph.kind[leaf_index] == NODE_INPUT):
      return str(self.graph.names[leaf_index])
    return f"#{leaf_index}"

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
      elif step[0] == "fetch":
        for i in step[1]:
          slots[i].copy_to_host_async()
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


def place(fn: Callable, graph: Graph, placement=None, devices=None,
          mode: str = "cluster", *, schedule=None,
          topology: Topology | None = None, fusion=None,
          example_args: tuple | None = None,
          example_kwargs: dict | None = None) -> PlacedFunction:
  """Pins each op of ``fn`` to the device that ``placement`` gives it, and
  runs each device's ops in the order ``schedule`` gives them.

  ``gplace.place(fn, result)`` runs the winner of ``result =
  gplace.optimize(fn, ...)`` in the schedule it was simulated in (its
  :meth:`~gplace.PlacementResult.place`).

  Args:
    fn: the jittable function ``graph`` was captured from.
    graph: its op graph (``gplace.capture(fn, *args)``), or a
      :class:`~gplace.PlacementResult` (any :class:`ScheduledPlacement`;
      then no ``placement`` or ``schedule``).
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
      describe ``devices[i]`` (default ``gplace.sim.presets.local(devices)``;
      pass ``Profile.topology`` for calibrated costs).
    fusion: optional ``[N]`` int fusion group labels
      (:mod:`gplace.graphs.fusion`, as ``gplace.simulate`` takes them):
      each group (and each op labelled ``-1``) runs as one jitted cluster,
      one launch, XLA fusing inside it; a value that crosses between
      groups is materialized between two executables, a barrier XLA
      cannot fuse across (:mod:`gplace.execution.fusion`). The default
      schedule is then simulated with the decision. Default None: clusters
      are maximal same-device runs that XLA fuses as it likes (with a
      result of ``gplace.optimize(..., fusion=True)``: its ``fusion``).
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
    FusionError: a bad fusion decision, a group the placement splits
      across devices, or (when building) a group holding an op with side
      effects.
    CaptureError: ``fn`` is not callable.
    ExecutionError: an unknown mode, ``devices`` that are not distinct
      ``jax.Device`` s, example arguments that are not a tuple and a dict,
      or (when building) ``graph`` was not captured from ``fn`` with
      arguments of these shapes and dtypes (or of these weak types, where
      they change the computation; see
      :mod:`gplace.execution.weak_types`), or ``fn`` holds a ``jax.pmap`` /
      ``shard_map`` over several devices, or over one device other than its
      node's (:func:`check_multi_device_ops`).
  """
  if _is_scheduled_placement(graph):
    if placement is not None or schedule is not None:
      raise PlacementError(
          "gplace.place(fn, result) runs the optimize result's own placement "
          "and schedule; drop placement= and schedule= (or pass result.graph "
          "with a placement of your own).")
    return place(fn, graph.graph, graph.placement, devices, mode=mode,
                 schedule=graph.schedule(), topology=topology,
                 fusion=(fusion if fusion is not None
                         else getattr(graph, "fusion", None)),
                 example_args=example_args, example_kwargs=example_kwargs)
  if placement is None:
    raise PlacementError(
        "gplace.place needs a placement: gplace.place(fn, graph, placement), "
        "or gplace.place(fn, result) with the result of gplace.optimize.")
  inputs.check_fn(fn, "gplace.place")
  mode = inputs.check_mode(mode)
  devices = (inputs.check_devices(devices, "gplace.place")
             if devices is not None else default_devices())
  placement = check_placements(placement, graph, len(devices),
                               batched=False)
  schedule = partitioning.check_schedule(schedule, graph)
  if topology is not None:
    topology = partitioning.check_topology(topology, devices)
  fused = fusing.check_fusion(fusion, graph, placement)
  placed = PlacedFunction(fn, graph, placement, devices, mode, schedule,
                          topology, fusion, fused)
  if example_args is not None or example_kwargs is not None:
    example_args, example_kwargs = inputs.check_call(
        example_args, example_kwargs, ("example_args", "example_kwargs"))
    placed.build(*example_args, **example_kwargs)
  return placed
