"""Fuzzes every public entry point of gplace with bad and adversarial input.

    python experiments/fuzz.py [--fast] [--jobs 2] [--timeout 60]
        [--entry simulate,place] [--show all] [--json out.json]

Each case calls one entry point (``gplace.capture``, ``simulate``,
``lower_bound``, ``place`` and the placed function, ``measure``,
``profile``, ``optimize``, ``coarsen`` / ``expand``, the baselines,
searches, solvers and ``gplace.placers.get``, ``create_policy``, the
training settings and ``gplace.rl.train``, the workload loaders, graph
files, ``Topology`` / ``Device`` and plotting) with one bad or odd
argument: bad values per argument are drawn from lists of wrong types,
NaN / inf, negative, huge, empty, wrong shapes, bools for ints, strings for
numbers and None, beside hand-written adversarial cases. Every case runs in
a worker process under a timeout, and ends in one of:

* ``clear``: a GplaceError whose message is a few readable lines;
* ``accepted``: odd but valid input, handled, and the result passes its
  sanity check (finite runtimes, right shapes, equal to ``jax.jit``);
* ``unclear``: a GplaceError whose message is empty, long or a repr dump;
* ``raw``: any other exception (or the worker died);
* ``silent``: a result for input that must be refused, or one that fails
  its sanity check;
* ``hang``: the case ran past ``--timeout`` (its worker is killed).

It prints a table (cases per entry point and outcome), then each failure
(unclear, raw, silent, hang); the exit status is 1 if there is any. Cases
listed in :data:`KNOWN` belong to fixes under way elsewhere: they are
marked as such, and ``--allow-known`` lets them fail without failing the
run. ``--fast`` runs the subset tests/test_fuzz_script.py runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import json
import math
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Optional
import warnings

# The repository root, so that `python experiments/fuzz.py` finds gplace.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import jax.numpy as jnp
import numpy as np

import gplace
from gplace.errors import GplaceError
from gplace.graphs.graph import Graph, random_dag
from gplace.rl import settings as settings_lib
from gplace.sim import presets
from gplace.sim import topology as topology_lib

CLEAR, ACCEPTED, UNCLEAR, RAW, SILENT, HANG = (
    "clear", "accepted", "unclear", "raw", "silent", "hang")
OUTCOMES = (CLEAR, ACCEPTED, UNCLEAR, RAW, SILENT, HANG)
FAILURES = (UNCLEAR, RAW, SILENT, HANG)

#: A case either must be refused (a GplaceError), or is odd but valid: it
#: may be refused or return a result that passes its check.
REJECT, ODD = "reject", "odd"

#: Failing cases that fixes under way elsewhere address (case id -> who):
#: ``--allow-known`` lets them fail; the run lists those that pass now.
#: Empty: issue 47 asks for a clean run (tests/test_fuzz_script.py).
KNOWN: dict[str, str] = {}

N_NODES = 12       # nodes of the fuzzed random graph
N_DEVICES = 3      # devices of the fuzzed topology (1cpu+2gpu)
NAN, INF = float("nan"), float("inf")

# Message markers of a repr dump or a traceback rather than a sentence.
_DUMP_MARKERS = ("Traceback (most recent call", "PyTreeDef(", '  File "',
                 "DeviceArray(", "Array([")
MAX_MESSAGE_CHARS = 1500
MAX_MESSAGE_LINES = 8


def readable(message: str) -> Optional[str]:
  """Why ``message`` is not a readable error message, or None."""
  text = message.strip()
  if not text:
    return "empty message"
  if len(text) > MAX_MESSAGE_CHARS:
    return f"{len(text)} characters"
  if len(text.splitlines()) > MAX_MESSAGE_LINES:
    return f"{len(text.splitlines())} lines"
  for marker in _DUMP_MARKERS:
    if marker in text:
      return f"holds {marker.strip()!r}"
  return None


# -- the cases -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
  """One call. ``run`` returns the result; ``check`` says what is wrong
  with an accepted result (None: nothing)."""
  id: str
  entry: str
  run: Callable[[], Any]
  expect: str = REJECT
  check: Optional[Callable[[Any], Optional[str]]] = None
  slow: bool = False


class Lazy:
  """An argument built in the worker when the case runs (fixtures)."""

  def __init__(self, make: Callable[[], Any]):
    self.make = make


def _resolve(value):
  return value.make() if isinstance(value, Lazy) else value


def call(fn, *args, **kwargs) -> Callable[[], Any]:
  """``fn(*args, **kwargs)`` with :class:`Lazy` arguments built first;
  ``fn`` may be a ``"module:attr.attr"`` path, imported when it runs."""
  def run():
    target = _import(fn) if isinstance(fn, str) else fn
    return target(*[_resolve(a) for a in args],
                  **{k: _resolve(v) for k, v in kwargs.items()})
  return run


def _import(path: str):
  module, _, attrs = path.partition(":")
  value = importlib.import_module(module)
  for attr in attrs.split("."):
    value = getattr(value, attr)
  return value


class _Fixtures:
  """What the cases share, built once per worker on first use."""

  @functools.cached_property
  def graph(self):
    return random_dag(N_NODES, seed=0, name="fuzz")

  @functools.cached_property
  def topology(self):
    return presets.preset("1cpu+2gpu")

  @functools.cached_property
  def empty_graph(self):
    return Graph.build(names=[], op_type=[], kind=[], out_shapes=[],
                       out_dtype=[], out_bytes=[], flops=[],
                       bytes_accessed=[], edges=[], name="empty")

  @functools.cached_property
  def program(self):
    """``(fn, args)``: a dense layer with a params dict."""

    def dense(params, x):
      return jnp.tanh(params["w"] @ x + params["b"]).sum()

    return dense, ({"w": jnp.ones((4, 4)), "b": jnp.zeros(4)},
                   jnp.arange(4.0))

  @functools.cached_property
  def captured(self):
    fn, args = self.program
    return gplace.capture(fn, *args)

  @functools.cached_property
  def devices(self):
    return jax.devices()[:2]

  @functools.cached_property
  def placed(self):
    fn, args = self.program
    graph = self.captured
    placed = gplace.place(fn, graph, np.arange(graph.n_nodes) % 2,
                          self.devices)
    placed(*args)
    return placed

  @functools.cached_property
  def tmp(self) -> str:
    """A scratch folder in the run's (which the parent removes)."""
    return tempfile.mkdtemp(prefix="worker_",
                            dir=os.environ.get("GPLACE_FUZZ_TMP"))

  def path(self, name: str, content: Optional[bytes] = None) -> str:
    """A file ``name`` in the scratch folder, holding ``content``."""
    path = os.path.join(self.tmp, name)
    if content is not None:
      with open(path, "wb") as f:
        f.write(content)
    return path


F = _Fixtures()
GRAPH = Lazy(lambda: F.graph)
TOPOLOGY = Lazy(lambda: F.topology)
EMPTY_GRAPH = Lazy(lambda: F.empty_graph)
CAPTURED = Lazy(lambda: F.captured)
PLACED = Lazy(lambda: F.placed)
DEVICES = Lazy(lambda: F.devices)
FN = Lazy(lambda: F.program[0])


# -- sanity checks of accepted results -----------------------------------------


def check_placement(n_nodes: Optional[int] = N_NODES,
                    n_devices: int = N_DEVICES):
  """A ``[N]`` integer placement of devices ``0..n_devices-1``."""
  def check(result):
    placement = np.asarray(getattr(result, "placement", result))
    n = n_nodes if n_nodes is not None else placement.shape[-1]
    if placement.shape != (n,) or not np.issubdtype(placement.dtype,
                                                    np.integer):
      return f"placement of shape {placement.shape} {placement.dtype}"
    if placement.size and (placement.min() < 0
                           or placement.max() >= n_devices):
      return f"device indices {placement.min()}..{placement.max()}"
    return None
  return check


def check_finite_seconds(value) -> Optional[str]:
  array = np.asarray(value, np.float64)
  if array.size == 0 or not np.all(np.isfinite(array)) or np.any(array < 0):
    return f"runtime {array}"
  return None


def check_simulation(rows: Optional[int] = None):
  def check(result):
    runtime = np.asarray(result.runtime_s)
    if rows is not None and runtime.shape not in ((rows,), ()):
      return f"runtime_s of shape {runtime.shape}"
    if rows == 0:
      return None
    oom = np.asarray(result.oom)
    return check_finite_seconds(runtime[~oom] if runtime.shape else (
        runtime if not bool(oom) else 0.0))
  return check


def check_positive_float(result) -> Optional[str]:
  try:
    value = float(result)
  except (TypeError, ValueError):
    return f"not a number: {result!r}"
  return None if math.isfinite(value) and value >= 0 else f"{value}"


def check_graph(result) -> Optional[str]:
  graph = getattr(result, "graph", result)
  if not isinstance(graph, Graph):
    return f"a {type(graph).__name__}, not a Graph"
  return None


def check_type(*names: str):
  def check(result):
    if type(result).__name__ not in names:
      return f"a {type(result).__name__}, not a {' or '.join(names)}"
    return None
  return check


def check_measurement(result) -> Optional[str]:
  if getattr(result, "failed", False):
    return None  # a measured failure says why in result.reason
  return check_finite_seconds(result.runtime_s)


