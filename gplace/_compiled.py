"""Host loops compiled by numba on first use.

``import gplace`` does not import numba: a module that has a host loop to
compile asks :func:`njit` for it when it first runs it.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Callable, Optional


@functools.cache
def njit(function: Callable) -> Optional[Callable]:
  """``function`` compiled by numba (without the GIL, cached on disk), once
  per process; None where numba is not installed (callers fall back to
  Python or numpy)."""
  if importlib.util.find_spec("numba") is None:
    return None
  import numba  # pylint: disable=g-import-not-at-top
  return numba.njit(cache=True, nogil=True)(function)
