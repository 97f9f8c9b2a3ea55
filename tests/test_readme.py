"""The README's Python examples run as written (each in a fresh process)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

_README = pathlib.Path(__file__).parent.parent / "README.md"
_BLOCKS = re.findall(r"```python\n(.*?)```", _README.read_text(), re.S)


def test_readme_has_examples():
  assert len(_BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(_BLOCKS)))
def test_readme_example_runs(index, tmp_path):
  script = tmp_path / f"example_{index}.py"
  script.write_text(_BLOCKS[index])
  env = dict(os.environ,
             XLA_FLAGS="--xla_force_host_platform_device_count=2 "
             "--xla_backend_optimization_level=0",
             JAX_PLATFORMS="cpu")
  result = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                          env=env, capture_output=True, text=True,
                          timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
