"""experiments/phase_timeline.py on a small graph: a line per phase, the
phases back to back from the baselines, each best no worse than the one
before it and the last one the answer; bad flags exit."""

import math
import re

import pytest

from experiments import phase_timeline
from gplace.autoplace import budget
from gplace.autoplace import progress

HEAD = re.compile(r"^(.+) \((\d+) ops\): ([\d.e+-]+) ms in ([\d.]+) s, (.+)$")
PHASE = re.compile(r"^ +([\d.]+) s  (.+?) +([\d.]+) s  best (\S+)(?: ms)?  "
                   r"(\S+)$")


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
  # The script patches the progress bar's methods and --set's constants
  # for the process; put them back after each test.
  monkeypatch.setattr(progress.Progress, "stage", progress.Progress.stage)
  monkeypatch.setattr(progress.Progress, "best", progress.Progress.best)
  monkeypatch.setattr(budget, "MIN_LNS_S", budget.MIN_LNS_S)


def test_phases_run_back_to_back_and_end_at_the_answer(capsys):
  flags = ["--classes", "homogeneous", "--graphs", "matmul chains 4x24, "
           "4xh100|", "--budget_s", "4", "--set", "MIN_LNS_S=0.5"]
  assert phase_timeline.main(flags) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0].startswith("load average") and "simulated" in out[0]
  assert "MIN_LNS_S=0.5" in out[0]
  head = HEAD.match(out[1])
  assert head and head.group(1) == "matmul chains 4x24, 4xh100"
  answer_ms = float(head.group(3))
  phases = [PHASE.match(line).groups() for line in out[2:-1]]
  assert phases[0][1] == "baselines" and len(phases) >= 2
  end = 0.0
  bests = []
  for start, _, seconds, best, _ in phases:
    assert float(start) == pytest.approx(end, abs=0.15)
    end = float(start) + float(seconds)
    bests.append(math.inf if best == "none" else float(best))
  assert all(b <= a for a, b in zip(bests, bests[1:]))
  assert bests[-1] == pytest.approx(answer_ms, rel=1e-5)


@pytest.mark.parametrize("flags", [["--budget_s", "0"],
                                   ["--graphs", "no such graph"],
                                   ["--set", "NO_SUCH_CONSTANT=1"]])
def test_bad_flags_exit(flags):
  with pytest.raises(SystemExit):
    phase_timeline.main(flags + ["--classes", "homogeneous"])
