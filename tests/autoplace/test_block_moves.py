"""method="auto" searches with block moves (budget.BLOCK_SHARE), and
without them under memory pressure (budget.BLOCK_SHARE_UNDER_PRESSURE)."""

import pytest

import gplace
from gplace.autoplace import budget
from gplace.autoplace import candidates as candidates_lib
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset


@pytest.mark.parametrize("pressure, share", [
    (False, budget.BLOCK_SHARE),
    (True, budget.BLOCK_SHARE_UNDER_PRESSURE)])
def test_the_searches_move_blocks_unless_memory_is_tight(pressure, share,
                                                         monkeypatch):
  shares = []
  search_candidate = candidates_lib.search_candidate

  def recorded(*args, **kwargs):
    shares.append(kwargs["block_share"])
    return search_candidate(*args, **kwargs)

  monkeypatch.setattr(candidates_lib, "search_candidate", recorded)
  monkeypatch.setattr(budget, "memory_pressure",
                      lambda runs, share=None: pressure)
  result = gplace.optimize(random_dag(40, seed=2),
                           topology=preset("1cpu+2gpu"),
                           budget_s=10.0, progress=False, max_evaluations=256)
  assert shares and all(s == share for s in shares)
  assert any(k.startswith("annealing from") for k in result.candidates)
  assert budget.BLOCK_SHARE > 0 == budget.BLOCK_SHARE_UNDER_PRESSURE
