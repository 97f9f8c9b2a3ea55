"""Tests of what the executor accepts (issue 13): bad arguments to place,
measure and measure_placements raise GplaceErrors that name the argument and
the fix; weak-type differences run when they do not change the computation
and are explained when they do; side effects run exactly as under jax.jit;
typed PRNG keys are arguments like any other; one device warns or refuses."""

import functools
import warnings

import jax
from jax.experimental import io_callback
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import _testing
from gplace.errors import (CaptureError, ExecutionError, GplaceError,
                           PlacementError, ScheduleError)
from gplace.execution import inputs
from gplace.execution import timing
from gplace.graphs.capture import evaluate, trace_program
from gplace.graphs.graph import NODE_OP

MODES = ("cluster", "op")


@pytest.fixture(scope="module")
def control_flow():
  fn = _testing.control_flow_program
  args = _testing.control_flow_args()
  return fn, args, gplace.capture(fn, *args)


def alternating(graph):
  """Node ``i`` on device ``i % 2``: nearly every edge crosses devices."""
  return (np.arange(graph.n_nodes) % 2).astype(np.int32)


def _assert_equal_to_jit(got, want):
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert a.dtype == b.dtype
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


# -- bad input -----------------------------------------------------------------

_DEVICE_HINT = "jax.Device objects, e.g. jax.devices()"


def _place_cases(n):
  devices = jax.devices()[:2]
  zeros = np.zeros(n, np.int32)
  return {
      "strings": (dict(placement=np.array(["0"] * n)), PlacementError,
                  "integer device indices"),
      "floats": (dict(placement=np.full(n, 0.5)), PlacementError,
                 "integer device indices"),
      "wrong length": (dict(placement=zeros[1:]), PlacementError,
                       "one device index per node"),
      "out of range": (dict(placement=zeros + 2), PlacementError,
                       "only devices 0..1"),
      "device None": (dict(devices=[None]), ExecutionError, _DEVICE_HINT),
      "device name": (dict(devices=["cpu:0"]), ExecutionError,
                      r"devices\[0\] is str 'cpu:0'"),
      "device index": (dict(devices=[0, 1]), ExecutionError, _DEVICE_HINT),
      "one device": (dict(devices=devices[0]), ExecutionError,
                     "got one device"),
      "empty devices": (dict(devices=[]), ExecutionError,
                        "devices is empty"),
      "duplicate devices": (dict(devices=[devices[0], devices[0]]),
                            ExecutionError, "distinct devices"),
      "schedule float": (dict(schedule=1.5), ScheduleError,
                         "integer permutation"),
      "schedule dict": (dict(schedule={}), ScheduleError,
                        "integer permutation"),
      "schedule name": (dict(schedule="fastest"), ScheduleError,
                        "Unknown schedule"),
      "mode": (dict(mode=3), ExecutionError, "Unknown mode"),
      "fn": (dict(fn=None), CaptureError, "needs the function"),
      "example_kwargs": (dict(example_kwargs=[1]), ExecutionError,
                         "example_kwargs must be a dict"),
  }


@pytest.mark.parametrize("case", list(_place_cases(1)))
def test_place_bad_input_names_the_argument(control_flow, case):
  fn, _, graph = control_flow
  overrides, error, message = _place_cases(graph.n_nodes)[case]
  call = dict(fn=fn, placement=np.zeros(graph.n_nodes, np.int32),
              devices=jax.devices()[:2])
  call.update(overrides)
  with pytest.raises(error, match=message):
    gplace.place(call.pop("fn"), graph, call.pop("placement"), **call)


