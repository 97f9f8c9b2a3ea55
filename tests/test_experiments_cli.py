"""The experiment scripts' command lines: run.py fails with one clear line
(no absl usage text) and a nonzero status; every other script parses its
flags with argparse, each flag with help."""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
# Scripts with a command line; run.py parses ml_collections config flags
# with absl, the others use argparse.
SCRIPTS = sorted(p.name for p in EXPERIMENTS.glob("*.py")
                 if "__main__" in p.read_text() and p.name != "run.py")


def run_script(*flags, workdir):
  return subprocess.run(
      [sys.executable, str(EXPERIMENTS / "run.py"),
       "--config", str(EXPERIMENTS / "configs" / "quickstart.py"),
       "--workdir", str(workdir), *flags],
      cwd=ROOT, capture_output=True, text=True, timeout=300,
      env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=False)


def test_a_gplace_error_is_one_line_without_usage_text(tmp_path):
  result = run_script("--config.workload=no_such_model", workdir=tmp_path)
  assert result.returncode == 1
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr
  assert lines[0].startswith("ConfigError: Unknown workload 'no_such_model'")
  output = result.stdout + result.stderr
  for usage in ("USAGE", "flags:", "--helpfull", "Traceback"):
    assert usage not in output, usage


def test_positional_arguments_are_refused_in_one_line(tmp_path):
  result = run_script("extra", workdir=tmp_path)
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and "no positional arguments" in lines[0]


def test_a_missing_config_file_is_one_line(tmp_path):
  # It was ml_collections' two chained tracebacks.
  result = subprocess.run(
      [sys.executable, str(EXPERIMENTS / "run.py"), "--config",
       str(tmp_path / "no_such_config.py"), "--workdir", str(tmp_path)],
      cwd=ROOT, capture_output=True, text=True, timeout=300,
      env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=False)
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "ConfigError: --config cannot be loaded ([Errno 2] No such file"), lines
  assert "no_such_config.py" in lines[0]


@pytest.mark.parametrize("name,source,expected", [
    # Were a SyntaxError / NameError traceback, "Bad --config override:
    # AttributeError(...)", a TypeError traceback, absl's FATAL line.
    ("notes.txt", "hello world\n", "notes.txt is not valid Python (not a "
     ".py file): SyntaxError at line 1"),
    ("broken.py", "def get_config(:\n", "broken.py is not valid Python: "
     "SyntaxError at line 1"),
    ("names.py", "undefined_name\n", "names.py fails when run: NameError: "
     "name 'undefined_name' is not defined"),
    ("empty.py", "x = 1\n", "empty.py defines no get_config()"),
    ("raises.py", "def get_config():\n  raise RuntimeError('boom')\n",
     "raises.py: get_config() failed: RuntimeError: boom"),
    ("number.py", "def get_config():\n  return 3\n",
     "number.py: get_config() returned int, not a ConfigDict"),
    ("none.py", "def get_config():\n  return None\n",
     "none.py: get_config() returned NoneType, not a ConfigDict"),
])
def test_a_config_file_that_gives_no_config_is_one_line(tmp_path, name,
                                                        source, expected):
  config = tmp_path / name
  config.write_text(source)
  result = subprocess.run(
      [sys.executable, str(EXPERIMENTS / "run.py"), "--config", str(config),
       "--workdir", str(tmp_path / "run")],
      cwd=ROOT, capture_output=True, text=True, timeout=300,
      env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=False)
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr
  assert lines[0].startswith(f"ConfigError: --config {config}")
  assert expected in lines[0], lines[0]
  assert "Traceback" not in result.stdout + result.stderr


def test_help_exits_zero_like_the_argparse_scripts(tmp_path):
  result = run_script("--help", workdir=tmp_path)  # absl's status was 1
  assert result.returncode == 0
  assert "--workdir: Output directory" in result.stdout + result.stderr


def test_error_line_is_one_line():
  sys.path.insert(0, str(ROOT))
  try:
    from experiments import run  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.remove(str(ROOT))
  from gplace.errors import ConfigError  # pylint: disable=g-import-not-at-top
  line = run.error_line(ConfigError("first\nsecond  third"))
  assert line == "ConfigError: first second third"


def _calls(tree: ast.AST, attribute: str):
  return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
          and isinstance(node.func, ast.Attribute)
          and node.func.attr == attribute]


def test_there_are_scripts_to_check():
  assert {"baselines.py", "bench_train_step.py", "fidelity.py"} <= set(
      SCRIPTS)


