"""Simulator fidelity: does the calibrated simulator rank real placements?

    python experiments/fidelity.py --size tiny \
        --out experiments/results/fidelity/tiny

For each inference graph (resnet50, inception_v3, bert by default) on two
local devices (forced CPU devices here; CPU + GPU where a GPU exists), it

1. calibrates with ``gplace.profile`` (cached in
   ``experiments/cache/profile_<name>_<size>_<platforms>.npz``; ``--fresh``
   measures again);
2. draws placements: everything on one device, every baseline of
   ``gplace.baselines`` planned on the calibrated topology and costs, then
   random ones with long same-device runs (the topological order cut into
   2..16 random contiguous blocks on random devices) up to
   ``--placements``, each distinct placement once (a repeat is measured
   once, under its first label);
3. runs each placement with ``gplace.place`` / ``gplace.measure`` under each
   of ``--schedules`` in ``--rounds`` rounds (all runs in a new random order
   each round), each round summarized by the fastest and by the median of
   ``--repeats`` calls:

   * ``sim`` (default): the placement runs in its simulator schedule, the
     default schedule of ``gplace.simulate(graph, placements,
     profile.topology, costs=profile.costs, return_schedule=True)``
     (``"best"``: per placement the faster of the dynamic and the planned
     schedule; ``place(..., schedule=order)``: each device runs its ops in
     that order), and is predicted by that same simulation;
   * ``static``: the same in node-id order (``schedule="static"``);
   * ``dynamic``: the same with the simulator's dynamic list schedule
    (``simulate(..., schedule="dynamic")``), each placement its own order;
  * ``device_greedy``: the way before schedules: the executor's
     device-greedy order, predicted by the simulator in node-id order
     (``simulate(..., order=np.arange(N))``);

4. compares the prediction with the measurement (``fastest``: the fastest
   call of all rounds, what ``gplace.profile`` calibrates on; ``min`` and
   ``median``: the mean over rounds of each round's fastest or median
   call): Spearman rank correlation and median absolute % error, next to
   the measurement's own round-to-round Spearman (the mean over round
   pairs: the noise ceiling). The fastest call is the robust statistic on a
   shared, loaded machine; the median is what ``gplace.measure`` reports.

With ``--calibrate-in-rounds`` the profile's own calibration runs
(``fitting.calibration_runs``) are measured in the same rounds, the profile
is fitted again on them (``fitting.refit``: fusion, links, launches,
copies; op times stay) and its predictions are scored as one more statistic,
``fastest, refit in rounds``. The fit still sees only its calibration
placements; what changes is that it and the placements it predicts are
measured on the same host at the same time (on a shared 2-core machine the
host's speed drifts between a calibration and a measurement minutes later:
``docs/design.md``, "Calibration").

It prints a table; ``--out DIR`` writes it to ``DIR/README.md`` with what
was run, when and on which machine.
"""

import os
import sys

_N_DEVICES = 2
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={_N_DEVICES}").strip()

import jax  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_num_cpu_devices", _N_DEVICES)

import argparse  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import itertools  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import time  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import numpy as np  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from scipy import stats  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import gplace  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import baselines, report, workloads  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import cache as executor_cache  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import executor  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import partition  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import calibration  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import fidelity_dumps  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import fitting  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import op_timing  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import profiler  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution.profile_file import Profile  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.sim import simulator  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

# Each placement's measurement: (statistic, its per-round summary of the
# round's timed calls, how the rounds are combined). "fastest" is the
# fastest call of all rounds, the figure gplace.profile calibrates on: load
# on a shared machine only ever adds time, and on this 2-core machine the
# fastest call reproduced to 2% between two processes where the median over
# rounds moved by up to 12% (experiments/results/fidelity/README.md).
STATISTICS = ("fastest", "min", "median")
# With --calibrate-in-rounds, one more row per schedule: "fastest", predicted
# by the profile fitted again on its calibration runs measured in the rounds.
_REFIT = "fastest, refit in rounds"
_CALIBRATION = "calibration"
_PER_ROUND = {"fastest": "min", "min": "min", "median": "median",
              _REFIT: "min"}