def test_measure_bad_input_names_the_argument(control_flow):
  fn, args, graph = control_flow
  placed = gplace.place(fn, graph, alternating(graph), jax.devices()[:2])
  for kwargs, message in [(dict(repeats=0), "repeats must be an int >= 1"),
                          (dict(repeats=1.5), "repeats must be an int"),
                          (dict(warmup=-1), "warmup must be an int >= 0"),
                          (dict(warmup=None), "warmup must be an int")]:
    with pytest.raises(ExecutionError, match=message):
      gplace.measure(placed, *args, **kwargs)
  with pytest.raises(CaptureError, match="PlacedFunction"):
    gplace.measure(None, *args)
  with pytest.raises(CaptureError, match="could not trace"):
    gplace.measure(fn, args[0])  # a plain function, one argument short
  placed(*args)
  with pytest.raises(ExecutionError, match="pytree structure"):
    gplace.measure(placed, args[0])
  # Shapes alone run nothing: InvalidInputException before (issue 47).
  shapes = jax.tree_util.tree_map(
      lambda a: jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a)), args)
  with pytest.raises(ExecutionError, match="is a jax.ShapeDtypeStruct"):
    gplace.measure(placed, *shapes)
  with pytest.raises(ExecutionError, match="is a jax.ShapeDtypeStruct"):
    placed(*shapes)


@pytest.mark.parametrize("kwargs,message", [
    (dict(repeats=None), "repeats must be an int >= 1"),   # TypeError before
    (dict(repeats=-1), "repeats must be an int >= 1"),     # StatisticsError
    (dict(transfer_repeats=0.5), "transfer_repeats must be an int"),
    (dict(calibration_placements=-1), "calibration_placements must be"),
    (dict(calibration_rounds="7"), "calibration_rounds must be an int"),
    (dict(seed=-3), "seed must be an integer"),
])
def test_profile_bad_counts_fail_before_any_work(control_flow, kwargs,
                                                 message):
  fn, args, _ = control_flow
  with pytest.raises(ExecutionError, match=message):
    gplace.profile(fn, *args, **kwargs)


def test_measure_placements_bad_input_names_the_argument(control_flow):
  fn, args, graph = control_flow
  devices = jax.devices()[:2]
  placements = np.zeros((2, graph.n_nodes), np.int32)
  measure = functools.partial(timing.measure_placements, fn, graph,
                              repeats=1, warmup=0)
  cases = [
      (dict(placements=np.array([["0"] * graph.n_nodes])), PlacementError,
       "integer device indices"),
      (dict(placements=placements[0]), PlacementError, r"\[K, N\]"),
      (dict(placements=placements + 0.5), PlacementError, "integer"),
      (dict(placements=placements[:, 1:]), PlacementError, "length"),
      (dict(placements=placements + 2), PlacementError, "only devices"),
      (dict(devices=[None]), ExecutionError, _DEVICE_HINT),
      (dict(devices=["cpu:0"]), ExecutionError, _DEVICE_HINT),
      (dict(devices=[]), ExecutionError, "devices is empty"),
      (dict(args=args[1]), ExecutionError, "args must be a tuple"),
      (dict(kwargs=[1]), ExecutionError, "kwargs must be a dict"),
      (dict(schedules={}), ScheduleError, "one order per placement"),
      (dict(schedules="fastest"), ScheduleError, "Unknown schedule"),
      (dict(mode="fast"), ExecutionError, "Unknown mode"),
      (dict(repeats=0), ExecutionError, "repeats"),
      (dict(penalty_s="x"), ExecutionError, "penalty_s"),
  ]
  for overrides, error, message in cases:
    call = dict(placements=placements, args=args, devices=devices)
    call.update(overrides)
    with pytest.raises(error, match=message):
      measure(call.pop("placements"), call.pop("args"), **call)


# -- weak types ----------------------------------------------------------------


def scale(x, s):
  return jnp.sin(x) * s


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("captured,called", [
    (2.0, np.float32(3.0)), (np.float32(2.0), 3.0), (2.0, jnp.float32(3.0))])
def test_weak_type_differences_that_compute_the_same_run(mode, captured,
                                                         called):
  # Capturing with a Python float adds a convert that drops the weak flag;
  # np.float32 does not: the graphs differ, the computation does not.
  x = jnp.linspace(0.0, 1.0, 4)
  graph = gplace.capture(scale, x, captured)
  placed = gplace.place(scale, graph, alternating(graph), jax.devices()[:2],
                        mode=mode)
  _assert_equal_to_jit(placed(x, called), jax.jit(scale)(x, called))
  _assert_equal_to_jit(placed(x, captured), jax.jit(scale)(x, captured))


