"""The best a simulator model can do on measured placements (in-sample).

    PYTHONPATH=. python experiments/fidelity_refit.py \
        --dump DIR   # a folder of fidelity.py --dump

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
The grid leaves out the per-copy host cost (``Device.copy_issue_s``), which
the calibration fits since 2026-11-27.

With ``--calibration``, it instead reruns ``gplace.profile``'s fit of the
link, launch and copy factors (as the code stands now) on the calibration runs the
profile kept, and scores that fit on the fidelity measurements: out of
sample, what a change to the fit would have given on the same machine and
measurements, without a new calibration run. The first row of each workload
repeats the stored profile's figures. ``--in-rounds`` fits instead on the
calibration runs measured in the fidelity rounds (dumps of ``fidelity.py
--calibrate-in-rounds``), as its ``fastest, refit in rounds`` rows do; the
first row then repeats those rows' stored figures.
"""

import argparse
import dataclasses
import itertools

import numpy as np
from scipy import stats

from gplace.execution import calibration
from gplace.execution import fidelity_dumps
from gplace.execution import fitting
from gplace.execution.profile_file import Profile
from gplace.sim import simulator


def score(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
  """(Spearman, median absolute error in %)."""
  return (float(stats.spearmanr(predicted, measured).statistic),
          float(np.median(np.abs(predicted - measured) / measured) * 100))


def executor_links(prof: Profile, data) -> np.ndarray:
  """The ``pipelined_links`` of the executor that measured ``data`` (a
  fidelity dump): read-backs of accelerator values overlapping where the
  dump says so (``host_reads``), else waiting for each other, as before
  2026-11-28."""
  overlapped = "host_reads" in data and str(data["host_reads"]) == "overlapped"
  return fitting.executor_pipelining(prof.topology.devices, overlapped)


def uncalibrated(prof: Profile, pipelined_links) -> tuple:
  """``(topology, costs)`` as ``gplace.profile`` had them before fitting
  links, launches and copies: the bare copy latencies and bandwidths it
  measured, the bare dispatch as each device's launch cost, no copy issue
  cost, batched inputs allowed, links pipelined as the executor that
  measured the dump copied (``pipelined_links``, :func:`executor_links`),
  and op costs gross of launches (summing to the whole-program runs)."""
  topology = prof.topology
  latency = np.array(prof.transfer_latency_s)
  np.fill_diagonal(latency, 0.0)
  bare = topology.replace(
      devices=tuple(dataclasses.replace(dev, cluster_launch_s=float(s),
                                        copy_issue_s=0.0)
                    for dev, s in zip(topology.devices, prof.dispatch_s)),
      link_latency=latency, link_bandwidth=np.array(prof.transfer_bandwidth),
      batched_inputs=True,
      pipelined_links=pipelined_links)
  return bare, prof.costs * (prof.whole_program_s / prof.costs.sum(0))[None]


def refit(prof: Profile, placements: np.ndarray, orders: np.ndarray,
          measured: np.ndarray, pipelined_links) -> tuple[dict, np.ndarray]:
  """The grid point with the least median absolute log error, and its
  ``[K]`` predictions."""
  topology, gross = uncalibrated(prof, pipelined_links)
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
        link_latency=topology.link_latency * factors,
        link_bandwidth=topology.link_bandwidth / factors,
        batched_inputs=batched, compute_group=np.asarray(group))
    costs = calibration.net_of_launch(gross, trial)
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


def calibration_refit(prof: Profile, pipelined_links,
                      rounds=None) -> tuple:
  """``(topology, costs)`` that ``gplace.profile``'s fit (as the code
  stands) gives on ``prof``'s own calibration runs (``fitting.refit``),
  or on those runs measured in fidelity's rounds (``rounds [R, D + C]``
  seconds, as ``fitting.refit_in_rounds`` fits them)."""
  if prof.calibration_placements is None:
    raise SystemExit("the profile kept no calibration runs (profiles from "
                     "before 2026-11-27 did not); --calibration needs them.")
  if rounds is not None:
    # Host devices time alike (op_timing.timing_classes), each other alone.
    kinds = [dev.kind for dev in prof.topology.devices]
    classes = [kinds.index("cpu") if kind == "cpu" else j
               for j, kind in enumerate(kinds)]
    again = fitting.refit_in_rounds(prof, rounds, classes, pipelined_links)
  else:
    again = fitting.refit(prof, prof.calibration_s, prof.whole_program_s,
                           pipelined_links)
  return again.topology, again.costs


