"""experiments/lns_window.py on a small memory-capped graph: one row per
per-window limit, number of threads and share of neighbourhoods drawn
evenly (and set of CP-SAT parameters per window), LNS never above its
start, windows counted per neighbourhood, bad flags in one line."""

import re

import pytest

from experiments import lns_window
from gplace.solvers import lns_model, lns_windows
from gplace.solvers.lns_windows import NEIGHBOURHOODS


def test_one_row_per_limit_never_above_the_start(tmp_path):
  out = tmp_path / "windows"
  assert lns_window.main(["--graphs", "bert tiny infer, 1cpu+2acc",
                          "--solve_s", "0.5,0.125", "--time_s", "0.5",
                          "--seeds", "1", "--workers", "1,2",
                          "--explore", "1,0.3", "--kick_after", "300,none",
                          "--out", str(out)]) == 0
  text = (out / "README.md").read_text()
  assert lns_window.HEADER[0] in text
  rows = [[c.strip() for c in line.strip("|").split("|")]
          for line in text.splitlines() if line.startswith("| bert tiny")]
  assert [(r[2], r[3], r[4], r[5]) for r in rows] == [
      (limit, workers, share, kick) for limit in ("0.5", "0.125")
      for workers in ("1", "2") for share in ("1", "0.3")
      for kick in ("300", "None")]
  for row in rows:
    assert int(row[7]) >= 0     # windows solved (none if the start took 1 s)
    assert float(row[10]) <= float(row[9])           # never above the start
    assert row[11] == "+0.0%" or row[11].startswith("-"), row
    counts = re.findall(r"(\w+) (\d+) \((\d+), ([-+.\de]+) ms\)", row[12])
    assert [c[0] for c in counts] == list(NEIGHBOURHOODS)
    assert sum(int(c[1]) for c in counts) == int(row[7])
    assert sum(int(c[2]) for c in counts) == int(row[8])
    assert int(row[13]) >= 0 and (row[5] == "300" or row[13] == "0")
    assert row[14] == "lean" and row[15] == "defaults"


def test_one_row_per_parameter_set_and_the_default_restored(tmp_path):
  out = tmp_path / "params"
  kept = lns_model.WINDOW_PARAMETERS
  assert lns_window.main(["--graphs", "bert tiny infer, 1cpu+2acc",
                          "--solve_s", "0.125", "--time_s", "0.5",
                          "--seeds", "1", "--window_params", "full,lean",
                          "--out", str(out)]) == 0
  assert lns_model.WINDOW_PARAMETERS is kept
  rows = [[c.strip() for c in line.strip("|").split("|")]
          for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| bert tiny")]
  assert [r[14] for r in rows] == ["full", "lean"]
  assert all(float(r[10]) <= float(r[9]) for r in rows)
  full = lns_window.PARAMETER_SETS["full"]
  assert full["use_sat_inprocessing"] and not kept["use_sat_inprocessing"]


def test_one_row_per_group_of_window_constants_and_each_restored(
    tmp_path, monkeypatch):
  out = tmp_path / "constants"
  kept = (lns_windows.CONTEXT_FACTOR, lns_windows.FAST_SHARE,
          lns_windows.SHRINK)
  seen = []
  solve = lns_window.solvers.lns

  def spy(*args, **kwargs):
    seen.append((lns_windows.CONTEXT_FACTOR, lns_windows.FAST_SHARE,
                 lns_windows.SHRINK))
    return solve(*args, **kwargs)

  monkeypatch.setattr(lns_window.solvers, "lns", spy)
  assert lns_window.main([
      "--graphs", "bert tiny infer, 1cpu+2acc", "--solve_s", "0.125",
      "--time_s", "0.5", "--seeds", "1", "--out", str(out),
      "--constants", "defaults;CONTEXT_FACTOR=6;FAST_SHARE=1,SHRINK=0.85"
  ]) == 0
  assert seen == [kept, (6, kept[1], kept[2]), (kept[0], 1.0, 0.85)]
  assert (lns_windows.CONTEXT_FACTOR, lns_windows.FAST_SHARE,
          lns_windows.SHRINK) == kept
  rows = [[c.strip() for c in line.strip("|").split("|")]
          for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| bert tiny")]
  assert [r[15] for r in rows] == ["defaults", "CONTEXT_FACTOR=6",
                                   "FAST_SHARE=1,SHRINK=0.85"]
  assert all(float(r[10]) <= float(r[9]) for r in rows)


def test_one_row_per_memory_scale_on_all_but_the_cpus(tmp_path,
                                                     monkeypatch):
  out = tmp_path / "memory"
  seen = []
  solve = lns_window.solvers.lns

  def spy(graph, topology, **kwargs):
    seen.append(topology)
    return solve(graph, topology, **kwargs)

  monkeypatch.setattr(lns_window.solvers, "lns", spy)
  assert lns_window.main([
      "--graphs", "bert tiny infer, 1cpu+2acc", "--solve_s", "0.125",
      "--time_s", "0.5", "--seeds", "1", "--out", str(out),
      "--memory_scale", "1,2.5"]) == 0
  rows = [[c.strip() for c in line.strip("|").split("|")]
          for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| bert tiny")]
  assert [r[16] for r in rows] == ["1", "2.5"]
  assert all(float(r[10]) <= float(r[9]) for r in rows)
  assert len(seen) == 2          # scale 1 runs on the graph's own caps
  capped = seen[0]
  for device, before, after in zip(capped.devices, capped.memory_bytes,
                                   seen[1].memory_bytes):
    assert after == (before if device.kind == "cpu" else 2.5 * before)
  assert any(device.kind == "cpu" for device in capped.devices)


@pytest.mark.parametrize("flags, message", [
    (["--solve_s", "0,1"], "--solve_s must be"),
    (["--solve_s", "fast"], "--solve_s must be"),
    (["--time_s", "0"], "--time_s must be"),
    (["--workers", "0"], "--workers must be"),
    (["--workers", "two"], "--workers must be"),
    (["--explore", "2"], "--explore must be"),
    (["--explore", "even"], "--explore must be"),
    (["--kick_after", "0"], "--kick_after must be"),
    (["--kick_after", "often"], "--kick_after must be"),
    (["--start_s", "-1"], "--start_s at least 0"),
    (["--memory_scale", "0"], "--memory_scale must be"),
    (["--memory_scale", "big"], "--memory_scale must be"),
    (["--window_params", "fast"], "--window_params must be"),
    (["--constants", ";"], "--constants must name"),
    (["--constants", "WIDE=2"], "--constants takes NAME=VALUE"),
    (["--constants", "CONTEXT_FACTOR=wide"], "is not a number"),
    (["--constants", "EXPLORE=0.5"], "would change nothing"),
    (["--constants", "MIN_WINDOW=4"], "would change nothing"),
    (["--graphs", "no such graph"], "names no graph"),
])
def test_bad_flags_are_one_line(flags, message):
  with pytest.raises(SystemExit, match=message):
    lns_window.main(flags)
