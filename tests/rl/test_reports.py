"""Tests of gplace.rl.reports, gplace.rl.run_outputs, gplace.rl.metrics and
gplace.rl.best_placement_file: metrics files, best placements, tables."""

import json
import os
import warnings
from typing import NamedTuple

import numpy as np
import pytest

from gplace.errors import PlacementError, TopologyError
from gplace.graphs import fusion_decisions
from gplace.graphs.graph import random_dag
from gplace.rl import best_placement_file
from gplace.rl import metrics as metrics_lib
from gplace.rl import reports
from gplace.rl import run_outputs
from gplace.sim import presets


class Summary(NamedTuple):
  name: str
  graph: object
  baseline_runtime_s: dict
  lower_bound_s: float


def _summary(n=4, name="g", bound=1e-3):
  return Summary(name, random_dag(n, seed=0, name=name),
                 {"slow": 4e-3, "fast": 2e-3, "oom": float("inf")}, bound)


def test_format_table_rows_and_gaps():
  table = reports.format_table(_summary(), 1.5e-3).splitlines()
  assert table[0] == "g (4 nodes; runtimes simulated)"
  measured = reports.format_table(_summary(), 1.5e-3, runtimes="measured")
  assert measured.splitlines()[0] == "g (4 nodes; runtimes measured)"
  assert table[1].split() == ["placement", "runtime", "(ms)", "gap", "to",
                              "bound"]
  assert table[-2] == f"  ({reports.BEST_FOUND_NOTE})"
  assert table[-1] == f"  ({reports.BOUND_NOTE})"
  rows = [line.split() for line in table[2:-2]]
  # Learned first, then baselines fastest first, OOM, the bound last.
  assert [r[0] for r in rows] == ["gplace", "fast", "slow", "oom", "lower"]
  assert rows[0][-2:] == ["1.5000", "50.0%"]
  assert rows[1][-2:] == ["2.0000", "100.0%"]
  assert rows[3][-1] == "OOM/failed"
  assert rows[4][-2:] == ["1.0000", "0.0%"]
  # Measured runtimes have no bound: no gap, no bound row.
  no_bound = reports.format_table(_summary(bound=float("nan")), 1.5e-3)
  assert "n/a" in no_bound and "lower bound" not in no_bound


class PlannedSummary(NamedTuple):
  name: str
  graph: object
  baseline_runtime_s: dict
  lower_bound_s: float
  planned_runtime_s: dict


def test_tables_list_list_schedulers_in_their_own_plan_and_pick_the_best():
  summary = PlannedSummary("g", random_dag(4, seed=0, name="g"),
                           {"heft": 2e-3, "metis": 1.9e-3}, 1e-3,
                           {"heft": 1.8e-3})
  assert reports.best_classical(summary) == ("heft (own plan)", 1.8e-3)
  assert reports.best_classical(_summary()) == ("fast", 2e-3)
  rows = [line.split() for line in
          reports.format_table(summary, 1.5e-3).splitlines()[2:-2]]
  assert [r[0] for r in rows] == ["gplace", "heft", "metis", "heft", "lower"]
  assert rows[1][:3] == ["heft", "(own", "plan)"]
  (table,) = reports.result_tables([summary], [1.5e-3])
  assert table["heft (own plan)"] == 1.8e-3 and table["heft"] == 2e-3


def test_chunk_records_number_steps_and_interpolate_time():
  metrics = {"loss": np.array([1.0, 2.0]),
             "best_runtime_s": np.array([[1.0, 2.0], [0.5, 2.0]])}
  records = metrics_lib.chunk_records(4, "rl", metrics, start_s=10.0,
                                      elapsed_s=2.0)
  assert [r["step"] for r in records] == [5, 6]
  assert [r["wall_s"] for r in records] == [11.0, 12.0]
  assert records[1]["best_runtime_s"] == [0.5, 2.0]
  assert records[0]["loss"] == 1.0 and records[0]["phase"] == "rl"
  json.dumps(records)  # plain Python values only


def test_metrics_writer_trims_lines_after_the_resumed_step(tmp_path):
  path = str(tmp_path / metrics_lib.METRICS_FILE)
  with metrics_lib.MetricsWriter(path) as writer:
    writer.write([{"step": s, "phase": "rl"} for s in (1, 2, 3, 4)])
  with metrics_lib.MetricsWriter(path, resume_step=2) as writer:
    assert [r["step"] for r in metrics_lib.read_metrics(path)] == [1, 2]
    writer.write([{"step": 3, "phase": "rl"}])
  assert [r["step"] for r in metrics_lib.read_metrics(path)] == [1, 2, 3]
  # A fresh run (step 0) starts an empty file.
  metrics_lib.MetricsWriter(path).close()
  assert metrics_lib.read_metrics(path) == []


