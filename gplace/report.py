"""Markdown tables, curve read-outs and study folders for ``experiments/``.

Rows (:func:`table_per_workload`, :func:`percent_change`,
:func:`format_seconds`), best-so-far curves
read at a budget (:func:`best_by`, :func:`value_at`), and :class:`Study`, a
folder whose ``README.md`` says what was run, when and where. Numpy only.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import math
import os
import platform
import shlex
import subprocess
import sys
from typing import Any, Callable, Optional, Sequence

import numpy as np

README = "README.md"
#: The help of a study script's ``--out`` flag (the folder of a :class:`Study`).
OUT_HELP = ("the study's folder: its README.md says what was run (command, "
            "date, machine) and holds the tables")


def add_zoo_arguments(parser, workloads: Sequence[str],
                      size: str = "tiny", topology: str = "1cpu+4gpu") -> None:
  """Adds the benchmark scripts' common flags to an ``argparse`` parser:
  ``--workloads`` (names, space-separated), ``--size``, ``--topology`` and
  ``--graph_cache``."""
  parser.add_argument("--workloads", nargs="+", default=list(workloads),
                      help="zoo workloads (train steps)")
  parser.add_argument("--size", default=size,
                      help="workload size: tiny, small or paper")
  parser.add_argument("--topology", default=topology,
                      help="topology preset")
  parser.add_argument("--graph_cache", default="",
                      help="directory of captured graphs (reused)")


def write_markdown(path: str, lines: Sequence[str]) -> None:
  """Writes ``lines`` to ``path`` (creating its directory), one per line."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def parse_shares(text: str, flag: str, example: str) -> list[float]:
  """A flag's comma-separated shares in ``[0, 1]``, e.g. ``"1,0.3"``.

  Raises:
    SystemExit: none, one that is not a number, or one outside ``[0, 1]``
      (the message names ``flag`` and shows ``example``).
  """
  try:
    shares = [float(x) for x in text.split(",") if x]
  except ValueError:
    shares = []
  if not shares or not all(0 <= x <= 1 for x in shares):
    raise SystemExit(f"{flag} must be comma-separated shares in [0, 1], "
                     f"got {text!r}; pass e.g. {flag} {example}.")
  return shares


# -- cells ---------------------------------------------------------------------


def format_seconds(seconds: float) -> str:
  """``seconds`` in s, ms or µs with four significant digits
  (``"infeasible"`` when not finite)."""
  if not math.isfinite(seconds):
    return "infeasible"
  for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
    if abs(seconds) >= scale or unit == "µs":
      return f"{seconds / scale:.4g} {unit}"
  return f"{seconds:.4g} s"


def percent_change(value: float, reference: float, digits: int = 1) -> str:
  """``value / reference - 1`` as ``"+1.2%"``; ``"–"`` unless both are
  finite and ``reference`` is positive."""
  if not (np.isfinite(value) and np.isfinite(reference) and reference > 0):
    return "–"
  return f"{100 * (value / reference - 1):+.{digits}f}%"


def mean_change(values, reference: float, *,
                always_range: bool = False) -> str:
  """The mean change of ``values`` against ``reference`` and its range:
  ``"+1.2% [+0.4, +2.0]"`` (the range only for more than one value, unless
  ``always_range``)."""
  change = 100 * (np.asarray(values, np.float64) / reference - 1)
  spread = (f" [{change.min():+.1f}, {change.max():+.1f}]"
            if change.size > 1 or always_range else "")
  return f"{change.mean():+.1f}%{spread}"


# -- curves --------------------------------------------------------------------


def checkpoints(budget: int) -> list[int]:
  """Powers of ten from 10^3 below ``budget``: where best-so-far curves are
  also tabulated, so that one long run gives the shorter budgets' rows."""
  out, c = [], 1000
  while c < budget:
    out.append(c)
    c *= 10
  return out


def best_by(evaluations, best, budget: int) -> float:
  """The best-so-far value of a curve after at most ``budget`` evaluations
  (NaN if the curve has no point that early)."""
  evaluations, best = np.asarray(evaluations), np.asarray(best, np.float64)
  seen = best[(evaluations <= budget) & np.isfinite(best)]
  return float(seen.min()) if seen.size else float("nan")


def value_at(evaluations, values, budget: int) -> float:
  """The last value of a curve at or before ``budget`` evaluations (NaN if
  none): for curves that are not best-so-far, such as a policy's greedy
  placement's."""
  evaluations, values = np.asarray(evaluations), np.asarray(values, np.float64)
  seen = np.flatnonzero(evaluations <= budget)
  return float(values[seen[-1]]) if seen.size else float("nan")


def first_within(values, final: float, tolerance: float) -> int:
  """Index of the first finite value ``<= final * (1 + tolerance)``, or -1
  if there is none."""
  values = np.asarray(values, np.float64)
  hit = np.flatnonzero(np.isfinite(values)
                       & (values <= final * (1 + tolerance)))
  return int(hit[0]) if hit.size else -1


# -- a study's folder ----------------------------------------------------------


def command_line(script: str, argv: Optional[Sequence[str]] = None) -> str:
  """``python <script> <argv>``, the script relative to the working
  directory; ``argv`` defaults to ``sys.argv[1:]``."""
  argv = sys.argv[1:] if argv is None else list(argv)
  return shlex.join(["python", os.path.relpath(script), *argv])


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).strftime(
      "%Y-%m-%d %H:%M UTC")


def load_average(separator: str = " ") -> str:
  """The 1, 5 and 15 minute load averages, ``"0.52 1.10 1.31"`` (``"unknown"``
  where the platform has none)."""
  try:
    return separator.join(f"{x:.2f}" for x in os.getloadavg())
  except OSError:
    return "unknown"


