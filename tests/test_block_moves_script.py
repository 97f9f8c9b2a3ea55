"""experiments/block_moves.py on a small memory-capped graph: one row per
search, share of block moves and seed, never above the start; bad flags in
one line."""

import pytest

from experiments import block_moves


def test_one_row_per_setting_never_above_the_start(tmp_path):
  out = tmp_path / "blocks"
  assert block_moves.main(["--classes", "memory",
                           "--graphs", "bert tiny infer, 1cpu+2acc",
                           "--shares", "0,0.5", "--time_s", "1",
                           "--seeds", "2", "--out", str(out)]) == 0
  text = (out / "README.md").read_text()
  assert block_moves.HEADER[0] in text
  rows = [[c.strip() for c in line.strip("|").split("|")]
          for line in text.splitlines() if line.startswith("| bert tiny")]
  assert [(r[2], r[3], r[4]) for r in rows] == [
      (name, share, seed) for name in block_moves.SEARCHES
      for share in ("0", "0.5") for seed in ("0", "1", "mean")]
  for row in rows:
    assert row[8] == "+0.0%" or row[8].startswith("-"), row
    if row[4] != "mean":
      assert int(row[5]) > 0
      assert float(row[7]) <= float(row[6])          # never above the start


@pytest.mark.parametrize("flags, message", [
    (["--shares", "1.5"], "--shares must be"),
    (["--shares", "half"], "--shares must be"),
    (["--searches", "tabu"], "--searches must be"),
    (["--time_s", "0"], "--time_s must be"),
    (["--graphs", "no such graph"], "names no graph"),
])
def test_bad_flags_are_one_line(flags, message):
  with pytest.raises(SystemExit, match=message):
    block_moves.main(flags)
