"""Tests of gplace.workloads.zoo: export to .npz and the markdown table
(the command line that wraps them is tested in test_main.py)."""

import gplace
from gplace import workloads
from gplace.workloads import zoo


def test_export_writes_loadable_graphs(tmp_path):
  seen = []
  rows = zoo.export(str(tmp_path), "tiny", "infer", names=["rnnlm2"],
                    progress=seen.append)
  assert [row.name for row in rows] == ["rnnlm2"] and seen == rows
  graph = gplace.Graph.load(tmp_path / "rnnlm2_tiny_infer.npz")
  assert graph.name == "rnnlm2_tiny_infer"
  assert graph.n_nodes == rows[0].nodes
  assert workloads.export is zoo.export


def test_zoo_table_is_markdown():
  table = workloads.zoo_table("tiny", "infer", names=["rnnlm2"])
  lines = table.splitlines()
  assert lines[0].startswith("| workload |") and len(lines) == 3
