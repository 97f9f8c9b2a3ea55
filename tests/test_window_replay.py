"""experiments/window_replay.py on a small memory-capped graph: the same
recorded windows for every variant, a replay that repeats itself exactly,
the module state restored, and bad variants refused in one line."""

import pytest

from experiments import window_replay
from gplace.solvers import lns_model, lns_windows


def _rows(text: str) -> list[list[str]]:
  return [[c.strip() for c in line.strip("|").split("|")]
          for line in text.splitlines() if line.startswith("| bert tiny")]


def test_every_variant_replays_the_same_windows_and_repeats(tmp_path):
  out = tmp_path / "replay"
  kept_parameters, kept_solve = (lns_model.WINDOW_PARAMETERS,
                                 lns_windows.solve_window)
  assert window_replay.main([
      "--graphs", "bert tiny infer, 1cpu+2acc", "--record_s", "3",
      "--skip_s", "0", "--max_windows", "6",
      "--variants", "default;again;links:links=true;short:det=0.25,"
      "search_branching=HINT_SEARCH", "--out", str(out)]) == 0
  assert lns_model.WINDOW_PARAMETERS is kept_parameters
  assert lns_windows.solve_window is kept_solve
  text = (out / "README.md").read_text()
  assert window_replay.HEADER[0] in text
  rows = _rows(text)
  assert [r[2] for r in rows] == ["default", "again", "links", "short"]
  windows = {r[3] for r in rows}
  assert len(windows) == 1 and 1 <= int(windows.pop()) <= 6
  for row in rows:
    assert 0 <= int(row[6]) <= int(row[3])          # confirmed <= windows
    assert float(row[7]) >= 0 and float(row[8]) >= 0
  # Deterministic limits: the same windows give the same answers.
  assert rows[0][5:8] == rows[1][5:8]


@pytest.mark.parametrize("text, message", [
    ("x:det=0", "det must be a positive scale"),
    ("x:links=maybe", "links must be true or false"),
    ("x:no_such_parameter=1", "is not det, links or a CP-SAT parameter"),
    ("x:det", "is not key=value"),
    ("x:search_branching=fast", "is not true/false, a number"),
    (" ; ", "names no variant"),
])
def test_bad_variants_are_refused(text, message):
  with pytest.raises(SystemExit, match=message):
    window_replay.parse_variants(text)


def test_variants_parse_into_parameters_scale_and_links():
  default, mixed = window_replay.parse_variants(
      "default;mixed:det=0.5,links=false,use_dynamic_precedence_in_"
      "disjunctive=true")
  assert default == window_replay.Variant("default", {})
  assert default.links is None
  assert mixed.det == 0.5 and mixed.links is False
  assert mixed.parameters == {"use_dynamic_precedence_in_disjunctive": True}
