"""Tests of gplace.errors: one hierarchy, one-line causes."""

import inspect

import pytest

from gplace import errors


def test_every_error_is_a_gplace_error_defined_in_errors():
  classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
             if issubclass(c, Exception)]
  assert len(classes) >= 15
  for cls in classes:
    assert issubclass(cls, errors.GplaceError), cls
    assert cls.__module__ == "gplace.errors"
    assert cls.__doc__, cls


def test_specific_errors_are_caught_by_their_parents():
  with pytest.raises(errors.ExecutionError):
    raise errors.BuildError("no")
  with pytest.raises(errors.PlacementError):
    raise errors.ScheduleError("no")


def test_first_line_quotes_type_and_first_line():
  assert errors.first_line(ValueError("bad\nmore")) == "ValueError: bad"
  assert errors.first_line(KeyError()) == "KeyError: "


def test_or_exit_names_a_gplace_error_in_one_line():
  def bad(name, *, more):
    raise errors.WorkloadError(f"no graph {name!r} ({more})\nhow to fix it")

  assert errors.or_exit(lambda x, *, y: x + y, 1, y=2) == 3
  with pytest.raises(SystemExit, match=r"^WorkloadError: no graph 'g' \(m\)$"):
    errors.or_exit(bad, "g", more="m")
  with pytest.raises(ValueError):     # only gplace's own errors
    errors.or_exit(int, "x")