def test_mixed_weak_types_swapped_run():
  def affine(x, a, b):
    return jnp.sin(x) * a + b
  x = jnp.linspace(0.0, 1.0, 4)
  graph = gplace.capture(affine, x, 2.0, np.float32(1.0))
  placed = gplace.place(affine, graph, alternating(graph), jax.devices()[:2])
  args = (x, np.float32(2.0), 1.0)
  _assert_equal_to_jit(placed(*args), jax.jit(affine)(*args))


def test_weak_type_change_that_changes_the_program_is_explained():
  # With a bfloat16 array, a weak scalar multiplies in bfloat16 and a strong
  # float32 one promotes to float32: another computation.
  def multiply(x, s):
    return x * s
  x = jnp.ones(3, jnp.bfloat16)
  graph = gplace.capture(multiply, x, 2.0)
  placed = gplace.place(multiply, graph, alternating(graph),
                        jax.devices()[:2])
  _assert_equal_to_jit(placed(x, 2.0), jax.jit(multiply)(x, 2.0))
  with pytest.raises(ExecutionError,
                     match=r"(?s)Argument arg1 was a weakly typed float32.*"
                     r"strongly typed float32.*jnp\.float32\(x\) in both"):
    placed(x, np.float32(2.0))


def test_a_different_function_is_still_reported():
  x = jnp.ones(3)
  graph = gplace.capture(scale, x, 2.0)
  placed = gplace.place(lambda x, s: jnp.cos(x) + s * s, graph,
                        alternating(graph), jax.devices()[:2])
  with pytest.raises(GplaceError, match="different function/arguments"):
    placed(x, np.float32(2.0))


def _dense(params, x):
  return jnp.tanh(params["w"] @ x)


@pytest.mark.parametrize("built", [False, True])
@pytest.mark.parametrize("params,kwargs,named", [
    (dict(w=jnp.ones((4, 4)), b=jnp.ones(4)), {}, "extra {}: arg0/b"),
    (dict(v=jnp.ones((4, 4))), {}, "extra {}: arg0/v; missing {}: arg0/w"),
    ([jnp.ones((4, 4))], {}, "extra {}: arg0/0; missing {}: arg0/w"),
    (dict(w=jnp.ones((4, 4))), dict(x=jnp.ones(4)),
     "extra {}: x; missing {}: arg1"),
])
def test_arguments_of_another_pytree_name_the_extra_and_missing_leaves(
    built, params, kwargs, named):
  # It named no key: "captured from a different function/arguments" before
  # the first call, two PyTreeDef dumps after it.
  if kwargs and not built:
    pytest.skip("x by keyword traces to the captured graph: it runs")
  x = jnp.ones(4)
  graph = gplace.capture(_dense, dict(w=jnp.ones((4, 4))), x)
  placed = gplace.place(_dense, graph, alternating(graph), jax.devices()[:2])
  if built:
    placed(dict(w=jnp.ones((4, 4))), x)
  call_args = (params,) if kwargs else (params, x)
  with pytest.raises(ExecutionError) as info:
    placed(*call_args, **kwargs)
  message = str(info.value)
  what = "argument leaves" if built else "inputs"
  assert named.format(what, what) in message, message
  assert "PyTreeDef" not in message and "\n" not in message


def test_evaluate_names_the_leaves_of_another_pytree():
  program = trace_program(_dense, dict(w=jnp.ones((4, 4))), jnp.ones(4))
  with pytest.raises(CaptureError, match="extra argument leaves: arg0/b"):
    evaluate(program, dict(w=jnp.ones((4, 4)), b=1.0), jnp.ones(4))


@pytest.mark.parametrize("first_call", ["bfloat16", "bigger"])
def test_other_shapes_or_dtypes_than_captured_are_refused(first_call):
  # The same ops on other shapes or dtypes ran silently: a program the
  # graph's costs (and the placement's simulated runtime) do not describe.
  x = jnp.ones((4, 4))
  graph = gplace.capture(scale, x, 2.0)
  placed = gplace.place(scale, graph, alternating(graph), jax.devices()[:2])
  other = (jnp.ones((4, 4), jnp.bfloat16) if first_call == "bfloat16"
           else jnp.ones((8, 4)))
  with pytest.raises(ExecutionError, match=r"node 0 \('arg0'\) is "
                     r"(bfloat16\[4,4\]|float32\[8,4\]) here, float32\[4,4\] "
                     r"in the graph"):
    placed(other, 2.0)
  _assert_equal_to_jit(placed(x, 2.0), jax.jit(scale)(x, 2.0))


