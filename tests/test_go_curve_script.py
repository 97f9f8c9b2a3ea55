"""experiments/go_curve.py: where the stall rule stops a recorded curve, and
its flags."""

import pytest

from experiments import go_curve


def test_the_stall_rule_stops_where_the_curve_flattens():
  points = [(15.0, 1.00), (20.0, 0.90), (30.0, 0.85), (40.0, 0.849),
            (50.0, 0.848), (60.0, 0.847)]
  # 10 s windows, 1%: 0.849 at 40 s is not 1% faster than 0.85 at 30 s.
  assert go_curve.stall_stop(points, 10.0, 0.01) == (40.0, 0.849)
  # 20 s windows: 0.849 at 40 s is 5.7% faster than 0.90 at 20 s; 0.848 at
  # 50 s is only 0.2% faster than 0.85 at 30 s.
  assert go_curve.stall_stop(points, 20.0, 0.01) == (50.0, 0.848)
  assert go_curve.stall_stop(points, 100.0, 0.01) is None


def test_the_row_reads_the_curve_at_its_marks():
  points = [(15.0, 0.95), (45.0, 0.80)]
  cells = go_curve.row("g", 1.0, points, 50.0).strip("|").split("|")
  assert [c.strip() for c in cells[:6]] == ["g", "1000", "-5.0%", "-5.0%",
                                            "-5.0%", "-20.0%"]


@pytest.mark.parametrize("argv", [["--workloads", "nope"],
                                  ["--seconds", "0"]])
def test_bad_flags_are_one_line(argv):
  with pytest.raises(SystemExit, match="--workloads must name"):
    go_curve.main(argv)
