"""gplace.rl.metrics.read_curves: a run's curves from its metrics."""

import json

import numpy as np

from gplace.rl import metrics


def test_curves_count_samples_from_the_first_rl_step(tmp_path):
  records = [
      {"step": 1, "phase": "warm_start", "wall_s": 0.5},
      {"step": 2, "phase": "rl", "wall_s": 1.0, "mean_runtime_s": 3.0,
       "best_runtime_s": [None]},
      {"step": 3, "phase": "rl", "wall_s": 2.0, "mean_runtime_s": 2.5,
       "best_runtime_s": [2.0]},
      {"step": 3, "phase": metrics.GREEDY_PHASE,
       "greedy_runtime_s": [2.2]},
      {"step": 4, "phase": "rl", "mean_runtime_s": 2.0,
       "best_runtime_s": [1.5]},
      {"step": 4, "phase": metrics.GREEDY_PHASE,
       "greedy_runtime_s": [None]},
  ]
  with open(tmp_path / metrics.METRICS_FILE, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  curves = metrics.read_curves(str(tmp_path), 16)
  np.testing.assert_array_equal(curves.evaluations, [16, 32, 48])
  np.testing.assert_array_equal(curves.mean, [3.0, 2.5, 2.0])
  np.testing.assert_array_equal(curves.best, [np.nan, 2.0, 1.5])
  np.testing.assert_array_equal(curves.step_wall_s, [1.0, 2.0, np.nan])
  np.testing.assert_array_equal(curves.greedy[0], [32, 48])
  np.testing.assert_array_equal(curves.greedy[1], [2.2, np.nan])


def test_a_run_without_rl_steps_has_empty_curves(tmp_path):
  (tmp_path / metrics.METRICS_FILE).write_text("")
  curves = metrics.read_curves(str(tmp_path), 16)
  assert len(curves.evaluations) == len(curves.greedy[0]) == 0
