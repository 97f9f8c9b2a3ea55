"""Tests of ``python -m gplace.workloads`` (gplace/workloads/__main__.py):
list, table and export, in process and as a real command."""

import os
import subprocess
import sys

import gplace
from gplace import workloads
from gplace.workloads.__main__ import main


def test_list_prints_every_name(capsys):
  assert main(["list"]) == 0
  assert capsys.readouterr().out.split() == list(workloads.names())


def test_table_prints_a_markdown_row_per_workload(capsys):
  assert main(["table", "--names", "rnnlm2", "--step", "infer"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].startswith("| workload |") and len(lines) == 3
  assert lines[2].startswith("| rnnlm2 | tiny | infer |")


def test_export_writes_loadable_graphs(tmp_path, capsys):
  assert main(["export", "--out", str(tmp_path), "--names", "wavenet2",
               "--step", "infer"]) == 0
  graph = gplace.Graph.load(tmp_path / "wavenet2_tiny_infer.npz")
  assert graph.name == "wavenet2_tiny_infer" and graph.n_nodes > 50
  assert "| wavenet2 | tiny | infer |" in capsys.readouterr().out


def test_unknown_names_exit_2_and_list_the_choices(tmp_path, capsys):
  assert main(["export", "--out", str(tmp_path), "--names",
               "wavenet2,alexnet"]) == 2
  err = capsys.readouterr().err
  assert "unknown workload(s) alexnet" in err and "gnmt8" in err
  assert not list(tmp_path.iterdir())


def test_runs_as_a_module():
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  done = subprocess.run([sys.executable, "-m", "gplace.workloads", "list"],
                        capture_output=True, text=True, env=env, check=False,
                        timeout=120)
  assert done.returncode == 0, done.stderr
  assert done.stdout.split() == list(workloads.names())
  bad = subprocess.run([sys.executable, "-m", "gplace.workloads", "fly"],
                       capture_output=True, text=True, env=env, check=False,
                       timeout=120)
  assert bad.returncode == 2 and "invalid choice" in bad.stderr
