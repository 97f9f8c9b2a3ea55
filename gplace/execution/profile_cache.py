"""Saved profiles, one per program and device set, so that
:func:`gplace.profile` (``cache=True``) and ``gplace.optimize(...,
profile=True)`` measure a program once per machine.

A profile is kept under :func:`profile_key`: a fingerprint of the traced
program (its ops, their parameters and wiring, closed-over constants by
value, the argument shapes and dtypes; not the argument values), the devices
(platform, kind, id, count), the host (architecture, CPU count), the jax and
jaxlib versions, ``XLA_FLAGS`` and the profile's settings. The directory is
``cache=`` (a path), else ``$GPLACE_CACHE_DIR``, else
``~/.cache/gplace/profiles``. Files are written atomically (a temporary file,
then a rename), so processes may share the directory. Host-side.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import tempfile
from typing import Any, Sequence

import jax
import numpy as np

from gplace.errors import ExecutionError
from gplace.execution.profile_file import Profile
from gplace.graphs.capture import Program
from gplace.graphs.graph import NODE_INPUT, NODE_OP

#: Environment variable naming the cache directory.
CACHE_DIR_ENV = "GPLACE_CACHE_DIR"
#: Bumped when what a profile holds or how it is measured changes.
FORMAT_VERSION = 1

_LOG = logging.getLogger(__name__)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def cache_dir(cache: Any) -> str | None:
  """The directory that ``cache`` (``profile``'s argument) names: None for
  False, ``$GPLACE_CACHE_DIR`` or ``~/.cache/gplace/profiles`` for True, the
  path itself for a path.

  Raises:
    ExecutionError: anything else.
  """
  if cache is False or cache is None:
    return None
  if cache is True:
    return os.environ.get(CACHE_DIR_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "gplace", "profiles")
  if isinstance(cache, (str, os.PathLike)):
    return os.fspath(cache)
  raise ExecutionError(
      f"gplace.profile: cache must be True, False or a directory path, got "
      f"{cache!r}; pass cache=True for ~/.cache/gplace/profiles (or "
      f"${CACHE_DIR_ENV}).")


def _stable(value: Any, digest) -> None:
  """Feeds ``value`` (an equation parameter) into ``digest`` so that equal
  meanings hash alike across processes: constants by their bytes, object
  addresses dropped."""
  if hasattr(value, "jaxpr") and hasattr(value, "consts"):   # ClosedJaxpr
    digest.update(_ADDRESS.sub("0x", str(value.jaxpr)).encode())
    for const in value.consts:
      _array(const, digest)
  elif isinstance(value, (tuple, list)):
    digest.update(b"(")
    for item in value:
      _stable(item, digest)
      digest.update(b",")
    digest.update(b")")
  elif isinstance(value, np.ndarray) or isinstance(value, jax.Array):
    _array(value, digest)
  else:
    digest.update(_ADDRESS.sub("0x", repr(value)).encode())


def _array(value: Any, digest) -> None:
  try:
    array = np.asarray(value)
  except Exception:  # pylint: disable=broad-except  (e.g. PRNG key arrays)
    digest.update(_ADDRESS.sub("0x", repr(jax.typeof(value))).encode())
    return
  digest.update(f"{array.dtype}{array.shape}".encode())
  digest.update(np.ascontiguousarray(array).tobytes())


def program_fingerprint(program: Program) -> str:
  """A hex digest of what ``program`` computes: every node's kind, primitive,
  parameters and wiring, closed-over constants by value, the argument
  pytree, shapes and dtypes (not the argument values)."""
  digest = hashlib.sha256()
  digest.update(str(program.in_tree).encode())
  digest.update(str(program.out_tree).encode())
  for aval in program.in_avals:
    digest.update(str(aval).encode())
  for record in program.nodes:
    digest.update(f"|{record.kind}|{record.outputs}".encode())
    if record.kind == NODE_INPUT:
      source, payload = record.source
      digest.update(source.encode())
      if source == "arg":
        digest.update(str(payload).encode())
      else:
        _array(payload, digest)
      continue
    for ref in record.inputs:
      digest.update(f"{ref.var}:".encode())
      if ref.var < 0:
        _stable(ref.literal, digest)
    if record.kind == NODE_OP:
      eqn = record.eqn
      digest.update(eqn.primitive.name.encode())
      for name in sorted(eqn.params):
        digest.update(name.encode())
        _stable(eqn.params[name], digest)
      for var in eqn.outvars:
        digest.update(str(var.aval).encode())
  return digest.hexdigest()


def device_fingerprint(devices: Sequence[Any]) -> dict:
  """What the devices and host are, as far as a profile depends on them."""
  import jaxlib  # pylint: disable=g-import-not-at-top
  return {
      "devices": [[d.platform, d.device_kind, d.id, d.process_index]
                  for d in devices],
      "jax": jax.__version__,
      "jaxlib": getattr(jaxlib, "__version__", ""),
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
      "machine": platform.machine(), "cpus": os.cpu_count(),
  }


def profile_key(program: Program, devices: Sequence[Any],
                settings: dict) -> str:
  """The cache key of a profile of ``program`` on ``devices`` made with
  ``settings`` (the counts and seed; the time budget is not part of it)."""
  text = json.dumps({"format": FORMAT_VERSION,
                     "program": program_fingerprint(program),
                     "devices": device_fingerprint(devices),
                     "settings": settings}, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:32]


def entry_path(directory: str, key: str) -> str:
  """Where the profile under ``key`` is kept."""
  return os.path.join(directory, f"{key}.npz")


def good_enough(prof: Profile, time_s: float | None) -> bool:
  """Whether a saved profile answers a request with budget ``time_s``: it
  did everything its settings asked, or it had at least this budget."""
  meta = prof.meta or {}
  if meta.get("complete", False):
    return True
  saved = meta.get("time_s")
  return time_s is not None and saved is not None and saved >= time_s


def load(directory: str, key: str, time_s: float | None) -> Profile | None:
  """The saved profile under ``key`` if there is one that answers a request
  with budget ``time_s`` (:func:`good_enough`), else None (an unreadable
  file counts as none)."""
  path = entry_path(directory, key)
  if not os.path.exists(path):
    return None
  try:
    prof = Profile.load(path)
  except ExecutionError as err:
    _LOG.warning("gplace.profile: ignoring the unreadable cached profile "
                 "%s (%s)", path, err)
    return None
  if not good_enough(prof, time_s):
    return None
  _LOG.info("gplace.profile: reusing the cached profile %s", path)
  return prof


def store(directory: str, key: str, prof: Profile) -> str:
  """Writes ``prof`` under ``key``, atomically; returns its path.

  Raises:
    ExecutionError: the directory cannot be created or written.
  """
  path = entry_path(directory, key)
  try:
    os.makedirs(directory, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".npz",
                                   dir=directory)
    os.close(handle)
    try:
      prof.save(tmp)
      os.replace(tmp, path)
    finally:
      if os.path.exists(tmp):
        os.remove(tmp)
  except OSError as err:
    raise ExecutionError(
        f"gplace.profile could not write its cache in {directory}: {err}; "
        f"set ${CACHE_DIR_ENV} to a writable directory or pass "
        "cache=False.") from err
  return path
