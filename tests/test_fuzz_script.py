"""experiments/fuzz.py (issue 47): its fast subset finds no raw exception,
silent acceptance, unclear message or hang at all (KNOWN is empty), and it
classifies every kind of outcome as it says."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "experiments" / "fuzz.py"
sys.path.insert(0, str(ROOT))
from experiments import fuzz  # pylint: disable=g-import-not-at-top,wrong-import-position
sys.path.remove(str(ROOT))

ENTRY_POINTS = {
    "capture", "simulate", "lower_bound", "place", "placed call", "measure",
    "profile", "optimize", "coarsen/expand", "baselines", "search",
    "solvers", "placers.get", "create_policy", "rl settings", "rl.train",
    "workloads", "graph_files", "Topology/Device", "plotting"}


def run_fuzz(tmp_path, *flags, timeout=300):
  out = tmp_path / "fuzz.json"
  result = subprocess.run(
      [sys.executable, str(SCRIPT), "--json", str(out), *flags],
      cwd=ROOT, capture_output=True, text=True, timeout=timeout,
      env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=False)
  records = json.loads(out.read_text()) if out.exists() else []
  return result, records


def test_the_fast_subset_finds_no_failure(tmp_path):
  assert not fuzz.KNOWN  # no failure is waiting for a fix elsewhere
  result, records = run_fuzz(tmp_path, "--fast", "--jobs", "1", "--timeout",
                             "60")
  failures = [f"{r['outcome']} {r['id']}: {r['message'][:200]}"
              for r in records if r["outcome"] in fuzz.FAILURES]
  assert not failures, "\n".join(failures)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
  assert len(records) >= 300
  assert {r["entry"] for r in records} == ENTRY_POINTS
  counts = {outcome: sum(r["outcome"] == outcome for r in records)
            for outcome in fuzz.OUTCOMES}
  assert counts["raw"] == counts["silent"] == counts["hang"] == 0
  assert counts["unclear"] == 0
  assert "| **all**" in result.stdout  # the summary table


def test_every_outcome_is_classified_as_documented(tmp_path):
  result, records = run_fuzz(tmp_path, "--self-test", "--timeout", "5")
  assert result.returncode == 1  # it has failures, by design
  outcome = {r["id"].split(":")[1]: r["outcome"] for r in records}
  assert outcome == {
      "clear": "clear", "accepted": "accepted", "unclear": "unclear",
      "raw": "raw", "silent": "silent", "silent_check": "silent",
      "hang": "hang", "crash": "raw", "after_crash": "accepted"}


def test_the_full_run_has_300_cases_over_every_entry_point():
  cases = fuzz.build_cases()
  assert len(cases) >= 300 and len({c.id for c in cases}) == len(cases)
  assert {c.entry for c in cases} == ENTRY_POINTS
  fast = fuzz.build_cases(fast=True)
  assert {c.id for c in fast} <= {c.id for c in cases}
  assert not any(c.slow for c in fast)
  assert set(fuzz.KNOWN) <= {c.id for c in cases}  # no stale entries


def test_a_readable_message_is_a_few_lines_without_dumps():
  assert fuzz.readable("gplace.place: mode 'x'; use 'cluster' or 'op'.") is None
  assert fuzz.readable("") == "empty message"
  assert fuzz.readable("x" * 2000) == "2000 characters"
  assert fuzz.readable("\n".join(["line"] * 20)) == "20 lines"
  assert "PyTreeDef" in fuzz.readable("got PyTreeDef((*, *))")