def test_best_placement_json_content_and_rewrites(tmp_path):
  topology = presets.preset("1cpu+2gpu")
  graphs = [_summary(4, "a"), _summary(3, "b")]
  path = str(tmp_path / best_placement_file.BEST_PLACEMENT_FILE)
  writer = best_placement_file.BestPlacementWriter(path, graphs, topology,
                                           np.array([1.0, 1.0]))
  placement = np.array([[0, 1, 2, 1, 0], [2, 2, 0, 0, 0]])
  writer.update(3, placement, np.array([1.0, 1.0]))
  assert not os.path.exists(path)  # nothing improved
  writer.update(4, placement, np.array([0.5, 1.0]))
  with open(path) as f:
    best = json.load(f)
  assert best["step"] == 4 and best["topology"] == "1cpu+2gpu"
  assert best["device_names"] == ["cpu:0", "gpu:0", "gpu:1"]
  assert [g["workload"] for g in best["graphs"]] == ["a", "b"]
  assert best["graphs"][0]["runtime_s"] == 0.5
  a_nodes = best["graphs"][0]["placement"]
  assert len(a_nodes) == 4  # padding nodes are cut
  assert a_nodes[2] == {"node": 2, "name": str(graphs[0].graph.names[2]),
                        "device": "gpu:1"}
  assert [n["device"] for n in best["graphs"][1]["placement"]] == [
      "gpu:1", "gpu:1", "cpu:0"]
  writer.update(5, placement, np.array([0.5, 1.0]))
  with open(path) as f:
    assert json.load(f)["step"] == 4  # no improvement, no rewrite
  writer.update(6, placement, np.array([0.5, 1.0]), force=True)
  with open(path) as f:
    best = json.load(f)
  assert best["step"] == 6
  # gplace.simulate's default schedule (it was mislabelled "dynamic").
  assert {g["schedule"] for g in best["graphs"]} == {"best"}
  assert {g["source"] for g in best["graphs"]} == {"training samples"}
  assert [g["found_at_step"] for g in best["graphs"]] == [4, 4]
  assert "order" not in best["graphs"][0]
  # An ordering policy's best: its order (padding cut), by priority.
  priority = np.array([[-2.0, 0.0, -1.0, -3.0, -9.0],
                       [-1.0, -2.0, 0.0, -3.0, -3.0]])
  writer.update(7, placement, np.array([0.5, 1.0]), force=True,
                best_priority=priority)
  with open(path) as f:
    best = json.load(f)
  assert [g["order"] for g in best["graphs"]] == [[1, 2, 0, 3], [2, 0, 1]]
  assert {g["schedule"] for g in best["graphs"]} == {
      "dynamic: order as priority"}


def test_best_placement_json_round_trip_with_fusion_and_order(tmp_path):
  topology = presets.preset("1cpu+2gpu")
  summary = _summary(6, "a")
  path = str(tmp_path / best_placement_file.BEST_PLACEMENT_FILE)
  writer = best_placement_file.BestPlacementWriter(path, [summary], topology,
                                                   np.array([np.inf]))
  placement = np.array([[1, 1, 1, 1, 1, 1, 0]])       # one padding node
  choices = np.ones((1, 7), np.int32)                 # every node fuses
  priority = -np.arange(7, dtype=np.float32)[None]
  writer.update(2, placement, np.array([0.25]), best_priority=priority,
                best_fusion=choices)
  saved = best_placement_file.read_best_placement(
      path, "a", topology.device_names)
  labels = fusion_decisions.decision_labels(summary.graph, placement[0, :6],
                                            choices[0, :6])
  assert (labels >= 0).any()                          # something fused
  np.testing.assert_array_equal(saved.placement, placement[0, :6])
  np.testing.assert_array_equal(saved.fusion, labels)
  np.testing.assert_array_equal(saved.order, np.arange(6))
  assert saved.runtime_s == 0.25 and saved.workload == "a"
  assert saved.schedule == best_placement_file.OWN_SCHEDULE
  # The end-of-run record keeps a winner's fusion too.
  writer.write_best_of_run(3, [best_placement_file.FoundPlacement(
      "policy greedy", placement[0, :6], 0.2, fusion=labels)])
  again = best_placement_file.read_best_placement(path)
  np.testing.assert_array_equal(again.fusion, labels)
  assert again.order is None and again.source == "policy greedy"


