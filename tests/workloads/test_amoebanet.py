"""Tests of gplace.workloads.amoebanet: AmoebaNet captures with cell names
and runs."""


import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "amoebanet": "AmoebaNet/cell_1/node_4_b",
}


(test_layer_names_cover_the_module,
 test_tiny_train_captures_with_layer_names, test_tiny_infer_runs,
 test_tiny_train_runs) = workload_cases.family_tests("amoebanet", LAYER_NAMES)
