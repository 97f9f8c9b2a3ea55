"""Tests of gplace.capture: structure, inlining, costs, names and errors."""

import functools
import warnings

import flax.linen as nn
import jax
from jax.extend import core as jex_core
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gplace
from gplace import _testing
from gplace.graphs.capture import evaluate, trace_program
from gplace.errors import CaptureError, GplaceError, GraphError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT


class _Block(nn.Module):
  features: int

  @nn.compact
  def __call__(self, x):
    return nn.relu(nn.Dense(self.features, name="dense")(x))


class _Net(nn.Module):

  @nn.compact
  def __call__(self, x):
    for i in range(2):
      x = _Block(8, name=f"layer_{i}")(x)
    return nn.Dense(2, name="head")(x)


def _train_step_and_args():
  net = _Net()
  x = jnp.ones((4, 8))
  params = net.init(jax.random.key(0), x)
  tx = optax.adam(1e-3)

  def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(
        lambda p: jnp.mean(net.apply(p, batch["x"]) ** 2))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return train_step, (params, tx.init(params), {"x": x})


def test_inlines_calls_and_keeps_control_flow_whole():
  graph = gplace.capture(_testing.control_flow_program,
                         *_testing.control_flow_args())
  ops = set(graph.op_type[graph.kind == NODE_OP])
  assert not ops & {"jit", "pjit", "custom_jvp_call", "custom_vjp_call",
                    "remat", "checkpoint", "closed_call"}
  assert {"scan", "while", "cond", "dot_general", "sin"} <= ops
  assert np.all(graph.edge_src < graph.edge_dst)


def test_program_replay_equals_jit():
  args = _testing.control_flow_args()
  program = trace_program(_testing.control_flow_program, *args)
  got = evaluate(program, *args)
  want = jax.jit(_testing.control_flow_program)(*args)
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), got, want)


def test_train_step_inputs_names_and_outputs():
  step, args = _train_step_and_args()
  graph = gplace.capture(step, *args)
  n_leaves = len(jax.tree_util.tree_leaves(args))
  assert int((graph.kind == NODE_INPUT).sum()) == n_leaves
  n_out = len(jax.tree_util.tree_leaves(jax.eval_shape(step, *args)))
  assert int((graph.kind == NODE_OUTPUT).sum()) == n_out
  names = list(graph.names)
  assert "arg0/params/layer_1/dense/kernel" in names
  assert "arg2/x" in names
  # Forward and backward ops of a layer carry the layer's module path.
  dots = [n for n, t in zip(names, graph.op_type) if t == "dot_general"]
  assert sum("layer_1/dense" in n for n in dots) == 3  # fwd, dgrad, wgrad
  assert sum("layer_0/dense" in n for n in dots) == 2  # no grad wrt x
  # Every parameter feeds something.
  assert np.all(graph.out_degree[graph.kind == NODE_INPUT] > 0)


def test_keyword_arguments_are_named():
  graph = gplace.capture(lambda x, *, scale: x * scale, jnp.ones(3),
                         scale=jnp.float32(2.0))
  assert list(graph.names[graph.kind == NODE_INPUT]) == ["arg0", "scale"]


def test_abstract_arguments_capture_without_allocating():
  big = jax.ShapeDtypeStruct((4096, 4096), jnp.float32)
  graph = gplace.capture(lambda a, b: a @ b, big, big)
  (dot,) = np.flatnonzero(graph.op_type == "dot_general")
  assert graph.flops[dot] == 2 * 4096**3
  assert graph.edge_bytes.max() == 4096 * 4096 * 4


