"""Tests of gplace.workloads.wavenet: the WaveNet stacks capture with layer
names and run."""

import pytest

import workload_cases

# A layer-name fragment that each workload's captured graph must contain.
LAYER_NAMES = {
    "wavenet2": "WaveNet/stack_1/layer_1",
    "wavenet4": "WaveNet/stack_3/layer_0",
}


def test_layer_names_cover_the_module():
  assert workload_cases.names_from("wavenet") == set(LAYER_NAMES)


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
