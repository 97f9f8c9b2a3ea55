"""Test set-up: four forced CPU devices, set before JAX starts."""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=4").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_num_cpu_devices", 4)
