"""Device constraints on a graph: validation, violations, repair, the
policies' mask, coarsening and storage."""

import numpy as np
import pytest

import gplace
from gplace.errors import GraphError, PlacementError
from gplace.graphs import constraints
from gplace.graphs.graph import Graph, random_dag

N = 16


@pytest.fixture(scope="module")
def graph():
  return random_dag(N, seed=2, name="c")


def mask_with(rows: dict, n_devices: int = 3) -> np.ndarray:
  mask = np.ones((N, n_devices), bool)
  for node, allowed in rows.items():
    mask[node] = False
    mask[node, allowed] = True
  return mask


def classes(groups: dict) -> np.ndarray:
  colocation = np.full(N, -1)
  for label, nodes in groups.items():
    colocation[nodes] = label
  return colocation


def test_graph_carries_and_compares_constraints(graph):
  mask = mask_with({3: [0]})
  constrained = graph.replace(allowed_devices=mask)
  assert constrained.allowed_devices.dtype == bool
  assert not constrained.allowed_devices.flags.writeable
  assert constrained != graph
  assert constrained == graph.replace(allowed_devices=mask.astype(int))
  assert graph.replace(colocation=classes({0: [1, 2]})) != graph
  assert not constraints.has_constraints(graph)


@pytest.mark.parametrize("field,value,words", [
    ("allowed_devices", np.ones((N - 1, 2), bool), ["shape", "one row"]),
    ("allowed_devices", np.ones(N, bool), ["shape"]),
    ("allowed_devices", np.full((N, 2), 2), ["bool"]),
    ("allowed_devices", np.full((N, 2), "yes"), ["bool"]),
    ("allowed_devices", np.zeros((N, 2), bool), ["allows no device"]),
    ("colocation", np.zeros(N - 1), ["shape"]),
    ("colocation", np.full(N, -2), ["below -1"]),
    ("colocation", np.full(N, 0.5), ["integer"]),
    # int32 wrapped 2**32 around to class 0 before, joining other nodes'
    # (issue 47).
    ("colocation", np.where(np.arange(N) == 1, 2**32, 0), ["below 2**31"]),
])
def test_malformed_constraints(graph, field, value, words):
  with pytest.raises(GraphError) as info:
    graph.replace(**{field: value})
  for word in words:
    assert word in str(info.value)


def test_a_class_without_a_common_device_is_refused(graph):
  with pytest.raises(GraphError, match="no device in common"):
    graph.replace(allowed_devices=mask_with({1: [0], 2: [1]}),
                  colocation=classes({4: [1, 2]}))


def test_build_reorders_constraints_with_the_nodes():
  # Given in reverse topological order: build renumbers the nodes.
  graph = Graph.build(
      names=["out", "op", "in"], op_type=["output", "add", "input"],
      kind=[2, 1, 0], out_shapes=[(1,)] * 3, out_dtype=["float32"] * 3,
      out_bytes=[4] * 3, flops=[0, 1, 0], bytes_accessed=[0, 8, 0],
      edges=[(2, 1, 4), (1, 0, 4)],
      allowed_devices=[[True, False], [False, True], [True, True]],
      colocation=[5, -1, 5])
  assert list(graph.names) == ["in", "op", "out"]
  assert graph.allowed_devices.tolist() == [[True, True], [False, True],
                                            [True, False]]
  assert graph.colocation.tolist() == [5, -1, 5]


def test_violations(graph):
  constrained = graph.replace(allowed_devices=mask_with({3: [2]}),
                              colocation=classes({0: [5, 9]}))
  placements = np.zeros((4, N), np.int32)
  placements[:, 3] = 2
  placements[1, 3] = 1             # disallowed device
  placements[2, 9] = 1             # class split
  placements[3, [5, 9]] = 1        # class together elsewhere: fine
  assert constraints.violations(constrained, placements).tolist() == [
      False, True, True, False]
  assert not constraints.violations(graph, placements).any()


def test_repair_keeps_allowed_nodes_and_joins_classes(graph):
  constrained = graph.replace(allowed_devices=mask_with({3: [2], 4: [1, 2]}),
                              colocation=classes({0: [5, 9, 10]}))
  costs = np.ones((N, 3))
  costs[4] = [1.0, 3.0, 2.0]
  placement = np.zeros(N, np.int32)
  placement[[9, 10]] = 1
  repaired = constraints.repair(constrained, placement, costs)
  assert repaired[3] == 2                  # the only allowed device
  assert repaired[4] == 2                  # the cheapest allowed one
  assert repaired[[5, 9, 10]].tolist() == [1, 1, 1]   # the majority
  untouched = np.setdiff1d(np.arange(N), [3, 4, 5, 9, 10])
  np.testing.assert_array_equal(repaired[untouched], placement[untouched])
  assert not constraints.violations(constrained, repaired[None]).any()


def test_device_mask_for_policies(graph):
  constrained = graph.replace(allowed_devices=mask_with({3: [2]}))
  mask = constraints.device_mask(constrained, 3, 32)
  assert mask.shape == (32, 3)
  assert mask[3].tolist() == [False, False, True]
  assert mask[N:].all()
  assert constraints.device_mask(graph, 3, 32).all()
  with pytest.raises(PlacementError, match="for 3 devices"):
    constraints.device_mask(constrained, 4, 32)


def test_coarsening_keeps_constraints(graph):
  constrained = graph.replace(allowed_devices=mask_with({3: [0, 2], 4: [2]}),
                              colocation=classes({0: [1, 12]}))
  coarse = gplace.coarsen(constrained, "size", max_groups=6)
  labels = coarse.group_of
  coarse_graph = coarse.graph
  assert coarse_graph.allowed_devices.shape == (coarse_graph.n_nodes, 3)
  assert not coarse_graph.allowed_devices[labels[4], :2].any()
  assert (coarse_graph.colocation[labels[1]]
          == coarse_graph.colocation[labels[12]] >= 0)
  # A coarse placement that keeps the coarse constraints keeps the fine ones.
  placement = constraints.repair(
      coarse_graph, np.zeros(coarse_graph.n_nodes, np.int32),
      np.ones((coarse_graph.n_nodes, 3)))
  assert not constraints.violations(
      constrained, gplace.expand(coarse, placement)[None]).any()


def test_npz_keeps_constraints_and_plain_graphs_stay_version_1(tmp_path,
                                                                graph):
  import json
  constrained = graph.replace(allowed_devices=mask_with({3: [2]}),
                              colocation=classes({1: [2, 3]}))
  for g, version in ((graph, 1), (constrained, 2)):
    path = str(tmp_path / f"{version}.npz")
    g.save(path)
    with np.load(path) as data:
      assert json.loads(str(data["meta"]))["version"] == version
    assert Graph.load(path) == g
