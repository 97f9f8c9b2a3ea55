"""Fidelity of fusion decisions: does the calibrated simulator rank the
fusion variants of one placement as they run?

    python experiments/fusion_fidelity.py --workloads resnet50,bert \
        --out experiments/results/fusion_fidelity/tiny

On two forced CPU devices, for each tiny zoo inference workload it

1. calibrates with ``gplace.profile`` (the cache of
   ``experiments/fidelity.py``, ``--cache``);
2. takes one placement: the fastest baseline's on the calibrated profile;
3. builds fusion variants of it: no fusion, the default
   (``gplace.graphs.fusion.default_fusion``: XLA's producer-into-consumer
   fusion), random legal merges of several sizes (from no fusion and from
   the default), and the fusion search's result
   (``gplace.search.fusion_annealing``, ``--budget`` evaluations), each
   distinct decision once;
4. predicts each with the calibrated profile (``gplace.simulate(...,
   fusion=)``), and with a per-op model of the same profile (each op at
   its own measured time, ``costs / fusion_factor``, and one dispatch per
   executable: the calibrated costs are scaled so that one cluster costs
   the whole program XLA fused, which a decision that runs ops alone
   undoes; the search runs on both), and runs it with ``gplace.place(..., schedule=, fusion=)``
   (each group one executable) in ``--rounds`` interleaved rounds of
   ``gplace.measure``, keeping the fastest call of all rounds (and, for
   reference, the placement without a decision: maximal same-device
   clusters that XLA fuses as it likes);
5. prints Spearman and median absolute % error of prediction against
   measurement, and whether the search's variant is measured faster than
   the default.

The machine is shared: the load average is printed at the start and end
(and the study's README has both).
"""

import os
import sys

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))

_N_DEVICES = 2
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={_N_DEVICES}").strip()

import jax  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_num_cpu_devices", _N_DEVICES)

import argparse  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import dataclasses  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import time  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import numpy as np  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from scipy import stats  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import gplace  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import baselines, report, workloads  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import cache as executor_cache  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import executor  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution.timing import fastest_in_rounds  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.graphs.fusion import default_fusion, fuse  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.search.fusion import fusion_annealing  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.search.fusion_moves import canonical, merge  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from experiments.fidelity import CACHE, load_profile, two_devices  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position


def best_baseline(graph, prof, seed):
  """``(name, [N] placement)``: the fastest baseline on the profile."""
  placed = baselines.run_all(graph, prof.topology, costs=prof.costs,
                             seed=seed)
  names = list(placed)
  stacked = np.stack([np.asarray(placed[n], np.int32) for n in names])
  result = gplace.simulate(graph, stacked, prof.topology, costs=prof.costs)
  runtime = np.where(np.asarray(result.oom), np.inf,
                     np.asarray(result.runtime_s, np.float64))
  best = int(np.argmin(runtime))
  return names[best], stacked[best]


def per_op_model(prof):
  """``(topology, costs)``: the profile with each op at its own measured
  time (``costs / fusion_factor``: the calibrated costs are scaled so that
  one cluster costs the whole program, which XLA fused) and one dispatch
  (``dispatch_s``) per executable, a model of ops that run alone."""
  devices = tuple(dataclasses.replace(device, cluster_launch_s=float(
      prof.dispatch_s[i])) for i, device in enumerate(prof.topology.devices))
  return (prof.topology.replace(devices=devices),
          prof.costs / np.asarray(prof.fusion_factor)[None, :])


def random_merges(rng, graph, placement, labels, n_merges):
  """``labels`` with ``n_merges`` random legal merges applied."""
  for _ in range(n_merges):
    labels = merge(rng, graph, placement, labels)
  return labels


def variants(graph, models, placement, args_ns, rng):
  """``[(label, [N] labels)]``, each distinct decision once, and the
  search's result on the calibrated profile (``models["profile"]``); the
  search on the per-op model is one more variant."""
  none = np.full(graph.n_nodes, -1, np.int64)
  default = canonical(default_fusion(graph, placement))
  found = None
  rows = [("none", none), ("default", default)]
  for model, (topology, costs) in models.items():
    result = fusion_annealing(graph, topology, placement=placement,
                              costs=costs, seed=args_ns.seed,
                              budget=args_ns.budget)
    rows.append(("search" if model == "profile" else f"search ({model})",
                 result.fusion))
    if found is None:
      found = result
  for size in (int(s) for s in args_ns.merges.split(",")):
    rows.append((f"none+{size} merges",
                 random_merges(rng, graph, placement, none, size)))
    rows.append((f"default+{size} merges",
                 random_merges(rng, graph, placement, default, size)))
  kept, seen = [], {}
  for label, labels in rows:
    key = canonical(labels).tobytes()
    if key in seen:
      print(f"    ({label} is the same decision as {seen[key]})")
      continue
    seen[key] = label
    kept.append((label, canonical(labels)))
  return kept, found


