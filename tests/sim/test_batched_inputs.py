"""Tests of Topology.batched_inputs: graph inputs reach other devices
without link latency, the same in every simulator path, the reference, the
solver's model and the JSON format."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gplace.errors import TopologyError
from gplace.graphs.graph import NODE_INPUT, random_dag
from gplace.sim import topology_json
from gplace.sim.problem import transfer_seconds
from gplace.sim.simulator import simulate
from gplace.sim.presets import preset
from sim_cases import SETTINGS, assert_runs_as_the_reference, random_topology


@settings(SETTINGS, max_examples=8)
@given(n_nodes=st.integers(4, 40), n_devices=st.integers(2, 4),
       seed=st.integers(0, 10_000),
       schedule=st.sampled_from(["static", "dynamic", "planned"]))
def test_fast_paths_match_the_reference(n_nodes, n_devices, seed, schedule):
  rng = np.random.default_rng(seed)
  graph = random_dag(n_nodes, n_inputs=3, seed=seed)
  topology = random_topology(rng, n_devices).replace(batched_inputs=True)
  placements = rng.integers(0, n_devices, (3, graph.n_nodes))
  assert_runs_as_the_reference(graph, placements, topology, schedule)


def test_inputs_pay_bytes_but_no_latency():
  graph = random_dag(30, n_inputs=4, seed=0)
  plain = preset("1cpu+2gpu")
  batched = plain.replace(batched_inputs=True)
  seconds, batched_s = (transfer_seconds(graph, t) for t in (plain, batched))
  is_input = graph.kind == NODE_INPUT
  np.testing.assert_array_equal(batched_s[~is_input], seconds[~is_input])
  np.testing.assert_allclose(batched_s[is_input] + plain.link_latency[None],
                             seconds[is_input])
  # So placements whose inputs cross devices run faster, others equally.
  rng = np.random.default_rng(0)
  placements = rng.integers(0, 3, (16, graph.n_nodes))
  fast = np.asarray(simulate(graph, placements, batched).runtime_s)
  slow = np.asarray(simulate(graph, placements, plain).runtime_s)
  assert np.all(fast <= slow * (1 + 1e-6)) and np.any(fast < slow)


def test_batched_inputs_survive_the_json_format():
  topology = preset("1cpu+2gpu").replace(batched_inputs=True)
  back = topology_json.topology_from_dict(
      topology_json.topology_to_dict(topology), "topology")
  assert back.batched_inputs


def test_batched_inputs_must_be_a_bool():
  with pytest.raises(TopologyError, match="batched_inputs"):
    preset("1cpu+2gpu").replace(batched_inputs="yes")
