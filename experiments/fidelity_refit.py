"""The best a simulator model can do on measured placements (in-sample).

    PYTHONPATH=. python experiments/fidelity_refit.py \
        --dump experiments/results/device_h200_2026-11-27/run5

Reads what ``experiments/fidelity.py --dump DIR`` saved (two devices: each
workload's placements, the orders they ran in, their measured times) and the
profile it calibrated (``profile_<name>_<size>_*.npz`` in ``--profiles``,
default the same directory), and searches a grid of the calibration's free
parameters on those very measurements: a link factor per direction (on the
profile's bare copy latency and bandwidth), each device's cost per cluster
(``Device.cluster_launch_s``), whether graph inputs are batched and, where
the two devices share a compute group (forced host devices), whether they
would fit better as two groups that run at once. Op costs
are the profile's, net of one launch (``gplace.profile``'s rule). Prints the
calibrated profile's Spearman and median absolute error next to the best the
grid finds, and the best parameters: a ceiling on what calibration can reach
with this model, not a prediction (it is fitted to what it is scored on).
"""

import argparse
import dataclasses
import itertools

import numpy as np
from scipy import stats

from experiments.fidelity_links import add_dump_flags, dumps
from gplace.execution import profiler
from gplace.sim import simulator


def score(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
  """(Spearman, median absolute error in %)."""
  return (float(stats.spearmanr(predicted, measured).statistic),
          float(np.median(np.abs(predicted - measured) / measured) * 100))


def refit(prof: profiler.Profile, placements: np.ndarray, orders: np.ndarray,
          measured: np.ndarray) -> tuple[dict, np.ndarray]:
  """The grid point with the least median absolute log error, and its
  ``[K]`` predictions."""
  topology = prof.topology
  latency = np.array(prof.transfer_latency_s)
  np.fill_diagonal(latency, 0.0)
  bandwidth = np.array(prof.transfer_bandwidth)
  gross = prof.costs * (prof.whole_program_s / prof.costs.sum(0))[None]
  directions = 2.0 ** np.arange(-4.0, 4.01, 0.5)
  launches = [0.0, 1e-5, 3e-5, 1e-4, 3e-4]
  groups = [tuple(np.asarray(topology.compute_group).tolist())]
  if topology.n_compute_groups < topology.n_devices:
    groups.append(tuple(range(topology.n_devices)))
  best = None
  for group, batched, f01, f10, l0, l1 in itertools.product(
      groups, (False, True), directions, directions, launches, launches):
    factors = np.array([[1.0, f01], [f10, 1.0]])
    trial = topology.replace(
        devices=tuple(dataclasses.replace(dev, cluster_launch_s=launch)
                      for dev, launch in zip(topology.devices, (l0, l1))),
        link_latency=latency * factors, link_bandwidth=bandwidth / factors,
        batched_inputs=batched, compute_group=np.asarray(group))
    costs = profiler._net_of_launch(gross, trial)  # pylint: disable=protected-access
    predicted = np.asarray(simulator.simulate(
        prof.graph, placements, trial, costs=costs, order=orders).runtime_s,
                           np.float64)
    error = float(np.median(np.abs(np.log(predicted / measured))))
    if best is None or error < best[0]:
      best = (error, dict(compute_group=group, batched=batched,
                          link_0_to_1=float(f01),
                          link_1_to_0=float(f10),
                          launch_ms=(l0 * 1e3, l1 * 1e3)), predicted)
  return best[1], best[2]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_dump_flags(parser)
  parser.add_argument("--schedule", default="sim",
                      help="which of the dump's schedule kinds to score")
  args = parser.parse_args()
  profile_dir = args.profiles or args.dump
  print("| workload | calibrated: Spearman / err % | best in-sample: "
        "Spearman / err % | best parameters |")
  print("|---|---|---|---|")
  for name, size, prof, data in dumps(args.dump, profile_dir):
    if prof.topology.n_devices != 2:
      raise SystemExit(f"{name}: the grid is for two devices.")
    ok = ~data["failed"]
    measured = data[f"measured_min_{args.schedule}"].mean(0)[ok]
    calibrated = data[f"predicted_{args.schedule}"][ok]
    params, predicted = refit(prof, data["placements"][ok],
                              data[f"order_{args.schedule}"][ok], measured)
    cal, fit = score(calibrated, measured), score(predicted, measured)
    print(f"| {name} {size} | {cal[0]:.3f} / {cal[1]:.1f} | {fit[0]:.3f} / "
          f"{fit[1]:.1f} | {params} |", flush=True)


if __name__ == "__main__":
  main()