def test_a_tensor_read_twice_is_one_edge_and_inputs_have_no_producer():
  # One rule with graph files: a tensor moves once per consumer (issue 47).
  x = jnp.ones((4, 4), jnp.float32)
  graph = gplace.capture(lambda x: x @ x, x)
  (dot,) = np.flatnonzero(graph.op_type == "dot_general")
  into = graph.edge_dst == dot
  assert into.sum() == 1 and graph.edge_bytes[into].tolist() == [64]
  step, args = _train_step_and_args()
  for graph in (graph, gplace.capture(step, *args),
                gplace.capture(_testing.control_flow_program,
                               *_testing.control_flow_args())):
    assert graph.in_degree[graph.kind == NODE_INPUT].sum() == 0


def test_save_load_round_trip_of_captured_graph(tmp_path):
  step, args = _train_step_and_args()
  graph = gplace.capture(step, *args, name="mlp_train")
  graph.save(tmp_path / "g.npz")
  assert Graph.load(tmp_path / "g.npz") == graph


# -- bad input ----------------------------------------------------------------------


def test_untraceable_function_raises_capture_error():
  def python_branch(x):
    if x.sum() > 0:  # Python control flow on a traced value
      return x
    return -x

  with pytest.raises(CaptureError, match="jittable"):
    gplace.capture(python_branch, jnp.ones(3))


def test_arguments_jax_cannot_flatten_raise_capture_error():
  # Dict keys that do not sort: JAX's ValueError before.
  with pytest.raises(CaptureError, match="mutually sortable"):
    gplace.capture(lambda d: d, {1: jnp.ones(2), "a": jnp.ones(2)})


def test_mismatched_arguments_raise_capture_error():
  with pytest.raises(CaptureError, match="Could not trace"):
    gplace.capture(lambda a, b: a @ b, jnp.ones((2, 3)), jnp.ones((4, 5)))
  with pytest.raises(GplaceError):
    gplace.capture(lambda a: a, "not an array")
  with pytest.raises(CaptureError, match="function"):
    gplace.capture(42, jnp.ones(3))


def _scale(x, n):
  return jnp.sin(x) * n


@pytest.mark.parametrize("jit_keywords,args,kwargs,named", [
    (dict(static_argnums=1), (jnp.ones(3), 3), {}, "argument 1 (n=3)"),
    (dict(static_argnames="n"), (jnp.ones(3),), {"n": 3},
     "keyword argument n=3"),
    (dict(static_argnums=1), (jnp.ones(3),), {"n": 3},
     "keyword argument n=3"),
])
def test_static_arguments_of_a_jitted_function_say_how_to_bind_them(
    jit_keywords, args, kwargs, named):
  # It said "the function must be jittable" of a jitted function.
  fn = jax.jit(_scale, **jit_keywords)
  with pytest.raises(CaptureError) as info:
    gplace.capture(fn, *args, **kwargs)
  message = str(info.value)
  assert "static arguments" in message and named in message
  assert "functools.partial(_scale, n=3)" in message
  assert "must be jittable" not in message
  # The fix it names captures, places and runs as jax.jit does.
  bound = functools.partial(fn, n=3)
  graph = gplace.capture(bound, jnp.ones(3))
  placed = gplace.place(bound, graph, np.zeros(graph.n_nodes, np.int32))
  np.testing.assert_allclose(placed(jnp.ones(3)), fn(jnp.ones(3), n=3))


@pytest.mark.parametrize("name", [np.array(["a", "b"]), 0])
def test_a_bad_graph_name_is_a_graph_error(name):
  # An array raised numpy's ValueError; 0 became the function's name.
  with pytest.raises(GraphError, match="name must be a str"):
    gplace.capture(jnp.sin, jnp.ones(3), name=name)


def test_unknown_primitive_is_captured_with_a_warning():
  pytest.importorskip("gplace.features")
  prim = jex_core.Primitive("gplace_test_mystery_op")
  prim.def_impl(lambda x: x * 3)
  prim.def_abstract_eval(lambda x: x)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    graph = gplace.capture(lambda x: prim.bind(x) + 1, jnp.ones(4))
  assert "unknown" in set(graph.op_type)
  assert any("gplace_test_mystery_op" in str(w.message) for w in caught)