def _version(package: str) -> str:
  try:
    return importlib.metadata.version(package)
  except importlib.metadata.PackageNotFoundError:
    return "not installed"


def _devices() -> str:
  # Read from a jax the study has loaded already: importing it here would
  # make this module depend on it, and could pick the backend for the study.
  jax = sys.modules.get("jax")
  if jax is None:
    return "jax not loaded"
  try:
    return ", ".join(f"{d.platform}:{d.id} ({d.device_kind})"
                     for d in jax.devices())
  except Exception as err:  # pylint: disable=broad-except
    return f"unknown ({type(err).__name__})"


def _code_version() -> str:
  """The git commit of the checkout this module is in, if any."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  try:
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short",
                             "HEAD"], capture_output=True, text=True,
                            timeout=10, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True,
                           text=True, timeout=10, check=True).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return "not a git checkout"
  return f"git {commit}" + (" with uncommitted changes" if dirty else "")


def machine() -> dict[str, str]:
  """What the machine is now: OS, cores (all, and usable by this process),
  load average, Python, numpy and jax versions, jax's devices (if the
  study has loaded jax) and the code's git commit."""
  usable = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count())
  return {"os": platform.platform(),
          "cores": f"{os.cpu_count()} cores ({usable} usable by this "
                   "process)",
          "load average": load_average(),
          "python": platform.python_version(),
          "numpy": np.__version__,
          "jax": _version("jax"),
          "devices": _devices(),
          "code": _code_version()}


@dataclasses.dataclass(frozen=True)
class Study:
  """A study's output folder: ``out_dir/README.md`` holds what was run
  (command, dates, machine) and the study's markdown; other files the study
  writes there (plots, raw figures) are listed in it.

  Attributes:
    out_dir: the folder, e.g. ``experiments/results/search_controls_paper``.
    command: the command line that ran the study (:func:`command_line`).
    started: when the study started (UTC).
    start_load: the load average when it started.
    start_code: the code's git commit when it started (what ran; a commit
      made while a long study runs does not change it).
  """

  out_dir: str
  command: str
  started: str = dataclasses.field(default_factory=_now)
  start_load: str = dataclasses.field(default_factory=load_average)
  start_code: str = dataclasses.field(
      default_factory=lambda: _code_version())  # pylint: disable=unnecessary-lambda

  @classmethod
  def create(cls, out_dir: Optional[str], script: str,
             argv: Optional[Sequence[str]] = None) -> Optional["Study"]:
    """The study of ``script`` run with ``argv`` (default ``sys.argv[1:]``)
    writing to ``out_dir``, or None when ``out_dir`` is empty (the study
    only prints)."""
    if not out_dir:
      return None
    return cls(out_dir, command_line(script, argv))

  @property
  def readme(self) -> str:
    return os.path.join(self.out_dir, README)

  def path(self, name: str) -> str:
    """``out_dir/name``, with ``out_dir`` created."""
    os.makedirs(self.out_dir, exist_ok=True)
    return os.path.join(self.out_dir, name)

  def header(self) -> list[str]:
    """The README's first lines: the study's name and what was run."""
    info = machine()
    lines = [f"# {os.path.basename(os.path.normpath(self.out_dir))}", "",
             f"- command: `{self.command}`",
             f"- date: started {self.started}, written {_now()}",
             f"- machine: {info['os']}, {info['cores']}; load average "
             f"{self.start_load} at the start, {info['load average']} when "
             "written",
             f"- software: Python {info['python']}, numpy {info['numpy']}, "
             f"jax {info['jax']}; devices: {info['devices']}",
             f"- code: {self.start_code}" + (
                 "" if info["code"] == self.start_code else
                 f" at the start ({info['code']} when written)")]
    others = sorted(name for name in os.listdir(self.out_dir)
                    if name != README) if os.path.isdir(self.out_dir) else []
    if others:
      lines.append(f"- files here: {', '.join(others)}")
    return lines + [""]

  def write(self, lines: Sequence[str]) -> str:
    """(Re)writes ``README.md``: :meth:`header`, then ``lines``. Returns its
    path."""
    write_markdown(self.path(README), self.header() + list(lines))
    return self.readme


def finish(lines: Sequence[str], study: Optional[Study] = None) -> None:
  """Prints the load average at the end of a study and, with ``study``,
  writes its README: ``lines``, then that line."""
  end = f"Load average at the end: {load_average()}."
  print(end)
  if study is not None:
    study.write(list(lines) + ["", end])


def table_per_workload(workloads: str | Sequence[Any],
                       rows_fn: Callable[[Any], list[str]],
                       lines: list[str], study: Optional[Study] = None, *,
                       skip: tuple[type[BaseException], ...] = ()
                       ) -> list[str]:
  """Appends ``rows_fn(workload)`` for each of ``workloads`` (comma-separated
  names, or a sequence, e.g. of ``gplace.workloads.benchmark`` specs) to
  ``lines``, printing each workload's rows as they come and rewriting
  ``study``'s README after each (a long run keeps what it has); a workload
  that raises one of ``skip`` gets one "skipped" row saying why.

  Returns:
    ``lines``.
  """
  if isinstance(workloads, str):
    workloads = [w for w in workloads.split(",") if w]
  for workload in workloads:
    try:
      rows = rows_fn(workload)
    except skip as err:
      cause = (str(err).strip().splitlines() or [""])[0]
      name = getattr(workload, "name", workload)
      rows = [f"| {name} | – | skipped: {type(err).__name__}: {cause} |"]
    print("\n".join(rows), flush=True)
    lines += rows
    if study is not None:
      study.write(lines)
  return lines
