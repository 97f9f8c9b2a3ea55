"""experiments/group_ceiling.py: plans projected onto the policy's groups, and
searches around a given placement."""

import json

import numpy as np
import pytest

import gplace
from experiments import group_ceiling
from gplace import baselines
from gplace.errors import GplaceError
from gplace.graphs.graph import random_dag
from gplace.rl.grouping import coarsen_for_policy
from gplace.sim.presets import preset


def test_group_majority_moves_each_group_to_its_most_common_device():
  graph = random_dag(40, seed=1)
  groups = coarsen_for_policy(graph, max_groups=6, rule="colocation",
                              min_nodes=0)
  group_of = np.asarray(groups.group_of)
  placement = np.random.default_rng(0).integers(0, 5, graph.n_nodes)
  moved = group_ceiling.group_majority(placement, groups, 5)
  for g in range(groups.n_groups):
    votes = np.bincount(placement[group_of == g], minlength=5)
    # One device per group: the most common one, the lowest on ties.
    assert set(moved[group_of == g]) == {int(np.argmax(votes))}


def test_rows_project_plans_and_searches_never_lose(tmp_path):
  dag = "random_dag:60:3"  # the workload name of this graph
  graph = random_dag(60, seed=3)
  topology = preset("1cpu+4gpu")
  start = np.asarray(baselines.get("m_etf")(graph, topology), np.int32)
  path = tmp_path / "best_placement.json"
  path.write_text(json.dumps({
      "device_names": topology.device_names,
      "graphs": [{"workload": dag, "placement": [
          {"node": i, "device": topology.device_names[d]}
          for i, d in enumerate(start)]}]}))
  out = tmp_path / "ceiling"
  assert group_ceiling.main([
      "--workloads", dag, "--max_groups", "8", "--budget", "40",
      "--placement", f"{dag}={path}", "--out", str(out)]) == 0
  rows = [line.split("|") for line in (out / "README.md").read_text()
          .splitlines() if line.startswith(f"| {dag} ")]
  ms = {r[3].strip(): float(r[4]) for r in rows}
  groups = coarsen_for_policy(graph, max_groups=8, rule="colocation",
                              min_nodes=0)
  projected = group_ceiling.group_majority(
      baselines.plan("heft", graph, topology).placement, groups,
      topology.n_devices)
  np.testing.assert_allclose(
      ms["heft: groups at its majority device"],
      float(gplace.simulate(graph, projected[None], topology).runtime_s[0])
      * 1e3, rtol=1e-3)
  given = ms["given placement"]
  searched = [v for k, v in ms.items() if k.startswith("search:")]
  assert len(searched) == 4 and all(v <= given + 1e-9 for v in searched)


def test_a_placement_of_another_topology_is_refused(tmp_path):
  path = tmp_path / "best_placement.json"
  path.write_text(json.dumps({"device_names": ["cpu:0"], "graphs": []}))
  with pytest.raises(GplaceError, match="--topology"):
    group_ceiling.read_placement(str(path), "dag",
                                 preset("1cpu+4gpu").device_names)
