"""Argument checks of the executor's entry points and of a placed
function's calls, before anything is traced: each failure is a
:class:`~gplace.errors.GplaceError` that names the argument and the fix.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, Sequence

import jax
import numpy as np

from gplace.errors import CaptureError, ExecutionError
from gplace.sim.jax_devices import (MORE_DEVICES_HINT, check_devices,
                                    default_devices)

MODES = ("cluster", "op")

class SingleDeviceWarning(UserWarning):
  """Placements were measured on fewer than two devices, so they all run on
  one device and their runtimes differ only by timing noise."""


def check_fn(fn: Any, where: str,
             what: str = "the function the graph was captured from") -> None:
  """Raises CaptureError unless ``fn`` is callable.

  Args:
    fn: the function argument.
    where: the entry point, named in the message (``"gplace.place"``).
    what: what ``fn`` should be, for the message.
  """
  if not callable(fn):
    raise CaptureError(
        f"{where} needs {what} as its first argument, got "
        f"{type(fn).__name__}.")


def check_mode(mode: Any) -> str:
  """Raises ExecutionError unless ``mode`` is one of :data:`MODES`."""
  if not isinstance(mode, str) or mode not in MODES:
    raise ExecutionError(f"Unknown mode {mode!r}; choose one of {MODES}.")
  return mode


def check_count(value: Any, name: str, minimum: int) -> int:
  """An int ``>= minimum`` (``repeats``, ``warmup``), else ExecutionError."""
  if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
      or value < minimum):
    raise ExecutionError(f"{name} must be an int >= {minimum}, got "
                         f"{value!r}.")
  return int(value)


def check_penalty(penalty_s: Any) -> float:
  """A real number of seconds (inf and NaN allowed: both mark a failure)."""
  if isinstance(penalty_s, bool) or not isinstance(penalty_s, numbers.Real):
    raise ExecutionError(f"penalty_s must be a number of seconds (e.g. "
                         f"float('inf')), got {penalty_s!r}.")
  return float(penalty_s)


def check_call(args: Any, kwargs: Any, names: tuple[str, str]
               ) -> tuple[tuple, dict]:
  """``(args, kwargs)`` as a tuple and a dict, else ExecutionError.

  Args:
    args, kwargs: positional arguments (tuple or list; None: none) and
      keyword arguments (a mapping; None: none).
    names: how the caller calls them, e.g. ``("args", "kwargs")``.
  """
  if args is None:
    args = ()
  if not isinstance(args, (tuple, list)):
    raise ExecutionError(
        f"{names[0]} must be a tuple of fn's positional arguments, got "
        f"{type(args).__name__}; for one argument x pass {names[0]}=(x,).")
  if kwargs is None:
    kwargs = {}
  if not isinstance(kwargs, dict):
    try:
      kwargs = dict(kwargs)
    except (TypeError, ValueError) as err:
      raise ExecutionError(
          f"{names[1]} must be a dict of fn's keyword arguments, got "
          f"{type(kwargs).__name__}.") from err
  return tuple(args), kwargs


def check_several_devices(devices: Sequence[jax.Device], what: str) -> None:
  """Refuses to compare placements on fewer than two devices.

  Every placement of a program onto one device is the same placement, so a
  table of their measured "runtimes" ranks timing noise. Call this where a
  run that measures placements (executor rewards) resolves its devices.

  Args:
    devices: the devices placements index.
    what: what needs them, for the message (e.g. ``"Executor rewards"``).

  Raises:
    ExecutionError: fewer than two devices; the message says how to get
      more.
  """
  if len(devices) < 2:
    found = f"one device ({devices[0]})" if devices else "no device"
    raise ExecutionError(
        f"{what} compare placements across devices, but there is only "
        f"{found}, so every placement is the same and their runtimes differ "
        f"only by noise. {MORE_DEVICES_HINT}")


def warn_if_single_device(devices: Sequence[jax.Device],
                          n_placements: int) -> None:
  """Warns (:class:`SingleDeviceWarning`) when several placements are
  measured on one device."""
  if len(devices) < 2 and n_placements > 1:
    warnings.warn(
        f"Measuring placements on one device ({devices[0]}): they all run "
        "on it, so their runtimes differ only by timing noise. "
        f"{MORE_DEVICES_HINT}", SingleDeviceWarning, stacklevel=3)


# -- call arguments ----------------------------------------------------------


def check_concrete(args: Any, kwargs: Any, caller: str) -> None:
  """Raises ExecutionError if an argument leaf is a ``jax.ShapeDtypeStruct``:
  ``caller`` runs the program, which needs values (capture does not)."""
  leaves = jax.tree_util.tree_flatten_with_path((tuple(args), dict(kwargs)))[0]
  for path, leaf in leaves:
    if isinstance(leaf, jax.ShapeDtypeStruct):
      first = path[1]
      name = ((f"arg{first.idx}" if path[0].idx == 0 else str(first.key))
              + jax.tree_util.keystr(path[2:]))
      raise ExecutionError(
          f"{caller} runs the program, so it needs real arrays, but "
          f"argument {name} is a jax.ShapeDtypeStruct {leaf.shape} "
          f"{leaf.dtype}; pass arrays of that shape and dtype (e.g. "
          "jnp.zeros(s.shape, s.dtype)); gplace.capture alone accepts "
          "abstract arguments.")


def leaf_aval(leaf: Any):
  """The abstract value (shape, dtype, weak type) JAX traces ``leaf`` as;
  ``leaf`` may be a ``jax.ShapeDtypeStruct``."""
  return jax.typeof(leaf)


def is_extended(dtype) -> bool:
  """True for JAX's extended dtypes (typed PRNG keys ``key<fry>``), which
  numpy cannot interpret."""
  return jax.dtypes.issubdtype(dtype, jax.dtypes.extended)


def same_dtype(a, b) -> bool:
  """``a == b`` for numpy and extended dtypes alike."""
  if a == b:
    return True
  if is_extended(a) or is_extended(b):
    return False
  return np.dtype(a) == np.dtype(b)


def leaf_weak_type(leaf: Any) -> bool:
  """Whether JAX treats ``leaf`` as weakly typed (Python scalars, arrays
  made from them), without building an abstract value (cheap per call)."""
  if isinstance(leaf, (bool, np.generic, np.ndarray)):
    return False
  if isinstance(leaf, (int, float, complex)):
    return True
  return bool(getattr(leaf, "weak_type", False))


def check_leaves(leaves: Sequence[Any], in_avals: Sequence[Any],
                 name_of: Callable[[int], str]) -> tuple[int, ...]:
  """Checks call arguments against a traced program's.

  Args:
    leaves: the flat call arguments.
    in_avals: the program's flat argument avals.
    name_of: leaf index -> its name in the graph, for messages.

  Returns:
    The indices of leaves whose weak type differs from the program's (the
    caller decides whether that matters: :mod:`gplace.execution.weak_types`).

  Raises:
    ExecutionError: a leaf's shape or dtype differs from the program's, or
      it is a ``jax.ShapeDtypeStruct`` (no value to run on).
  """
  changed = []
  for i, (leaf, aval) in enumerate(zip(leaves, in_avals)):
    if isinstance(leaf, jax.ShapeDtypeStruct):
      raise ExecutionError(
          f"Argument leaf {i} ({name_of(i)}) is a jax.ShapeDtypeStruct, but "
          "a placed program runs on values; pass an array of its shape and "
          "dtype (gplace.capture alone accepts abstract arguments).")
    dtype = getattr(leaf, "dtype", None)
    if dtype is None or not hasattr(leaf, "shape"):
      try:
        leaf_type = leaf_aval(leaf)
      except TypeError as err:
        raise ExecutionError(
            f"Argument leaf {i} ({name_of(i)}) is a {type(leaf).__name__}, "
            "not an array; pass arrays of the traced shapes and dtypes "
            "(bind other arguments with functools.partial before "
            "capturing).") from err
      shape, dtype = tuple(leaf_type.shape), leaf_type.dtype
    else:
      shape = tuple(leaf.shape)
    if shape != tuple(aval.shape) or not same_dtype(dtype, aval.dtype):
      raise ExecutionError(
          f"Argument leaf {i} ({name_of(i)}) has shape {shape} and dtype "
          f"{dtype}, but the program was traced with {aval.str_short()}; "
          "place the function again for new shapes or dtypes.")
    if leaf_weak_type(leaf) != aval.weak_type:
      changed.append(i)
  return tuple(changed)
