"""experiments/bench_lns.py on a small memory-capped graph: a line per
graph with windows per second, CP-SAT's share and a runtime no worse than
HEFT's; the same windows reach the same runtime; bad flags exit."""

import re

import pytest

from experiments import bench_lns

LINE = re.compile(r"^(.+): ([\d.]+) windows/s, CP-SAT (\d+)% of the wall "
                  r"time, (\d+) of (\d+) candidates out of memory, "
                  r"([\d.e+-]+) -> ([\d.e+-]+) ms in ([\d.]+) s$")


def rows(capsys, flags):
  assert bench_lns.main(flags) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0].startswith("load average") and "simulated" in out[0]
  return [LINE.match(line).groups() for line in out[1:-1]]


def test_a_line_per_graph_reproducible_for_its_windows(capsys):
  flags = ["--classes", "memory", "--graphs", "bert tiny infer, 1cpu+2acc|",
           "--windows", "6"]
  (first,) = rows(capsys, flags)
  assert first[0] == "bert tiny infer, 1cpu+2acc"
  assert float(first[1]) > 0 and 0 <= int(first[2]) <= 100
  assert int(first[3]) <= int(first[4])
  assert float(first[6]) <= float(first[5])          # never above HEFT
  (again,) = rows(capsys, flags)
  assert again[6] == first[6]                        # one thread, counted


@pytest.mark.parametrize("flags", [["--windows", "0"],
                                   ["--graphs", "no such graph"]])
def test_bad_flags_exit(flags):
  with pytest.raises(SystemExit):
    bench_lns.main(flags + ["--classes", "memory"])
