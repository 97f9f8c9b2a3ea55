"""A fidelity run's raw figures on disk, for refitting a model offline:
:func:`save` (``experiments/fidelity.py --dump DIR``) and :func:`load_all`
(``experiments/fidelity_links.py``, ``fidelity_refit.py``).
"""

from __future__ import annotations

import glob
import os
from typing import Iterator, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from gplace.errors import ExecutionError
from gplace.execution.profile_file import Profile

PREFIX = "fidelity_"
#: The help of the ``--dump`` and ``--profiles`` flags of the scripts that
#: read dumps (:func:`load_all`'s ``dump_dir`` and ``profile_dir``).
DUMP_HELP = ("directory holding fidelity_<name>_<size>.npz and (unless "
             "--profiles says otherwise) the matching profile_*.npz")
PROFILES_HELP = ("directory of the profiles (fidelity.py's --cache; "
                 "default: --dump)")


def add_dump_arguments(parser) -> None:
  """Adds the ``--dump`` (required) and ``--profiles`` flags to an
  ``argparse`` parser (:func:`load_all`'s ``dump_dir`` and
  ``profile_dir``)."""
  parser.add_argument("--dump", required=True, help=DUMP_HELP)
  parser.add_argument("--profiles", default="", help=PROFILES_HELP)


def dump_path(dump_dir: str, name: str, size: str) -> str:
  """``dump_dir/fidelity_<name>_<size>.npz``."""
  return os.path.join(dump_dir, f"{PREFIX}{name}_{size}.npz")


def run_orders(schedules: Sequence, n_nodes: int) -> np.ndarray:
  """``[K, N]`` int64 orders the placements ran in: each schedule's order,
  node-id order for a named one (a ``str``, such as ``"device_greedy"``)."""
  return np.stack([np.arange(n_nodes) if isinstance(o, str)
                   else np.asarray(o, np.int64) for o in schedules])


def save(path: str, labels: Sequence[str], placements: np.ndarray,
         kinds: Sequence[str], schedules: Mapping[str, Sequence],
         predicted: Mapping[str, np.ndarray],
         measured: Mapping[tuple[str, str], np.ndarray],
         clusters: Mapping[str, Sequence[int]], failed: np.ndarray,
         refit_predicted: Optional[Mapping[str, np.ndarray]] = None,
         calibration_rounds: Optional[np.ndarray] = None) -> None:
  """Saves one workload's raw figures to ``path``.

  The file holds ``labels [K]``, ``placements [K, N]``, ``failed [K]``
  bool, and per schedule kind of ``kinds``: ``order_<kind> [K, N]``
  (:func:`run_orders` of ``schedules[kind]``), ``predicted_<kind> [K]`` s,
  ``clusters_<kind> [K]``, and per statistic ``min`` and ``median``
  ``measured_<stat>_<kind> [rounds, K]`` s (NaN: failed; ``measured`` is
  keyed by ``(stat, kind)``). Where the profile's calibration runs were
  measured in the same rounds: ``calibration_rounds [rounds, D + C]`` (each
  round's fastest call of ``fitting.calibration_runs``) and
  ``predicted_refit_<kind> [K]`` (``refit_predicted``). ``host_reads``
  ``"overlapped"``: the executor starts its read-backs of accelerator values
  early (files without it come from an older executor, whose read-backs
  waited for each other: ``fitting.executor_pipelining``).
  """
  arrays = dict(labels=np.asarray(labels), placements=placements,
                failed=failed, host_reads=np.asarray("overlapped"))
  for kind in kinds:
    arrays[f"order_{kind}"] = run_orders(schedules[kind],
                                         placements.shape[1])
    arrays[f"predicted_{kind}"] = predicted[kind]
    arrays[f"clusters_{kind}"] = np.asarray(clusters[kind])
    for stat in ("min", "median"):
      arrays[f"measured_{stat}_{kind}"] = measured[(stat, kind)]
    if refit_predicted and kind in refit_predicted:
      arrays[f"predicted_refit_{kind}"] = refit_predicted[kind]
  if calibration_rounds is not None:
    arrays["calibration_rounds"] = calibration_rounds
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  np.savez(path, **arrays)


class Dump(NamedTuple):
  """One workload's saved figures and the profile they were predicted with.

  Attributes:
    name, size: the workload.
    profile: its calibrated :class:`~gplace.Profile`.
    data: the ``.npz`` contents (see :func:`save`).
  """

  name: str
  size: str
  profile: Profile
  data: Mapping[str, np.ndarray]


def load_all(dump_dir: str, profile_dir: Optional[str] = None
             ) -> Iterator[Dump]:
  """Yields a :class:`Dump` for each ``fidelity_<name>_<size>.npz`` in
  ``dump_dir`` (in name order), with the one ``profile_<name>_<size>_*.npz``
  of ``profile_dir`` (default ``dump_dir``).

  Raises:
    ExecutionError: a workload without exactly one matching profile.
  """
  profile_dir = profile_dir or dump_dir
  for path in sorted(glob.glob(os.path.join(dump_dir, f"{PREFIX}*.npz"))):
    name, size = os.path.basename(path)[len(PREFIX):-4].rsplit("_", 1)
    profiles = glob.glob(os.path.join(profile_dir,
                                      f"profile_{name}_{size}_*.npz"))
    if len(profiles) != 1:
      raise ExecutionError(
          f"{name}: expected one profile_{name}_{size}_*.npz in "
          f"{profile_dir}, found {len(profiles)}; pass the directory the "
          "fidelity run kept its profiles in (its --cache).")
    yield Dump(name, size, Profile.load(profiles[0]), np.load(path))
