"""The README's and docs/'s Python examples run as written (each in a fresh
process), the first-run documentation issue 13 asked for stays in, and the
markdown pages' relative links resolve."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from gplace import baselines

_ROOT = pathlib.Path(__file__).parent.parent
_README = pathlib.Path(__file__).parent.parent / "README.md"
_PYTHON = re.compile(r"```python\n(.*?)```", re.S)
# Every Python block of the README and of docs/*.md, as (page, block).
_BLOCKS = [(str(path.relative_to(_ROOT)), block)
           for path in [_README] + sorted((_ROOT / "docs").glob("*.md"))
           for block in _PYTHON.findall(path.read_text())]
# Markdown a newcomer reads: the README, docs/ and each study's page.
_PAGES = ([_README] + sorted((_ROOT / "docs").glob("*.md"))
          + sorted((_ROOT / "experiments" / "results").rglob("*.md")))


def test_readme_has_examples():
  assert len(_PYTHON.findall(_README.read_text())) >= 2


@pytest.mark.parametrize("index", range(len(_BLOCKS)),
                         ids=[f"{page}:{i}" for i, (page, _) in
                              enumerate(_BLOCKS)])
def test_readme_example_runs(index, tmp_path):
  script = tmp_path / f"example_{index}.py"
  script.write_text(_BLOCKS[index][1])
  env = dict(os.environ,
             XLA_FLAGS="--xla_force_host_platform_device_count=2 "
             "--xla_backend_optimization_level=0",
             JAX_PLATFORMS="cpu")
  result = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                          env=env, capture_output=True, text=True,
                          timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]


def _readable(name: str) -> str:
  """How the README writes a baseline: ``m_etf`` -> ``m-etf``,
  ``ordered_eft`` -> ``ordered eft`` (compared lower-case)."""
  return re.sub(r"^m_", "m-", name).replace("_", " ")


def test_readme_lists_every_baseline_and_every_test_switch():
  readme = _README.read_text()
  missing = [name for name in baselines.names()
             if _readable(name) not in readme.lower()]
  assert not missing, f"README's baseline list lacks {missing}"
  sources = [p.read_text() for p in (_ROOT / "tests").rglob("*.py")]
  sources += [p.read_text() for p in (_ROOT / "colabs").glob("*.ipynb")]
  switches = set(re.findall(r"GPLACE_[A-Z_]+", "\n".join(sources)))
  assert switches >= {"GPLACE_SLOW_TESTS", "GPLACE_NOTEBOOK_SIZE"}
  assert not [s for s in switches if s not in readme], switches
  for output in ("best_placement.json", "metrics.jsonl", "results.json",
                 "learning_curve.png", "checkpoints/"):
    assert output in readme, output


def test_notebook_install_cells_have_no_placeholder():
  for notebook in (_ROOT / "colabs").glob("*.ipynb"):
    for line in notebook.read_text().splitlines():
      if "pip install" in line:  # was "git+<this repository>"
        assert not re.search(r"<[^>]*>", line), (notebook.name, line)


def test_pyproject_license_is_an_spdx_string():
  # license = {text = ...} made setuptools warn on every install.
  tomllib = pytest.importorskip("tomllib")
  with open(_ROOT / "pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
  assert isinstance(project["license"], str)


@pytest.mark.parametrize("page", _PAGES,
                         ids=lambda p: str(p.relative_to(_ROOT)))
def test_markdown_links_resolve_and_pages_stay_small(page):
  text = page.read_text()
  assert len(text.encode()) < 60_000, f"{page} is over 60 KB: split it"
  missing = [target for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text)
             if not target.startswith(("http://", "https://", "mailto:"))
             and not (page.parent / target).exists()]
  assert not missing, f"{page.relative_to(_ROOT)} links to missing {missing}"
