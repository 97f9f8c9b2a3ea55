"""experiments/compare_systems.py: the systems table and its search controls."""

import numpy as np
import pytest

from experiments import compare_systems


def _table(tmp_path, *flags):
  out = tmp_path / "study"
  assert compare_systems.main([
      "--workloads", "rnnlm2", "--size", "tiny", "--topologies", "1cpu+2gpu",
      "--out", str(out), *flags]) == 0
  return [[cell.strip() for cell in line.strip("|").split("|")]
          for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| rnnlm2 |")]


def test_a_system_row_without_controls(tmp_path, capsys):
  rows = _table(tmp_path, "--systems", "hsdag", "--evaluations", "64",
                "--no_controls")
  # Every row is printed once, as it comes (the log keeps finished systems).
  printed = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("| rnnlm2 |")]
  assert [[c.strip() for c in line.strip("|").split("|")]
          for line in printed] == rows
  names = [row[3] for row in rows]
  assert names[0] == "hsdag"
  assert names[-1].startswith("best classical: ")
  assert not any(name.startswith("search control") for name in names)
  cells = rows[0]
  greedy_ms, best_ms = (float(cells[i].split()[0]) for i in (4, 6))
  classical_ms = float(rows[-1][4])
  single_ms = float(rows[-1][-1].split()[-1])
  assert np.isfinite(greedy_ms) and greedy_ms > 0 and best_ms > 0
  # ColocRL's check: never worse than the whole graph on one device.
  assert cells[-1] == "yes" and best_ms <= single_ms * (1 + 1e-6)
  assert classical_ms <= single_ms


def test_controls_alone_spend_the_budget(tmp_path):
  rows = _table(tmp_path, "--systems", "", "--evaluations", "64")
  controls = [row for row in rows if row[3].startswith("search control")]
  assert [row[3] for row in controls] == [
      "search control: local search", "search control: annealing",
      "search control: genetic", "search control: random"]
  # Each spent the budget it was given (the evaluations column).
  assert all(row[8] == "64" for row in controls)


def test_unknown_system_is_refused():
  with pytest.raises(SystemExit):
    compare_systems.main(["--systems", "go,alphaplace"])
