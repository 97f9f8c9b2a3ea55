"""Tests of the Graph value: validation, construction, persistence."""

import numpy as np
import pytest

from gplace.errors import GraphError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT, random_dag


def _tiny(edges):
  return Graph.build(
      names=["x", "a", "b", "y"], op_type=["input", "add", "mul", "output"],
      kind=[NODE_INPUT, NODE_OP, NODE_OP, NODE_OUTPUT],
      out_shapes=[(2, 3)] * 4, out_dtype=["float32"] * 4,
      out_bytes=[24] * 4, flops=[0, 6, 6, 0], bytes_accessed=[0, 48, 48, 0],
      edges=edges)


def test_build_renumbers_into_topological_order():
  g = _tiny([(0, 2, 24), (2, 1, 24), (1, 3, 24)])
  assert np.all(g.edge_src < g.edge_dst)
  assert list(g.names) == ["x", "b", "a", "y"]


def test_build_merges_duplicate_edges():
  g = _tiny([(0, 1, 24), (0, 1, 8), (1, 2, 24), (2, 3, 24)])
  assert g.n_edges == 3
  assert g.edge_bytes[0] == 32


def test_cycle_is_rejected():
  with pytest.raises(GraphError, match="cycle"):
    _tiny([(0, 1, 1), (1, 2, 1), (2, 1, 1), (2, 3, 1)])


def test_cycle_error_names_the_nodes_of_a_shortest_cycle():
  # a -> b -> y -> a is a cycle, and so is the shorter b -> y -> b.
  with pytest.raises(GraphError) as info:
    _tiny([(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 1, 1), (3, 2, 1)])
  assert "'b' -> 'y' -> 'b'" in str(info.value)
  assert "'x'" not in str(info.value)  # upstream of the cycle, not on it


def test_a_long_cycle_error_names_ten_nodes_and_the_length():
  n = 30
  with pytest.raises(GraphError) as info:
    Graph.build(names=[f"op{i}" for i in range(n)], op_type=["add"] * n,
                kind=[NODE_OP] * n, out_shapes=[(2,)] * n,
                out_dtype=["float32"] * n, out_bytes=[8] * n,
                flops=[1.0] * n, bytes_accessed=[8.0] * n,
                edges=[(i, (i + 1) % n, 8) for i in range(n)])
  message = str(info.value)
  assert "(30 nodes in all)" in message and message.count("'op") == 11
  assert len(message.splitlines()) == 1


def test_backward_edge_in_raw_constructor_is_rejected():
  g = _tiny([(0, 1, 24), (1, 2, 24), (2, 3, 24)])
  with pytest.raises(GraphError, match="topological"):
    g.replace(edge_src=np.array([0, 2, 2]), edge_dst=np.array([1, 1, 3]))


def test_depth_and_csr_agree_with_edges():
  g = random_dag(200, seed=5)
  for node in (10, 50, 199):
    preds = g.predecessors(node)
    assert set(preds) == set(g.edge_src[g.edge_dst == node])
    expect = max((g.depth[p] + 1 for p in preds), default=0)
    assert g.depth[node] == expect
  assert g.in_degree.sum() == g.n_edges


def test_constructor_names_the_field_it_cannot_read():
  g = random_dag(10, seed=0)
  with pytest.raises(GraphError, match="'flops' cannot be read as float64"):
    g.replace(flops=np.array(["a"] * 10))
  with pytest.raises(GraphError, match="'kind' cannot be read as int8.*non-"):
    g.replace(kind=np.full(10, 0.5))
  with pytest.raises(GraphError, match="bytes_accessed.*node 3"):
    g.replace(bytes_accessed=np.where(np.arange(10) == 3, np.nan, 1.0))




def test_values_past_a_field_dtype_are_refused_not_wrapped_around():
  # kind 257 read as an op (int8), an edge into node 2**32 as one into
  # node 0 (int32), before (issue 47).
  g = _tiny([(0, 1, 24), (1, 2, 24), (2, 3, 24)])
  with pytest.raises(GraphError, match="'kind' cannot be read as int8.*"
                     "outside -128..127"):
    g.replace(kind=np.array([0, 257, 1, 2]))
  with pytest.raises(GraphError, match="'edge_dst' cannot be read as int32"):
    g.replace(edge_dst=np.array([1, 2, 2**32 + 3]))
  with pytest.raises(GraphError, match="'out_bytes' cannot be read as int64"):
    g.replace(out_bytes=np.full(4, 1e30))
  with pytest.raises(GraphError, match="'kind' cannot be read as int8"):
    Graph.build(names=["x", "y"], op_type=["input", "output"],
                kind=[0, 258], out_shapes=[(), ()], out_dtype=["f32"] * 2,
                out_bytes=[4, 4], flops=[0, 0], bytes_accessed=[0, 0],
                edges=[(0, 1, 4)])


def test_an_edge_into_an_input_is_refused():
  # The simulators treat an input as resident at time 0, so its consumers
  # started before its "producer" finished (issue 47).
  with pytest.raises(GraphError, match=r"goes into an input node.*Make node "
                     r"\d \(x\) an op"):
    _tiny([(1, 0, 24), (0, 2, 24), (2, 3, 24)])
  g = _tiny([(0, 1, 24), (1, 2, 24), (2, 3, 24)])
  with pytest.raises(GraphError, match=r"Edge 0 \(x\) -> 1 \(a\) goes into an "
                     "input node"):
    g.replace(kind=np.array([NODE_INPUT, NODE_INPUT, NODE_OP, NODE_OUTPUT]))
  assert g.in_degree[g.kind == NODE_INPUT].sum() == 0
