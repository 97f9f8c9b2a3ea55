"""experiments/lns_window.py on a small memory-capped graph: one row per
per-window limit and number of threads, LNS never above its start, bad
flags in one line."""

import pytest

from experiments import lns_window


def test_one_row_per_limit_never_above_the_start(tmp_path):
  out = tmp_path / "windows"
  assert lns_window.main(["--graphs", "bert tiny infer, 1cpu+2acc",
                          "--solve_s", "0.5,0.125", "--time_s", "1",
                          "--seeds", "1", "--workers", "1,2",
                          "--out", str(out)]) == 0
  text = (out / "README.md").read_text()
  assert lns_window.HEADER[0] in text
  rows = [[c.strip() for c in line.strip("|").split("|")]
          for line in text.splitlines() if line.startswith("| bert tiny")]
  assert [(r[2], r[3]) for r in rows] == [
      ("0.5", "1"), ("0.5", "2"), ("0.125", "1"), ("0.125", "2")]
  for row in rows:
    assert int(row[5]) >= 0     # windows solved (none if the start took 1 s)
    assert float(row[8]) <= float(row[7])            # never above the start
    assert row[9] == "+0.0%" or row[9].startswith("-"), row


@pytest.mark.parametrize("flags, message", [
    (["--solve_s", "0,1"], "--solve_s must be"),
    (["--solve_s", "fast"], "--solve_s must be"),
    (["--time_s", "0"], "--time_s must be"),
    (["--workers", "0"], "--workers must be"),
    (["--workers", "two"], "--workers must be"),
    (["--graphs", "no such graph"], "names no graph"),
])
def test_bad_flags_are_one_line(flags, message):
  with pytest.raises(SystemExit, match=message):
    lns_window.main(flags)
