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
