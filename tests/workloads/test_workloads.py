"""Tests of the workload zoo: every tiny workload traces, captures with layer
names, and runs; a train step learns; bad requests raise WorkloadError."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace import workloads
from gplace.errors import WorkloadError

# Compiling ~2k-op train steps dominates test time; XLA's backend optimizer is
# not needed to check that a step runs.
_FAST_COMPILE = {"xla_backend_optimization_level": 0}
# Compiling a train step is the dearest part of this file, so by default one
# workload per model family runs its train step (rnnlm2 in
# test_train_step_reduces_loss, a one-block ResNet in
# test_batch_norm_train_step_updates_statistics); the others differ only in
# depth or block count, are traced in test_tiny_train_captures_with_layer_names,
# and run with GPLACE_SLOW_TESTS=1.
_SLOW_TRAIN = {"amoebanet", "inception_v3", "resnet50", "gnmt4", "gnmt8", "rnnlm2", "rnnlm4",
               "transformer_xl4", "transformer_xl8", "wavenet4"}

# A layer-name fragment that each workload's captured graph must contain.
_LAYER_NAMES = {
    "inception_v3": "InceptionV3/Mixed_5b/branch_5x5",
    "resnet50": "ResNet50/stage_2/block_0/conv_2",
    "amoebanet": "AmoebaNet/cell_1/node_4_b",
    "bert": "BertEncoder/layer_1/attention",
    "gnmt2": "Decoder/attention",
    "gnmt4": "Encoder/layer_3",
    "gnmt8": "Decoder/layer_7",
    "rnnlm2": "RNNLM/layer_1",
    "rnnlm4": "RNNLM/layer_3",
    "transformer_xl2": "TransformerXL/layer_1/attention",
    "transformer_xl4": "TransformerXL/layer_3",
    "transformer_xl8": "TransformerXL/layer_7",
    "wavenet2": "WaveNet/stack_1/layer_1",
    "wavenet4": "WaveNet/stack_3/layer_0",
}


def _all_finite(tree) -> bool:
  leaves = jax.tree_util.tree_leaves(tree)
  return all(bool(jnp.all(jnp.isfinite(x))) for x in leaves
             if jnp.issubdtype(x.dtype, jnp.floating))


def test_names_cover_the_papers():
  assert set(workloads.names()) == set(_LAYER_NAMES)


@pytest.mark.parametrize("bad", [
    dict(name="alexnet"), dict(size="huge"), dict(step="eval")])
def test_unknown_request_lists_choices(bad):
  request = {**dict(name="rnnlm2", size="tiny", step="train"), **bad}
  with pytest.raises(WorkloadError) as err:
    workloads.get(request["name"], request["size"], request["step"])
  message = str(err.value)
  assert "choose one of" in message
  assert any(choice in message for choice in ("gnmt8", "paper", "infer"))


@pytest.mark.parametrize("name", sorted(_LAYER_NAMES))
def test_tiny_train_captures_with_layer_names(name):
  fn, args = workloads.get(name, "tiny", "train", abstract=True)
  assert all(isinstance(x, jax.ShapeDtypeStruct)
             for x in jax.tree_util.tree_leaves(args))
  graph = gplace.capture(fn, *args, name=name)
  assert 300 <= graph.n_nodes <= 6000, graph.n_nodes
  assert any(_LAYER_NAMES[name] in str(n) for n in graph.names)
  assert graph.flops.sum() > 0


@pytest.mark.parametrize("name", sorted(_LAYER_NAMES))
def test_tiny_infer_runs(name):
  fn, args = workloads.get(name, "tiny", "infer")
  out = jax.jit(fn, compiler_options=_FAST_COMPILE)(*args)
  assert _all_finite(out)


@pytest.mark.parametrize("name", sorted(_LAYER_NAMES))
def test_tiny_train_runs(name):
  if name in _SLOW_TRAIN and not os.environ.get("GPLACE_SLOW_TESTS"):
    pytest.skip("slow to compile; set GPLACE_SLOW_TESTS=1 (still traced in "
                "test_tiny_train_captures_with_layer_names)")
  fn, args = workloads.get(name, "tiny", "train")
  variables, opt_state, loss = jax.jit(fn, compiler_options=_FAST_COMPILE)(
      *args)
  assert _all_finite((variables, opt_state, loss))
  changed = jax.tree_util.tree_map(
      lambda a, b: bool(jnp.any(a != b)), variables["params"],
      args[0]["params"])
  assert any(jax.tree_util.tree_leaves(changed))


def test_train_step_reduces_loss():
  fn, (variables, opt_state, batch) = workloads.get("rnnlm2", "tiny", "train")
  step = jax.jit(fn, compiler_options=_FAST_COMPILE)
  losses = []
  for _ in range(5):
    variables, opt_state, loss = step(variables, opt_state, batch)
    losses.append(float(loss))
  assert losses[-1] < losses[0], losses


def test_train_step_returns_variables_state_and_loss():
  fn, args = workloads.get("resnet50", "tiny", "train", abstract=True)
  new_variables, new_opt_state, loss = jax.eval_shape(fn, *args)
  assert loss.shape == ()
  # Batch-norm statistics are carried along with the parameters.
  assert "batch_stats" in new_variables
  assert (jax.tree_util.tree_structure((new_variables, new_opt_state))
          == jax.tree_util.tree_structure(args[:2]))


def test_batch_norm_train_step_updates_statistics():
  from gplace.workloads import cnn, common  # pylint: disable=g-import-not-at-top
  config = dict(image=16, batch=2, classes=3)
  spec = cnn.image_spec(cnn.ResNet50((1,), 2, 3, name="ResNet50"), config,
                         cnn.optax.sgd(0.1, momentum=0.9))
  fn, args = common.make_step(spec, "train")
  variables, _, loss = jax.jit(fn, compiler_options=_FAST_COMPILE)(*args)
  assert _all_finite((variables, loss))
  mean = variables["batch_stats"]["stage_1"]["block_0"]["conv_1"]
  old_mean = args[0]["batch_stats"]["stage_1"]["block_0"]["conv_1"]
  assert not np.allclose(mean["batch_norm"]["mean"],
                         old_mean["batch_norm"]["mean"])


def test_transformer_xl_infer_returns_next_memory():
  fn, (variables, batch) = workloads.get("transformer_xl2", "tiny", "infer",
                                         abstract=True)
  logits, memory = jax.eval_shape(fn, variables, batch)
  assert memory.shape == batch["memory"].shape
  assert logits.shape[:2] == batch["tokens"].shape


def test_lstm_weights_are_shared_across_time_steps():
  _, (variables, _, _) = workloads.get("gnmt2", "tiny", "train", abstract=True)
  decoder = variables["params"]["Decoder"]
  assert set(decoder) >= {"layer_0", "layer_1", "attention", "softmax"}
  # One kernel per layer, not one per step.
  assert decoder["layer_0"]["input"]["kernel"].ndim == 2


def test_paper_size_is_abstract_and_large():
  fn, args = workloads.get("gnmt2", "paper", "infer", abstract=True)
  leaves = jax.tree_util.tree_leaves(args)
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  n_params = sum(np.prod(x.shape) for x in
                 jax.tree_util.tree_leaves(args[0]["params"]))
  assert n_params > 50e6  # hidden 1024, vocabulary 32k
