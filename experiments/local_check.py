"""Does gplace.optimize return a placement that is faster for real, on this
machine, than one device?

Three programs written for the check (an MLP forward pass, a flax
Transformer LM train step with adamw, a small conv net forward pass) are
placed with ``gplace.optimize(fn, *args, topology="local", budget_s=...)``
on this machine's forced CPU devices; then the returned placement and
everything on one device are each measured ``--repeats`` times, interleaved,
and the ratio of their medians is printed with each one's spread. Run it
alone (the figures are wall-clock times):

  python experiments/local_check.py --devices 2 \
      --out experiments/results/local_check/devices_2
  python experiments/local_check.py --devices 4 \
      --out experiments/results/local_check/devices_4

``--devices`` sets ``--xla_force_host_platform_device_count`` before JAX
starts, so each device count is one process. Where JAX sees an accelerator
too (``JAX_PLATFORMS=cuda,cpu``), the local devices are the CPU devices and
the accelerator (CPU + GPU, the papers' heterogeneous case), and the bar is
the faster of everything on the CPU and everything on the accelerator
(``experiments/device_check.sh local``).

``--profile-repeats K`` checks calibration instead: each program is
profiled K times afresh within ``--budget_s`` (``gplace.profile(fn, *args,
time_s=budget_s)``), and the wall time and fitted factors of each are
printed with their spread; then what the spread does to predictions:
``--check-placements`` fixed placements (everything on device 0, then block
placements drawn with a fixed seed, all in node-id order) are measured once
and predicted by each fresh profile (``gplace.simulate`` with its topology
and costs), with each profile's error and the spread of the predictions;
then a profile with a cache, made and reused:

  python experiments/local_check.py --devices 4 --programs lm \
      --profile-repeats 3 --out experiments/results/local_check/profile_4
"""

import argparse
import os
import sys


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--devices", type=int, default=4,
                      help="forced CPU devices")
  parser.add_argument("--budget_s", type=float, default=30.0,
                      help="gplace.optimize's budget per program")
  parser.add_argument("--repeats", type=int, default=20,
                      help="timed calls of each placement, in 4 rounds")
  parser.add_argument("--programs", default="mlp,lm,convnet",
                      help="comma-separated: mlp, lm, convnet")
  parser.add_argument("--profile-repeats", type=int, default=0,
                      help="profile each program this many times within "
                      "--budget_s instead (0: the placement check)")
  parser.add_argument("--check-placements", type=int, default=3,
                      help="with --profile-repeats: block placements "
                      "predicted by every profile (besides one device)")
  parser.add_argument("--no-prior", action="store_true",
                      help="fit without the calibration prior on few runs "
                      "(calibration.PRIOR_PER_OCTAVE = 0), for comparison")
  parser.add_argument("--out", default="", help="a study folder")
  return parser.parse_args(argv)


ARGS = parse_args()
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count="
                           f"{ARGS.devices}")

# pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile
import time
import warnings

import jax
import numpy as np

import gplace
from gplace import report
from gplace.execution import calibration, timing
from gplace.execution.inputs import default_devices

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))    # the repository, for experiments.programs
from experiments.programs import PROGRAMS  # noqa: E402