def check_equal_to_jit(fn, args):
  def check(result):
    want = jax.jit(fn)(*args)
    got_leaves, want_leaves = jax.tree.leaves(result), jax.tree.leaves(want)
    if jax.tree.structure(result) != jax.tree.structure(want):
      return "another output structure than jax.jit's"
    for got, expected in zip(got_leaves, want_leaves):
      if not np.allclose(np.asarray(got), np.asarray(expected), rtol=1e-5,
                         equal_nan=True):
        return "outputs differ from jax.jit's"
    return None
  return check


def check_none(result) -> Optional[str]:
  return None


# -- catalogues of bad values --------------------------------------------------


def not_objects():
  """Values that are no graph, topology, function or settings object."""
  return [("None", None), ("int", 3), ("str", "x"), ("dict", {}),
          ("list", []), ("array", np.zeros(3)), ("object", object()),
          ("bool", True)]


def bad_counts(minimum: int = 1):
  """Values a count of at least ``minimum`` must refuse."""
  return [("below", minimum - 1), ("negative", -5), ("fraction", 1.5),
          ("nan", NAN), ("inf", INF), ("string", "3"), ("None", None),
          ("bool", True), ("array", np.ones(2, int)), ("complex", 1j)]


def bad_seeds():
  return [("negative", -1), ("fraction", 0.5), ("nan", NAN), ("string", "1"),
          ("None", None), ("huge", 2**40), ("array", np.zeros(3)),
          ("bool", True)]


def bad_seconds(zero_ok: bool = False):
  """Values a positive duration must refuse."""
  values = [("negative", -1.0), ("nan", NAN), ("inf", INF), ("string", "1"),
            ("bool", True), ("list", [1.0]), ("-inf", -INF)]
  if not zero_ok:
    values.append(("zero", 0.0))
  return values


def bad_placements(n: int, d: int):
  """Placements of ``n`` nodes on ``d`` devices that must be refused."""
  return [
      ("short", np.zeros(n - 1, np.int32)),
      ("long", np.zeros(n + 1, np.int32)),
      ("empty", np.zeros(0, np.int32)),
      ("rank3", np.zeros((2, 2, n), np.int32)),
      ("scalar", 0), ("None", None), ("strings", ["gpu:0"] * n),
      ("string", "0" * n), ("dict", {"a": 1}),
      ("ragged", [[0] * n, [0] * (n - 1)]),
      ("nan", np.full(n, NAN)), ("fraction", np.full(n, 0.5)),
      ("inf", np.full(n, INF)), ("huge", np.full(n, 1e30)),
      ("negative", np.full(n, -1)), ("too_high", np.full(n, d)),
      ("int64_max", np.full(n, np.iinfo(np.int64).max)),
      ("uint_wrap", np.full(n, 2**32 + 1, np.uint64)),
      ("complex", np.zeros(n, complex)), ("objects", np.array([object()] * n)),
      ("one_bad_node", np.r_[np.zeros(n - 1, int), d + 5]),
  ]


def odd_placements(n: int, d: int):
  """Placements that are odd but mean something: they run or are refused."""
  return [("bools", np.arange(n) % 2 == 0), ("integral_floats", np.zeros(n)),
          ("list", [i % d for i in range(n)]), ("int8", np.zeros(n, np.int8)),
          ("uint64", np.zeros(n, np.uint64))]


def bad_costs(n: int, d: int):
  nan_one = np.ones((n, d))
  nan_one[3, 1] = NAN
  return [("nan", np.full((n, d), NAN)), ("one_nan", nan_one),
          ("negative", -np.ones((n, d))), ("inf", np.full((n, d), INF)),
          ("narrow", np.ones((n, d - 1))), ("flat", np.ones(n)),
          ("transposed", np.ones((d, n))), ("string", "fast"),
          ("objects", [[None, "a", 1]] * n), ("dict", {"a": 1}),
          ("empty", np.zeros((0, d))), ("complex", np.ones((n, d), complex)),
          ("float32_overflow", np.full((n, d), 1e300))]


def odd_costs(n: int, d: int):
  return [("zeros", np.zeros((n, d))), ("tiny", np.full((n, d), 1e-30)),
          ("large", np.full((n, d), 1e6)), ("int", np.ones((n, d), int)),
          ("bools", np.ones((n, d), bool)),
          ("list", np.ones((n, d)).tolist())]


# -- case builders, one per entry point ----------------------------------------


def _capture_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"capture:{label}", "capture", run, **kw))
  x = jnp.ones(3)
  sin = lambda a: jnp.sin(a)
  for label, fn in not_objects():
    add(f"fn={label}", call("gplace:capture", fn, x))
  for label, arg in [("str", "abc"), ("object", object()),
                     ("dict_of_str", {"a": "b"}), ("list_with_str", [1, "x"]),
                     ("bytes", b"xy"), ("function", sin),
                     ("object_array", np.array([object()])),
                     ("str_array", np.array(["a", "b"])),
                     ("mixed_dict_keys", {1: x, "a": x})]:
    add(f"arg={label}", call("gplace:capture", lambda *a: a, arg))

  def raises(a):
    raise ValueError("user code failed")

  def branch(a):
    return a if a.sum() > 0 else -a

  add("fn_raises", call("gplace:capture", raises, x))
  add("python_control_flow", call("gplace:capture", branch, x))
  add("returns_str", call("gplace:capture", lambda a: "out", x))
  add("too_many_args", call("gplace:capture", sin, x, x))
  add("too_few_args", call("gplace:capture", lambda a, b: a + b, x))
  add("shape_mismatch", call("gplace:capture", lambda a, b: a @ b,
                             jnp.ones((2, 3)), jnp.ones((4, 5))))
  add("jit_static_argnums", call("gplace:capture", jax.jit(
      lambda a, n: a * n, static_argnums=1), x, 3))
  add("jit_static_argnames", call("gplace:capture", jax.jit(
      lambda a, n: a * n, static_argnames="n"), x, n=3))
  for label, name in [("int", 3), ("array", np.array(["a", "b"])),
                      ("list", ["g"])]:
    add(f"name={label}", call("gplace:capture", sin, x, name=name))
  # Odd but valid: these capture.
  odd = lambda label, run, check=check_graph: add(label, run, expect=ODD,
                                                  check=check)
  odd("returns_None", call("gplace:capture", lambda a: None, x))
  odd("arg=None", call("gplace:capture", lambda a: jnp.ones(2), None))
  odd("no_arguments", call("gplace:capture", lambda: jnp.ones(3) * 2))
  odd("python_scalars", call("gplace:capture", lambda a, b, c: a * b + c, 3,
                             2.0, True))
  odd("abstract_huge", call("gplace:capture", lambda a: a * 2,
                            jax.ShapeDtypeStruct((10**6, 10**6),
                                                 jnp.float32)))
  odd("zero_size", call("gplace:capture", sin, jnp.zeros((0, 3))))
  odd("keyword_only", call("gplace:capture", lambda *, a: a + 1, a=x))
  odd("already_jitted", call("gplace:capture", jax.jit(sin), x))
  odd("typed_key", call("gplace:capture", lambda k: jax.random.normal(k, (3,)),
                        jax.random.key(0)))
  odd("complex", call("gplace:capture", sin, jnp.ones(3, jnp.complex64)))
  odd("deep_pytree", call("gplace:capture", lambda t: jax.tree.leaves(t)[0],
                          functools.reduce(lambda a, _: [a], range(200), x)))
  odd("name_empty", call("gplace:capture", sin, x, name=""))
  odd("pmap_inside", call("gplace:capture", lambda a: jax.pmap(
      lambda b: b * 2)(a[None])[0], x))
  odd("while_loop", call("gplace:capture", lambda a: jax.lax.while_loop(
      lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2), (0, a))[1], x))
  return cases


def _simulate_cases() -> list[Case]:
  cases = []
  n, d = N_NODES, N_DEVICES
  zeros = np.zeros(n, np.int32)
  sim = "gplace:simulate"
  add = lambda label, run, **kw: cases.append(
      Case(f"simulate:{label}", "simulate", run, **kw))
  for label, value in not_objects():
    add(f"graph={label}", call(sim, value, zeros, TOPOLOGY))
    add(f"topology={label}", call(sim, GRAPH, zeros, value))
  add("topology=preset_name", call(sim, GRAPH, zeros, "1cpu+2gpu"))
  add("empty_graph", call(sim, EMPTY_GRAPH, np.zeros(0, np.int32), TOPOLOGY))
  for label, value in bad_placements(n, d):
    add(f"placements={label}", call(sim, GRAPH, value, TOPOLOGY))
  for label, value in odd_placements(n, d):
    add(f"placements={label}", call(sim, GRAPH, value, TOPOLOGY),
        expect=ODD, check=check_simulation())
  add("placements=batch_of_5", call(sim, GRAPH, np.zeros((5, n), int),
                                    TOPOLOGY), expect=ODD,
      check=check_simulation(5))
  add("placements=batch_of_0", call(sim, GRAPH, np.zeros((0, n), int),
                                    TOPOLOGY), expect=ODD,
      check=check_simulation(0))
  for label, value in bad_costs(n, d):
    add(f"costs={label}", call(sim, GRAPH, zeros, TOPOLOGY, value))
  for label, value in odd_costs(n, d):
    add(f"costs={label}", call(sim, GRAPH, zeros, TOPOLOGY, value),
        expect=ODD, check=check_simulation())
  for label, value in [("string", "abc"), ("fractions", np.full(n, 0.5)),
                       ("repeated", np.zeros(n, int)),
                       ("reversed", np.arange(n)[::-1]),
                       ("short", np.arange(n - 1)), ("nan", np.full(n, NAN))]:
    add(f"order={label}", call(sim, GRAPH, zeros, TOPOLOGY, order=value))
  for label, value in [("nan", np.full(n, NAN)), ("string", "high"),
                       ("long", np.ones(n + 1)), ("inf", np.full(n, INF))]:
    add(f"priority={label}", call(sim, GRAPH, zeros, TOPOLOGY,
                                  priority=value))
  for label, value in [("unknown", "fifo"), ("list", ["static"]),
                       ("int", 3)]:
    add(f"schedule={label}", call(sim, GRAPH, zeros, TOPOLOGY,
                                  schedule=value))
  for label, value in [("list", [1]), ("string", "yes")]:
    add(f"return_schedule={label}", call(sim, GRAPH, zeros, TOPOLOGY,
                                         return_schedule=value))
  add("order=identity", call(sim, GRAPH, zeros, TOPOLOGY,
                             order=np.arange(n)), expect=ODD,
      check=check_simulation())
  return cases