def test_best_placement_json_without_fusion_still_loads(tmp_path):
  topology = presets.preset("1cpu+2gpu")
  path = tmp_path / best_placement_file.BEST_PLACEMENT_FILE
  # A file as runs wrote it before fusion (and order) were recorded.
  path.write_text(json.dumps({
      "step": 4, "device_names": topology.device_names, "graphs": [
          {"workload": "a", "runtime_s": None, "placement": [
              {"node": 0, "device": "gpu:1"}, {"node": 1,
                                               "device": "cpu:0"}]}]}))
  saved = best_placement_file.read_best_placement(str(path), "a")
  np.testing.assert_array_equal(saved.placement, [2, 0])
  assert saved.fusion is None and saved.order is None
  assert saved.runtime_s == float("inf")
  with pytest.raises(PlacementError, match="no placement of 'b'"):
    best_placement_file.read_best_placement(str(path), "b")
  with pytest.raises(TopologyError, match="--topology"):
    best_placement_file.read_best_placement(str(path), "a", ["cpu:0"])
  with pytest.raises(PlacementError, match="not a readable"):
    best_placement_file.read_best_placement(str(tmp_path / "missing.json"))


def test_progress_postfix_by_phase():
  rl = run_outputs.progress_postfix(4, 2.0, [1e-3, 3e-3],
                                    {"phase": "rl", "mean_runtime_s": 5e-3,
                                     "entropy": 0.25})
  assert rl == {"best_ms": "2", "steps/s": "2.00", "mean_ms": "5",
                "entropy": "0.250"}
  warm = run_outputs.progress_postfix(2, 1.0, [1e-3],
                                      {"phase": "warm_start",
                                       "accuracy": 0.5})
  assert warm["accuracy"] == "0.500" and "entropy" not in warm


def test_final_report_writes_results_and_curve(tmp_path):
  workdir = str(tmp_path)
  with metrics_lib.MetricsWriter(os.path.join(
      workdir, metrics_lib.METRICS_FILE)) as writer:
    writer.write([{"step": 1, "phase": "warm_start", "accuracy": 0.5}] + [
        {"step": s, "phase": "rl", "mean_runtime_s": 3e-3,
         "best_runtime_s": [2e-3]} for s in (2, 3)])
  lines = []
  tables = run_outputs.write_final_report(
      workdir, [_summary()], [1.5e-3], ["g"],
      presets.preset("1cpu+2gpu"), log=lines.append)
  assert tables == [{"slow": 4e-3, "fast": 2e-3, "oom": float("inf"),
                     "gplace": 1.5e-3, "lower_bound": 1e-3}]
  with open(os.path.join(workdir, run_outputs.RESULTS_FILE)) as f:
    results = json.load(f)
  assert results["tables"][0]["oom"] is None  # inf is not JSON
  assert results["workloads"] == ["g"]
  assert results["topology"] == "1cpu+2gpu"
  assert os.path.getsize(os.path.join(workdir, run_outputs.CURVE_FILE)) > 0
  assert len(lines) == 1 and lines[0].startswith(
      "g (4 nodes; runtimes simulated on 1cpu+2gpu)")


def _reject_constant(name):
  raise ValueError(f"non-standard JSON constant {name}")


def strict_load(text):
  """json.loads that rejects Infinity, -Infinity and NaN."""
  return json.loads(text, parse_constant=_reject_constant)


def test_outputs_are_strict_json_with_null_for_non_finite(tmp_path):
  workdir = str(tmp_path)
  inf, nan = float("inf"), float("nan")
  metrics_path = os.path.join(workdir, metrics_lib.METRICS_FILE)
  with metrics_lib.MetricsWriter(metrics_path) as writer:
    writer.write(metrics_lib.chunk_records(
        0, "rl", {"mean_runtime_s": np.array([inf, 3e-3], np.float32),
                  "best_runtime_s": np.array([[inf], [nan]], np.float32)},
        start_s=0.0, elapsed_s=1.0))
  with open(metrics_path) as f:
    lines = [strict_load(line) for line in f]
  assert lines[0]["mean_runtime_s"] is None
  assert lines[0]["best_runtime_s"] == [None] and lines[1]["best_runtime_s"] \
      == [None]
  topology = presets.preset("1cpu+2gpu")
  all_oom = Summary("g", random_dag(4, seed=0, name="g"),
                    {"a": inf, "b": inf}, nan)
  best_path = os.path.join(workdir, best_placement_file.BEST_PLACEMENT_FILE)
  best_placement_file.BestPlacementWriter(best_path, [all_oom], topology,
                                  np.array([inf])).write(
                                      2, np.zeros((1, 4), np.int32),
                                      np.array([inf], np.float32))
  with open(best_path) as f:
    assert strict_load(f.read())["graphs"][0]["runtime_s"] is None
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # no All-NaN / log-scale warnings
    run_outputs.write_final_report(workdir, [all_oom], [inf], ["g"],
                                   topology, step=2)
  with open(os.path.join(workdir, run_outputs.RESULTS_FILE)) as f:
    results = strict_load(f.read())
  assert results["tables"] == [{"a": None, "b": None, "gplace": None,
                                "lower_bound": None}]
  assert results["step"] == 2 and results["finished"] is True
  metrics_lib.write_json(os.path.join(workdir, "x.json"),
                         {"v": [np.float32(inf)]})
  with open(os.path.join(workdir, "x.json")) as f:
    assert strict_load(f.read()) == {"v": [None]}


