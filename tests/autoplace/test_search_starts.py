"""Where optimize's placement search starts (candidates.search_starts)."""

import numpy as np

from gplace.autoplace.candidates import Candidate, search_starts


def _candidate(label, runtime_s, order=None):
  return Candidate(label, np.zeros(4, np.int32), order, runtime_s)


def test_a_baseline_start_is_searched_alone():
  default = [_candidate("heft", 2.0), _candidate("metis", 3.0)]
  tried = default + [_candidate("pretrained GO zero-shot: greedy", 2.5)]
  assert [c.label for c in search_starts(default, tried)] == ["heft"]


def test_a_learned_start_is_searched_beside_the_best_baseline():
  default = [_candidate("heft", 2.0), _candidate("metis", 3.0)]
  policy = _candidate("pretrained GO zero-shot: best of 16 samples", 1.9)
  starts = search_starts(default, default + [policy])
  assert [c.label for c in starts] == [policy.label, "heft"]


def test_a_start_in_its_own_order_is_not_a_placement_start():
  default = [_candidate("heft", 2.0)]
  own = _candidate("heft (own plan)", 1.0, order=np.arange(4))
  assert [c.label for c in search_starts(default, default + [own])] == ["heft"]


def test_no_feasible_start_falls_back_to_the_first_baseline():
  default = [_candidate("heft", np.inf), _candidate("metis", np.inf)]
  assert [c.label for c in search_starts(default, default)] == ["heft"]