def _lower_bound_cases() -> list[Case]:
  cases = []
  n, d = N_NODES, N_DEVICES
  bound = "gplace:lower_bound"
  add = lambda label, run, **kw: cases.append(
      Case(f"lower_bound:{label}", "lower_bound", run, **kw))
  for label, value in not_objects():
    add(f"graph={label}", call(bound, value, TOPOLOGY))
    add(f"topology={label}", call(bound, GRAPH, value))
  add("empty_graph", call(bound, EMPTY_GRAPH, TOPOLOGY), expect=ODD,
      check=check_positive_float)
  for label, value in bad_costs(n, d):
    add(f"costs={label}", call(bound, GRAPH, TOPOLOGY, value))
  for label, value in odd_costs(n, d):
    add(f"costs={label}", call(bound, GRAPH, TOPOLOGY, value), expect=ODD,
        check=check_positive_float)
  return cases


def _place_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"place:{label}", "place", run, **kw))

  def place(placement=None, **kwargs):
    """``gplace.place(dense, captured, placement, devices, **kwargs)``
    with the example arguments, so that it builds now."""
    def run():
      fn, args = F.program
      graph = F.captured
      value = placement(graph.n_nodes) if callable(placement) else placement
      keywords = dict(devices=F.devices, example_args=args)
      keywords.update({k: _resolve(v) for k, v in kwargs.items()})
      return gplace.place(fn, graph, value, **keywords)
    return run

  zeros = lambda n: np.zeros(n, np.int32)
  for label, make in [(label, (lambda n, i=i: bad_placements(n, 2)[i][1]))
                      for i, (label, _) in enumerate(bad_placements(4, 2))]:
    add(f"placement={label}", place(make))
  add("placement=missing", place(None))
  for label, devices in [("empty", []), ("strings", ["cpu:0"]),
                         ("ints", [0, 1]), ("string", "cpu"),
                         ("one_device_object", Lazy(lambda: F.devices[0])),
                         ("duplicate", Lazy(lambda: [F.devices[0]] * 2))]:
    add(f"devices={label}", place(zeros, devices=devices))
  for label, mode in [("unknown", "fast"), ("None", None), ("int", 3),
                      ("empty", "")]:
    add(f"mode={label}", place(zeros, mode=mode))
  for label, schedule in [("unknown", "fifo"), ("repeated", Lazy(
      lambda: np.zeros(F.captured.n_nodes, int))), ("reversed", Lazy(
          lambda: np.arange(F.captured.n_nodes)[::-1])), ("nan", Lazy(
              lambda: np.full(F.captured.n_nodes, NAN)))]:
    add(f"schedule={label}", place(zeros, schedule=schedule))
  add("topology=too_many_devices", place(zeros, topology=TOPOLOGY))
  add("topology=str", place(zeros, topology="1cpu+2gpu"))
  add("example_args=dict", place(zeros, example_args={"a": 1}))
  add("example_args=int", place(zeros, example_args=3))
  add("example_kwargs=list", place(zeros, example_kwargs=[1]))
  for label, fn in not_objects():
    add(f"fn={label}", call("gplace:place", fn, CAPTURED, Lazy(
        lambda: zeros(F.captured.n_nodes)), DEVICES))
  for label, graph in not_objects():
    add(f"graph={label}", call("gplace:place", FN, graph, np.zeros(3, int),
                               DEVICES))
  add("graph=not_captured_from_fn", call(
      "gplace:place", FN, GRAPH, np.zeros(N_NODES, int), DEVICES,
      example_args=Lazy(lambda: F.program[1])))
  add("schedule=device_greedy", place(zeros, schedule="device_greedy"),
      expect=ODD, check=check_type("PlacedFunction"))

  # Calls of a built placed function with other arguments.
  def placed_call(*args, **kwargs):
    def run():
      return F.placed(*[_resolve(a) for a in args],
                      **{k: _resolve(v) for k, v in kwargs.items()})
    return run

  good_x = jnp.arange(4.0)
  params = lambda **changes: {**{"w": jnp.ones((4, 4)), "b": jnp.zeros(4)},
                              **changes}
  call_cases = [
      ("extra_key", placed_call(params(c=jnp.ones(2)), good_x)),
      ("missing_key", placed_call({"w": jnp.ones((4, 4))}, good_x)),
      ("list_for_dict", placed_call([jnp.ones((4, 4)), jnp.zeros(4)],
                                    good_x)),
      ("wrong_shape", placed_call(params(), jnp.ones(5))),
      ("wrong_dtype", placed_call(params(), jnp.arange(4))),
      ("string", placed_call(params(), "x")),
      ("None", placed_call(params(), None)),
      ("too_few", placed_call(params())),
      ("too_many", placed_call(params(), good_x, good_x)),
      ("keyword", placed_call(params(), x=good_x)),
      ("python_list", placed_call(params(), [0.0, 1.0, 2.0, 3.0])),
      ("bfloat16", placed_call(params(w=jnp.ones((4, 4), jnp.bfloat16)),
                               good_x)),
  ]
  for label, run in call_cases:
    cases.append(Case(f"placed_call:{label}", "placed call", run))
  fn = lambda p, x: jnp.tanh(p["w"] @ x + p["b"]).sum()
  nan_args = (params(w=jnp.full((4, 4), NAN)), good_x)
  cases.append(Case("placed_call:nan_values", "placed call",
                    placed_call(*nan_args), expect=ODD,
                    check=check_equal_to_jit(fn, nan_args)))
  numpy_args = (jax.tree.map(np.asarray, params()), np.arange(4.0,
                                                             dtype=np.float32))
  cases.append(Case("placed_call:numpy_arrays", "placed call",
                    placed_call(*numpy_args), expect=ODD,
                    check=check_equal_to_jit(fn, numpy_args)))

  # jax.pmap / shard_map inside the placed function (issue 47, item 1).
  def pmapped(n_devices):
    def run():
      body = lambda a: jax.pmap(lambda b: b * 2.0)(
          a.reshape(n_devices, -1)).reshape(-1) + 1.0
      a = jnp.arange(4.0)
      graph = gplace.capture(body, a)
      return gplace.place(body, graph, np.zeros(graph.n_nodes, int),
                          F.devices)(a)
    return run

  add("pmap_over_one_device", pmapped(1), expect=ODD, check=lambda r: (
      None if np.allclose(np.asarray(r), np.arange(4.0) * 2 + 1) else
      "outputs differ from jax.jit's"))
  add("pmap_over_two_devices", pmapped(2))
  return cases


def _measure_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"measure:{label}", "measure", run, **kw))
  args = Lazy(lambda: F.program[1])

  def measure(target=PLACED, **kwargs):
    def run():
      return gplace.measure(_resolve(target), *F.program[1],
                            **{k: _resolve(v) for k, v in kwargs.items()})
    return run

  for field, minimum in (("repeats", 1), ("warmup", 0)):
    for label, value in bad_counts(minimum):
      add(f"{field}={label}", measure(**{field: value}))
  for label, value in not_objects():
    add(f"placed={label}", measure(value))
  add("placed=graph", measure(CAPTURED))
  add("args=missing", call("gplace:measure", PLACED))
  add("args=wrong_shape", call("gplace:measure", PLACED, Lazy(
      lambda: F.program[1][0]), np.ones(5, np.float32)))
  add("plain_function", measure(FN, repeats=2, warmup=0), expect=ODD,
      check=check_measurement)
  add("repeats=1", measure(repeats=1, warmup=0), expect=ODD,
      check=check_measurement)
  del args
  return cases


