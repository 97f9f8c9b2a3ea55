"""Tests of node features, the op-type vocabulary and padded GraphsTuples."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplace.graphs import features
from gplace.graphs.features import Budget, BudgetError
from gplace.errors import GraphError
from gplace.graphs.graph import (Graph, MAX_RANK, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                          random_dag)


def _tiny():
  # x -> a -> b -> y, x -> b.
  return Graph.build(
      names=["x", "a", "b", "y"], op_type=["input", "dot_general", "mystery",
                                           "output"],
      kind=[NODE_INPUT, NODE_OP, NODE_OP, NODE_OUTPUT],
      out_shapes=[(2, 3), (2, 3), (6,), (2, 3)], out_dtype=["float32"] * 4,
      out_bytes=[24] * 4, flops=[0, 36, 6, 0], bytes_accessed=[0, 48, 48, 0],
      edges=[(0, 1, 24), (1, 2, 24), (0, 2, 24), (2, 3, 24)])


# -- vocabulary ------------------------------------------------------------------


def test_vocabulary_ids_are_pinned():
  # These ids are baked into trained embeddings: they must never change.
  pinned = {"padding": 0, "unknown": 1, "input": 2, "output": 3, "add": 4,
            "mul": 7, "tanh": 29, "dot_general": 89,
            "conv_general_dilated": 90, "reduce_sum": 107,
            "broadcast_in_dim": 132, "scatter-add": 145, "scan": 153,
            "while": 154, "rng_bit_generator": 171}
  got = {name: int(features.op_type_id(name)) for name in pinned}
  assert got == pinned


def test_vocabulary_is_unique_and_covers_common_jax_primitives():
  vocab = features.OP_VOCABULARY
  assert len(set(vocab)) == len(vocab) == features.n_op_types
  from jax.extend.core import primitives  # pylint: disable=g-import-not-at-top
  names = {p.name for p in vars(primitives).values()
           if hasattr(p, "bind") and hasattr(p, "name")}
  common = {"add", "sub", "mul", "div", "dot_general", "conv_general_dilated",
            "exp", "log", "tanh", "logistic", "max", "min", "reduce_sum",
            "reduce_max", "broadcast_in_dim", "reshape", "transpose",
            "concatenate", "slice", "dynamic_slice", "dynamic_update_slice",
            "gather", "scatter-add", "select_n", "scan", "while", "cond",
            "convert_element_type", "rsqrt", "sqrt", "pow", "integer_pow",
            "argmax", "cumsum", "sort", "iota", "squeeze", "pad",
            "rng_bit_generator", "random_bits"}
  assert common <= names & set(vocab)
  # Nearly every primitive this JAX has gets its own id.
  assert len(names - set(vocab)) <= 10, sorted(names - set(vocab))


def test_unknown_names_map_to_unknown_and_shape_is_kept():
  ids = features.op_type_id(np.array([["add", "no_such_op"], ["", "exp"]]))
  assert ids.dtype == np.int32 and ids.shape == (2, 2)
  assert ids[0, 1] == ids[1, 0] == features.OP_TYPE_UNKNOWN
  assert features.op_type_id([]).shape == (0,)


# -- node features ---------------------------------------------------------------


def test_node_features_columns():
  g = _tiny()
  f = features.node_features(g)
  assert f.shape == (4, features.n_node_features) and f.dtype == np.float32
  assert len(features.NODE_FEATURE_NAMES) == features.n_node_features
  col = {name: f[:, i] for i, name in enumerate(features.NODE_FEATURE_NAMES)}
  np.testing.assert_allclose(col["log1p_flops"], np.log1p([0, 36, 6, 0]),
                             rtol=1e-6)
  np.testing.assert_allclose(col["log1p_out_bytes"], np.log1p(24), rtol=1e-6)
  np.testing.assert_allclose(col["log1p_out_dim_0"][2], np.log1p(6), rtol=1e-6)
  assert col["log1p_out_dim_1"][2] == 0.0
  assert all(col[f"log1p_out_dim_{d}"].max() == 0 for d in range(2, MAX_RANK))
  np.testing.assert_allclose(col["depth_fraction"], [0, 1 / 3, 2 / 3, 1])
  np.testing.assert_allclose(col["log1p_in_degree"], np.log1p([0, 1, 2, 1]),
                             rtol=1e-6)
  np.testing.assert_allclose(col["log1p_out_degree"], np.log1p([2, 1, 1, 0]),
                             rtol=1e-6)
  np.testing.assert_array_equal(
      f[:, -3:], [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]])


# -- GraphsTuple -----------------------------------------------------------------


def test_single_graph_layout():
  g = _tiny()
  gt = features.to_graphs_tuple(g)
  budget = features.budget_for(g)
  assert budget == Budget(64, 64, 2)
  n, e, n_graphs = budget
  expect = {
      ("nodes", "features"): ((n, features.n_node_features), np.float32),
      ("nodes", "op_type"): ((n,), np.int32),
      ("nodes", "mask"): ((n,), np.bool_),
      ("nodes", "graph_index"): ((n,), np.int32),
      ("nodes", "position"): ((n,), np.int32),
      ("nodes", "hint"): ((n,), np.int32),
      ("edges", "features"): ((e, features.n_edge_features), np.float32),
      ("edges", "direction"): ((e,), np.int32),
      ("edges", "mask"): ((e,), np.bool_),
      ("globals", "mask"): ((n_graphs,), np.bool_),
  }
  for (part, key), (shape, dtype) in expect.items():
    value = getattr(gt, part)[key]
    assert value.shape == shape and value.dtype == dtype, (part, key)
  assert set(gt.nodes) == {"features", "op_type", "mask", "graph_index",
                           "position", "hint"}
  assert (gt.nodes["hint"] == -1).all()  # no plan until make_batch
  assert set(gt.edges) == {"features", "direction", "mask"}
  assert set(gt.globals) == {"mask"}
  for value in (gt.senders, gt.receivers):
    assert value.shape == (e,) and value.dtype == np.int32
  for value in (gt.n_node, gt.n_edge):
    assert value.shape == (n_graphs,) and value.dtype == np.int32
  np.testing.assert_array_equal(gt.n_node, [4, n - 4])
  np.testing.assert_array_equal(gt.n_edge, [8, e - 8])
  np.testing.assert_array_equal(gt.globals["mask"], [True, False])
  assert gt.nodes["mask"].sum() == 4 and gt.nodes["mask"][:4].all()
  assert gt.edges["mask"].sum() == 8 and gt.edges["mask"][:8].all()
  np.testing.assert_array_equal(gt.nodes["position"][:4], np.arange(4))
  assert not gt.nodes["position"][4:].any()
  np.testing.assert_array_equal(gt.nodes["graph_index"], [0] * 4 + [1] * 60)
  np.testing.assert_array_equal(
      gt.nodes["op_type"][:5],
      [2, 89, features.OP_TYPE_UNKNOWN, 3, features.OP_TYPE_PADDING])
  np.testing.assert_array_equal(gt.nodes["features"][:4],
                                features.node_features(g))
  assert not gt.nodes["features"][4:].any()
  # Padding edges sit on the last (padding) node.
  assert (gt.senders[8:] == n - 1).all() and (gt.receivers[8:] == n - 1).all()
  # The layout is what jraph's own utilities expect.
  import jraph  # pylint: disable=g-import-not-at-top
  np.testing.assert_array_equal(jraph.get_node_padding_mask(gt),
                                gt.nodes["mask"])
  np.testing.assert_array_equal(jraph.get_edge_padding_mask(gt),
                                gt.edges["mask"])


def test_edges_appear_in_both_directions():
  g = random_dag(40, seed=3)
  gt = features.to_graphs_tuple(g)
  e = g.n_edges
  fwd, bwd = slice(0, e), slice(e, 2 * e)
  np.testing.assert_array_equal(gt.edges["direction"][fwd], 0)
  np.testing.assert_array_equal(gt.edges["direction"][bwd], 1)
  np.testing.assert_array_equal(gt.senders[fwd], g.edge_src)
  np.testing.assert_array_equal(gt.receivers[fwd], g.edge_dst)
  np.testing.assert_array_equal(gt.senders[bwd], g.edge_dst)
  np.testing.assert_array_equal(gt.receivers[bwd], g.edge_src)
  # Forward edges go up the topological order.
  assert (gt.senders[fwd] < gt.receivers[fwd]).all()
  feats = gt.edges["features"]
  np.testing.assert_allclose(feats[fwd, 0], np.log1p(g.edge_bytes), rtol=1e-6)
  np.testing.assert_array_equal(feats[fwd, 0], feats[bwd, 0])
  np.testing.assert_array_equal(feats[fwd, 1], 0.0)
  np.testing.assert_array_equal(feats[bwd, 1], 1.0)
  assert not feats[2 * e:].any()


def test_batch_equals_concatenation_of_singles():
  graphs = [random_dag(n, seed=n) for n in (10, 37, 23)]
  batch = features.to_graphs_tuple(graphs)
  assert batch.n_node.shape == (4,)
  node_at = edge_at = 0
  for index, g in enumerate(graphs):
    single = features.to_graphs_tuple(g)
    n, e = g.n_nodes, 2 * g.n_edges
    nodes, edges = slice(node_at, node_at + n), slice(edge_at, edge_at + e)
    for key in ("features", "op_type", "mask", "position"):
      np.testing.assert_array_equal(batch.nodes[key][nodes],
                                    single.nodes[key][:n])
    np.testing.assert_array_equal(batch.nodes["graph_index"][nodes], index)
    for key in ("features", "direction", "mask"):
      np.testing.assert_array_equal(batch.edges[key][edges],
                                    single.edges[key][:e])
    np.testing.assert_array_equal(batch.senders[edges],
                                  single.senders[:e] + node_at)
    np.testing.assert_array_equal(batch.receivers[edges],
                                  single.receivers[:e] + node_at)
    assert batch.n_node[index] == n and batch.n_edge[index] == e
    # Node i of graph g is at offset(g) + i.
    np.testing.assert_array_equal(
        features.unpad_node_values(batch.nodes["position"], batch, index),
        np.arange(n))
    node_at += n
    edge_at += e
  assert (batch.nodes["graph_index"][node_at:] == 3).all()
  assert not batch.nodes["mask"][node_at:].any()
  assert not batch.edges["mask"][edge_at:].any()
  np.testing.assert_array_equal(batch.globals["mask"], [1, 1, 1, 0])
  assert batch.n_node.sum() == batch.nodes["mask"].shape[0]
  assert batch.n_edge.sum() == batch.senders.shape[0]


def test_extra_padding_graphs_are_empty():
  g = _tiny()
  gt = features.to_graphs_tuple(g, Budget(10, 12, 4))
  np.testing.assert_array_equal(gt.n_node, [4, 6, 0, 0])
  np.testing.assert_array_equal(gt.n_edge, [8, 4, 0, 0])
  np.testing.assert_array_equal(gt.globals["mask"], [1, 0, 0, 0])
  np.testing.assert_array_equal(gt.nodes["graph_index"][4:], 1)


def test_budget_rounding():
  graphs = [random_dag(100, seed=1), random_dag(30, seed=2)]
  n = sum(g.n_nodes for g in graphs) + 1
  e = 2 * sum(g.n_edges for g in graphs)
  b = features.budget_for(graphs)
  assert b.n_nodes % 64 == 0 and n <= b.n_nodes < n + 64
  assert b.n_edges % 64 == 0 and e <= b.n_edges < e + 64
  assert b.n_graphs == 3
  p = features.budget_for(graphs, power_of_two=True)
  assert p.n_nodes == 256 and p.n_edges == 1 << (e - 1).bit_length()
  assert features.budget_for(graphs, multiple=1) == (n, e, 3)
  with pytest.raises(BudgetError):
    features.budget_for(graphs, multiple=0)


@pytest.mark.parametrize("budget, field", [
    (Budget(4, 64, 2), "n_nodes >= 5"),
    (Budget(64, 7, 2), "n_edges >= 8"),
    (Budget(64, 64, 1), "n_graphs >= 2"),
])
def test_budget_too_small_names_the_needed_size(budget, field):
  with pytest.raises(BudgetError, match=field):
    features.to_graphs_tuple(_tiny(), budget)


def test_same_budget_compiles_once():
  traces = []

  @jax.jit
  def readout(gt):
    traces.append(1)
    # A sum over each graph's real nodes, as a policy would do.
    w = jnp.where(gt.nodes["mask"], gt.nodes["features"][:, 0], 0.0)
    per_edge = w[gt.senders] * gt.edges["mask"]
    return jax.ops.segment_sum(w, gt.nodes["graph_index"],
                               gt.n_node.shape[0]), per_edge.sum()

  budget = features.budget_for([random_dag(60, seed=9)])
  results = []
  for seed, n in enumerate((20, 35, 50, 60)):
    g = random_dag(n, seed=seed)
    results.append(readout(features.to_graphs_tuple(g, budget)))
    np.testing.assert_allclose(results[-1][0][0], np.log1p(g.flops).sum(),
                               rtol=1e-5)
  assert len(traces) == 1
  assert readout._cache_size() == 1  # pylint: disable=protected-access


def test_stack_and_vmap():
  graphs = [random_dag(n, seed=n) for n in (12, 20, 31)]
  budget = features.budget_for(graphs[-1:])
  stacked = features.stack_graphs_tuples(
      [features.to_graphs_tuple(g, budget) for g in graphs])
  assert stacked.nodes["features"].shape == (3, budget.n_nodes,
                                             features.n_node_features)
  assert stacked.senders.shape == (3, budget.n_edges)
  assert stacked.n_node.shape == (3, budget.n_graphs)
  counts = jax.vmap(lambda gt: gt.nodes["mask"].sum())(stacked)
  np.testing.assert_array_equal(counts, [12, 20, 31])
  with pytest.raises(BudgetError, match="one Budget"):
    features.stack_graphs_tuples([features.to_graphs_tuple(graphs[0]),
                                  features.to_graphs_tuple(graphs[2])])


def test_unpad_node_values_axis():
  graphs = [random_dag(10, seed=1), random_dag(15, seed=2)]
  gt = features.to_graphs_tuple(graphs)
  n_pad = gt.nodes["mask"].shape[0]
  placements = np.tile(np.arange(n_pad), (3, 1))  # [K, N_pad]
  got = features.unpad_node_values(placements, gt, 1, axis=1)
  np.testing.assert_array_equal(got, np.tile(np.arange(10, 25), (3, 1)))
  with pytest.raises(BudgetError):
    features.unpad_node_values(placements, gt, 2, axis=1)
  with pytest.raises(BudgetError):
    features.unpad_node_values(placements[:, :5], gt, 0, axis=1)


@pytest.mark.parametrize("fn", [features.node_features, features.edge_features,
                                features.to_graphs_tuple, features.budget_for])
@pytest.mark.parametrize("bad", ["not a graph", 3, None])
def test_feature_functions_need_a_graph(fn, bad):
  with pytest.raises(GraphError, match="Graph"):
    fn(bad)


def test_a_batch_names_the_item_that_is_not_a_graph():
  with pytest.raises(GraphError, match="item 1 is a dict"):
    features.to_graphs_tuple([random_dag(5), {}])
