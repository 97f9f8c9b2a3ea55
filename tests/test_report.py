"""gplace.report: cells, curve read-outs and a study's output folder."""

import ast
import pathlib
import sys
import typing

import numpy as np
import pytest

from gplace import report
from gplace.errors import GplaceError, WorkloadError


def test_percent_change_and_its_dash():
  assert report.percent_change(1.1, 1.0) == "+10.0%"
  assert report.percent_change(0.5, 2.0, 2) == "-75.00%"
  for value, reference in ((np.inf, 1.0), (1.0, np.nan), (1.0, 0.0)):
    assert report.percent_change(value, reference) == "–"


def test_mean_change_gives_the_range_of_several_values():
  assert report.mean_change([1.1], 1.0) == "+10.0%"
  assert report.mean_change([1.1], 1.0, always_range=True) == (
      "+10.0% [+10.0, +10.0]")
  assert report.mean_change(np.array([0.9, 1.3]), 1.0) == (
      "+10.0% [-10.0, +30.0]")


def test_checkpoints_and_best_so_far_by_a_budget():
  assert report.checkpoints(1000) == []
  assert report.checkpoints(12800) == [1000, 10000]
  assert report.checkpoints(102400) == [1000, 10000, 100000]
  evaluations = [64, 640, 1280, 12800]
  best = [float("nan"), 3.0, 2.0, 1.0]
  assert report.best_by(evaluations, best, 1000) == 3.0
  assert report.best_by(evaluations, best, 10000) == 2.0
  assert report.best_by(evaluations, best, 12800) == 1.0
  assert report.best_by(evaluations, best, 63) != (
      report.best_by(evaluations, best, 63))  # NaN: no point yet
  # The greedy curve is not best-so-far: its last point counts.
  assert report.value_at(evaluations, [5.0, 3.0, 4.0, 1.0], 10000) == 4.0


def test_first_within_skips_nans_and_reports_none():
  values = [np.nan, 1.5, 1.03, 1.0]
  assert report.first_within(values, 1.0, 0.05) == 2
  assert report.first_within(values, 0.5, 0.05) == -1


def test_no_folder_no_study():
  assert report.Study.create(None, __file__) is None
  assert report.Study.create("", __file__) is None


def test_a_study_readme_says_what_ran_where_and_holds_the_table(tmp_path):
  out = tmp_path / "results" / "my_study"
  study = report.Study.create(str(out), "experiments/my_study.py",
                              ["--size", "tiny", "--out", str(out)])
  out.mkdir(parents=True)
  (out / "curve.png").write_bytes(b"")
  path = study.write(["| a | b |", "|---|---:|", "| x | 1 |"])
  assert path == str(out / "README.md")
  text = (out / "README.md").read_text()
  lines = text.splitlines()
  assert lines[0] == "# my_study"
  assert f"- command: `python experiments/my_study.py --size tiny --out " \
         f"{out}`" in lines
  header = "\n".join(lines[:10])
  for what in ("- date: started ", " UTC, written ", "cores", "usable",
               "load average", "jax ", "devices: ", "- code: ",
               "- files here: curve.png"):
    assert what in header, what
  # The study's own lines come last, unchanged.
  assert lines[-3:] == ["| a | b |", "|---|---:|", "| x | 1 |"]
  # Written again: the same file, the new lines.
  study.write(["| y | 2 |"])
  assert (out / "README.md").read_text().splitlines()[-1] == "| y | 2 |"


def test_the_command_quotes_what_the_shell_would_split(tmp_path):
  command = report.command_line("experiments/s.py", ["--workloads", "a,b c"])
  assert command == "python experiments/s.py --workloads 'a,b c'"


def test_table_per_workload_skips_only_what_it_is_told(tmp_path, capsys):
  def rows(workload):
    if workload == "bad":
      raise WorkloadError("Unknown workload 'bad'\nmore")
    return [f"| {workload} | 1 |"]

  study = report.Study(str(tmp_path / "s"), "python s.py")
  lines = report.table_per_workload("a,bad,,b", rows, ["header"], study,
                                    skip=(GplaceError,))
  assert lines == ["header", "| a | 1 |",
                   "| bad | – | skipped: WorkloadError: Unknown workload "
                   "'bad' |", "| b | 1 |"]
  assert capsys.readouterr().out.splitlines() == lines[1:]
  assert (tmp_path / "s" / "README.md").read_text().splitlines()[-4:] == lines
  with pytest.raises(WorkloadError):
    report.table_per_workload("bad", rows, [])


def test_table_per_workload_takes_named_items(capsys):
  class Spec(typing.NamedTuple):
    name: str

  def rows(spec):
    if spec.name == "bad":
      raise WorkloadError("no such graph")
    return [f"| {spec.name} | 2 |"]

  lines = report.table_per_workload([Spec("a"), Spec("bad")], rows, [],
                                    skip=(GplaceError,))
  assert lines == ["| a | 2 |",
                   "| bad | – | skipped: WorkloadError: no such graph |"]
  assert capsys.readouterr().out.splitlines() == lines


def test_finish_prints_the_end_and_writes_the_readme(tmp_path, capsys):
  study = report.Study(str(tmp_path / "s"), "python s.py")
  report.finish(["| a | 1 |"], study)
  end = capsys.readouterr().out.strip()
  assert end.startswith("Load average at the end: ")
  assert (tmp_path / "s" / "README.md").read_text().splitlines()[-3:] == [
      "| a | 1 |", "", end]
  report.finish(["x"])                        # no study: prints only
  assert capsys.readouterr().out.startswith("Load average at the end")


def test_the_module_is_a_leaf():
  # numpy and the standard library only: no upper layer of gplace.
  source = pathlib.Path(report.__file__).read_text()
  modules = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      modules |= {alias.name.split(".")[0] for alias in node.names}
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      modules.add(node.module.split(".")[0])
  assert modules - {"__future__", "numpy"} <= set(sys.stdlib_module_names)


def test_a_study_names_the_code_it_started_with(tmp_path, monkeypatch):
  monkeypatch.setattr(report, "_code_version", lambda: "git aaaaaaa")
  study = report.Study.create(str(tmp_path / "s"), "experiments/s.py", [])
  study.write([])
  assert "- code: git aaaaaaa" in (tmp_path / "s" / "README.md").read_text()
  # A commit made while the study ran: the README names the one that ran.
  monkeypatch.setattr(report, "_code_version", lambda: "git bbbbbbb")
  study.write([])
  text = (tmp_path / "s" / "README.md").read_text()
  assert ("- code: git aaaaaaa at the start (git bbbbbbb when written)"
          in text)


def test_the_load_average_is_three_numbers_or_unknown(monkeypatch):
  loads = [float(x) for x in report.load_average(", ").split(", ")]
  assert len(loads) == 3 and min(loads) >= 0

  def missing():
    raise OSError("no load average here")

  monkeypatch.setattr(report.os, "getloadavg", missing)
  assert report.load_average() == "unknown"


def test_format_seconds_picks_the_unit_and_names_infeasible():
  assert report.format_seconds(2.5) == "2.5 s"
  assert report.format_seconds(0.0012345) == "1.234 ms"
  assert report.format_seconds(3e-6) == "3 µs"
  assert report.format_seconds(0.0) == "0 µs"
  assert report.format_seconds(float("inf")) == "infeasible"