def evaluate(name, args_ns, devices):
  """The rows of one workload: per variant its groups, prediction and
  measurement; and the summary."""
  workload = workloads.load(name, args_ns.size, "infer", runnable=True)
  fn, fn_args, graph = workload.fn, workload.args, workload.graph
  prof = load_profile(name, args_ns.size, fn, fn_args, devices, False,
                      args_ns.profile_repeats, args_ns.cache,
                      args_ns.calibration_rounds)
  rng = np.random.default_rng(args_ns.seed)
  base, placement = best_baseline(graph, prof, args_ns.seed)
  models = {"profile": (prof.topology, prof.costs),
            "per-op model": per_op_model(prof)}
  began = time.perf_counter()
  kept, found = variants(graph, models, placement, args_ns, rng)
  search_s = time.perf_counter() - began
  predicted = {model: [] for model in models}
  placed = []
  for _, labels in kept:
    for model, (topology, costs) in models.items():
      result = gplace.simulate(graph, placement, topology, costs=costs,
                               fusion=labels, return_schedule=True)
      predicted[model].append(float(result.runtime_s))
      if model == "profile":     # run in the calibrated fused schedule
        placed.append(executor.place(fn, graph, placement, devices,
                                     schedule=np.asarray(result.order),
                                     fusion=labels))
  # For reference, not ranked: the executor without a decision (maximal
  # same-device clusters, XLA fusing inside them as it likes).
  plain = gplace.simulate(graph, placement, prof.topology, costs=prof.costs,
                          return_schedule=True)
  placed.append(executor.place(fn, graph, placement, devices,
                               schedule=np.asarray(plain.order)))
  fastest = fastest_in_rounds(placed, *fn_args, rounds=args_ns.rounds,
                              repeats=args_ns.repeats, warmup=args_ns.warmup,
                              rng=rng)
  xla_ms, fastest = fastest[-1] * 1e3, fastest[:-1]
  predicted = {model: np.asarray(v) for model, v in predicted.items()}
  ok = np.isfinite(fastest) & np.isfinite(predicted["profile"])
  labels = [label for label, _ in kept]
  index = {label: i for i, label in enumerate(labels)}
  rows = []
  for i, (label, decision) in enumerate(kept):
    fused = fuse(graph, decision)
    rows.append(f"| {name} | {label} | {int((fused.n_members > 1).sum())} | "
                f"{int((decision >= 0).sum())} | "
                f"{predicted['profile'][i] * 1e3:.3f} | "
                f"{predicted['per-op model'][i] * 1e3:.3f} | "
                f"{fastest[i] * 1e3:.3f} |")
  rows.append(f"| {name} | XLA clusters (no fusion=) | – | – | "
              f"{float(plain.runtime_s) * 1e3:.3f} | – | {xla_ms:.3f} |")
  fit = {}
  for model, values in predicted.items():
    fit[model] = (
        stats.spearmanr(values[ok], fastest[ok]).statistic,
        np.median(np.abs(values[ok] - fastest[ok]) / fastest[ok]) * 100)
  search, default = fastest[index["search"]], fastest[index["default"]]
  summary = dict(
      name=name, nodes=graph.n_nodes, base=base, k=int(ok.sum()),
      spearman=fit["profile"][0], error=fit["profile"][1],
      spearman_per_op=fit["per-op model"][0],
      error_per_op=fit["per-op model"][1], xla_ms=xla_ms,
      search_ms=search * 1e3, default_ms=default * 1e3,
      none_ms=fastest[index["none"]] * 1e3,
      search_faster=bool(search < default),
      predicted_gain=found.gain_over_default,
      evaluations=found.evaluations, search_s=search_s)
  return rows, summary


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="resnet50,bert",
                      help="comma-separated zoo workload names")
  parser.add_argument("--size", default="tiny", help="tiny | small | paper")
  parser.add_argument("--merges", default="2,8,32",
                      help="sizes (merges) of the random variants, each "
                      "from no fusion and from the default")
  parser.add_argument("--budget", type=int, default=1500,
                      help="simulator evaluations of the fusion search")
  parser.add_argument("--rounds", type=int, default=3,
                      help="interleaved measurement rounds")
  parser.add_argument("--repeats", type=int, default=5,
                      help="timed calls per variant and round")
  parser.add_argument("--warmup", type=int, default=2,
                      help="untimed calls before timing")
  parser.add_argument("--profile-repeats", type=int, default=3,
                      help="repeats of the per-op cost profile (if not "
                      "cached)")
  parser.add_argument("--calibration-rounds", type=int, default=3,
                      help="calibration rounds of the profile (if not "
                      "cached)")
  parser.add_argument("--cache", default=CACHE,
                      help="directory of cached profiles")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the random merges and the search")
  parser.add_argument("--out", default="", help=report.OUT_HELP)
  args_ns = parser.parse_args()
  study = report.Study.create(args_ns.out, __file__)
  devices = two_devices()
  print(f"devices: {devices}; load average {report.load_average(', ')}",
        flush=True)
  lines = ["| workload | variant | fused groups | fused nodes | "
           "predicted ms (profile) | predicted ms (per-op model) | "
           "measured ms (fastest) |", "|" + "---|" * 7]
  summaries = []
  for name in [w for w in args_ns.workloads.split(",") if w]:
    rows, summary = evaluate(name, args_ns, devices)
    executor_cache.clear_cache()
    lines += rows
    summaries.append(summary)
    print("\n".join(rows), flush=True)
    print(f"{name}: spearman {summary['spearman']:.3f}, median error "
          f"{summary['error']:.1f}% over {summary['k']} variants (per-op "
          f"model: {summary['spearman_per_op']:.3f}, "
          f"{summary['error_per_op']:.1f}%); XLA clusters measured "
          f"{summary['xla_ms']:.3f} ms; measured "
          f"search {summary['search_ms']:.3f} ms vs default "
          f"{summary['default_ms']:.3f} ms vs none {summary['none_ms']:.3f} "
          f"ms (search faster: {summary['search_faster']}; predicted gain "
          f"over default {100 * summary['predicted_gain']:.1f}%); load "
          f"average {report.load_average(', ')}", flush=True)
  summary_lines = [
      "| workload | nodes | placement | variants | Spearman (profile) | "
      "median abs err % (profile) | Spearman (per-op model) | median abs "
      "err % (per-op model) | measured search / default / none / XLA "
      "clusters ms | search faster than default | predicted gain over "
      "default % | search evaluations, s |",
      "|" + "---|" * 12]
  for s in summaries:
    summary_lines.append(
        f"| {s['name']} ({args_ns.size}, infer) | {s['nodes']} | {s['base']} "
        f"| {s['k']} | {s['spearman']:.3f} | {s['error']:.1f} | "
        f"{s['spearman_per_op']:.3f} | {s['error_per_op']:.1f} | "
        f"{s['search_ms']:.3f} / {s['default_ms']:.3f} / {s['none_ms']:.3f} "
        f"/ {s['xla_ms']:.3f} | {'yes' if s['search_faster'] else 'no'} | "
        f"{100 * s['predicted_gain']:.1f} | {s['evaluations']}, "
        f"{s['search_s']:.0f} |")
  print("\n".join(summary_lines))
  print(f"load average at the end: {report.load_average(', ')}")
  if study:
    study.write([
        f"{len(devices)} forced CPU devices; one placement per workload (the "
        "fastest baseline on the calibrated profile) and fusion variants of "
        "it, each run with gplace.place(..., fusion=) in its fused "
        f"simulator schedule; {args_ns.rounds} interleaved rounds of "
        f"{args_ns.repeats} timed calls, the fastest call of all rounds "
        "against gplace.simulate(..., fusion=) on the calibrated profile "
        "and on its per-op model (costs / fusion_factor, one dispatch per "
        "executable). "
        "The machine is shared (2 cores): see the load averages above.",
        "", *summary_lines, "", *lines])


if __name__ == "__main__":
  main()