def _profile_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"profile:{label}", "profile", run, **kw))

  def profile(fn=FN, **kwargs):
    def run():
      keywords = dict(devices=F.devices, repeats=1, transfer_repeats=1,
                      calibration_placements=2, calibration_rounds=1)
      keywords.update({k: _resolve(v) for k, v in kwargs.items()})
      return gplace.profile(_resolve(fn), *F.program[1], **keywords)
    return run

  for field in ("repeats", "transfer_repeats", "calibration_rounds"):
    for label, value in bad_counts(1):
      add(f"{field}={label}", profile(**{field: value}))
  for label, value in bad_counts(0):
    add(f"calibration_placements={label}",
        profile(calibration_placements=value))
  for label, value in bad_seeds():
    add(f"seed={label}", profile(seed=value))
  for label, value in [("empty", []), ("strings", ["cpu:0"]),
                       ("string", "cpu")]:
    add(f"devices={label}", profile(devices=value))
  for label, value in not_objects():
    add(f"fn={label}", profile(value))
  for value in (1, 0):
    add(f"calibration_placements={value}",
        profile(calibration_placements=value), expect=ODD,
        check=check_type("Profile"), slow=True)
  return cases


def _optimize_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"optimize:{label}", "optimize", run, **kw))

  def optimize(target=GRAPH, **kwargs):
    def run():
      keywords = dict(topology=F.topology, budget_s=0.5, progress=False)
      keywords.update({k: _resolve(v) for k, v in kwargs.items()})
      return gplace.optimize(_resolve(target), **keywords)
    return run

  for label, value in not_objects():
    add(f"fn_or_graph={label}", optimize(value))
    if value is not None:  # None: the default topology
      add(f"topology={label}", optimize(topology=value))
  for label, value in [("unknown", "nope"), ("None", None), ("int", 3),
                       ("empty", ""), ("list", ["heft"])]:
    add(f"method={label}", optimize(method=value))
  for label, value in bad_seconds():
    add(f"budget_s={label}", optimize(budget_s=value))
  add("budget_s=None", optimize(budget_s=None))
  for label, value in bad_seeds():
    add(f"seed={label}", optimize(seed=value))
  for label, value in bad_counts(1):
    if label != "None":  # None: no limit
      add(f"max_evaluations={label}", optimize(max_evaluations=value))
  for label, value in bad_costs(N_NODES, N_DEVICES)[:6]:
    add(f"costs={label}", optimize(costs=value))
  for label, value in [("unknown", "nope"), ("int", 3)]:
    add(f"policy={label}", optimize(policy=value))
  for label, value in [("string", "yes"), ("int", 2)]:
    add(f"profile={label}", optimize(profile=value))
  add("empty_graph", optimize(EMPTY_GRAPH))
  add("tiny_budget", optimize(budget_s=1e-6), expect=ODD,
      check=check_placement(), slow=True)
  add("one_evaluation", optimize(max_evaluations=1), expect=ODD,
      check=check_placement(), slow=True)
  return cases


def _coarsen_cases() -> list[Case]:
  cases = []
  add = lambda entry, label, run, **kw: cases.append(
      Case(f"{entry}:{label}", "coarsen/expand", run, **kw))
  for label, value in not_objects():
    add("coarsen", f"graph={label}", call("gplace:coarsen", value))
  add("coarsen", "empty_graph", call("gplace:coarsen", EMPTY_GRAPH),
      expect=ODD, check=lambda c: None if c.graph.n_nodes == 0 else
      f"{c.graph.n_nodes} groups of no nodes")
  for label, value in [("unknown", "nope"), ("None", None), ("int", 3),
                       ("list", ["size"])]:
    add("coarsen", f"rule={label}", call("gplace:coarsen", GRAPH, value))
  for label, value in bad_counts(1):
    if label != "None":
      add("coarsen", f"max_groups={label}", call(
          "gplace:coarsen", GRAPH, "size", max_groups=value))
  add("coarsen", "max_groups=huge", call("gplace:coarsen", GRAPH, "size",
                                         max_groups=10**12), expect=ODD,
      check=lambda c: None if c.graph.n_nodes <= N_NODES else "more groups")
  add("coarsen", "max_groups=1", call("gplace:coarsen", GRAPH, "size",
                                      max_groups=1), expect=ODD,
      check=lambda c: None if c.graph.n_nodes >= 1 else "no groups")
  coarse = Lazy(lambda: _import("gplace:coarsen")(F.graph, "size",
                                                  max_groups=4))
  for label, value in not_objects():
    add("expand", f"coarsening={label}", call("gplace:expand", value,
                                              np.zeros(4, int)))
  for label, value in bad_placements(4, 1000)[:12]:
    add("expand", f"placement={label}", call("gplace:expand", coarse, value))
  add("expand", "placement=graph_length", call(
      "gplace:expand", coarse, np.zeros(N_NODES, int)))
  return cases


def _baseline_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"baselines:{label}", "baselines", run, **kw))
  n, d = N_NODES, N_DEVICES
  for name in gplace.baselines.names():
    fn = f"gplace.baselines:{name}"
    add(f"{name}:graph=None", call(fn, None, TOPOLOGY))
    add(f"{name}:empty_graph", call(fn, EMPTY_GRAPH, TOPOLOGY))
    add(f"{name}:topology=str", call(fn, GRAPH, "1cpu+2gpu"))
    add(f"{name}:costs=nan", call(fn, GRAPH, TOPOLOGY,
                                  costs=np.full((n, d), NAN)))
    add(f"{name}:seed=-1", call(fn, GRAPH, TOPOLOGY, seed=-1))
    add(f"{name}:seed=True", call(fn, GRAPH, TOPOLOGY, seed=True))
    add(f"{name}:zero_costs", call(fn, GRAPH, TOPOLOGY,
                                   costs=np.zeros((n, d))), expect=ODD,
        check=check_placement())
  for label, value in [("unknown", "nope"), ("None", None), ("int", 3),
                       ("list", ["heft"]), ("search", "local_search")]:
    add(f"get={label}", call("gplace.baselines:get", value))
    add(f"plan={label}", call("gplace.baselines:plan", value, GRAPH,
                              TOPOLOGY))
  for label, value in [("int", 3), ("empty", []), ("set", {"heft"}),
                       ("unknown", ["heft", "nope"]), ("dict", {"a": 1})]:
    add(f"run_all:only={label}", call("gplace.baselines:run_all", GRAPH,
                                      TOPOLOGY, only=value))
    add(f"best:only={label}", call("gplace.baselines:best", GRAPH, TOPOLOGY,
                                   only=value))
  add("run_all:only=str", call("gplace.baselines:run_all", GRAPH, TOPOLOGY,
                               only="heft"), expect=ODD,
      check=lambda r: check_placement()(r["heft"]) if list(r) == ["heft"]
      else f"keys {list(r)}")
  for label, value in not_objects():
    add(f"single_device_peak_bytes={label}",
        call("gplace.baselines:single_device_peak_bytes", value))
  return cases


def _search_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"search:{label}", "search", run, **kw))
  n, d = N_NODES, N_DEVICES
  for name in ("local_search", "annealing", "genetic"):
    fn = f"gplace.search:{name}"
    search = lambda fn=fn, **kw: call(fn, GRAPH, TOPOLOGY,
                                      **{"budget": 40, **kw})
    for label, value in bad_counts(1):
      if label != "None":
        add(f"{name}:budget={label}", search(budget=value))
    for label, value in bad_placements(n, d)[:12]:
      if value is not None:  # None: start from the baselines
        add(f"{name}:init={label}", search(init=value))
    for label, value in bad_placements(n, 10**6)[:8]:
      if value is not None:  # None: every node its own group
        add(f"{name}:groups={label}", search(groups=value))
    for label, value in [("zero", 0), ("negative", -1), ("fraction", 1.5),
                         ("string", "2")]:
      add(f"{name}:move_size={label}", search(move_size=value))
      add(f"{name}:batch_size={label}", search(batch_size=value))
    for label, value in bad_seconds():
      if label != "inf":  # no time limit: the budget ends it
        add(f"{name}:time_limit_s={label}", search(time_limit_s=value))
    add(f"{name}:time_limit_s=inf", search(time_limit_s=INF), expect=ODD,
        check=check_placement())
    for label, value in bad_seeds()[:4]:
      add(f"{name}:seed={label}", search(seed=value))
    add(f"{name}:move_size=huge", search(move_size=10**6), expect=ODD,
        check=check_placement())
    add(f"{name}:budget=1", search(budget=1), expect=ODD,
        check=check_placement())
  annealing = lambda **kw: call("gplace.search:annealing", GRAPH, TOPOLOGY,
                                budget=40, **kw)
  for label, value in [("negative", -1.0), ("nan", NAN), ("inf", INF),
                       ("string", "0.1")]:
    add(f"annealing:t0={label}", annealing(t0=value))
  for label, value in [("negative", -0.5), ("nan", NAN), ("above_one", 2.0),
                       ("string", "0.9")]:
    add(f"annealing:decay={label}", annealing(decay=value))
  genetic = lambda **kw: call("gplace.search:genetic", GRAPH, TOPOLOGY,
                              budget=40, **kw)
  for field, values in [
      ("population", [("zero", 0), ("negative", -4), ("fraction", 2.5),
                      ("one", 1)]),
      ("elite", [("negative", -1), ("above_population", 100)]),
      ("tournament", [("zero", 0), ("negative", -1)]),
      ("crossover_kind", [("unknown", "nope"), ("None", None)]),
      ("mutation_rate", [("nan", NAN), ("negative", -0.5), ("above_one", 2.0),
                         ("string", "0.5")])]:
    for label, value in values:
      add(f"genetic:{field}={label}", genetic(**{field: value}))
  return cases