def measured_of(data, schedule: str, statistic: str) -> np.ndarray:
  """``[K]`` seconds of a fidelity dump's placements in ``schedule``: the
  fastest call of all rounds (``"fastest"``) or the mean over rounds of each
  round's fastest call (``"min"``)."""
  rounds = data[f"measured_min_{schedule}"]
  return rounds.min(0) if statistic == "fastest" else rounds.mean(0)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  fidelity_dumps.add_dump_arguments(parser)
  parser.add_argument("--schedule", default="sim",
                      help="which of the dump's schedule kinds to score")
  parser.add_argument("--statistic", default="fastest",
                      choices=("fastest", "min"),
                      help="the measurement each placement is scored on: "
                      "fastest = the fastest call of all rounds (what "
                      "gplace.profile calibrates on since 2026-11-27), min "
                      "= the mean over rounds of each round's fastest call "
                      "(what it calibrated on before)")
  parser.add_argument("--calibration", action="store_true",
                      help="rerun gplace.profile's fit on the profile's own "
                      "calibration runs and score it out of sample, instead "
                      "of the in-sample grid")
  parser.add_argument("--in-rounds", action="store_true",
                      help="with --calibration: fit on the calibration runs "
                      "measured in the fidelity rounds (dumps of fidelity.py "
                      "--calibrate-in-rounds) instead of the profile's own")
  args = parser.parse_args()
  if args.in_rounds and not args.calibration:
    parser.error("--in-rounds goes with --calibration")
  if args.calibration:
    stored, runs = (("stored refit in rounds", "calibration runs in the "
                     "rounds") if args.in_rounds
                    else ("stored profile", "calibration runs"))
    print(f"| workload | {stored}: Spearman / err % | fit rerun on its "
          f"{runs}: Spearman / err % | link factors 0->1 / 1->0 | "
          "launch ms | copy issue ms | batched inputs |")
    print("|---|---|---|---|---|---|---|")
    for name, size, prof, data in fidelity_dumps.load_all(args.dump,
                                                          args.profiles):
      ok = ~data["failed"]
      measured = measured_of(data, args.schedule, args.statistic)[ok]
      if args.in_rounds and "calibration_rounds" not in data:
        raise SystemExit(f"{name} {size}: the dump has no calibration runs "
                         "measured in rounds (fidelity.py "
                         "--calibrate-in-rounds); drop --in-rounds.")
      topology, costs = calibration_refit(
          prof, executor_links(prof, data),
          data["calibration_rounds"] if args.in_rounds else None)
      predicted = np.asarray(simulator.simulate(
          prof.graph, data["placements"][ok], topology, costs=costs,
          order=data[f"order_{args.schedule}"][ok]).runtime_s, np.float64)
      key = "predicted_refit_" if args.in_rounds else "predicted_"
      cal = score(data[f"{key}{args.schedule}"][ok], measured)
      fit = score(predicted, measured)
      factors = topology.link_latency / np.where(
          prof.transfer_latency_s > 0, prof.transfer_latency_s, 1.0)
      links = " / ".join(f"{factors[i, j]:.2f}"
                         for i in range(len(factors))
                         for j in range(len(factors)) if i != j)
      launch, copy = (" / ".join(f"{getattr(dev, field) * 1e3:.3f}"
                                 for dev in topology.devices)
                      for field in ("cluster_launch_s", "copy_issue_s"))
      print(f"| {name} {size} | {cal[0]:.3f} / {cal[1]:.1f} | {fit[0]:.3f} "
            f"/ {fit[1]:.1f} | {links} | {launch} | {copy} | "
            f"{topology.batched_inputs} |", flush=True)
    return
  print("| workload | calibrated: Spearman / err % | best in-sample: "
        "Spearman / err % | best parameters |")
  print("|---|---|---|---|")
  for name, size, prof, data in fidelity_dumps.load_all(args.dump,
                                                        args.profiles):
    if prof.topology.n_devices != 2:
      raise SystemExit(f"{name}: the grid is for two devices.")
    ok = ~data["failed"]
    measured = measured_of(data, args.schedule, args.statistic)[ok]
    calibrated = data[f"predicted_{args.schedule}"][ok]
    params, predicted = refit(prof, data["placements"][ok],
                              data[f"order_{args.schedule}"][ok], measured,
                              executor_links(prof, data))
    cal, fit = score(calibrated, measured), score(predicted, measured)
    print(f"| {name} {size} | {cal[0]:.3f} / {cal[1]:.1f} | {fit[0]:.3f} / "
          f"{fit[1]:.1f} | {params} |", flush=True)


if __name__ == "__main__":
  main()
