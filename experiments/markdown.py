"""Writing an experiment's markdown output (shared by the scripts here)."""

import os
from typing import Callable, Optional, Sequence

from gplace.errors import GplaceError, first_line


def write_markdown(path: str, lines: Sequence[str]) -> None:
  """Writes ``lines`` to ``path`` (creating its directory), one per line."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")


def table_per_workload(workloads: str, rows_fn: Callable[[str], list[str]],
                       lines: list[str], out: Optional[str]) -> list[str]:
  """Appends ``rows_fn(workload)`` for each of the comma-separated
  ``workloads`` to ``lines``, printing each workload's rows as they come; a
  workload that raises a :class:`~gplace.errors.GplaceError` gets one
  "skipped" row saying why. Writes ``lines`` to ``out`` if given.

  Returns:
    ``lines``.
  """
  for workload in [w for w in workloads.split(",") if w]:
    try:
      rows = rows_fn(workload)
    except GplaceError as err:
      rows = [f"| {workload} | – | skipped: {first_line(err)} |"]
    print("\n".join(rows), flush=True)
    lines += rows
  if out:
    write_markdown(out, lines)
  return lines
