"""experiments/learning_vs_search.py with the per-op refinement: the RL arm
splits its evaluations between RL and refinement, and the refinement's
local-search control gets as many."""

import numpy as np
import pytest

from experiments import learning_vs_search


def test_refined_rows_and_their_control_at_equal_evaluations(tmp_path, capsys):
  # --refine_start best (the default "policy" start is covered by
  # tests/rl/test_train.py); one run keeps the suite's time.
  out = tmp_path / "lvs"
  assert learning_vs_search.main([
      "--size", "tiny", "--workloads", "rnnlm2", "--evaluations", "256",
      "--refine_evaluations", "64", "--samples", "64", "--mutate_best", "0",
      "--refine_start", "best", "--no_search", "--out", str(out)]) == 0
  rows = {line.split(" | ")[2]: line.split(" | ")
          for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| rnnlm2 |")}
  # RL spends 3 x 64, the refinement 64: 256 in all, as its control.
  assert rows["policy greedy"][6] == "193"
  assert int(rows["policy refined per op: greedy"][6]) in (255, 256)
  assert rows["policy refined per op: greedy"][3] == "learned"
  # Three RL steps leave a poor greedy placement: a baseline's is faster,
  # and the rows say which; the control starts there too.
  (name,) = [r[len("policy refinement starts at "):-len("'s placement")]
             for r in rows if r.startswith("policy refinement starts at")]
  assert rows[f"policy refinement starts at {name}'s placement"][3] == (
      "baseline")
  control = rows[f"policy refinement's start ({name}), then local search "
                 "over ops"]
  assert control[3] == "search" and control[6] == "256"
  assert "policy refined per op: best sample" in rows
  capsys.readouterr()


@pytest.mark.parametrize("flags, message", [
    (["--evaluations", "100", "--refine_evaluations", "64"],
     "minus --refine_evaluations must be at least --samples"),
    (["--refine_evaluations", "2"], "0 or at least 3"),
])
def test_bad_refinement_budgets_are_refused(flags, message, capsys):
  with pytest.raises(SystemExit) as info:
    learning_vs_search.main(["--samples", "64", *flags])
  assert info.value.code == 2
  assert message in capsys.readouterr().err


def test_time_to_within_reads_rl_then_interpolates_the_refinement():
  best = np.array([np.nan, 1.30, 1.10, 1.05])
  wall = np.array([1.0, 2.0, 3.0, 4.0])
  # Reached during RL: the first step within 2% of 1.04 (1.0608).
  assert learning_vs_search.time_to_within(1.04, 0.02, best, wall) == (4.0,
                                                                       1.05)
  # Only the refinement gets there: its time is interpolated in evaluations
  # between its start (10 s) and the run's end (30 s).
  refine = (np.array([100, 150, 200, 300]), np.array([1.05, 1.0, 0.95, 0.9]))
  at, reached = learning_vs_search.time_to_within(
      0.9, 0.06, best, wall, refine, (10.0, 30.0))
  assert reached == 0.95 and at == pytest.approx(10.0 + 20.0 * 100 / 200)
  # Never within: NaNs.
  assert all(np.isnan(learning_vs_search.time_to_within(0.5, 0.02, best,
                                                        wall, refine)))