_ACROSS_ROUNDS = {"fastest": np.min, "min": np.mean, "median": np.mean,
                  _REFIT: np.min}
SCHEDULES = ("sim", "static", "dynamic", "device_greedy")
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")


def two_devices() -> list[jax.Device]:
  """An accelerator and the CPU where there is one, else two CPU devices."""
  accelerators = [d for d in executor.default_devices() if d.platform != "cpu"]
  if accelerators:
    return [jax.devices("cpu")[0], accelerators[0]]
  return list(jax.devices("cpu")[:_N_DEVICES])


def load_profile(name, size, fn, args, devices, fresh, repeats, cache=CACHE,
                 calibration_rounds=7):
  platforms = "+".join(d.platform for d in devices)
  # "_fastest": calibrated with placements run in their simulator schedule,
  # a cost per cluster, and each run's fastest call of all rounds (older
  # profiles are not reused).
  path = os.path.join(cache,
                      f"profile_{name}_{size}_{platforms}_fastest.npz")
  if os.path.exists(path) and not fresh:
    return Profile.load(path)
  prof = profiler.profile(fn, *args, devices=devices, repeats=repeats,
                          calibration_rounds=calibration_rounds)
  os.makedirs(cache, exist_ok=True)
  prof.save(path)
  return prof


def distinct(labels, placements, seen=None):
  """``(labels, placements, seen)`` without the placements equal to an
  earlier one or to one in ``seen`` (placement bytes -> label, updated);
  the label of a dropped one is printed next to the one it repeats."""
  kept_labels, kept, seen = [], [], dict(seen or {})
  for label, placement in zip(labels, placements):
    key = np.asarray(placement, np.int32).tobytes()
    if key in seen:
      print(f"    ({label} is the same placement as {seen[key]}: measured "
            "once)")
      continue
    seen[key] = label
    kept_labels.append(label)
    kept.append(placement)
  return kept_labels, kept, seen


