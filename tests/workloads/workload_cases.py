"""Shared checks of the workload tests (tests/workloads): each model
module's test file runs them on its own workloads, so every workload
traces, captures with layer names and runs."""

import os

import jax
import jax.numpy as jnp
import pytest

import gplace
from gplace import workloads

# Compiling ~2k-op train steps dominates test time; XLA's backend optimizer is
# not needed to check that a step runs.
FAST_COMPILE = {"xla_backend_optimization_level": 0}
# Compiling a train step is the dearest part of these tests, so by default one
# workload per model family runs its train step (rnnlm2 in
# test_rnn.py::test_train_step_reduces_loss, a one-block ResNet in
# test_cnn.py::test_batch_norm_train_step_updates_statistics); the others
# differ only in depth or block count, are traced in
# test_tiny_train_captures_with_layer_names, and run with GPLACE_SLOW_TESTS=1.
SLOW_TRAIN = {"amoebanet", "inception_v3", "resnet50", "gnmt4", "gnmt8",
              "rnnlm2", "rnnlm4", "transformer_xl4", "transformer_xl8",
              "wavenet4"}


def names_from(module: str) -> set[str]:
  """The workloads whose model is defined in ``gplace.workloads.<module>``."""
  return {name for name in workloads.names()
          if type(workloads.spec(name).model).__module__
          == f"gplace.workloads.{module}"}


def all_finite(tree) -> bool:
  leaves = jax.tree_util.tree_leaves(tree)
  return all(bool(jnp.all(jnp.isfinite(x))) for x in leaves
             if jnp.issubdtype(x.dtype, jnp.floating))


def check_tiny_train_captures_with_layer_names(name: str, fragment: str):
  """The abstract tiny train step captures, with ``fragment`` in a name."""
  fn, args = workloads.get(name, "tiny", "train", abstract=True)
  assert all(isinstance(x, jax.ShapeDtypeStruct)
             for x in jax.tree_util.tree_leaves(args))
  graph = gplace.capture(fn, *args, name=name)
  assert 300 <= graph.n_nodes <= 6000, graph.n_nodes
  assert any(fragment in str(n) for n in graph.names)
  assert graph.flops.sum() > 0


def check_tiny_infer_runs(name: str):
  fn, args = workloads.get(name, "tiny", "infer")
  out = jax.jit(fn, compiler_options=FAST_COMPILE)(*args)
  assert all_finite(out)


def check_tiny_train_runs(name: str):
  """One tiny train step runs, stays finite and changes the parameters
  (skipped for :data:`SLOW_TRAIN` unless ``GPLACE_SLOW_TESTS`` is set)."""
  if name in SLOW_TRAIN and not os.environ.get("GPLACE_SLOW_TESTS"):
    pytest.skip("slow to compile; set GPLACE_SLOW_TESTS=1 (still traced in "
                "test_tiny_train_captures_with_layer_names)")
  fn, args = workloads.get(name, "tiny", "train")
  variables, opt_state, loss = jax.jit(fn, compiler_options=FAST_COMPILE)(
      *args)
  assert all_finite((variables, opt_state, loss))
  changed = jax.tree_util.tree_map(
      lambda a, b: bool(jnp.any(a != b)), variables["params"],
      args[0]["params"])
  assert any(jax.tree_util.tree_leaves(changed))


def family_tests(module: str, layer_names: dict[str, str]):
  """The four tests every model module's test file runs on its workloads
  (``gplace.workloads.<module>``; ``layer_names``: a layer-name fragment
  each captured graph must contain). Assign them to ``test_*`` names.

  Returns:
    ``(covers_module, captures_with_layer_names, infer_runs, train_runs)``.
  """
  names = sorted(layer_names)

  def covers_module():
    assert names_from(module) == set(layer_names)

  @pytest.mark.parametrize("name", names)
  def captures_with_layer_names(name):
    check_tiny_train_captures_with_layer_names(name, layer_names[name])

  @pytest.mark.parametrize("name", names)
  def infer_runs(name):
    check_tiny_infer_runs(name)

  @pytest.mark.parametrize("name", names)
  def train_runs(name):
    check_tiny_train_runs(name)

  return covers_module, captures_with_layer_names, infer_runs, train_runs