def interleaved(placed: dict, args: tuple, repeats: int, rounds: int = 4
                ) -> dict:
  """``{name: [times]}``: each placed function timed ``repeats`` times in
  ``rounds`` interleaved rounds (after one untimed call each)."""
  for function in placed.values():
    jax.block_until_ready(function(*args))
  times = {name: [] for name in placed}
  per_round = max(1, repeats // rounds)
  for _ in range(rounds):
    for name, function in placed.items():
      for _ in range(per_round):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        times[name].append(time.perf_counter() - start)
  return times


def check(name: str, budget_s: float, repeats: int) -> dict:
  fn, args = PROGRAMS[name]()
  graph = gplace.capture(fn, *args)
  start = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = gplace.optimize(fn, *args, topology="local", budget_s=budget_s,
                             progress=False)
  optimize_s = time.perf_counter() - start
  # One device of each platform (device 0 and the first accelerator, in
  # the order gplace places on: CPU devices first): the bar is the fastest.
  devices = default_devices()
  singles = {}
  for index, device in enumerate(devices):
    if f"single:{device.platform}" not in singles:
      singles[f"single:{device.platform}"] = gplace.place(
          fn, graph, np.full(graph.n_nodes, index, np.int32))
  times = interleaved({"optimize": result.place(fn), **singles}, args,
                      repeats)
  med = {k: float(np.median(v)) for k, v in times.items()}
  iqr = {k: float(np.subtract(*np.percentile(v, [75, 25])))
         for k, v in times.items()}
  best = min(singles, key=med.get)
  med["single"], iqr["single"] = med[best], iqr[best]
  used = len(np.unique(result.placement))
  row = dict(program=name, nodes=graph.n_nodes, devices_used=used,
             single_device=best.split(":")[1],
             method=result.method, optimize_s=optimize_s,
             optimize_ms=med["optimize"] * 1e3,
             optimize_iqr_ms=iqr["optimize"] * 1e3,
             single_ms=med["single"] * 1e3, single_iqr_ms=iqr["single"] * 1e3,
             ratio=med["optimize"] / med["single"],
             no_slower=med["optimize"] <= med["single"] + max(
                 iqr["optimize"], iqr["single"]))
  print(f"{name}: {graph.n_nodes} ops, {result.method!r} on {used} "
        f"device(s): {row['optimize_ms']:.2f} ms (IQR "
        f"{row['optimize_iqr_ms']:.2f}) vs one device "
        f"{row['single_ms']:.2f} ms (IQR {row['single_iqr_ms']:.2f}): "
        f"ratio {row['ratio']:.3f}, optimize took {optimize_s:.0f} s",
        flush=True)
  return row


def _host_cost_ms(prof, field: str) -> str:
  costs = sorted({f"{getattr(dev, field) * 1e3:.3f}"
                  for dev in prof.topology.devices})
  return " / ".join(costs)


def profile_check(name: str, budget_s: float, repeats: int) -> list:
  """Rows of ``repeats`` fresh profiles of one program within ``budget_s``,
  then a cached profile made and reused."""
  fn, args = PROGRAMS[name]()
  rows = []
  def one(label, **kwargs):
    start = time.perf_counter()
    prof = gplace.profile(fn, *args, time_s=budget_s, **kwargs)
    wall = time.perf_counter() - start
    rows.append([name, label, f"{wall:.1f}", f"{prof.fusion_factor.mean():.3f}",
                 f"{prof.link_scale:.2f}",
                 _host_cost_ms(prof, "cluster_launch_s"),
                 _host_cost_ms(prof, "copy_issue_s"),
                 str(len(prof.calibration_s)
                     if prof.calibration_s is not None else 0)])
    print(f"{name} {label}: {' | '.join(rows[-1][2:])}", flush=True)
    return wall, prof
  fresh = [one(f"fresh {i + 1}") for i in range(repeats)]
  walls = [w for w, _ in fresh]
  scales = [p.link_scale for _, p in fresh]
  fusion = [float(p.fusion_factor.mean()) for _, p in fresh]
  rows.append([name, "spread (max/min)",
               f"{max(walls) / min(walls):.2f}x",
               f"{max(fusion) / min(fusion):.2f}x",
               f"{max(scales) / max(min(scales), 1e-9):.2f}x", "", "", ""])
  with tempfile.TemporaryDirectory() as cache:
    one("cached: made", cache=cache)
    one("cached: reused", cache=cache)
  return rows, prediction_rows(name, fn, args, [p for _, p in fresh])


def prediction_rows(name: str, fn, args: tuple, profiles: list) -> list:
  """Rows of each profile's predictions of fixed placements (measured once
  here, node-id order), and their spread over the profiles."""
  graph = profiles[0].graph
  n, d = graph.n_nodes, profiles[0].topology.n_devices
  blocks = calibration.block_placements(
      n, d, ARGS.check_placements, np.random.default_rng(7))
  placements = np.concatenate([np.zeros((1, n), np.int32), blocks])
  orders = np.tile(np.arange(n, dtype=np.int32), (len(placements), 1))
  measured = timing.measure_placements(
      fn, graph, placements, args, schedules=orders, repeats=10)
  rows, predicted = [], []
  for i, prof in enumerate(profiles):
    sim = np.asarray(gplace.simulate(graph, placements, prof.topology,
                                     prof.costs, order=orders).runtime_s)
    predicted.append(sim)
    rows.append([name, f"fresh {i + 1}"] + [
        f"{s * 1e3:.2f} ({(s / m - 1) * 100:+.0f}%)"
        for s, m in zip(sim, measured)])
  predicted = np.array(predicted)
  rows.append([name, "spread (max/min)"] + [
      f"{hi / lo:.2f}x" for hi, lo in zip(predicted.max(0), predicted.min(0))])
  rows.insert(0, [name, "measured"] + [f"{m * 1e3:.2f}" for m in measured])
  return rows


def profile_main() -> None:
  if ARGS.no_prior:
    calibration.PRIOR_PER_OCTAVE = 0.0
  checks = [profile_check(name, ARGS.budget_s, ARGS.profile_repeats)
            for name in ARGS.programs.split(",")]
  rows = [row for profile_rows, _ in checks for row in profile_rows]
  header = ["program", "profile", "wall s", "fusion factor (mean)",
            "link scale", "launch ms", "copy issue ms", "calibration runs"]
  lines = [f"`gplace.profile(fn, *args, time_s={ARGS.budget_s:g})` on "
           f"{ARGS.devices} forced CPU devices, load average at the start "
           f"{os.getloadavg()[0]:.1f} (measured wall time; fitted factors).",
           "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  predicted = ["program", "profile", "one device"] + [
      f"blocks {k + 1}" for k in range(ARGS.check_placements)]
  lines += ["", "Fixed placements in node-id order, measured once (ms), and "
            "each fresh profile's simulated prediction (error against the "
            "measurement); spread: max/min of the predictions.", "",
            "| " + " | ".join(predicted) + " |",
            "|" + "---|" * len(predicted)]
  lines += ["| " + " | ".join(row) + " |"
            for _, prediction in checks for row in prediction]
  print("\n".join(lines))
  study = report.Study.create(ARGS.out, __file__)
  if study is not None:
    study.write(lines)


def main() -> None:
  if ARGS.profile_repeats:
    profile_main()
    return
  print(f"devices {default_devices()}, load average "
        f"{os.getloadavg()}", flush=True)
  rows = [check(name, ARGS.budget_s, ARGS.repeats)
          for name in ARGS.programs.split(",")]
  header = ["program", "ops", "devices", "returned placement", "used",
            "measured ms (IQR)", "best one device ms (IQR)", "ratio",
            "no slower", "optimize s"]
  names = ", ".join(f"{d.platform}:{d.id}" for d in default_devices())
  table = [[r["program"], str(r["nodes"]), names, r["method"],
            str(r["devices_used"]),
            f"{r['optimize_ms']:.2f} ({r['optimize_iqr_ms']:.2f})",
            f"{r['single_device']}: {r['single_ms']:.2f} "
            f"({r['single_iqr_ms']:.2f})",
            f"{r['ratio']:.3f}", "yes" if r["no_slower"] else "NO",
            f"{r['optimize_s']:.0f}"] for r in rows]
  lines = [f"`gplace.optimize(fn, *args, topology='local', budget_s="
           f"{ARGS.budget_s:g})` on {names}; the returned placement and "
           "everything on one device of each platform each timed "
           f"{ARGS.repeats} times, interleaved (measured wall-clock "
           "medians); the bar is the fastest single device.", "",
           "| " + " | ".join(header) + " |",
           "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(row) + " |" for row in table]
  print("\n".join(lines))
  study = report.Study.create(ARGS.out, __file__)
  if study is not None:
    study.write(lines)
  if not all(r["no_slower"] for r in rows):
    sys.exit(1)


if __name__ == "__main__":
  main()