def _solver_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"solvers:{label}", "solvers", run, **kw))
  n, d = N_NODES, N_DEVICES
  for name in ("solve", "exact", "solver_lower_bound"):
    fn = f"gplace.solvers:{name}"
    solver = lambda fn=fn, **kw: call(fn, GRAPH, TOPOLOGY,
                                      **{"time_limit_s": 5.0, **kw})
    for label, value in bad_seconds():
      add(f"{name}:time_limit_s={label}", solver(time_limit_s=value))
    for label, value in [("zero", 0), ("negative", -1), ("fraction", 1.5),
                         ("string", "2"), ("bool", True)]:
      add(f"{name}:num_workers={label}", solver(num_workers=value))
    for label, value in bad_seeds()[:4]:
      add(f"{name}:seed={label}", solver(seed=value))
    add(f"{name}:graph=None", call(fn, None, TOPOLOGY))
    add(f"{name}:empty_graph", call(fn, EMPTY_GRAPH, TOPOLOGY), expect=ODD,
        check=lambda r: check_placement(0)(r) if not isinstance(r, float)
        else check_positive_float(r))
    add(f"{name}:costs=nan", solver(costs=np.full((n, d), NAN)))
  for label, value in bad_placements(n, d)[:10]:
    if value is not None:  # None: no hint
      add(f"solve:hint={label}", call("gplace.solvers:solve", GRAPH,
                                      TOPOLOGY, time_limit_s=5.0, hint=value))
  for label, value in [("negative", -1), ("fraction", 2.5), ("string", "9")]:
    add(f"solve:max_nodes={label}", call("gplace.solvers:solve", GRAPH,
                                         TOPOLOGY, max_nodes=value))
  add("solve:max_nodes=zero", call("gplace.solvers:solve", GRAPH, TOPOLOGY,
                                   time_limit_s=5.0, max_nodes=0),
      expect=ODD, check=check_placement(), slow=True)
  add("exact:tiny_graph", call("gplace.solvers:exact", GRAPH, TOPOLOGY,
                               time_limit_s=5.0), expect=ODD,
      check=check_placement(), slow=True)
  return cases


def _placers_get_cases() -> list[Case]:
  cases = []
  for label, value in not_objects() + [("unknown", "nope"),
                                       ("upper_case", "HEFT"),
                                       ("padded", " heft"), ("empty", ""),
                                       ("list_of_name", ["heft"])]:
    cases.append(Case(f"placers.get:{label}", "placers.get",
                      call("gplace.placers:get", value)))
  cases.append(Case("placers.get:kind_of=nope", "placers.get",
                    call("gplace.placers:kind_of", "nope")))
  return cases


def _policy_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"create_policy:{label}", "create_policy", run, **kw))
  create = "gplace.policies:create_policy"
  for label, value in not_objects() + [("unknown", "nope"),
                                       ("upper_case", "GO")]:
    add(f"name={label}", call(create, value, 3))
  for label, value in bad_counts(1):
    add(f"num_devices={label}", call(create, "go", value))
  for family in ("go", "hdp", "placeto", "colocrl", "hsdag", "doppler"):
    add(f"{family}:unknown_hparam", call(create, family, 3, hidden_sizes=64))
    for label, value in [("zero", 0), ("negative", -8), ("fraction", 1.5),
                         ("string", "64"), ("nan", NAN), ("None", None),
                         ("bool", True)]:
      add(f"{family}:hidden_size={label}", call(create, family, 3,
                                                hidden_size=value))
  add("go:num_heads=3", call(create, "go", 3, hidden_size=64, num_heads=3))
  add("go:aggregator=nope", call(create, "go", 3, aggregator="nope"))
  add("go:one_device", call(create, "go", 1), expect=ODD,
      check=check_type("GOPolicy", "Policy"))
  return cases


def _settings_cases() -> list[Case]:
  """Every declared field of every training settings section, with values
  its declared check refuses."""
  cases = []
  sections = [settings_lib.TrainSettings] + [
      type(getattr(settings_lib.TrainSettings(), f.name))
      for f in dataclasses.fields(settings_lib.TrainSettings)
      if dataclasses.is_dataclass(getattr(settings_lib.TrainSettings(),
                                          f.name))]
  if hasattr(settings_lib, "PretrainSettings"):
    sections.append(settings_lib.PretrainSettings)
  for cls in sections:
    for field in dataclasses.fields(cls):
      check = field.metadata.get("check")
      if check is None:
        continue
      for label, value in _refused_by(check):
        cases.append(Case(f"rl settings:{cls.__name__}.{field.name}={label}",
                          "rl settings",
                          call(cls, **{field.name: value})))
  add = lambda label, run, **kw: cases.append(
      Case(f"rl settings:{label}", "rl settings", run, **kw))
  train_settings = "gplace.rl:TrainSettings"
  for label, value in [("str", "x"), ("int", 3), ("list", [1])]:
    add(f"TrainSettings.rl={label}", call(train_settings, rl=value))
  add("TrainSettings.rl=bad_dict", call(train_settings,
                                        rl={"num_samples": 0}))
  add("TrainSettings.rl=unknown_key", call(train_settings,
                                           rl={"num_sample": 8}))
  add("PolicySettings.name=nope", call("gplace.rl:PolicySettings",
                                       name="nope"))
  add("PolicySettings.hparams=str", call("gplace.rl:PolicySettings",
                                         hparams="big"))
  add("PolicySettings.hparams=unknown", call("gplace.rl:PolicySettings",
                                             hparams={"hidden_sizes": 8}))
  add("PolicySettings.hparams=zero", call("gplace.rl:PolicySettings",
                                          hparams={"hidden_size": 0}))
  add("TrainSettings.baselines=unknown", call(train_settings,
                                              baselines=("nope",)))
  add("TrainSettings.baselines=str", call(train_settings, baselines="heft"),
      expect=ODD, check=lambda s: None if tuple(s.baselines) == ("heft",)
      else f"baselines={s.baselines!r}")
  return cases


def _refused_by(check):
  """Values the declared ``check`` of a settings field refuses."""
  kind = type(check).__name__
  if kind == "_Int":
    values = [("below", check.minimum - 1), ("fraction", 1.5),
              ("nan", NAN), ("string", str(check.example)), ("None", None),
              ("bool", True)]
    if check.maximum is not None:
      values.append(("at_maximum", check.maximum))
    return values
  if kind == "_Real":
    values = [("nan", NAN), ("string", str(check.example)), ("None", None),
              ("bool", True), ("-inf", -INF)]
    if math.isfinite(check.low):
      values.append(("below", check.low - 1.0))
      if not check.low_included:
        values.append(("at_low", check.low))
    if math.isfinite(check.high):
      values.append(("above", check.high + 1.0))
      if not check.high_included:
        values.append(("at_high", check.high))
    else:
      values.append(("inf", INF))
    return values
  if kind == "_Choice":
    return [("unknown", "no_such_choice"), ("int", 3), ("None", None)]
  return [("string", "yes"), ("int", 2), ("None", None)]


def _train_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"rl.train:{label}", "rl.train", run, **kw))

  def tiny_settings():
    return gplace.rl.TrainSettings(
        progress_bar=False, print_table=False, pmap=False,
        rl=gplace.rl.RLSettings(num_samples=4),
        train=gplace.rl.LoopSettings(num_steps=1, chunk_steps=1,
                                     eval_samples=4))

  def train(graphs=Lazy(lambda: [F.graph]), topology=TOPOLOGY, **kwargs):
    def run():
      keywords = dict(settings=tiny_settings(), log=lambda _: None,
                      workdir=os.path.join(F.tmp, "train"))
      keywords.update({k: _resolve(v) for k, v in kwargs.items()})
      return gplace.rl.train(_resolve(graphs), _resolve(topology), **keywords)
    return run

  for label, value in not_objects():
    add(f"graphs={label}", train(value))
    add(f"topology={label}", train(topology=value))
  add("graphs=[None]", train([None]))
  add("graphs=[graph, str]", train(Lazy(lambda: [F.graph, "x"])))
  add("graphs=[empty_graph]", train(Lazy(lambda: [F.empty_graph])))
  for label, value in [("str", "go"), ("int", 3), ("dict", {"name": "go"})]:
    add(f"policy={label}", train(policy=value))
  add("policy=unknown_family", train(policy=Lazy(
      lambda: _import("gplace.rl:PolicySettings")(name="nope"))))
  for label, value in [("str", "fast"), ("dict", {"seed": 1}),
                       ("RLSettings", Lazy(
                           lambda: _import("gplace.rl:RLSettings")()))]:
    add(f"settings={label}", train(settings=value))
  add("workdir=a_file", train(workdir=Lazy(lambda: F.path("file", b"x"))))
  add("workdir=int", train(workdir=3))
  add("progress=int", train(progress=3), slow=True)
  add("log=int", train(log=3))
  for label, value in [("negative", -1), ("string", "3"), ("fraction", 1.5)]:
    add(f"stop_after_step={label}", train(stop_after_step=value), slow=True)
  return cases


