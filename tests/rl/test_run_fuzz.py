"""Fuzzing experiments/run.py and the training config: every bad input is a
clear one-line error (a ConfigError, or exit status 2 for a misspelt
override), never a traceback; every output parses as strict JSON."""

import json
import math
import os
import subprocess
import sys

import hypothesis
from hypothesis import strategies as st
import pytest

import dataclasses

from experiments.run import check, check_override
from gplace.errors import ConfigError
from gplace.rl import metrics
from gplace.rl import settings as settings_lib
from test_settings import _set, tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def run_script(*flags, workdir):
  """``experiments/run.py`` on the quickstart config with ``flags``."""
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "experiments", "run.py"),
       "--config", os.path.join(ROOT, "experiments", "configs",
                                "quickstart.py"),
       "--workdir", str(workdir), *flags],
      cwd=ROOT, capture_output=True, text=True, timeout=120,
      env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=False)


@pytest.mark.parametrize("flag,expected", [
    ("--config.rl.num_sample=8",
     "--config.rl.num_sample: unknown field 'num_sample' in config.rl; did "
     "you mean --config.rl.num_samples?"),
    ("--config.trian.num_steps=5",
     "--config.trian.num_steps: unknown field 'trian' in the config; did you "
     "mean --config.train.num_steps?"),
])
def test_a_misspelt_override_is_one_line_and_exit_status_2(tmp_path, flag,
                                                           expected):
  result = run_script(flag, workdir=tmp_path)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [f"ConfigError: {expected}"]
  assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("flag,expected", [
    ("--config.policy.num_heads=0", "policy: num_heads=0 must be a positive "
                                    "integer"),
    ("--config.rl.ppo_epochs=0", "rl.ppo_epochs=0: must be a positive "
                                 "integer"),
    ("--config.rl.entropy_weight=nan", "rl.entropy_weight=nan: must "
                                       "be a finite number >= 0"),
])
def test_a_bad_value_is_a_config_error_before_any_work(tmp_path, flag,
                                                       expected):
  result = run_script(flag, workdir=tmp_path)
  assert result.returncode == 1
  assert f"ConfigError: {expected}" in result.stderr
  assert "Traceback" not in result.stdout + result.stderr
  assert not os.path.exists(tmp_path / "config.json")  # nothing started


def _config():
  config = tiny_config()
  config.workload = "random_dag:40:1"
  return config


ANY_VALUE = st.one_of(
    st.integers(-10, 10), st.integers(), st.floats(allow_nan=True,
                                                   allow_infinity=True),
    st.booleans(), st.none(), st.text(max_size=5))
def _numeric_fields():
  """Every declared int or real setting, by its config path, and the GO
  policy's integer hyperparameters."""
  paths = []
  settings = settings_lib.TrainSettings()
  for section in [settings] + [getattr(settings, f.name) for f in
                               dataclasses.fields(settings)
                               if dataclasses.is_dataclass(
                                   getattr(settings, f.name))]:
    prefix = f"{section.SECTION}." if section.SECTION else ""
    paths += [prefix + f.name for f in dataclasses.fields(section)
              if type(f.metadata.get("check")).__name__ in ("_Int", "_Real")]
  paths += [f"policy.{k}" for k, v in settings_lib.DEFAULT_POLICY.hparams
            .items() if isinstance(v, int)]
  return sorted(paths)


NUMERIC_FIELDS = _numeric_fields()


@hypothesis.settings(max_examples=150, deadline=None, database=None)
@hypothesis.given(path=st.sampled_from(NUMERIC_FIELDS), value=ANY_VALUE)
def test_any_value_of_any_numeric_field_passes_or_is_a_config_error(
    tmp_path_factory, path, value):
  config = _config()
  _set(config, path, value)
  del tmp_path_factory
  try:
    check(config, log=lambda _: None)
  except ConfigError as err:
    message = str(err)
    assert path in message or (path.startswith("policy.") and (
        path.split(".")[1] in message or "policy" in message))
    assert "\n" not in message
  else:  # accepted: then it is in range
    if isinstance(value, float):
      assert math.isfinite(value)


@hypothesis.settings(max_examples=100, deadline=None, database=None)
@hypothesis.given(path=st.lists(
    st.sampled_from(["rl", "train", "trian", "num_samples", "num_sample",
                     "seed", "policy", "x", "hidden_size", ""]),
    min_size=1, max_size=4).map(".".join))
def test_any_override_path_is_known_or_one_clear_line(path):
  try:
    check_override(_config(), path)
  except ConfigError as err:
    assert str(err).startswith(f"--config.{path}: ")
    assert "\n" not in str(err)


JSON_TREES = st.recursive(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(),
              st.booleans(), st.none(), st.text(max_size=3)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.text(max_size=3), children,
                                               max_size=3)),
    max_leaves=10)


def _reject_constant(name):
  raise ValueError(f"non-standard JSON constant {name}")


@hypothesis.settings(max_examples=100, deadline=None, database=None)
@hypothesis.given(tree=JSON_TREES)
def test_written_json_is_strict_whatever_the_numbers(tmp_path_factory, tree):
  path = os.path.join(tmp_path_factory.getbasetemp(), "fuzz.json")
  metrics.write_json(path, {"value": tree})
  with open(path) as f:
    json.loads(f.read(), parse_constant=_reject_constant)
