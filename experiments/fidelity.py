"""Simulator fidelity: does the calibrated simulator rank real placements?

    python experiments/fidelity.py --size tiny --out experiments/RESULTS.md

For each inference graph (resnet50, inception_v3, bert by default) on two
local devices (forced CPU devices here; CPU + GPU where a GPU exists), it

1. calibrates with ``gplace.profile`` (cached in
   ``experiments/cache/profile_<name>_<size>_<platforms>.npz``; ``--fresh``
   measures again);
2. draws placements: random ones with long same-device runs (the
   topological order cut into 2..16 random contiguous blocks on random
   devices), everything on one device, and every baseline of
   ``gplace.baselines`` planned on the calibrated topology and costs;
3. runs each placement with ``gplace.place`` / ``gplace.measure`` in
   ``--rounds`` rounds (placements in a new random order each round), each
   round summarized by the fastest and by the median of ``--repeats`` calls;
4. compares ``gplace.simulate`` with the mean measurement over rounds:
   Spearman rank correlation and median absolute % error, next to the
   measurement's own round-to-round Spearman (the mean over round pairs: the
   noise ceiling). The fastest call is the robust statistic on a shared,
   loaded machine; the median is what ``gplace.measure`` reports.

It prints a table and writes the "## Simulator fidelity" section of ``--out``
(replacing an earlier one).
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
from gplace import baselines, workloads  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from gplace.execution import executor
from gplace.execution import profiler
from gplace.sim import simulator

STATISTICS = ("min", "median")
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")


def two_devices() -> list[jax.Device]:
  """An accelerator and the CPU where there is one, else two CPU devices."""
  accelerators = [d for d in executor.default_devices() if d.platform != "cpu"]
  if accelerators:
    return [jax.devices("cpu")[0], accelerators[0]]
  return list(jax.devices("cpu")[:_N_DEVICES])


def load_profile(name, size, fn, args, devices, fresh, repeats):
  platforms = "+".join(d.platform for d in devices)
  path = os.path.join(CACHE, f"profile_{name}_{size}_{platforms}.npz")
  if os.path.exists(path) and not fresh:
    return profiler.Profile.load(path)
  prof = profiler.profile(fn, *args, devices=devices, repeats=repeats)
  os.makedirs(CACHE, exist_ok=True)
  prof.save(path)
  return prof


def evaluate(name, size, args_ns, devices):
  fn, args = workloads.get(name, size, "infer")
  prof = load_profile(name, size, fn, args, devices, args_ns.fresh,
                      args_ns.profile_repeats)
  graph = gplace.capture(fn, *args)
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
  n_random = max(args_ns.placements - len(placements), 0)
  for i, placement in enumerate(profiler.block_placements(
      graph.n_nodes, len(devices), n_random, rng, args_ns.max_blocks)):
    labels.append(f"blocks_{i}")
    placements.append(placement)
  placements = np.stack(placements)
  k = placements.shape[0]

  start = time.perf_counter()
  placed = [executor.place(fn, graph, p, devices, mode=args_ns.mode)
            for p in placements]
  measured = {stat: np.full((args_ns.rounds, k), np.nan)
              for stat in STATISTICS}
  failed = np.zeros(k, bool)
  for r in range(args_ns.rounds):
    for i in rng.permutation(k):
      result = gplace.measure(placed[i], *args, repeats=args_ns.repeats,
                              warmup=args_ns.warmup)
      if result.failed:
        failed[i] = True
        print(f"  {labels[i]} failed: {result.reason}", file=sys.stderr)
        continue
      measured["median"][r, i] = result.runtime_s
      measured["min"][r, i] = result.min_s
  measure_s = time.perf_counter() - start
  ok = ~failed
  sim = np.asarray(simulator.simulate(graph, placements[ok], prof.topology,
                                      costs=prof.costs).runtime_s,
                   np.float64)
  clusters = np.array([p.n_clusters for p in placed])
  common = dict(name=name, n_nodes=graph.n_nodes, k=int(ok.sum()),
                clusters=f"{clusters.min()}-{clusters.max()}",
                profile_s=prof.profile_s, measure_s=measure_s,
                fusion=float(prof.fusion_factor[0]),
                link_scale=prof.link_scale)
  results = {}
  for stat in STATISTICS:
    rounds = measured[stat][:, ok]
    mean = rounds.mean(0)
    ceiling = np.mean([stats.spearmanr(rounds[a], rounds[b]).statistic
                       for a, b in itertools.combinations(
                           range(args_ns.rounds), 2)])
    results[stat] = dict(
        common, statistic=stat, spearman=stats.spearmanr(sim, mean).statistic,
        error=np.median(np.abs(sim - mean) / mean) * 100, ceiling=ceiling,
        min_ms=mean.min() * 1e3, max_ms=mean.max() * 1e3,
        rows=list(zip(np.asarray(labels)[ok], mean, sim)))
  return results


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="resnet50,inception_v3,bert")
  parser.add_argument("--size", default="tiny")
  parser.add_argument("--placements", type=int, default=40)
  parser.add_argument("--max-blocks", type=int, default=16)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--profile-repeats", type=int, default=5)
  parser.add_argument("--mode", default="cluster")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--fresh", action="store_true")
  parser.add_argument("--verbose", action="store_true")
  parser.add_argument("--out", default="")
  args_ns = parser.parse_args()
  devices = two_devices()
  print(f"devices: {devices}")
  rows = []
  for name in args_ns.workloads.split(","):
    results = evaluate(name, args_ns.size, args_ns, devices)
    rows.extend(results[stat] for stat in STATISTICS)
    if args_ns.verbose:
      for (label, low, sim), (_, mid, _) in zip(results["min"]["rows"],
                                                results["median"]["rows"]):
        print(f"    {label:16s} measured min {low * 1e3:8.3f} ms, median "
              f"{mid * 1e3:8.3f} ms; simulated {sim * 1e3:8.3f} ms")
    for stat in STATISTICS:
      r = results[stat]
      print(f"{name} ({stat}): spearman {r['spearman']:.3f} (ceiling "
            f"{r['ceiling']:.3f}), median error {r['error']:.1f}%",
            flush=True)
  header = ("| workload | nodes | placements | clusters | statistic | "
            "measured ms (min-max) | Spearman | noise ceiling | "
            "median abs err % | fusion | link scale | profile s | measure s |")
  lines = [header, "|" + "---|" * 13]
  for r in rows:
    lines.append(
        f"| {r['name']} ({args_ns.size}, infer) | {r['n_nodes']} | {r['k']} | "
        f"{r['clusters']} | {r['statistic']} | {r['min_ms']:.2f}-"
        f"{r['max_ms']:.2f} | {r['spearman']:.3f} | {r['ceiling']:.3f} | "
        f"{r['error']:.1f} | {r['fusion']:.3f} | {r['link_scale']:.2f} | "
        f"{r['profile_s']:.0f} | {r['measure_s']:.0f} |")
  table = "\n".join(lines)
  print(table)
  if args_ns.out:
    platforms = "+".join(d.platform for d in devices)
    command = "python experiments/fidelity.py " + " ".join(sys.argv[1:])
    section = (
        f"## Simulator fidelity\n\nCommand: `{command}` on "
        f"{len(devices)} devices ({platforms}), mode {args_ns.mode!r}, "
        f"{args_ns.rounds} rounds of {args_ns.repeats} timed calls per "
        "placement, summarized per round by their fastest (min) or median "
        "call; the measurement is the mean over rounds, the noise ceiling "
        "the mean Spearman between rounds "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).\n\n"
        f"{table}\n")
    write_section(args_ns.out, section)


def write_section(path: str, section: str) -> None:
  """Replaces the "## Simulator fidelity" section of ``path`` (up to the
  next "## " heading), or appends it; other sections are left alone."""
  text = ""
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      text = f.read()
  heading = "## Simulator fidelity"
  start = text.find(heading)
  if start < 0:
    text = text.rstrip("\n") + ("\n\n" if text else "") + section
  else:
    end = text.find("\n## ", start + len(heading))
    rest = text[end + 1:] if end >= 0 else ""
    text = text[:start] + section + ("\n" + rest if rest else "")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


if __name__ == "__main__":
  main()
