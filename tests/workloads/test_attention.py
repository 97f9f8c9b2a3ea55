"""Tests of gplace.workloads.attention: BERT and Transformer-XL capture with
layer names and run; Transformer-XL returns its next memory."""

import jax
import pytest

from gplace import workloads
import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "bert": "BertEncoder/layer_1/attention",
    "transformer_xl2": "TransformerXL/layer_1/attention",
    "transformer_xl4": "TransformerXL/layer_3",
    "transformer_xl8": "TransformerXL/layer_7",
}


def test_layer_names_cover_the_module():
  assert workload_cases.names_from("attention") == set(LAYER_NAMES)


@pytest.mark.parametrize("name", sorted(LAYER_NAMES))
def test_tiny_train_captures_with_layer_names(name):
  workload_cases.check_tiny_train_captures_with_layer_names(
      name, LAYER_NAMES[name])


@pytest.mark.parametrize("name", sorted(LAYER_NAMES))
def test_tiny_infer_runs(name):
  workload_cases.check_tiny_infer_runs(name)


@pytest.mark.parametrize("name", sorted(LAYER_NAMES))
def test_tiny_train_runs(name):
  workload_cases.check_tiny_train_runs(name)


def test_transformer_xl_infer_returns_next_memory():
  fn, (variables, batch) = workloads.get("transformer_xl2", "tiny", "infer",
                                         abstract=True)
  logits, memory = jax.eval_shape(fn, variables, batch)
  assert memory.shape == batch["memory"].shape
  assert logits.shape[:2] == batch["tokens"].shape
