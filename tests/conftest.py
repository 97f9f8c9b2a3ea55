"""Test set-up: four forced CPU devices, set before JAX starts."""

import os

# The tests compile far more than they run (about half of the suite's time
# is XLA compiling small programs once): LLVM's cheapest optimisation level
# cuts that by a tenth or more. Results are unchanged (the same level on
# both sides of every comparison); benchmarks under experiments/ keep the
# default level. Subprocesses the tests start inherit it.
TEST_XLA_FLAGS = ("--xla_force_host_platform_device_count=4 "
                  "--xla_backend_optimization_level=0")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " +
                           TEST_XLA_FLAGS).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_num_cpu_devices", 4)


# The slowest test files (seconds on 2 workers, 2026-12-07,
# `--durations=0` summed per file), slowest first.
# README's test command runs the suite on two pytest-xdist workers, a file
# per worker at a time (`--dist loadfile`); starting the longest files first
# keeps one worker from finishing them alone at the end (longest processing
# time first). Other files follow in their collected order. A stale list
# only costs balance, never a test.
SLOWEST_FILES = (
    "tests/test_notebooks.py",            # ~170 s
    "tests/rl/test_train.py",             # ~85 s
    "tests/sim/test_dispatch.py",         # ~60 s
    "tests/rl/test_fusion_head.py",       # ~60 s
    "tests/test_multitask.py",            # ~55 s
    "tests/policies/test_doppler.py",     # ~55 s
    "tests/test_readme.py",               # ~55 s
    "tests/rl/test_learning.py",          # ~50 s
    "tests/solvers/test_lns.py",          # ~45 s
    "tests/execution/test_profiler.py",   # ~45 s
    "tests/test_optimize.py",             # ~45 s
    "tests/sim/test_native.py",           # ~40 s
    "tests/rl/test_pretrain.py",          # ~40 s
    "tests/sim/test_tree_kernel.py",      # ~40 s
    "tests/test_experiments_cli.py",      # ~35 s
    "tests/execution/test_executor.py",   # ~35 s
    "tests/policies/test_hdp.py",         # ~30 s
    "tests/policies/test_hsdag.py",       # ~30 s
    "tests/rl/test_update.py",            # ~30 s
    "tests/test_fuzz_script.py",          # ~25 s
)


def pytest_addoption(parser):
  parser.addoption("--run-slow", action="store_true", default=False,
                   help="also run the tests marked slow (multi-process "
                   "training, minutes); or set GPLACE_SLOW_TESTS=1")


def pytest_collection_modifyitems(config, items):
  if not (config.getoption("--run-slow")
          or os.environ.get("GPLACE_SLOW_TESTS") == "1"):
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
      if "slow" in item.keywords:
        item.add_marker(skip)
  rank = {path: i for i, path in enumerate(SLOWEST_FILES)}
  position = {id(item): i for i, item in enumerate(items)}

  def key(item):
    path = item.nodeid.split("::")[0]
    return (rank.get(path, len(rank)), position[id(item)])

  items.sort(key=key)


@pytest.fixture(scope="module")
def two_devices():
  """The first two local (forced CPU) devices."""
  return jax.devices()[:2]


@pytest.fixture(scope="module")
def two_device_topology(two_devices):
  """A local topology of two devices that compute in parallel (``local()``
  puts CPUs in one compute group)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import gplace  # pylint: disable=import-outside-toplevel
  return gplace.topology.local(two_devices).replace(
      compute_group=np.arange(2), name="2cpu")
