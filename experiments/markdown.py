"""Writing an experiment's markdown output (shared by the scripts here)."""

import os
from typing import Sequence


def write_markdown(path: str, lines: Sequence[str]) -> None:
  """Writes ``lines`` to ``path`` (creating its directory), one per line."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
