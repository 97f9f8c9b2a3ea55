"""experiments/refine_vs_search.py: the RL run is trained once and resumed,
and both second-stage arms get the same evaluations from its greedy
placement."""

from experiments import refine_vs_search


def _rows(out):
  return {line.split(" | ")[2]: line.split(" | ")
          for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| rnnlm2 |")}


def test_both_arms_start_from_the_policy_and_spend_the_same(tmp_path,
                                                            capsys):
  args = ["--size", "tiny", "--workloads", "rnnlm2", "--rl_evaluations",
          "128", "--evaluations", "64", "--seeds", "2", "--runs_dir",
          str(tmp_path / "runs")]
  assert refine_vs_search.main(args + ["--out", str(tmp_path / "a")]) == 0
  rows = _rows(tmp_path / "a")
  start = rows["policy greedy after 128 RL evaluations (the start)"]
  refined = rows["refined per op: greedy"]
  control = rows["local search over ops"]
  assert refined[3] == "learned" and control[3] == "search"
  assert refined[6] in ("+63", "+64") and control[6] == "+64"
  # Local search never ends slower than its start.
  assert float(control[4]) <= float(start[4]) + 1e-9
  # The second call resumes the finished run: the same start.
  assert refine_vs_search.main(args + ["--out", str(tmp_path / "b")]) == 0
  assert _rows(tmp_path / "b")[start[2]][4] == start[4]
  capsys.readouterr()