def evaluate(name, size, args_ns, devices):
  workload = workloads.load(name, size, "infer", runnable=True)
  fn, args, graph = workload.fn, workload.args, workload.graph
  prof = load_profile(name, size, fn, args, devices, args_ns.fresh,
                      args_ns.profile_repeats, args_ns.cache,
                      args_ns.calibration_rounds)
  if graph.n_nodes != prof.graph.n_nodes:
    raise SystemExit(f"{name}: cached profile is of another graph; --fresh")
  rng = np.random.default_rng(args_ns.seed)
  labels, placements = [], []
  for d in range(len(devices)):
    labels.append(f"all_on_{d}")
    placements.append(np.full(graph.n_nodes, d, np.int32))
  for base, placement in baselines.run_all(
      graph, prof.topology, costs=prof.costs, seed=args_ns.seed).items():
    labels.append(base)
    placements.append(np.asarray(placement, np.int32))
  # Each distinct placement once, under its first label: the same placement
  # measured twice is ranked by noise alone (inception_v3 tiny's 40 had 33
  # distinct ones: everything on one device three times, one plan four).
  labels, placements, seen = distinct(labels, placements)
  drawn = 0
  while len(placements) < args_ns.placements and drawn < 10 * (
      args_ns.placements + 1):
    placement, = calibration.block_placements(
        graph.n_nodes, len(devices), 1, rng, args_ns.max_blocks)
    more_labels, more, seen = distinct([f"blocks_{drawn}"], [placement],
                                       seen)
    labels, placements = labels + more_labels, placements + more
    drawn += 1
  placements = np.stack(placements)
  k = placements.shape[0]
  kinds = args_ns.schedules.split(",")

  # Predictions, and the schedule each placement runs in, per kind.
  predicted, schedules = {}, {}
  for kind in kinds:
    if kind in ("sim", "static", "dynamic"):
      result = simulator.simulate(
          graph, placements, prof.topology, costs=prof.costs,
          schedule=None if kind == "sim" else kind, return_schedule=True)
      schedules[kind] = list(partition.schedule_orders(result))
    else:
      result = simulator.simulate(graph, placements, prof.topology,
                                  costs=prof.costs,
                                  order=np.arange(graph.n_nodes))
      schedules[kind] = [kind] * k
    predicted[kind] = np.asarray(result.runtime_s, np.float64)

  start = time.perf_counter()
  runs = [(kind, i) for kind in kinds for i in range(k)]
  placed = {run: executor.place(fn, graph, placements[run[1]], devices,
                                mode=args_ns.mode,
                                schedule=schedules[run[0]][run[1]])
            for run in runs}
  # --calibrate-in-rounds: the profile's own calibration runs, measured in
  # the same rounds, to fit it again on the same machine state.
  if args_ns.calibrate_in_rounds and prof.calibration_placements is not None:
    for i, (placement, order) in enumerate(fitting.calibration_runs(prof)):
      placed[(_CALIBRATION, i)] = executor.place(fn, graph, placement,
                                                 devices, schedule=order)
      runs.append((_CALIBRATION, i))
  n_calibration = sum(run[0] == _CALIBRATION for run in runs)
  calibration_rounds = np.full((args_ns.rounds, n_calibration), np.nan)
  measured = {(stat, kind): np.full((args_ns.rounds, k), np.nan)
              for stat in ("min", "median") for kind in kinds}
  failed = np.zeros(k, bool)
  for r in range(args_ns.rounds):
    for j in rng.permutation(len(runs)):
      kind, i = runs[j]
      result = gplace.measure(placed[runs[j]], *args, repeats=args_ns.repeats,
                              warmup=args_ns.warmup)
      if kind == _CALIBRATION:
        calibration_rounds[r, i] = np.nan if result.failed else result.min_s
        continue
      if result.failed:
        failed[i] = True
        print(f"  {labels[i]} ({kind}) failed: {result.reason}",
              file=sys.stderr)
        continue
      measured[("median", kind)][r, i] = result.runtime_s
      measured[("min", kind)][r, i] = result.min_s
  measure_s = time.perf_counter() - start
  ok = ~failed
  refitted = None
  if n_calibration:
    refitted = fitting.refit_in_rounds(prof, calibration_rounds,
                                       op_timing.timing_classes(devices))
    for kind in kinds:
      result = simulator.simulate(
          graph, placements, refitted.topology, costs=refitted.costs,
          order=fidelity_dumps.run_orders(schedules[kind], graph.n_nodes))
      predicted[(kind, _REFIT)] = np.asarray(result.runtime_s, np.float64)
    if "static" in kinds:
      print_placed_twice(name, labels, calibration_rounds,
                         measured[("min", "static")])
  if args_ns.dump:
    fidelity_dumps.save(
        fidelity_dumps.dump_path(args_ns.dump, name, args_ns.size), labels,
        placements, kinds, schedules, predicted, measured,
        {kind: [placed[(kind, i)].n_clusters for i in range(k)]
         for kind in kinds}, failed,
        {kind: predicted[(kind, _REFIT)] for kind in kinds
         if (kind, _REFIT) in predicted},
        calibration_rounds if n_calibration else None)
  results = {}
  for kind in kinds:
    clusters = np.array([placed[(kind, i)].n_clusters for i in range(k)])
    for stat in STATISTICS + ((_REFIT,) if n_calibration else ()):
      used = refitted if stat == _REFIT else prof
      sim = predicted[(kind, _REFIT) if stat == _REFIT else kind][ok]
      common = dict(name=name, n_nodes=graph.n_nodes, k=int(ok.sum()),
                    schedule=kind,
                    clusters=f"{clusters.min()}-{clusters.max()}",
                    profile_s=prof.profile_s, measure_s=measure_s,
                    fusion=float(used.fusion_factor[0]),
                    link_scale=link_scale_text(used),
                    launch=launch_text(used))
      rounds = measured[(_PER_ROUND[stat], kind)][:, ok]
      mean = _ACROSS_ROUNDS[stat](rounds, axis=0)
      ceiling = np.mean([stats.spearmanr(rounds[a], rounds[b]).statistic
                         for a, b in itertools.combinations(
                             range(args_ns.rounds), 2)])
      results[(kind, stat)] = dict(
          common, statistic=stat,
          spearman=stats.spearmanr(sim, mean).statistic,
          error=np.median(np.abs(sim - mean) / mean) * 100, ceiling=ceiling,
          min_ms=mean.min() * 1e3, max_ms=mean.max() * 1e3,
          rows=list(zip(np.asarray(labels)[ok], mean, sim)))
  return results


