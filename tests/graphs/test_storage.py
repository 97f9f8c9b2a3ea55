"""Tests of gplace.graphs.storage (Graph.save / Graph.load) and of
gplace.graphs.build_checks (Graph.build's input checks)."""

import numpy as np
import pytest

from gplace.errors import GraphError
from gplace.graphs.build_checks import (edge_array, merge_edges, pad_shapes,
                                        sequence_length)
from gplace.graphs.graph import Graph, random_dag
from gplace.graphs.storage import check_path, load_graph, save_graph


def test_save_load_round_trip(tmp_path):
  g = random_dag(300, seed=3)
  g.save(tmp_path / "g.npz")
  h = Graph.load(tmp_path / "g.npz")
  assert g == h
  for field in ("names", "flops", "edge_bytes", "out_shape"):
    assert getattr(g, field).dtype == getattr(h, field).dtype


def test_load_rejects_other_files(tmp_path):
  np.savez(tmp_path / "x.npz", a=np.zeros(3))
  with pytest.raises(GraphError):
    Graph.load(tmp_path / "x.npz")


def test_load_says_the_file_is_truncated(tmp_path):
  random_dag(50, seed=1).save(tmp_path / "g.npz")
  data = (tmp_path / "g.npz").read_bytes()
  (tmp_path / "cut.npz").write_bytes(data[:len(data) // 3])
  with pytest.raises(GraphError, match="truncated, corrupted"):
    Graph.load(tmp_path / "cut.npz")


def test_functions_are_what_the_methods_call(tmp_path):
  g = random_dag(20, seed=0)
  save_graph(g, str(tmp_path / "a.npz"))
  assert load_graph(tmp_path / "a.npz", Graph) == g == Graph.load(tmp_path / "a.npz")
  assert check_path(tmp_path / "a.npz", "x") == str(tmp_path / "a.npz")
  with pytest.raises(GraphError, match="x needs path"):
    check_path(3, "x")


def test_edge_array_and_sequence_length_checks():
  np.testing.assert_array_equal(edge_array([(0, 1, 4)], 2), [[0, 1, 4]])
  assert edge_array([], 2).shape == (0, 3)
  with pytest.raises(GraphError, match="does not exist"):
    edge_array([(0, 5, 4)], 2)
  with pytest.raises(GraphError, match="negative bytes"):
    edge_array([(0, 1, -1)], 2)
  with pytest.raises(GraphError, match="triples"):
    edge_array([(0, 1)], 2)
  # int64 wrapped these around before (a "negative" count, issue 47).
  for bytes_ in (2.0**70, np.uint64(2**63 + 5)):
    with pytest.raises(GraphError, match="past the 64-bit counts"):
      edge_array(np.array([(0, 1, bytes_)]), 2)
  with pytest.raises(GraphError, match="pair of nodes carry 9.22e"):
    merge_edges(2, [0, 0], [1, 1], [2**62, 2**62])
  src, dst, nbytes = merge_edges(3, [1, 0, 0], [2, 1, 1], [4, 8, 16])
  assert src.tolist() == [0, 1] and nbytes.tolist() == [24, 4]
  # Ranks past MAX_RANK fold their leading dimensions: exactly, or refused.
  shape, rank = pad_shapes([(2,) * 10])
  assert shape[0].tolist() == [8] + [2] * 7 and rank[0] == 8
  with pytest.raises(GraphError, match="not below 2\\*\\*63"):
    pad_shapes([(2**40,) * 20])              # folded to 0 before
  assert sequence_length([1, 2], "names") == 2
  with pytest.raises(GraphError, match="names must be a sequence"):
    sequence_length("ab", "names")


def test_save_refuses_a_json_path_and_load_points_to_the_json_reader(
    tmp_path):
  # npz bytes under a .json name, which every JSON reader refuses (issue 47).
  g = random_dag(10, seed=0)
  with pytest.raises(GraphError, match=r"ends in \.json.*graph_files\.save"):
    g.save(tmp_path / "g.json")
  assert not (tmp_path / "g.json").exists()
  (tmp_path / "h.json").write_text('{"nodes": [], "edges": []}')
  with pytest.raises(GraphError, match=r"graph_files\.load"):
    Graph.load(tmp_path / "h.json")