def _helper_flags(tree: ast.AST):
  """The ``add_argument`` calls of the gplace functions a script calls to
  add shared flags (``module.add_<what>_arguments(parser)``, ``module``
  imported ``from gplace...``)."""
  modules = {alias.asname or alias.name: f"{node.module}.{alias.name}"
             for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and (node.module or "").startswith("gplace")
             for alias in node.names}
  found = []
  for call in ast.walk(tree):
    if not (isinstance(call, ast.Call) and isinstance(call.func,
                                                      ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in modules
            and call.func.attr.startswith("add_")
            and call.func.attr.endswith("_arguments")):
      continue
    path = ROOT / (modules[call.func.value.id].replace(".", "/") + ".py")
    helper, = [node for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef)
               and node.name == call.func.attr]
    found += _calls(helper, "add_argument")
  return found


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_use_argparse_with_help_on_every_flag(script):
  source = (EXPERIMENTS / script).read_text()
  tree = ast.parse(source)
  imported = {alias.name.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, (ast.Import, ast.ImportFrom))
              for alias in node.names}
  imported |= {node.module.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module}
  assert "absl" not in imported, f"{script} still parses flags with absl"
  assert "argparse" in imported
  arguments = _calls(tree, "add_argument") + _helper_flags(tree)
  assert arguments, f"{script} defines no flags"
  for call in arguments:
    flag = call.args[0].value if call.args and isinstance(
        call.args[0], ast.Constant) else "?"
    keywords = {k.arg: k.value for k in call.keywords}
    assert "help" in keywords, f"{script}: {flag} has no help"
    help_text = keywords["help"]
    if isinstance(help_text, ast.Constant):
      assert help_text.value.strip(), f"{script}: {flag} has empty help"


def test_bench_train_step_flags():
  sys.path.insert(0, str(ROOT))
  try:
    from experiments import bench_train_step  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.remove(str(ROOT))
  args = bench_train_step.parse_args(["--sizes=100,200", "--loss=reinforce"])
  assert args.sizes == "100,200" and args.loss == "reinforce"
  assert args.steps == 3 and args.num_samples == 16
  with pytest.raises(SystemExit):
    bench_train_step.parse_args(["--loss=sgd"])


def test_transfer_costs_moves_equal_values_four_ways(tmp_path):
  # The script checks every method's values against the source's and that
  # they land on the destination; two forced host devices here.
  out = tmp_path / "transfers"
  result = subprocess.run(
      [sys.executable, str(EXPERIMENTS / "transfer_costs.py"), "--counts",
       "1,3", "--repeats", "2", "--bytes", "64", "--out", str(out)],
      cwd=ROOT, capture_output=True, text=True, timeout=300,
      env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""},
      check=False)
  assert result.returncode == 0, result.stderr
  import json  # pylint: disable=g-import-not-at-top
  rows = json.loads((out / "transfer_costs.json").read_text())
  assert [(r["count"], r["src"] != r["dst"]) for r in rows] == [
      (1, True), (3, True)] * 2
  for row in rows:
    for method in ("put", "get", "prefetch", "packed"):
      assert f"{method}_us_per_value" in row


def test_schedule_gap_tables_agree_at_the_preset_bandwidth(tmp_path, capsys):
  from experiments import schedule_gap  # pylint: disable=g-import-not-at-top
  schedule_gap.main(["--workloads", "wavenet2", "--size", "tiny",
                     "--schedulers", "m_etf", "--cache", str(tmp_path),
                     "--bandwidth-scales", "1,1000", "--jitter", "0.01",
                     "--jitter-samples", "4", "--priority-variants"])
  tables = [[line.split(" | ") for line in block.splitlines()[2:]]
            for block in capsys.readouterr().out.strip().split("\n\n")]
  assert [len(t) for t in tables] == [1, 1, 1, 1]
  own = tables[0][0][2]
  # Scale 1 is the preset: the same own order and default schedule.
  assert tables[1][0][2].startswith(f"{own} / ")
  assert tables[2][0][2] == own
  # The jitter table's exact column is the first table's dynamic one.
  assert tables[2][0][3] == tables[0][0][3]
  # Default + best of the draws: no slower than the default or any draw.
  seconds = lambda cell: float(cell.split()[0])
  default = seconds(tables[1][0][2].split(" / ")[1])
  fastest_draw = seconds(tables[2][0][4].split(" / ")[0])
  assert seconds(tables[2][0][5]) == min(default, fastest_draw)
  # The bottom-level variant's dynamic cell is the first table's.
  assert tables[3][0][2] == own
  assert tables[3][0][3].split(" / ")[0] == (
      tables[0][0][3].split("(")[1].rstrip(")"))
