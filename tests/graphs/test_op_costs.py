"""Tests of gplace.graphs.op_costs: FLOPs against XLA, bodies, bytes."""

import functools
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.graphs.capture import eval_node, trace_program
from gplace.graphs.graph import NODE_OP
from gplace.graphs.op_costs import aval_bytes, eqn_cost


def _only_eqn(fn, *args, primitive=None):
  """The one equation of `fn`'s jaxpr (or its one `primitive` equation)."""
  eqns = jax.make_jaxpr(fn)(*args).jaxpr.eqns
  if primitive is not None:
    # Some jax versions wrap a low-precision reduction in converts.
    eqns = [e for e in eqns if e.primitive.name == primitive]
  (eqn,) = eqns
  return eqn


def test_layout_op_costs_no_flops_and_counts_bytes():
  eqn = _only_eqn(lambda x: x.T, jnp.ones((3, 5), jnp.float32))
  assert eqn_cost(eqn) == (0.0, 2 * 3 * 5 * 4)


def test_reduction_costs_one_flop_per_input_element():
  eqn = _only_eqn(jnp.sum, jnp.ones((4, 6), jnp.bfloat16),
                  primitive="reduce_sum")
  flops, accessed = eqn_cost(eqn)
  in_bytes = 24 * eqn.invars[0].aval.dtype.itemsize
  assert flops == 24
  assert accessed == in_bytes + eqn.outvars[0].aval.dtype.itemsize


def test_elementwise_costs_one_flop_per_output_element():
  x = jnp.ones((7,), jnp.float32)
  assert eqn_cost(_only_eqn(jnp.tanh, x))[0] == 7


def test_aval_bytes_of_shapeless_values_is_zero():
  assert aval_bytes(object()) == 0
  assert aval_bytes(jax.ShapeDtypeStruct((2, 3), jnp.int8)) == 6


def test_scan_cost_is_body_times_length():
  def one(x):
    return jnp.tanh(x @ x)

  def looped(x):
    return jax.lax.scan(lambda c, _: (one(c), None), x, None, length=7)[0]

  x = jnp.ones((16, 16))
  single = gplace.capture(one, x)
  scanned = gplace.capture(looped, x)
  (scan,) = np.flatnonzero(scanned.op_type == "scan")
  assert scanned.flops[scan] == pytest.approx(7 * single.flops.sum())



# -- FLOPs against XLA's own cost analysis --------------------------------------


def _xla_flops(fn, *avals):
  cost = jax.jit(fn).lower(*avals).cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost["flops"])


def _check_op_flops(graph_program, op_types=("dot_general",
                                             "conv_general_dilated")):
  """Compares every dot/conv node's FLOPs with XLA's, per distinct op."""
  seen = {}
  for node, record in enumerate(graph_program.nodes):
    if record.kind != NODE_OP or record.eqn.primitive.name not in op_types:
      continue
    eqn = record.eqn
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype)
             for v in eqn.invars]
    key = (eqn.primitive.name, str(eqn.params), str(avals))
    if key in seen:
      continue
    fn = functools.partial(
        lambda *xs, record: eval_node(record, xs)[0],
        record=record)
    seen[key] = (graph_program.graph.flops[node], _xla_flops(fn, *avals))
  assert seen, "no dot/conv ops found"
  for ours, xla in seen.values():
    assert ours == pytest.approx(xla, rel=0.05)
  return len(seen)


@pytest.mark.parametrize("kwargs", [
    dict(padding="SAME"),
    dict(padding="VALID", strides=(2, 2)),
    dict(padding=((2, 1), (0, 3)), kernel_dilation=(2, 1)),
    dict(padding="SAME", feature_group_count=4),
    dict(padding=((1, 1), (2, 0)), strides=(2, 2), input_dilation=(1, 2)),
])
def test_conv_flops_match_xla(kwargs):
  conv = nn.Conv(8, (3, 3), **kwargs)
  x = jnp.ones((2, 11, 9, 8))
  params = conv.init(jax.random.key(0), x)
  program = trace_program(
      lambda p, x: jax.grad(lambda p: conv.apply(p, x).sum())(p), params, x)
  assert _check_op_flops(program) >= 2  # forward conv and its gradient


def test_dot_flops_match_xla_on_batched_einsum():
  program = trace_program(
      lambda a, b: jnp.einsum("bij,bjk->bik", a, b), jnp.ones((3, 5, 7)),
      jnp.ones((3, 7, 2)))
  _check_op_flops(program)


def test_workload_dot_and_conv_flops_match_xla():
  workloads = pytest.importorskip("gplace.workloads")
  checked = 0
  # One workload per family (the others share its ops); all with
  # GPLACE_SLOW_TESTS=1.
  names = (workloads.names() if os.environ.get("GPLACE_SLOW_TESTS") else
           ("resnet50", "amoebanet", "bert", "rnnlm2", "transformer_xl2",
            "wavenet2"))
  for name in names:
    fn, args = workloads.get(name, size="tiny", step="train")
    program = trace_program(fn, *args)
    checked += _check_op_flops(program)
  assert checked > 10
