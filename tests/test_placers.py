"""Tests of gplace.placers: one registry of every non-learned placer."""

import pytest

from gplace import baselines, placers, search, solvers
from gplace.errors import BaselineError


def test_names_by_kind_in_a_fixed_order():
  assert placers.names(placers.BASELINE) == baselines.names()
  assert placers.names(placers.SEARCH) == [
      "local_search", "annealing", "genetic"]
  assert placers.names(placers.SOLVER) == ["exact", "lns"]
  assert placers.names() == (baselines.names() + list(search.PLACERS)
                             + ["exact", "lns"])
  assert set(placers.KINDS) == {"baseline", "search", "solver"}


def test_get_finds_every_placer_and_its_kind():
  for name in baselines.names():
    assert placers.get(name) is baselines.get(name)
    assert placers.kind_of(name) == placers.BASELINE
  for name, placer in search.PLACERS.items():
    assert placers.get(name) is placer
    assert placers.kind_of(name) == placers.SEARCH
  assert placers.get("exact") is solvers.exact
  assert placers.kind_of("exact") == placers.SOLVER
  assert placers.get("lns") is solvers.lns_placer
  assert placers.kind_of("lns") == placers.SOLVER


@pytest.mark.parametrize("name", ["nope", "M_ETF", "", 3, None, ["m_etf"]])
def test_unknown_names_list_every_placer(name):
  for lookup in (placers.get, placers.kind_of):
    with pytest.raises(BaselineError) as info:
      lookup(name)
    message = str(info.value)
    assert repr(name) in message
    for known in ("m_etf", "single_device", "annealing", "exact"):
      assert known in message


def test_an_unknown_kind_is_a_baseline_error():
  with pytest.raises(BaselineError, match="baseline"):
    placers.names("learned")
