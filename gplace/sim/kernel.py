"""The CPU one-kernel path of the simulator's loops, and its compile options.

Inside :func:`one_kernel_loops` the simulator's loops compile as one native
function each (:func:`per_member_kernel`); :data:`COMPILER_OPTIONS` asks for
512-bit vectors where the CPU has AVX-512.
"""

from __future__ import annotations

import contextlib
import contextvars
import os

import jax

try:
  import inspect as _inspect
  from jax.experimental.xla_metadata import set_xla_metadata as _set_metadata
  _HAS_OP_METADATA = "x" in _inspect.signature(_set_metadata).parameters
except (ImportError, TypeError, ValueError):      # older jax
  _HAS_OP_METADATA = False

#: Compile the simulator's sequential loops as single CPU kernels (see
#: :func:`one_kernel`). Set to False to fall back to XLA's default per-op
#: CPU runtime (about 2x slower); it takes effect at the next trace. The
#: environment variable ``GPLACE_SIM_ONE_KERNEL=0`` sets it to False at import
#: (a safety valve: that compilation path is XLA-internal).
ONE_KERNEL_LOOPS = os.environ.get("GPLACE_SIM_ONE_KERNEL", "1") != "0"

# The one-kernel path is used only where it is traced inside
# ``one_kernel_loops()``: by :func:`simulate` (its own jit, whose program
# shapes are the tested ones) and the benchmark. The compilation path is
# XLA-internal and CHECK-failed on other loop shapes during development, so
# inside other programs (a user's jit, a training step under ``jax.pmap``)
# the plain scan runs; results are the same.
_ONE_KERNEL_SCOPE = contextvars.ContextVar("gplace_one_kernel", default=False)


@contextlib.contextmanager
def one_kernel_loops(enabled: bool = True):
  """Within this context, traces of :func:`simulate_problem` compile their
  loops as single CPU kernels (see :func:`one_kernel`); outside it they use
  the plain ``lax.scan`` (same results)."""
  token = _ONE_KERNEL_SCOPE.set(enabled)
  try:
    yield
  finally:
    _ONE_KERNEL_SCOPE.reset(token)


def one_kernel_active() -> bool:
  """Whether a trace here compiles the simulator's loops as single CPU
  kernels (within :func:`one_kernel_loops`, and where supported)."""
  return bool(_HAS_OP_METADATA and ONE_KERNEL_LOOPS and
              _ONE_KERNEL_SCOPE.get())


def _as_one_kernel(fn):
  """``fn`` as a call XLA's CPU backend compiles into one native function
  (tagged ``xla_cpu_small_call`` and kept from inlining)."""

  def compiled(*args):
    return _set_metadata(jax.jit(fn)(*args), xla_cpu_small_call="true",
                         inlineable="false")

  return compiled


def one_kernel(fn, *args):
  """``fn(*args)``; on CPU, compiled as one kernel. ``fn`` must not close
  over traced values (pass them in ``args``).

  XLA's CPU runtime runs every fused op of a loop body as a separate kernel
  launch, and the simulator's loops run ~20 tiny ops per step, so launch
  overhead and poorly vectorized small fusions dominate. XLA compiles a
  ``call`` tagged ``xla_cpu_small_call`` (and kept from inlining) as one
  function with native loops, as it does for small while loops on its own;
  here the loop is wrapped that way. Other platforms, older jax, and
  ``ONE_KERNEL_LOOPS = False`` run ``fn`` unchanged: same results.

  Under ``vmap`` on CPU the batch runs one member at a time (``lax.map``),
  each as one kernel: a batched loop would write per-member dynamic rows
  (scatters), which that compilation path does not support.
  """
  if not one_kernel_active():
    return fn(*args)

  compiled = _as_one_kernel(fn)

  @jax.custom_batching.custom_vmap
  def run(*args):
    return jax.lax.platform_dependent(*args, cpu=compiled, default=fn)

  @run.def_vmap
  def run_batched(axis_size, in_batched, *args):
    del axis_size
    leaves, tree = jax.tree_util.tree_flatten(args)
    batched = jax.tree_util.tree_leaves(in_batched)

    def mapped(*args):
      leaves = jax.tree_util.tree_leaves(args)

      def member(values):
        values = iter(values)
        return run(*jax.tree_util.tree_unflatten(
            tree, [next(values) if b else x for x, b in zip(leaves, batched)]))

      return jax.lax.map(member, [x for x, b in zip(leaves, batched) if b])

    def vmapped(*args):
      in_axes = jax.tree_util.tree_map(lambda b: 0 if b else None,
                                       tuple(in_batched))
      return jax.vmap(fn, in_axes=in_axes)(*args)

    out = jax.lax.platform_dependent(*args, cpu=mapped, default=vmapped)
    return out, jax.tree_util.tree_map(lambda _: True, out)

  return run(*args)



def per_member_kernel(fn, batched: tuple, shared: tuple):
  """``fn(*batched, *shared)`` for a function written for a batch (every
  leaf of ``batched`` has a leading ``K`` axis). On CPU within
  :func:`one_kernel_loops`, each member runs on its own as one kernel (a
  batch of one, ``lax.map`` over the ``K`` members; see :func:`one_kernel`
  for why not the whole batch); elsewhere the whole batch at once, as
  written. Same results either way."""
  if not one_kernel_active():
    return fn(*batched, *shared)

  compiled = _as_one_kernel(fn)

  def per_member(batched, shared):
    def member(values):
      one = jax.tree_util.tree_map(lambda x: x[None], values)
      out = compiled(*one, *shared)
      return jax.tree_util.tree_map(lambda x: x[0], out)
    return jax.lax.map(member, batched)

  return jax.lax.platform_dependent(
      batched, shared, cpu=per_member,
      default=lambda batched, shared: fn(*batched, *shared))


def _cpu_compiler_options() -> dict[str, str]:
  """Per-compile XLA options for the simulator on CPUs with AVX-512.

  The one-kernel loops vectorize over the K placements; XLA's CPU backend
  emits 256-bit vectors by default, and preferring 512-bit ones runs a
  10k-node, K=256 call about 1.5x faster on AVX-512 machines with
  bit-identical results (measured: ``experiments/bench_simulator.py``). The
  option is passed to this module's own ``jax.jit`` only (never through
  ``XLA_FLAGS``, which would change the user's whole program); callers who
  jit :func:`simulate_problem` themselves can pass
  ``compiler_options=COMPILER_OPTIONS`` too.
  """
  try:
    with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as cpuinfo:
      has_avx512 = " avx512f" in cpuinfo.read()
  except OSError:
    has_avx512 = False
  return {"xla_cpu_prefer_vector_width": "512"} if has_avx512 else {}


#: XLA options ``simulate`` compiles with (see :func:`_cpu_compiler_options`).
COMPILER_OPTIONS = _cpu_compiler_options()
