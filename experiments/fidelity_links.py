"""One link factor or one per direction: the same measurements, two models.

    python experiments/fidelity_links.py \
        --dump experiments/results/device_h200_2026-11-27/run3

Reads what ``experiments/fidelity.py --dump DIR`` saved (each workload's
placements, the orders they ran in and their measured times) and the profile
it calibrated (``profile_<name>_<size>_<platforms>_sched.npz`` in
``--profiles``, default the same directory; ``device_check.sh`` brings both
back in ``fidelity_data.tar``: ``--dump fdump --profiles fcache``), and
predicts every placement twice on the identical measurements: with the
calibration's one common link factor (how ``gplace.profile`` fitted links
before per-direction factors) and with the per-(source kind, destination
kind) factors it fits now (``Profile.link_scales``). Prints Spearman and the
median absolute error of both, per schedule kind and statistic.
"""

import argparse
import glob
import os

import numpy as np
from scipy import stats

from gplace.execution import calibration
from gplace.execution.profile_file import Profile
from gplace.sim import simulator


def predictions(prof: Profile, placements: np.ndarray,
                orders: np.ndarray, factors: np.ndarray) -> np.ndarray:
  """``[K]`` simulated seconds with the profile's links scaled by
  ``factors [D, D]`` instead of its calibrated ones."""
  calibrated = prof.link_scales if prof.link_scales is not None else (
      np.full_like(prof.topology.link_latency, prof.link_scale))
  topology = calibration._rescaled(prof.topology, factors / calibrated)  # pylint: disable=protected-access
  return np.array([simulator.simulate(prof.graph, p, topology,
                                      costs=prof.costs, order=o).runtime_s
                   for p, o in zip(placements, orders)], np.float64)


def dumps(dump_dir: str, profile_dir: str):
  """Yields ``(name, size, profile, data)`` for each
  ``fidelity_<name>_<size>.npz`` in ``dump_dir`` with the one matching
  ``profile_<name>_<size>_*.npz`` of ``profile_dir``."""
  for path in sorted(glob.glob(os.path.join(dump_dir, "fidelity_*.npz"))):
    name, size = os.path.basename(path)[len("fidelity_"):-4].rsplit("_", 1)
    profiles = glob.glob(os.path.join(profile_dir,
                                      f"profile_{name}_{size}_*.npz"))
    if len(profiles) != 1:
      raise SystemExit(f"{name}: expected one profile in {profile_dir}, "
                       f"found {len(profiles)}")
    yield name, size, Profile.load(profiles[0]), np.load(path)


def add_dump_flags(parser: argparse.ArgumentParser) -> None:
  """``--dump`` and ``--profiles``, the inputs of :func:`dumps`."""
  parser.add_argument("--dump", required=True,
                      help="directory holding fidelity_<name>_<size>.npz and "
                      "(unless --profiles says otherwise) the matching "
                      "profile_*.npz")
  parser.add_argument("--profiles", default="",
                      help="directory of the profiles (fidelity.py's "
                      "--cache; default: --dump)")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_dump_flags(parser)
  args = parser.parse_args()
  profile_dir = args.profiles or args.dump
  print("| workload | schedule | statistic | link factors | Spearman, one "
        "factor | Spearman, per direction | median abs err %, one factor | "
        "median abs err %, per direction |")
  print("|---|---|---|---|---:|---:|---:|---:|")
  for name, _, prof, data in dumps(args.dump, profile_dir):
    d = prof.topology.n_devices
    one = np.where(np.eye(d, dtype=bool), 1.0, prof.link_scale)
    per = prof.link_scales if prof.link_scales is not None else one
    kinds = [k[len("predicted_"):] for k in data.files
             if k.startswith("predicted_")]
    for kind in kinds:
      orders = data[f"order_{kind}"]
      ok = ~data["failed"]
      pred_one = predictions(prof, data["placements"], orders, one)[ok]
      pred_per = predictions(prof, data["placements"], orders, per)[ok]
      for stat in ("min", "median"):
        measured = data[f"measured_{stat}_{kind}"].mean(0)[ok]
        cells = []
        for pred in (pred_one, pred_per):
          cells.append((stats.spearmanr(pred, measured).statistic,
                        np.median(np.abs(pred - measured) / measured) * 100))
        factors = (f"{prof.link_scale:.2f} / {per[0, 1]:.2f}, "
                   f"{per[1, 0]:.2f}")
        print(f"| {name} | {kind} | {stat} | {factors} | {cells[0][0]:.3f} | "
              f"{cells[1][0]:.3f} | {cells[0][1]:.1f} | {cells[1][1]:.1f} |")


if __name__ == "__main__":
  main()