def _workload_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"workloads:{label}", "workloads", run, **kw))
  load, get = "gplace.workloads:load", "gplace.workloads:get"
  for label, value in not_objects() + [
      ("empty", ""), ("blank", "  "), ("unknown", "nope"),
      ("random_dag_abc", "random_dag:abc"), ("random_dag_1", "random_dag:1"),
      ("random_dag_negative", "random_dag:-5"), ("random_dag", "random_dag"),
      ("random_dag_seed_x", "random_dag:10:x"),
      ("random_dag_extra", "random_dag:10:1:2"),
      ("missing_npz", "/no/such/graph.npz"),
      ("missing_json", "/no/such/graph.json"),
      ("missing_module", "no_such_module:make"),
      ("missing_function", "os:no_such_function"),
      ("function_returns_str", "os:getcwd"),
      ("function_needs_arguments", "os:listdir_x"),
      ("path_traversal", "../../etc/passwd.json")]:
    add(f"load:name={label}", call(load, value))
  for label, value in not_objects()[:3] + [("unknown", "huge")]:
    add(f"load:size={label}", call(load, "rnnlm2", value))
    add(f"load:step={label}", call(load, "rnnlm2", "tiny", value))
  for label, value in bad_seeds()[:5]:
    add(f"load:seed={label}", call(load, "random_dag:20", seed=value))
  add("load:cache_dir=a_file", call(load, "rnnlm2", cache_dir=Lazy(
      lambda: F.path("cache_file", b"x"))))
  for label, value in not_objects()[:4] + [("unknown", "nope"),
                                           ("random_dag", "random_dag:10")]:
    add(f"get:name={label}", call(get, value))
  for label, value in [("unknown", "huge"), ("None", None)]:
    add(f"get:size={label}", call(get, "rnnlm2", value))
    add(f"get:step={label}", call(get, "rnnlm2", "tiny", value))
  add("load:random_dag_seeded", call(load, "random_dag:20:3"), expect=ODD,
      check=check_graph)
  return cases


def _graph_file_cases() -> list[Case]:
  cases = []
  documents = {
      "empty": b"", "truncated": b'{"nodes": [', "not_json": b"hello",
      "list": b"[]", "null": b"null", "number": b"3",
      "nodes_not_list": b'{"nodes": 3, "edges": []}',
      "no_nodes": b'{"edges": []}',
      "node_not_object": b'{"nodes": [3], "edges": []}',
      "node_without_id": b'{"nodes": [{"out_bytes": 4}], "edges": []}',
      "node_without_bytes": b'{"nodes": [{"id": "a"}], "edges": []}',
      "one_node": b'{"nodes": [{"id": "a", "out_bytes": 4}], "edges": []}',
      "negative_bytes": (b'{"nodes": [{"id": "a", "out_bytes": -4}], '
                         b'"edges": []}'),
      "nan_flops": (b'{"nodes": [{"id": "a", "out_bytes": 4, "flops": NaN}],'
                    b' "edges": []}'),
      "huge_number": (b'{"nodes": [{"id": "a", "out_bytes": 1e999}], '
                      b'"edges": []}'),
      "string_bytes": (b'{"nodes": [{"id": "a", "out_bytes": "4"}], '
                       b'"edges": []}'),
      "duplicate_ids": (b'{"nodes": [{"id": "a", "out_bytes": 4}, '
                        b'{"id": "a", "out_bytes": 4}], "edges": []}'),
      "edge_to_unknown": (b'{"nodes": [{"id": "a", "out_bytes": 4}], '
                          b'"edges": [{"src": "a", "dst": "b"}]}'),
      "cycle": (b'{"nodes": [{"id": "a", "out_bytes": 4}, {"id": "b", '
                b'"out_bytes": 4}], "edges": [{"src": "a", "dst": "b"}, '
                b'{"src": "b", "dst": "a"}]}'),
      "bad_kind": (b'{"nodes": [{"id": "a", "out_bytes": 4, "kind": "x"}], '
                   b'"edges": []}'),
      "list_id": b'{"nodes": [{"id": [1], "out_bytes": 4}], "edges": []}',
      "cost_wrong_length": (b'{"n_devices": 2, "nodes": [{"id": "a", '
                            b'"out_bytes": 4, "cost_s": [1.0]}], '
                            b'"edges": []}'),
      "cost_negative": (b'{"nodes": [{"id": "a", "out_bytes": 4, '
                        b'"cost_s": [-1.0]}], "edges": []}'),
      "topology_not_object": (b'{"topology": 3, "nodes": [{"id": "a", '
                              b'"out_bytes": 4}], "edges": []}'),
      "topology_no_devices": (b'{"topology": {"devices": []}, "nodes": '
                              b'[{"id": "a", "out_bytes": 4}], "edges": []}'),
      "newer_version": b'{"version": 99, "nodes": [], "edges": []}',
      "deep_nesting": b"[" * 100000 + b"]" * 100000,
      "not_utf8": (b'{"nodes": [{"id": "\xff\xfe", "out_bytes": 4}], '
                   b'"edges": []}'),
      "allowed_unknown_device": (b'{"nodes": [{"id": "a", "out_bytes": 4, '
                                 b'"allowed_devices": ["tpu:9"]}], '
                                 b'"edges": []}'),
  }
  valid = {"one_node"}
  for label, content in documents.items():
    cases.append(Case(
        f"graph_files:json={label}", "graph_files",
        call("gplace.sim.graph_files:load", Lazy(
            lambda label=label, content=content: F.path(
                f"{label}.json", content))),
        expect=ODD if label in valid else REJECT,
        check=check_graph if label in valid else None))
  for label, content in [("npz_garbage", b"PK\x03\x04garbage"),
                         ("npz_empty", b"")]:
    cases.append(Case(
        f"graph_files:{label}", "graph_files",
        call("gplace.sim.graph_files:load", Lazy(
            lambda label=label, content=content: F.path(
                f"{label}.npz", content)))))
  for label, value in [("missing", "/no/such/file.json"),
                       ("directory", Lazy(lambda: F.tmp)),
                       ("other_extension", Lazy(lambda: F.path("g.txt",
                                                               b"{}"))),
                       ("None", None), ("int", 3), ("bytes", b"g.json")]:
    cases.append(Case(f"graph_files:path={label}", "graph_files",
                      call("gplace.sim.graph_files:load", value)))
  cases.append(Case(
      "graph_files:minimal", "graph_files",
      call("gplace.sim.graph_files:load", Lazy(lambda: F.path(
          "minimal.json", b'{"nodes": [{"id": "a", "out_bytes": 4}, '
          b'{"id": "b", "out_bytes": 4}], "edges": [{"src": "a", '
          b'"dst": "b"}]}'))), expect=ODD, check=check_graph))
  return cases


def _topology_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"topology:{label}", "Topology/Device", run, **kw))
  device_fields = dict(name="gpu:0", kind="gpu", peak_flops=1e12,
                       mem_bandwidth=1e11, memory_bytes=1e9,
                       launch_overhead_s=1e-5)

  def device(**changes):
    """A topology whose second device has ``changes`` (a Device is a
    record; the Topology holding it checks it)."""
    def run():
      bandwidth, latency = topology_lib.uniform_links(2, 1e10, 1e-5)
      devices = (topology_lib.Device(**device_fields),
                 topology_lib.Device(**{**device_fields, "name": "gpu:1",
                                        **changes}))
      return topology_lib.Topology(devices=devices, link_bandwidth=bandwidth,
                                   link_latency=latency,
                                   compute_group=np.arange(2))
    return run

  def simulates(topology):
    """An accepted topology: every placement of the graph on it simulates
    to finite seconds."""
    placements = np.arange(N_NODES)[None] % np.arange(1, 3)[:, None]
    return check_simulation(2)(gplace.simulate(F.graph, placements,
                                               topology))

  for field in ("peak_flops", "mem_bandwidth", "memory_bytes"):
    for label, value in [("zero", 0.0), ("negative", -1.0), ("nan", NAN),
                         ("string", "12GB"), ("None", None),
                         ("bool", True), ("array", np.ones(2))]:
      add(f"Device.{field}={label}", device(**{field: value}))
    add(f"Device.{field}=inf", device(**{field: INF}), expect=ODD,
        check=simulates)
  for field in ("launch_overhead_s", "cluster_launch_s", "copy_issue_s"):
    for label, value in [("negative", -1.0), ("nan", NAN), ("inf", INF),
                         ("string", "0")]:
      add(f"Device.{field}={label}", device(**{field: value}))
  for field in ("name", "kind"):
    for label, value in [("None", None), ("int", 3)]:
      add(f"Device.{field}={label}", device(**{field: value}))

  def topology(n=2, **changes):
    def run():
      bandwidth, latency = topology_lib.uniform_links(n, 1e10, 1e-5)
      devices = tuple(topology_lib.Device(**{**device_fields,
                                             "name": f"gpu:{i}"})
                      for i in range(n))
      fields = dict(devices=devices, link_bandwidth=bandwidth,
                    link_latency=latency, compute_group=np.arange(n))
      fields.update({k: _resolve(v) for k, v in changes.items()})
      return topology_lib.Topology(**fields)
    return run

  nan_matrix = np.full((2, 2), 1e10)
  nan_matrix[0, 1] = NAN
  for label, value in [("nan", nan_matrix), ("negative", -np.ones((2, 2))),
                       ("zero", np.zeros((2, 2))), ("wrong_size",
                                                    np.ones((3, 3))),
                       ("flat", np.ones(2)), ("string", "fast"),
                       ("None", None), ("ragged", [[1.0], [1.0, 2.0]])]:
    add(f"Topology.link_bandwidth={label}",
        topology(link_bandwidth=value))
  for label, value in [("negative", -np.ones((2, 2))),
                       ("inf", np.full((2, 2), INF)),
                       ("strings", [[0, "a"], [0, 0]])]:
    add(f"Topology.link_latency={label}", topology(link_latency=value))
  for label, value in [("short", [0]), ("nan", [0, NAN]),
                       ("fraction", [0, 0.5]), ("strings", ["a", "b"])]:
    add(f"Topology.compute_group={label}", topology(compute_group=value))
  for label, value in [("empty", ()), ("None", None), ("string", "gpu:0"),
                       ("strings", ("gpu:0", "gpu:1"))]:
    add(f"Topology.devices={label}", topology(devices=value))
  for label, value in [("zero", 0.0), ("nan", NAN), ("string", "1"),
                       ("negative", -1.0)]:
    add(f"Topology.time_scale={label}", topology(time_scale=value))
  for label, value in [("string", "yes"), ("wrong_shape", np.ones(3, bool))]:
    add(f"Topology.pipelined_links={label}", topology(pipelined_links=value))
  add("Topology.name=None", topology(name=None))
  for label, value in not_objects() + [("unknown", "1cpu+3gpu"),
                                       ("padded", " 1cpu+2gpu")]:
    add(f"preset={label}", call("gplace.sim.presets:preset", value))
  for label, args in [("fraction_devices", (1.5, 1e10, 1e-5)),
                      ("string_devices", ("2", 1e10, 1e-5))]:
    add(f"uniform_links={label}", call("gplace.sim.topology:uniform_links",
                                       *args))
  for label, value in [("empty", []), ("strings", ["cpu:0"]),
                       ("string", "cpu")]:
    add(f"local={label}", call("gplace.sim.presets:local", value))
  for label, value in [("not_dict", 3), ("no_devices", {}),
                       ("devices_not_list", {"devices": 3}),
                       ("device_not_dict", {"devices": [3]}),
                       ("links_missing", {"devices": [
                           {**device_fields, "name": "a"},
                           {**device_fields, "name": "b"}]})]:
    add(f"topology_from_dict={label}", call(
        "gplace.sim.topology_json:topology_from_dict", value, "fuzz"))
  return cases