def print_placed_twice(name: str, labels: list[str],
                       calibration_rounds: np.ndarray,
                       static_rounds: np.ndarray) -> None:
  """Prints the fastest call of the whole program on each device as two
  placed instances run in the same rounds: the calibration's run
  (``calibration_rounds [R, D + C]``, the single-device runs first) and
  ``all_on_<d>`` in node-id order (``static_rounds [R, K]``). They are the
  same program in the same order, so their spread is noise that no model
  can predict (experiments/results/fidelity/README.md, "CPU + H200")."""
  pairs = []
  for d in range(calibration_rounds.shape[1]):
    label = f"all_on_{d}"
    if label not in labels:
      break
    a = np.nanmin(calibration_rounds[:, d])
    b = np.nanmin(static_rounds[:, labels.index(label)])
    pairs.append(f"{label} {a * 1e3:.3f} / {b * 1e3:.3f} ms")
  if pairs:
    print(f"{name}: the same program placed twice, fastest call in the same "
          f"rounds (calibration run / node-id order): {', '.join(pairs)}",
          flush=True)


def link_scale_text(prof: Profile) -> str:
  """The calibrated link factor: one number, or ``0->1 / 1->0`` where the
  calibration fitted one per direction (CPU + GPU)."""
  scales = prof.link_scales
  if scales is None or np.allclose(scales[~np.eye(len(scales), dtype=bool)],
                                   prof.link_scale):
    return f"{prof.link_scale:.2f}"
  return f"{scales[0, 1]:.2f} / {scales[1, 0]:.2f}"


