"""The local ``jax.Device`` s a topology describes and a placement runs on:
:func:`default_devices` (CPU first) and :func:`check_devices` of a
``devices=`` argument (re-exported by :mod:`gplace.execution.inputs`).
"""

from __future__ import annotations

from typing import Any

import jax

from gplace.errors import ExecutionError

#: How to get several devices on a machine with one (the message of
#: :func:`check_devices`, and of
#: :func:`gplace.execution.inputs.check_several_devices` and
#: :class:`~gplace.execution.inputs.SingleDeviceWarning`).
MORE_DEVICES_HINT = (
    "For several CPU devices, set "
    "XLA_FLAGS=--xla_force_host_platform_device_count=N (or "
    "jax.config.update('jax_num_cpu_devices', N)) before JAX starts, e.g. "
    "`XLA_FLAGS=--xla_force_host_platform_device_count=4 python "
    "experiments/run.py ...`; or run on a machine with several GPUs.")


def default_devices() -> list[jax.Device]:
  """All local devices: the CPU devices first, then any accelerators."""
  devices = list(jax.devices("cpu"))
  try:
    if jax.default_backend() != "cpu":
      devices += [d for d in jax.devices() if d.platform != "cpu"]
  except RuntimeError:
    pass
  return devices


def check_devices(devices: Any, where: str,
                  error: type = ExecutionError) -> list[jax.Device]:
  """Validates a ``devices=`` argument.

  Args:
    devices: a non-empty sequence of distinct ``jax.Device`` s.
    where: the entry point, named in messages (``"gplace.place"``).
    error: the :class:`~gplace.errors.GplaceError` subclass to raise.

  Returns:
    The devices as a list.

  Raises:
    ``error`` (default ExecutionError): a single device instead of a list,
      a string, something not iterable, an empty list, an entry that is not
      a ``jax.Device`` (a name such as ``'cpu:0'``, an index, None), or a
      device listed twice.
  """
  usage = ("devices must be a list of jax.Device objects, e.g. "
           "jax.devices() or jax.devices('cpu')[:2]")
  if isinstance(devices, jax.Device):
    raise error(f"{where}: {usage}; got one device, {devices}: pass "
                f"[{devices}] to place everything on it.")
  if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
    raise error(f"{where}: {usage}; got {type(devices).__name__} "
                f"{devices!r}.")
  devices = list(devices)
  if not devices:
    raise error(f"{where}: devices is empty; {usage} (or leave it "
                "None for all local devices).")
  for i, device in enumerate(devices):
    if not isinstance(device, jax.Device):
      raise error(
          f"{where}: devices[{i}] is {type(device).__name__} {device!r}; "
          f"{usage} (not names or indices).")
  if len(set(devices)) != len(devices):
    twice = next(d for d in devices if devices.count(d) > 1)
    raise error(
        f"{where}: device {twice} is listed {devices.count(twice)} times in "
        "devices; placement indices must refer to distinct devices. "
        f"{MORE_DEVICES_HINT}")
  return devices
