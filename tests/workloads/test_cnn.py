"""Tests of gplace.workloads.cnn: the image classifiers (Inception-v3,
ResNet-50) capture with layer names and run; batch-norm statistics travel
with the train step."""

import jax
import numpy as np

from gplace import workloads
from gplace.workloads import cnn, common
import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "inception_v3": "InceptionV3/Mixed_5b/branch_5x5",
    "resnet50": "ResNet50/stage_2/block_0/conv_2",
}


(test_layer_names_cover_the_module,
 test_tiny_train_captures_with_layer_names, test_tiny_infer_runs,
 test_tiny_train_runs) = workload_cases.family_tests("cnn", LAYER_NAMES)


def test_train_step_returns_variables_state_and_loss():
  fn, args = workloads.get("resnet50", "tiny", "train", abstract=True)
  new_variables, new_opt_state, loss = jax.eval_shape(fn, *args)
  assert loss.shape == ()
  # Batch-norm statistics are carried along with the parameters.
  assert "batch_stats" in new_variables
  assert (jax.tree_util.tree_structure((new_variables, new_opt_state))
          == jax.tree_util.tree_structure(args[:2]))


def test_batch_norm_train_step_updates_statistics():
  config = dict(image=16, batch=2, classes=3)
  spec = cnn.image_spec(cnn.ResNet50((1,), 2, 3, name="ResNet50"), config,
                        cnn.optax.sgd(0.1, momentum=0.9))
  fn, args = common.make_step(spec, "train")
  variables, _, loss = jax.jit(
      fn, compiler_options=workload_cases.FAST_COMPILE)(*args)
  assert workload_cases.all_finite((variables, loss))
  mean = variables["batch_stats"]["stage_1"]["block_0"]["conv_1"]
  old_mean = args[0]["batch_stats"]["stage_1"]["block_0"]["conv_1"]
  assert not np.allclose(mean["batch_norm"]["mean"],
                         old_mean["batch_norm"]["mean"])