def launch_text(prof: Profile) -> str:
  """Each device's calibrated host costs in ms, per cluster
  (``cluster_launch_s``) and per copy into it (``copy_issue_s``): one
  number each where all devices share it, else one per device."""
  def text(field):
    costs = [f"{getattr(dev, field) * 1e3:.3f}"
             for dev in prof.topology.devices]
    return costs[0] if len(set(costs)) == 1 else " / ".join(costs)
  return f"{text('cluster_launch_s')}, {text('copy_issue_s')}"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="resnet50,inception_v3,bert",
                      help="comma-separated zoo workload names")
  parser.add_argument("--size", default="tiny", help="tiny | small | paper")
  parser.add_argument("--placements", type=int, default=40,
                      help="placements per workload (random block placements "
                      "after the single-device and baseline ones)")
  parser.add_argument("--max-blocks", type=int, default=16,
                      help="most contiguous blocks of a random placement")
  parser.add_argument("--rounds", type=int, default=3,
                      help="interleaved measurement rounds per placement")
  parser.add_argument("--repeats", type=int, default=7,
                      help="timed runs per placement and round")
  parser.add_argument("--warmup", type=int, default=2,
                      help="untimed runs before timing")
  parser.add_argument("--profile-repeats", type=int, default=5,
                      help="repeats of the per-op cost profile")
  parser.add_argument("--calibration-rounds", type=int, default=7,
                      help="interleaved rounds of the profile's calibration "
                      "runs (fewer: a faster, noisier calibration)")
  parser.add_argument("--calibrate-in-rounds", action="store_true",
                      help="also measure the profile's calibration runs in "
                      "the same rounds, fit the profile again on them "
                      "(fitting.refit) and report its predictions as one "
                      "more statistic: calibration and measurement then "
                      "see the same host speed")
  parser.add_argument("--mode", default="cluster",
                      help="the executor mode: cluster or op")
  parser.add_argument(
      "--schedules", default="sim",
      help="comma list of " + ", ".join(SCHEDULES) + ": sim = run and "
      "simulate each placement in its default simulator schedule; static "
      "= the same in node-id order; dynamic = the same with the dynamic "
      "list schedule; device_greedy = "
      "the way before schedules (device-greedy executor, node-id-order "
      "simulator). Both: the old and the new figures from the same rounds.")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the random placements")
  parser.add_argument("--fresh", action="store_true",
                      help="profile again instead of reading the cache")
  parser.add_argument("--cache", default=CACHE,
                      help="directory of cached profiles (a smoke run should "
                      "point elsewhere, e.g. /tmp)")
  parser.add_argument("--verbose", action="store_true",
                      help="print every placement's numbers")
  parser.add_argument("--dump", default="",
                      help="also save each workload's placements, schedules, "
                      "predictions and raw measurements to "
                      "DIR/fidelity_<name>_<size>.npz")
  parser.add_argument("--out", default="", help=report.OUT_HELP)
  args_ns = parser.parse_args()
  study = report.Study.create(args_ns.out, __file__)
  unknown = set(args_ns.schedules.split(",")) - set(SCHEDULES)
  if unknown:
    parser.error(f"unknown --schedules {sorted(unknown)}; choose from "
                 f"{SCHEDULES}")
  if args_ns.rounds < 2:
    parser.error("--rounds must be at least 2 (the noise ceiling compares "
                 "rounds)")
  devices = two_devices()
  print(f"devices: {devices}")
  rows = []
  for name in args_ns.workloads.split(","):
    results = evaluate(name, args_ns.size, args_ns, devices)
    # This workload's executables are not used again: let them go (each
    # holds memory maps, and a process has a limited number of them).
    executor_cache.clear_cache()
    rows.extend(results.values())
    for kind in args_ns.schedules.split(","):
      if args_ns.verbose:
        for (label, low, sim), (_, mid, _) in zip(
            results[(kind, "min")]["rows"], results[(kind, "median")]["rows"]):
          print(f"    {kind:13s} {label:16s} measured min {low * 1e3:8.3f} "
                f"ms, median {mid * 1e3:8.3f} ms; simulated "
                f"{sim * 1e3:8.3f} ms")
      for stat in [s for (k, s) in results if k == kind]:
        r = results[(kind, stat)]
        print(f"{name} [{kind}] ({stat}): spearman {r['spearman']:.3f} "
              f"(ceiling {r['ceiling']:.3f}), median error "
              f"{r['error']:.1f}%", flush=True)
    # What the table repeats at the end, for a run cut before it.
    first = next(iter(results.values()))
    print(f"{name}: fusion {first['fusion']:.3f}, link scale "
          f"{first['link_scale']}, launch, copy ms {first['launch']}; "
          f"profile {first['profile_s']:.0f} s, measured in "
          f"{first['measure_s']:.0f} s", flush=True)
  header = ("| workload | nodes | placements | schedule | clusters | "
            "statistic | measured ms (min-max) | Spearman | noise ceiling | "
            "median abs err % | fusion | link scale | launch, copy ms | "
            "profile s | "
            "measure s |")
  lines = [header, "|" + "---|" * 15]
  for r in rows:
    lines.append(
        f"| {r['name']} ({args_ns.size}, infer) | {r['n_nodes']} | {r['k']} | "
        f"{r['schedule']} | {r['clusters']} | {r['statistic']} | "
        f"{r['min_ms']:.2f}-"
        f"{r['max_ms']:.2f} | {r['spearman']:.3f} | {r['ceiling']:.3f} | "
        f"{r['error']:.1f} | {r['fusion']:.3f} | {r['link_scale']} | "
        f"{r['launch']} | "
        f"{r['profile_s']:.0f} | {r['measure_s']:.0f} |")
  table = "\n".join(lines)
  print(table)
  if study:
    platforms = "+".join(d.platform for d in devices)
    study.write([
        f"{len(devices)} devices ({platforms}), mode {args_ns.mode!r}, "
        f"schedules {args_ns.schedules} (sim: each placement run and "
        "simulated in its simulator schedule; device_greedy: the executor's "
        "order before schedules against the simulator in node-id order), "
        f"{args_ns.rounds} rounds of {args_ns.repeats} timed calls per "
        "placement, summarized per round by their fastest (min) or median "
        "call; the measurement is the mean over rounds of that, or "
        "(fastest) the fastest call of all rounds, as gplace.profile "
        "calibrates; the noise ceiling is the mean Spearman between rounds.",
        "", *lines])


if __name__ == "__main__":
  main()