def _plotting_cases() -> list[Case]:
  cases = []
  add = lambda label, run, **kw: cases.append(
      Case(f"plotting:{label}", "plotting", run, **kw))
  zeros = np.zeros(N_NODES, int)
  for name in ("plot_placement_graph", "plot_schedule"):
    fn = f"gplace.plotting:{name}"
    for label, value in bad_placements(N_NODES, N_DEVICES)[:10]:
      add(f"{name}:placement={label}", call(fn, GRAPH, value, TOPOLOGY))
    for label, value in not_objects()[:4]:
      add(f"{name}:graph={label}", call(fn, value, zeros, TOPOLOGY))
      add(f"{name}:topology={label}", call(fn, GRAPH, zeros, value))
    add(f"{name}:ax=int", call(fn, GRAPH, zeros, TOPOLOGY, ax=3))
    add(f"{name}:title=int", call(fn, GRAPH, zeros, TOPOLOGY, title=3),
        expect=ODD, check=check_none)
  for label, value in [("zero", 0), ("negative", -1), ("fraction", 1.5),
                       ("string", "10")]:
    add(f"plot_schedule:max_ops={label}", call(
        "gplace.plotting:plot_schedule", GRAPH, zeros, TOPOLOGY,
        max_ops=value))
  for label, value in bad_costs(N_NODES, N_DEVICES)[:5]:
    add(f"plot_schedule:costs={label}", call(
        "gplace.plotting:plot_schedule", GRAPH, zeros, TOPOLOGY, costs=value))
  load = "gplace.plotting:plot_device_load"
  for label, value in [("list", [zeros]), ("str", "heft"),
                       ("short", {"a": zeros[1:]}), ("None", None)]:
    add(f"plot_device_load:placements={label}", call(load, GRAPH, value,
                                                     TOPOLOGY))
  curve = "gplace.plotting:plot_learning_curve"
  png = Lazy(lambda: F.path("curve.png"))
  record = {"phase": "rl", "step": 1, "mean_runtime_s": 1.0,
            "best_runtime_s": 1.0}
  for label, kwargs in [
      ("records=str", dict(records="x")),
      ("records=list_of_int", dict(records=[3])),
      ("best_baseline_s=str", dict(best_baseline_s="1")),
      ("lower_bound_s=negative", dict(lower_bound_s=-1.0)),
      ("path=missing_directory", dict(path="/no/such/dir/curve.png")),
      ("path=int", dict(path=3))]:
    arguments = dict(path=png, records=[record], best_baseline_s=1.0,
                     lower_bound_s=0.5)
    arguments.update(kwargs)
    add(f"plot_learning_curve:{label}", call(curve, **arguments))
  # NaN levels draw no line (the docstring): odd but valid.
  add("plot_learning_curve:best_baseline_s=nan", call(
      curve, png, [record], best_baseline_s=NAN, lower_bound_s=0.5),
      expect=ODD, check=check_none)
  add("plot_learning_curve:no_rl_records", call(
      curve, png, [], best_baseline_s=1.0, lower_bound_s=0.5), expect=ODD,
      check=check_none)
  curves = "gplace.plotting:plot_evaluation_curves"
  for label, value in [("str", "x"), ("list", [1]),
                       ("ragged", {"a": ([1, 2], [1.0])})]:
    add(f"plot_evaluation_curves:curves={label}", call(
        curves, png, value, best_baseline_s=1.0, lower_bound_s=0.5))
  # Non-finite runtimes are gaps (the docstring): a curve of gaps only.
  add("plot_evaluation_curves:curves=nan", call(
      curves, png, {"a": ([1, 2], [NAN, NAN])}, best_baseline_s=1.0,
      lower_bound_s=0.5), expect=ODD, check=check_none)
  return cases


def _self_test_cases() -> list[Case]:
  """One case per outcome, to check the classification itself."""

  def fail(error):
    def run():
      raise error
    return run

  return [
      Case("self_test:clear", "self test", fail(GplaceError("bad x; pass y"))),
      Case("self_test:accepted", "self test", lambda: 1.0, expect=ODD,
           check=check_positive_float),
      Case("self_test:unclear", "self test", fail(GplaceError("x" * 2000))),
      Case("self_test:raw", "self test", fail(KeyError("subfuns"))),
      Case("self_test:silent", "self test", lambda: 1.0),
      Case("self_test:silent_check", "self test", lambda: NAN, expect=ODD,
           check=check_positive_float),
      Case("self_test:hang", "self test", lambda: time.sleep(3600)),
      # pylint: disable-next=protected-access
      Case("self_test:crash", "self test", lambda: os._exit(3)),
      Case("self_test:after_crash", "self test", lambda: 2.0, expect=ODD,
           check=check_positive_float),
  ]


BUILDERS = (_capture_cases, _simulate_cases, _lower_bound_cases, _place_cases,
            _measure_cases, _profile_cases, _optimize_cases, _coarsen_cases,
            _baseline_cases, _search_cases, _solver_cases, _placers_get_cases,
            _policy_cases, _settings_cases, _train_cases, _workload_cases,
            _graph_file_cases, _topology_cases, _plotting_cases)

#: The fast subset: per entry point its first cases and every this many.
FAST_HEAD, FAST_STRIDE = 6, 5


def build_cases(fast: bool = False, self_test: bool = False) -> list[Case]:
  """Every case (ids unique), or the fast subset: no slow case, and per
  entry point the first :data:`FAST_HEAD` then every
  :data:`FAST_STRIDE`-th; or the self test's cases."""
  if self_test:
    return _self_test_cases()
  cases = [case for builder in BUILDERS for case in builder()]
  ids = [case.id for case in cases]
  duplicates = sorted({i for i in ids if ids.count(i) > 1})
  assert not duplicates, duplicates
  if not fast:
    return cases
  picked, seen = [], {}
  for case in cases:
    position = seen.get(case.entry, 0)
    seen[case.entry] = position + 1
    if not case.slow and (position < FAST_HEAD
                          or position % FAST_STRIDE == 0):
      picked.append(case)
  return picked


# -- running one case (in a worker) --------------------------------------------


def run_case(case: Case) -> dict:
  """Runs ``case`` here; returns its outcome record."""
  start = time.perf_counter()
  record = dict(id=case.id, entry=case.entry)
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      result = case.run()
      problem = (case.check(result) if case.check is not None
                 else None) if case.expect == ODD else (
                     "a result where a GplaceError was due: "
                     f"{type(result).__name__}")
  except GplaceError as err:
    why = readable(str(err))
    record.update(outcome=UNCLEAR if why else CLEAR, error=type(err).__name__,
                  message=str(err), why=why)
  except Exception as err:  # pylint: disable=broad-except
    frames = traceback.extract_tb(err.__traceback__)
    where = next((f"{os.path.relpath(f.filename)}:{f.lineno}"
                  for f in reversed(frames) if "gplace" in f.filename
                  and "experiments" not in f.filename), "")
    record.update(outcome=RAW, error=type(err).__name__, message=str(err),
                  why=where)
  else:
    record.update(outcome=SILENT if problem else ACCEPTED,
                  error="", message=problem or "", why="")
  record["seconds"] = time.perf_counter() - start
  if "matplotlib.pyplot" in sys.modules:  # figures the case left open
    sys.modules["matplotlib.pyplot"].close("all")
  return record


