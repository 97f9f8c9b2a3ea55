"""Executes every notebook in colabs/ end to end (tiny sizes)."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

# A line each notebook prints when its last cell ran as it should.
_DONE = {"quickstart.ipynb": "same loss as jax.jit: True",
         "compare_systems.ipynb": "placements drawn: 2",
         "place_your_model.ipynb": "same outputs as jax.jit: True",
         "three_decisions.ipynb": ("three decisions drawn: True",
                                   "same outputs as jax.jit: True")}
_COLABS = sorted((pathlib.Path(__file__).parent.parent / "colabs").glob(
    "*.ipynb"))


@pytest.mark.parametrize("path", _COLABS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
  monkeypatch.setenv("GPLACE_NOTEBOOK_SIZE", "tiny")
  # The notebook sets its own device count; do not inherit the tests' flags.
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2 "
                     "--xla_backend_optimization_level=0")
  notebook = nbformat.read(path, as_version=4)
  client = nbclient.NotebookClient(notebook, timeout=600,
                                   kernel_name="python3",
                                   resources={"metadata": {"path": tmp_path}})
  client.execute()
  outputs = "".join(out.get("text", "") for cell in notebook.cells
                    for out in cell.get("outputs", []))
  done = _DONE[path.name]
  for line in (done,) if isinstance(done, str) else done:
    assert line in outputs
  images = [out for cell in notebook.cells for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})]
  assert images, "the notebook drew no picture"
