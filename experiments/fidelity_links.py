"""One link factor or one per direction: the same measurements, two models.

    python experiments/fidelity_links.py \
        --dump DIR   # a folder of fidelity.py --dump

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

import numpy as np
from scipy import stats

from gplace.execution import calibration, fidelity_dumps
from gplace.execution.profile_file import Profile
from gplace.sim import simulator


def predictions(prof: Profile, placements: np.ndarray,
                orders: np.ndarray, factors: np.ndarray) -> np.ndarray:
  """``[K]`` simulated seconds with the profile's links scaled by
  ``factors [D, D]`` instead of its calibrated ones."""
  calibrated = prof.link_scales if prof.link_scales is not None else (
      np.full_like(prof.topology.link_latency, prof.link_scale))
  topology = calibration.rescaled(prof.topology, factors / calibrated)
  return np.array([simulator.simulate(prof.graph, p, topology,
                                      costs=prof.costs, order=o).runtime_s
                   for p, o in zip(placements, orders)], np.float64)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  fidelity_dumps.add_dump_arguments(parser)
  args = parser.parse_args()
  print("| workload | schedule | statistic | link factors | Spearman, one "
        "factor | Spearman, per direction | median abs err %, one factor | "
        "median abs err %, per direction |")
  print("|---|---|---|---|---:|---:|---:|---:|")
  for name, _, prof, data in fidelity_dumps.load_all(args.dump,
                                                     args.profiles):
    d = prof.topology.n_devices
    one = np.where(np.eye(d, dtype=bool), 1.0, prof.link_scale)
    per = prof.link_scales if prof.link_scales is not None else one
    # The schedule kinds (not predicted_refit_<kind>: a refit's).
    kinds = [k[len("order_"):] for k in data.files if k.startswith("order_")]
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
