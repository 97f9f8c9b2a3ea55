"""A progress bar over :func:`gplace.optimize`'s time budget.

The stages (baselines, search, solver, policy) are blocking calls, so a
daemon thread advances a tqdm bar with the wall clock; the stage names the
description and the best runtime so far the postfix. The bar appears only
after ``DELAY_S`` seconds, so quick calls print nothing, and only on a
terminal (tqdm's ``disable=None``), so logs stay clean.
"""

from __future__ import annotations

import sys
import threading
import time

from gplace.report import format_seconds

DELAY_S = 2.0
REFRESH_S = 0.5


class Progress:
  """A context manager: ``with Progress(budget_s, enabled) as bar:`` then
  ``bar.stage("search")`` and ``bar.best(runtime_s)``; does nothing when
  disabled or tqdm is missing."""

  def __init__(self, budget_s: float, enabled: bool):
    self._bar = None
    self._stop = threading.Event()
    self._thread = None
    self._start = time.perf_counter()
    self._budget_s = budget_s
    if not enabled:
      return
    try:
      from tqdm.auto import tqdm  # pylint: disable=g-import-not-at-top
    except ImportError:
      return
    self._bar = tqdm(total=round(budget_s, 1), desc="optimize", unit="s",
                     delay=DELAY_S, file=sys.stderr, leave=False,
                     disable=None,     # off when stderr is not a terminal
                     bar_format="{desc}: {percentage:3.0f}%|{bar}| "
                                "{n:.0f}/{total:.0f} s{postfix}")

  def __enter__(self) -> "Progress":
    if self._bar is not None and not self._bar.disable:
      self._thread = threading.Thread(target=self._tick, daemon=True)
      self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    if self._bar is not None:
      self._bar.close()

  def _tick(self) -> None:
    while not self._stop.wait(REFRESH_S):
      elapsed = min(time.perf_counter() - self._start, self._budget_s)
      # update() (not refresh) honours tqdm's delay before the first draw.
      self._bar.update(round(elapsed - self._bar.n, 1))

  def stage(self, name: str) -> None:
    """Names the stage now running."""
    if self._bar is not None:
      self._bar.set_description_str(f"optimize: {name}", refresh=False)

  def best(self, runtime_s: float) -> None:
    """Shows the best runtime found so far."""
    if self._bar is not None:
      self._bar.set_postfix_str(f"best {format_seconds(runtime_s)}",
                                refresh=False)