# -- side effects --------------------------------------------------------------


def _effectful_program(log):
  """A program with an unused ordered io_callback on each of two
  independent chains, and a debug print."""

  def record(tag):
    def callback(value):
      log.append((tag, float(value)))
      return np.zeros((), np.float32)
    return callback

  def fn(x):
    a = jnp.sin(x)
    io_callback(record("a"), jax.ShapeDtypeStruct((), jnp.float32),
                a.sum(), ordered=True)
    b = jnp.cos(x)
    io_callback(record("b"), jax.ShapeDtypeStruct((), jnp.float32),
                b.sum(), ordered=True)
    jax.debug.print("effect-test {s:.3f}", s=(a * b).sum())
    return a * 2.0
  return fn


_NO_VOCABULARY_WARNING = pytest.mark.filterwarnings(
    "ignore:gplace.capture. primitive 'debug_print'")


@_NO_VOCABULARY_WARNING
@pytest.mark.parametrize("mode", MODES)
def test_effects_run_as_often_and_in_the_order_of_jit(mode, capfd):
  log = []
  fn = _effectful_program(log)
  x = jnp.linspace(0.0, 1.0, 5)
  jitted = jax.jit(fn)
  for _ in range(2):
    want = jitted(x)
  jax.effects_barrier()
  want_log = list(log)
  assert [tag for tag, _ in want_log] == ["a", "b", "a", "b"]
  jit_prints = capfd.readouterr().out.count("effect-test")
  assert jit_prints == 2
  graph = gplace.capture(fn, x)
  ops = np.flatnonzero(graph.kind == NODE_OP)
  placements = [alternating(graph), 1 - alternating(graph)]
  for placement in placements:
    # The same with every op on one device.
    single = placement.copy()
    single[ops] = 0
    for which in (placement, single):
      log.clear()
      placed = gplace.place(fn, graph, which, jax.devices()[:2], mode=mode)
      for _ in range(2):
        got = placed(x)
      jax.effects_barrier()
      _assert_equal_to_jit(got, want)
      assert log == want_log
      assert capfd.readouterr().out.count("effect-test") == jit_prints


@_NO_VOCABULARY_WARNING
def test_effect_order_survives_a_schedule_that_breaks_it():
  log = []
  fn = _effectful_program(log)
  x = jnp.linspace(0.0, 1.0, 5)
  graph = gplace.capture(fn, x)
  # Highest ready node id first: the "b" chain before the "a" chain.
  indegree = np.zeros(graph.n_nodes, np.int64)
  np.add.at(indegree, graph.edge_dst, 1)
  ptr, _ = graph.succ_csr
  ready, order = list(np.flatnonzero(indegree == 0)), []
  while ready:
    node = max(ready)
    ready.remove(node)
    order.append(node)
    for succ in graph.edge_dst[ptr[node]:ptr[node + 1]]:
      indegree[succ] -= 1
      if indegree[succ] == 0:
        ready.append(succ)
  placed = gplace.place(fn, graph, alternating(graph), jax.devices()[:2],
                        schedule=np.asarray(order), mode="op")
  placed(x)
  jax.effects_barrier()
  assert [tag for tag, _ in log] == ["a", "b"]


# -- typed PRNG keys -----------------------------------------------------------


def noisy(key, x):
  key, sub = jax.random.split(key)
  return key, jax.random.normal(sub, x.shape) * x + jnp.sin(x)


@pytest.mark.parametrize("mode", MODES)
def test_typed_prng_keys_match_jit(mode):
  key, x = jax.random.key(0), jnp.linspace(0.0, 1.0, 6)
  want = jax.jit(noisy)(key, x)
  graph = gplace.capture(noisy, key, x)
  for placement in (alternating(graph), 1 - alternating(graph)):
    placed = gplace.place(noisy, graph, placement, jax.devices()[:2],
                          mode=mode)
    new_key, sample = placed(key, x)
    assert placed.n_transfers > 0
    np.testing.assert_array_equal(jax.random.key_data(new_key),
                                  jax.random.key_data(want[0]))
    np.testing.assert_allclose(sample, want[1], rtol=1e-6)
    result = gplace.measure(placed, key, x, repeats=1, warmup=0)
    assert not result.failed, result.reason
  with pytest.raises(ExecutionError, match="dtype"):
    placed(jax.random.key_data(key), x)


