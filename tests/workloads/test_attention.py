"""Tests of gplace.workloads.attention: BERT and Transformer-XL capture with
layer names and run; Transformer-XL returns its next memory."""

import jax

from gplace import workloads
import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "bert": "BertEncoder/layer_1/attention",
    "transformer_xl2": "TransformerXL/layer_1/attention",
    "transformer_xl4": "TransformerXL/layer_3",
    "transformer_xl8": "TransformerXL/layer_7",
}


(test_layer_names_cover_the_module,
 test_tiny_train_captures_with_layer_names, test_tiny_infer_runs,
 test_tiny_train_runs) = workload_cases.family_tests("attention", LAYER_NAMES)


def test_transformer_xl_infer_returns_next_memory():
  fn, (variables, batch) = workloads.get("transformer_xl2", "tiny", "infer",
                                         abstract=True)
  logits, memory = jax.eval_shape(fn, variables, batch)
  assert memory.shape == batch["memory"].shape
  assert logits.shape[:2] == batch["tokens"].shape
