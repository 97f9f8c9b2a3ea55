"""Tests of gplace.workloads.rnn: GNMT and the LSTM language models capture
with layer names and run; a train step learns; LSTM weights are shared over
time."""

import jax
import numpy as np

from gplace import workloads
import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "gnmt2": "Decoder/attention",
    "gnmt4": "Encoder/layer_3",
    "gnmt8": "Decoder/layer_7",
    "rnnlm2": "RNNLM/layer_1",
    "rnnlm4": "RNNLM/layer_3",
}


(test_layer_names_cover_the_module,
 test_tiny_train_captures_with_layer_names, test_tiny_infer_runs,
 test_tiny_train_runs) = workload_cases.family_tests("rnn", LAYER_NAMES)


def test_train_step_reduces_loss():
  fn, (variables, opt_state, batch) = workloads.get("rnnlm2", "tiny", "train")
  step = jax.jit(fn, compiler_options=workload_cases.FAST_COMPILE)
  losses = []
  for _ in range(5):
    variables, opt_state, loss = step(variables, opt_state, batch)
    losses.append(float(loss))
  assert losses[-1] < losses[0], losses


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