# -- one device ----------------------------------------------------------------


def test_one_device_warns_or_refuses(control_flow):
  fn, args, graph = control_flow
  one = jax.devices()[:1]
  with pytest.raises(ExecutionError,
                     match="xla_force_host_platform_device_count"):
    inputs.check_several_devices(one, "Executor rewards")
  inputs.check_several_devices(jax.devices()[:2], "Executor rewards")
  placements = np.zeros((2, graph.n_nodes), np.int32)
  with pytest.warns(inputs.SingleDeviceWarning, match="timing noise"):
    timing.measure_placements(fn, graph, placements, args, devices=one,
                              repeats=1, warmup=0)
  with warnings.catch_warnings():
    warnings.simplefilter("error", inputs.SingleDeviceWarning)
    timing.measure_placements(fn, graph, placements, args,
                              devices=jax.devices()[:2], repeats=1, warmup=0)


# -- jax.pmap and shard_map inside a placed function ----------------------------


def _shard_map_program(n_devices, first=0):
  mesh = jax.sharding.Mesh(np.array(jax.devices()[first:first + n_devices]),
                           ("x",))
  spec = jax.sharding.PartitionSpec("x")

  def fn(x):
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # JAX before 0.6
      from jax.experimental.shard_map import shard_map  # pylint: disable=g-import-not-at-top
    doubled = shard_map(lambda a: a * 2.0, mesh=mesh, in_specs=spec,
                        out_specs=spec)(x)
    return jnp.sin(doubled) + 1.0

  return fn


def _pmap_program(x):
  return jax.pmap(lambda a: a * 2.0)(x[None])[0] + 1.0


def _scanned_shard_map(x):
  inner = _shard_map_program(1)
  return jax.lax.scan(lambda c, _: (inner(c), None), x, None, length=2)[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_shard_map_program(1), _pmap_program,
                                _scanned_shard_map],
                         ids=["shard_map", "pmap", "scan_of_shard_map"])
def test_a_one_device_pmap_or_shard_map_on_its_device_equals_jit(fn, mode):
  # It captured and optimized, then place failed: "KeyError: 'subfuns'".
  x = jnp.arange(16.0).reshape(4, 4)
  graph = gplace.capture(fn, x)
  on_mesh_device = np.zeros(graph.n_nodes, np.int32)
  placed = gplace.place(fn, graph, on_mesh_device, jax.devices()[:2],
                        mode=mode)
  _assert_equal_to_jit(placed(x), jax.jit(fn)(x))
  np.testing.assert_allclose(evaluate(trace_program(fn, x), x),
                             jax.jit(fn)(x), rtol=1e-6)


@pytest.mark.parametrize("fn,words", [
    (_shard_map_program(2), ("over 2 devices", "outside the placed "
                             "function")),
    (lambda x: jax.pmap(lambda a: a * 2.0)(x.reshape(2, 2, 4)).reshape(
        4, 4), ("over 2 devices", "outside the placed function")),
    (_shard_map_program(1, first=1), ("mesh of device cpu:1",
                                      "place node 1 on device 1")),
    (_scanned_shard_map, ("holds a", "mesh of device cpu:0",
                          "on device 0")),
])
def test_a_pmap_or_shard_map_a_placement_cannot_run_is_explained(fn, words):
  x = jnp.ones((4, 4))
  graph = gplace.capture(fn, x)
  placed = gplace.place(fn, graph, np.full(graph.n_nodes, 0 if "cpu:1" in
                                           words[0] else 1, np.int32),
                        jax.devices()[:2])
  with pytest.raises(ExecutionError) as info:
    placed(x)
  for word in words:
    assert word in str(info.value), str(info.value)
  assert "subfuns" not in str(info.value)
