"""Tests of gplace.workloads.wavenet: the WaveNet stacks capture with layer
names and run."""


import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "wavenet2": "WaveNet/stack_1/layer_1",
    "wavenet4": "WaveNet/stack_3/layer_0",
}


(test_layer_names_cover_the_module,
 test_tiny_train_captures_with_layer_names, test_tiny_infer_runs,
 test_tiny_train_runs) = workload_cases.family_tests("wavenet", LAYER_NAMES)
