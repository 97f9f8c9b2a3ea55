"""Tests of the ``gplace`` package itself: lazy subpackages and old paths."""

import importlib

import pytest

import gplace


def test_lazy_subpackages_load_on_first_use():
  for name in ("autoplace", "baselines", "workloads", "policies", "rl",
               "search", "solvers", "placers", "plotting"):
    module = getattr(gplace, name)
    assert module is importlib.import_module(f"gplace.{name}")


def test_optimize_and_its_result_load_with_autoplace():
  assert {"optimize", "PlacementResult"} <= set(dir(gplace))
  from gplace import optimize, PlacementResult  # pylint: disable=g-import-not-at-top
  assert optimize is importlib.import_module("gplace.autoplace").optimize
  assert gplace.PlacementResult is PlacementResult


def test_dir_lists_each_name_once_after_lazy_loads():
  before = dir(gplace)
  assert "baselines" in before and "simulate" in before
  _ = gplace.policies, gplace.rl          # now in the module's globals too
  after = dir(gplace)
  assert len(after) == len(set(after))
  assert set(before) <= set(after)


def test_old_module_paths_still_resolve():
  assert gplace.layers is importlib.import_module("gplace.policies.layers")
  assert importlib.import_module("gplace.graph").Graph is gplace.Graph
  assert importlib.import_module("gplace.topology").Topology is (
      gplace.Topology)


def test_an_unknown_attribute_is_an_attribute_error():
  with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
    _ = gplace.nonexistent
