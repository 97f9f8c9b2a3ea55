"""Op costs read off a jaxpr equation: FLOPs and bytes accessed.

:func:`eqn_cost` ``-> (flops, bytes_accessed)``, bodies of inlined calls and
loops included; matmuls and convolutions count 2 FLOPs per multiply-add on
real inputs (:func:`dot_flops`, :func:`conv_flops`). Host-side.
"""

from __future__ import annotations

import math

import numpy as np

# Call-like primitives whose body is inlined into the graph.
INLINED = frozenset({
    "jit", "pjit", "closed_call", "core_call", "custom_jvp_call",
    "custom_vjp_call", "custom_vjp_call_jaxpr", "remat", "remat2",
    "checkpoint", "custom_lin", "named_call",
})

# FLOPs of one output element for elementwise primitives, where it is not 1.
_ZERO_FLOP = frozenset({
    "reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims",
    "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "pad",
    "gather", "convert_element_type", "bitcast_convert_type", "iota", "copy",
    "copy_p", "rev", "select_n", "stop_gradient", "random_seed",
    "random_wrap", "random_unwrap", "random_bits", "random_split",
    "random_fold_in", "threefry2x32", "rng_bit_generator", "sharding_constraint",
    "device_put", "optimization_barrier", "split", "stack", "unstack",
})
_REDUCTIONS = frozenset({
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
    "reduce_or", "reduce_xor", "argmax", "argmin", "reduce_precision",
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
})


def aval_bytes(aval) -> int:
  """Bytes of an abstract value (0 for tokens and other shapeless avals)."""
  shape = getattr(aval, "shape", None)
  if shape is None:
    return 0
  dtype = getattr(aval, "dtype", None)
  itemsize = getattr(dtype, "itemsize", None) or 4
  return int(math.prod(shape)) * int(itemsize)


def _aval_size(aval) -> int:
  shape = getattr(aval, "shape", None)
  return int(math.prod(shape)) if shape is not None else 0


def _conv_valid_taps(in_size, kernel_size, out_size, stride, pad_lo,
                     lhs_dilation, rhs_dilation) -> int:
  """Number of (output position, kernel tap) pairs that read a real input
  element (not padding, not a hole of lhs dilation) along one dimension."""
  outs = np.arange(out_size)[:, None]
  taps = np.arange(kernel_size)[None, :]
  pos = outs * stride - pad_lo + taps * rhs_dilation
  dilated_size = (in_size - 1) * lhs_dilation + 1
  valid = (pos >= 0) & (pos < dilated_size) & (pos % lhs_dilation == 0)
  return int(valid.sum())


def conv_flops(eqn) -> float:
  """FLOPs of ``conv_general_dilated``: 2 per multiply-add that touches a real
  input element, so padding, strides, dilations and feature groups count."""
  params = eqn.params
  lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
  out = eqn.outvars[0].aval
  dn = params["dimension_numbers"]
  lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
  strides = params["window_strides"]
  padding = params["padding"]
  lhs_dil = params.get("lhs_dilation") or (1,) * len(strides)
  rhs_dil = params.get("rhs_dilation") or (1,) * len(strides)
  taps = 1
  for i in range(len(strides)):
    taps *= _conv_valid_taps(
        lhs.shape[lhs_spec[2 + i]], rhs.shape[rhs_spec[2 + i]],
        out.shape[out_spec[2 + i]], strides[i], padding[i][0], lhs_dil[i],
        rhs_dil[i])
  batch = out.shape[out_spec[0]]
  out_features = out.shape[out_spec[1]]
  in_features_per_group = rhs.shape[rhs_spec[1]]
  return 2.0 * batch * out_features * in_features_per_group * taps


def dot_flops(eqn) -> float:
  """FLOPs of ``dot_general``: 2 x output size x contracted size."""
  (lhs_contract, _), _ = eqn.params["dimension_numbers"]
  lhs = eqn.invars[0].aval
  contracted = math.prod(lhs.shape[d] for d in lhs_contract)
  return 2.0 * _aval_size(eqn.outvars[0].aval) * contracted


def _sub_jaxprs(eqn):
  """Closed sub-jaxprs of a control-flow equation, with their trip weight."""
  name = eqn.primitive.name
  params = eqn.params
  if name == "scan":
    return [(params["jaxpr"], float(params["length"]))]
  if name == "while":
    return [(params["body_jaxpr"], 1.0), (params["cond_jaxpr"], 1.0)]
  return []


def _jaxpr_cost(jaxpr) -> tuple[float, float]:
  """Total (flops, bytes_accessed) of an (open) jaxpr, recursively."""
  flops = accessed = 0.0
  for eqn in jaxpr.eqns:
    f, b = eqn_cost(eqn)
    flops += f
    accessed += b
  return flops, accessed


def eqn_cost(eqn) -> tuple[float, float]:
  """``(flops, bytes_accessed)`` of one equation, bodies included."""
  name = eqn.primitive.name
  in_bytes = sum(aval_bytes(v.aval) for v in eqn.invars)
  out_bytes = sum(aval_bytes(v.aval) for v in eqn.outvars)
  accessed = float(in_bytes + out_bytes)
  if name in INLINED:
    sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    if sub is not None:
      return _jaxpr_cost(getattr(sub, "jaxpr", sub))
  if name == "cond":
    costs = [_jaxpr_cost(b.jaxpr) for b in eqn.params["branches"]]
    f = max(c[0] for c in costs)
    return f, accessed + max(c[1] for c in costs)
  subs = _sub_jaxprs(eqn)
  if subs:
    f_total, b_total = 0.0, accessed
    for sub, weight in subs:
      f, b = _jaxpr_cost(getattr(sub, "jaxpr", sub))
      f_total += weight * f
      b_total += weight * b
    return f_total, b_total
  if name == "dot_general":
    return dot_flops(eqn), accessed
  if name == "conv_general_dilated":
    return conv_flops(eqn), accessed
  if name in _ZERO_FLOP:
    return 0.0, accessed
  if name in _REDUCTIONS:
    return float(sum(_aval_size(v.aval) for v in eqn.invars[:1])), accessed
  if name in ("reduce_window_sum", "reduce_window_max", "reduce_window_min",
              "reduce_window"):
    window = math.prod(eqn.params.get("window_dimensions", (1,)))
    return float(_aval_size(eqn.outvars[0].aval) * window), accessed
  # Elementwise and everything else: one FLOP per output element.
  return float(sum(_aval_size(v.aval) for v in eqn.outvars)), accessed
