"""Tests of the zoo tools: export to .npz and the markdown table."""

import gplace
from gplace import workloads


def test_export_writes_loadable_graphs(tmp_path, capsys):
  from gplace.workloads.__main__ import main  # pylint: disable=g-import-not-at-top
  assert main(["export", "--out", str(tmp_path), "--names", "wavenet2",
               "--step", "infer"]) == 0
  graph = gplace.Graph.load(tmp_path / "wavenet2_tiny_infer.npz")
  assert graph.name == "wavenet2_tiny_infer" and graph.n_nodes > 50
  assert "| wavenet2 | tiny | infer |" in capsys.readouterr().out


def test_zoo_table_is_markdown():
  table = workloads.zoo_table("tiny", "infer", names=["rnnlm2"])
  lines = table.splitlines()
  assert lines[0].startswith("| workload |") and len(lines) == 3