def test_results_at_every_checkpoint_and_a_fresh_start(tmp_path):
  workdir = str(tmp_path)
  topology = presets.preset("1cpu+2gpu")
  (tmp_path / run_outputs.RESULTS_FILE).write_text("{\"stale\": true}")
  (tmp_path / run_outputs.CURVE_FILE).write_bytes(b"stale")
  with run_outputs.RunOutputs(workdir, [_summary()], topology, [2e-3],
                              total_steps=4, first_step=0,
                              progress_bar=False) as outputs:
    # Not this run's:
    assert not (tmp_path / run_outputs.RESULTS_FILE).exists()
    assert not (tmp_path / run_outputs.CURVE_FILE).exists()

    class State(NamedTuple):
      best_placement: np.ndarray
      best_runtime_s: np.ndarray

    state = State(np.zeros((1, 4), np.int32), np.array([1.5e-3]))
    outputs.after_chunk(0, "rl", {"mean_runtime_s": np.array([3e-3, 2e-3]),
                                  "entropy": np.array([1.0, 0.9]),
                                  "best_runtime_s": np.array([[2e-3],
                                                              [1.5e-3]])},
                        state, start_s=0.0, elapsed_s=1.0)
    outputs.at_checkpoint(2, state)
  with open(tmp_path / run_outputs.RESULTS_FILE) as f:
    results = json.load(f)
  assert results["step"] == 2 and results["finished"] is False
  assert results["tables"][0]["gplace"] == 1.5e-3
  assert (tmp_path / run_outputs.CURVE_FILE).stat().st_size > 0
  lines = run_outputs.output_lines(workdir)
  assert [line.split()[-1] for line in lines] == [
      os.path.join(workdir, name) for name in (
          best_placement_file.BEST_PLACEMENT_FILE, metrics_lib.METRICS_FILE,
          run_outputs.RESULTS_FILE, run_outputs.CURVE_FILE)]


def test_a_half_written_metrics_line_is_dropped_on_resume(tmp_path):
  path = str(tmp_path / metrics_lib.METRICS_FILE)
  with metrics_lib.MetricsWriter(path) as writer:
    writer.write([{"step": 1, "phase": "rl"}, {"step": 2, "phase": "rl"}])
  with open(path, "a") as f:
    f.write('{"step": 3, "pha')  # killed while writing
  assert [r["step"] for r in metrics_lib.read_metrics(path)] == [1, 2]
  with metrics_lib.MetricsWriter(path, resume_step=2) as writer:
    writer.write([{"step": 3, "phase": "rl"}])
  assert [r["step"] for r in metrics_lib.read_metrics(path)] == [1, 2, 3]


def test_a_damaged_metrics_line_before_the_checkpoint_is_reported(tmp_path):
  # External damage: step 3's line torn, step 2's garbled, step 1 written
  # twice. The resumed file says what is lost instead of dropping it.
  path = str(tmp_path / metrics_lib.METRICS_FILE)
  with metrics_lib.MetricsWriter(path) as writer:
    writer.write([{"step": s, "phase": "rl", "loss": float(s)}
                  for s in (1, 1, 2, 3, 4)])
    writer.write([{"step": 4, "phase": "greedy", "greedy_runtime_s": [1.0]}])
  lines = open(path).read().splitlines()
  lines[2] = "#garbage"
  lines[3] = lines[3][:12]
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  log = []
  with metrics_lib.MetricsWriter(path, resume_step=4, log=log.append):
    pass
  text = "\n".join(log)
  assert f"{path}: line 3 is damaged (not a JSON record: '#garbage')" in text
  assert "line 4 is damaged" in text and "it held step 3" in text
  assert "step 1 recorded more than once" in text
  assert "the records of steps 2-3 are lost (resuming from step 4)" in text
  records = metrics_lib.read_metrics(path)
  assert [(r["step"], r["phase"]) for r in records] == [
      (1, "rl"), (2, "missing"), (3, "missing"), (4, "rl"), (4, "greedy")]
  assert "damaged" in records[1]["lost"]
  # A torn line past the checkpoint loses nothing (that step runs again).
  with open(path, "a") as f:
    f.write('{"step": 5, "pha')
  log.clear()
  metrics_lib.MetricsWriter(path, resume_step=4, log=log.append).close()
  assert log == [] and len(metrics_lib.read_metrics(path)) == 5