def worker(fast: bool, self_test: bool = False) -> None:
  """Reads case indices on stdin, writes one JSON record per case on the
  original stdout (what cases print goes to stderr)."""
  results = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)
  sys.stdout = sys.stderr
  cases = build_cases(fast, self_test)
  results.write(json.dumps({"cases": [[c.id, c.entry] for c in cases]})
                + "\n")
  for line in sys.stdin:
    index = int(line)
    try:
      record = run_case(cases[index])
    except BaseException as err:  # pylint: disable=broad-except
      record = dict(id=cases[index].id, entry=cases[index].entry,
                    outcome=RAW, error=type(err).__name__, message=str(err),
                    why="escaped the case runner", seconds=0.0)
    record["message"] = str(record["message"])[:4000]
    results.write(json.dumps(dict(record, index=index)) + "\n")


# -- the parent: workers, timeouts, the table ----------------------------------


class _Worker:
  """A worker process with at most one case in flight."""

  def __init__(self, flags: list[str], log, scratch: str):
    env = dict(os.environ, GPLACE_FUZZ_TMP=scratch, MPLBACKEND="Agg")
    env["JAX_PLATFORMS"] = env.get("JAX_PLATFORMS", "cpu")
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        " --xla_force_host_platform_device_count=2").strip()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                  if p])
    command = [sys.executable, os.path.abspath(__file__), "--worker"] + flags
    self.process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
        text=True, bufsize=1, env=env, start_new_session=True)
    self.index: Optional[int] = None
    self.deadline = math.inf
    self.cases = None  # the header: [[id, entry], ...]

  def send(self, index: int, timeout_s: float) -> None:
    self.index = index
    self.deadline = time.monotonic() + timeout_s
    self.process.stdin.write(f"{index}\n")
    self.process.stdin.flush()

  def kill(self) -> None:
    try:
      os.killpg(self.process.pid, 9)
    except (ProcessLookupError, PermissionError):
      pass
    self.process.wait()


def run_all(flags: list[str], jobs: int, timeout_s: float, entries, log,
            progress) -> list[dict]:
  """Every case in up to ``jobs`` workers started with ``flags``
  (``--fast``, ``--self-test``); a case past ``timeout_s`` is a hang and
  its worker is replaced."""
  start_s = 60.0 + timeout_s  # a worker's start: imports, first header
  scratch = tempfile.mkdtemp(prefix="gplace_fuzz_")
  try:
    return _run_workers(flags, jobs, timeout_s, entries, log, progress,
                        start_s, scratch)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


def _run_workers(flags, jobs, timeout_s, entries, log, progress, start_s,
                 scratch) -> list[dict]:
  workers = [_Worker(flags, log, scratch) for _ in range(jobs)]
  selector = selectors.DefaultSelector()
  for worker_ in workers:
    worker_.deadline = time.monotonic() + start_s
    selector.register(worker_.process.stdout, selectors.EVENT_READ, worker_)
  cases, todo, todo_all, records = None, [], [], {}

  def replace(old: _Worker) -> _Worker:
    selector.unregister(old.process.stdout)
    old.kill()
    new = _Worker(flags, log, scratch)
    new.deadline = time.monotonic() + start_s
    selector.register(new.process.stdout, selectors.EVENT_READ, new)
    workers[workers.index(old)] = new
    return new

  def dispatch(worker_: _Worker) -> None:
    if todo:
      worker_.send(todo.pop(0), timeout_s)
    else:
      worker_.index, worker_.deadline = None, math.inf

  while cases is None or len(records) < len(todo_all):
    events = selector.select(timeout=1.0)
    for key, _ in events:
      worker_ = key.data
      line = worker_.process.stdout.readline()
      if not line:  # the worker died
        if worker_.index is not None:
          records[worker_.index] = dict(
              id=cases[worker_.index][0], entry=cases[worker_.index][1],
              outcome=RAW, error="WorkerDied",
              message=f"the worker exited with status "
              f"{worker_.process.poll()}", why="", seconds=0.0)
          progress(records[worker_.index])
        elif cases is None:
          raise RuntimeError("a fuzz worker failed to start; run with "
                             "--verbose to see its errors")
        replace(worker_)  # the new one gets a case once it has started
        continue
      message = json.loads(line)
      if "cases" in message:
        if cases is None:
          cases = message["cases"]
          todo_all = [i for i, (_, entry) in enumerate(cases)
                      if not entries or entry in entries]
          todo = list(todo_all)
        worker_.cases = message["cases"]
        dispatch(worker_)
        continue
      records[message["index"]] = message
      progress(message)
      dispatch(worker_)
    now = time.monotonic()
    for worker_ in list(workers):
      if now > worker_.deadline:
        if worker_.index is None:
          raise RuntimeError("a fuzz worker did not start in time")
        records[worker_.index] = dict(
            id=cases[worker_.index][0], entry=cases[worker_.index][1],
            outcome=HANG, error="", message=f"no answer in {timeout_s:g} s",
            why="", seconds=timeout_s)
        progress(records[worker_.index])
        replace(worker_)
    if cases is not None and not todo_all:
      break
  for worker_ in workers:
    selector.unregister(worker_.process.stdout)
    worker_.process.stdin.close()
    worker_.kill()
  return [records[i] for i in sorted(records)]


def table(records: list[dict]) -> str:
  """Cases per entry point (rows) and outcome (columns), as markdown."""
  entries = list(dict.fromkeys(r["entry"] for r in records))
  header = ["entry point"] + list(OUTCOMES) + ["total"]
  rows = []
  for entry in entries + ["all"]:
    mine = [r for r in records if entry in ("all", r["entry"])]
    counts = [sum(r["outcome"] == o for r in mine) for o in OUTCOMES]
    rows.append([f"**{entry}**" if entry == "all" else entry]
                + [str(c) if c else "." for c in counts] + [str(len(mine))])
  widths = [max(len(row[i]) for row in rows + [header])
            for i in range(len(header))]
  line = lambda row: "| " + " | ".join(
      cell.ljust(w) for cell, w in zip(row, widths)) + " |"
  return "\n".join([line(header), line(["-" * w for w in widths])]
                   + [line(row) for row in rows])


def describe(record: dict) -> str:
  first = (record["message"].strip().splitlines() or [""])[0][:200]
  error = f"{record['error']}: " if record["error"] else ""
  why = f" [{record['why']}]" if record["why"] else ""
  return f"{record['outcome']:8} {record['id']}: {error}{first}{why}"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--fast", action="store_true",
                      help="run the fast subset (what the test suite runs)")
  parser.add_argument("--jobs", type=int, default=1,
                      help="worker processes running cases side by side")
  parser.add_argument("--timeout", type=float, default=60.0,
                      help="seconds a case may run before it is a hang")
  parser.add_argument("--entry", default="",
                      help="comma-separated entry points to run (table rows)")
  parser.add_argument("--show", default="failures",
                      choices=("failures", "all", "none"),
                      help="which cases to list after the table")
  parser.add_argument("--allow-known", action="store_true",
                      help="cases in KNOWN (fixes under way elsewhere) may "
                      "fail without failing the run")
  parser.add_argument("--json", default="",
                      help="also write every case's outcome to this file")
  parser.add_argument("--verbose", action="store_true",
                      help="show the workers' output and each case as it ends")
  parser.add_argument("--self-test", action="store_true",
                      help="run only the cases that check the classification "
                      "(one per outcome)")
  parser.add_argument("--worker", action="store_true",
                      help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    worker(args.fast, args.self_test)
    return 0
  if args.jobs < 1 or not args.timeout > 0:
    parser.error("--jobs must be >= 1 and --timeout > 0")
  entries = {e.strip() for e in args.entry.split(",") if e.strip()}
  log = None if args.verbose else subprocess.DEVNULL
  progress = ((lambda r: print(describe(r), flush=True)) if args.verbose
              else (lambda r: None))
  start = time.perf_counter()
  flags = ["--fast"] * args.fast + ["--self-test"] * args.self_test
  records = run_all(flags, args.jobs, args.timeout, entries, log, progress)
  if entries and not records:
    parser.error(f"no case has entry point {sorted(entries)}")
  print(table(records))
  print(f"\n{len(records)} cases in {time.perf_counter() - start:.0f} s")
  failures = [r for r in records if r["outcome"] in FAILURES]
  known = [r for r in failures if r["id"] in KNOWN]
  new = [r for r in failures if r["id"] not in KNOWN]
  fixed = sorted(set(KNOWN) & {r["id"] for r in records
                               if r["outcome"] not in FAILURES})
  if args.show == "all":
    print("\n" + "\n".join(describe(r) for r in records))
  elif args.show == "failures" and failures:
    if new:
      print(f"\n{len(new)} failures:\n" + "\n".join(describe(r) for r in new))
    if known:
      print(f"\n{len(known)} known failures (fixes under way):\n" + "\n".join(
          f"{describe(r)} ({KNOWN[r['id']]})" for r in known))
  if fixed:
    print(f"\n{len(fixed)} cases of KNOWN pass now; remove them from KNOWN: "
          + ", ".join(fixed))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(records, f, indent=1)
  return 1 if new or (known and not args.allow_known) else 0


if __name__ == "__main__":
  sys.exit(main())
