"""experiments/cross_platform.py: the per-leaf gap it reports."""

import numpy as np

from experiments import cross_platform


def test_leaf_gaps_relative_to_leaf_scale():
  a = {"w": np.array([1.0, -4.0], np.float32), "n": np.array([3], np.int32),
       "b": np.array([0.5], np.float32)}
  b = {"w": np.array([1.0, -3.9], np.float32), "n": np.array([3], np.int32),
       "b": np.array([0.5], np.float32)}
  gaps = {path: (gap, scale) for path, gap, scale
          in cross_platform.leaf_gaps(a, b)}
  assert set(gaps) == {"['b']", "['w']"}  # integer leaves are skipped
  assert gaps["['b']"] == (0.0, 0.5)
  np.testing.assert_allclose(gaps["['w']"][0], 0.1 / 4.0, rtol=1e-5)
  assert gaps["['w']"][1] == 4.0
