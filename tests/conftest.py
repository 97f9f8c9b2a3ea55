"""Test set-up: four forced CPU devices, set before JAX starts."""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=4").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_num_cpu_devices", 4)


# The slowest test files (seconds on 2 cores, `--durations`), slowest first.
# README's test command runs the suite on two pytest-xdist workers, a file
# per worker at a time (`--dist loadfile`); starting the longest files first
# keeps one worker from finishing them alone at the end (longest processing
# time first). Other files follow in their collected order. A stale list
# only costs balance, never a test.
SLOWEST_FILES = (
    "tests/sim/test_dispatch.py",         # ~110 s
    "tests/rl/test_train.py",             # ~110 s
    "tests/test_notebooks.py",            # ~110 s
    "tests/policies/test_doppler.py",     # ~80 s
    "tests/execution/test_executor.py",   # ~80 s
    "tests/rl/test_learning.py",          # ~50 s
    "tests/test_readme.py",               # ~40 s
    "tests/policies/test_hsdag.py",       # ~35 s
    "tests/rl/test_update.py",            # ~35 s
    "tests/policies/test_hdp.py",         # ~30 s
    "tests/policies/test_colocrl.py",     # ~30 s
    "tests/policies/test_placeto.py",     # ~30 s
)


def pytest_collection_modifyitems(config, items):
  del config
  rank = {path: i for i, path in enumerate(SLOWEST_FILES)}
  position = {id(item): i for i, item in enumerate(items)}

  def key(item):
    path = item.nodeid.split("::")[0]
    return (rank.get(path, len(rank)), position[id(item)])

  items.sort(key=key)
