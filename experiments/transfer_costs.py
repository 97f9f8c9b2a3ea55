"""What moving freshly computed values between two devices costs, three ways.

    python experiments/transfer_costs.py [--counts 1,8,32] [--bytes 4096] \
        [--out experiments/results/fidelity/transfer_costs]

On CPU + GPU a ``jax.device_put`` of a value the GPU has just computed to
the CPU costs far more than a bare copy of a resting array
(``gplace.profile``'s ``fit_transfer``), batched in one call or not
(``experiments/results/fidelity/README.md``, "CPU + H200"). This
script times, for ``k`` values of ``--bytes`` each that one executable has
just produced on the source device:

* ``put``: ``jax.device_put(values, dst)``, the executor's earlier way;
* ``get``: ``jax.device_get(values)`` (every copy to the host started before
  any is awaited), then ``jax.device_put`` of the host arrays;
* ``prefetch``: ``copy_to_host_async()`` of every value not on a CPU,
  then ``jax.device_put(values, dst)``: what the executor does now between
  platforms (``gplace.execution.plan.defer_host_copies``; out of a CPU it
  is ``put``);
* ``packed``: the values flattened into one buffer on the source device (one
  more executable), one copy, and split back on the destination.

Each is timed with the producing executable, less the producer alone
(median over ``--repeats``, after warm-up), per direction between the first
device and the last (CPU and GPU where both exist; two forced CPU devices
otherwise: ``--cpu-devices``). Every method's values are checked equal to
the source's. Prints microseconds per value.
"""

import argparse
import json
import os
import statistics
import time

JSON_FILE = "transfer_costs.json"
METHODS = ("put", "get", "prefetch", "packed")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--counts", default="1,8,32",
                      help="comma-separated numbers of values moved at once")
  parser.add_argument("--bytes", type=int, default=4096,
                      help="bytes of each value (float32)")
  parser.add_argument("--repeats", type=int, default=30,
                      help="timed calls per method (median)")
  parser.add_argument("--cpu-devices", type=int, default=2,
                      help="forced host devices when there is no accelerator")
  parser.add_argument("--out", default="",
                      help="the study's folder: README.md there says what "
                      "was run and holds the table, transfer_costs.json "
                      "every figure")
  args = parser.parse_args()
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (f"{flags} --xla_force_host_platform_device_"
                               f"count={args.cpu_devices}").strip()
  import jax                           # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp              # pylint: disable=import-outside-toplevel
  import numpy as np                   # pylint: disable=import-outside-toplevel
  from gplace import report            # pylint: disable=import-outside-toplevel

  study = report.Study.create(args.out, __file__)

  cpus = jax.devices("cpu")
  others = [d for d in jax.devices() if d.platform != "cpu"]
  first, last = cpus[0], (others[0] if others else cpus[-1])
  if first == last:
    raise SystemExit("two devices are needed (set --cpu-devices >= 2).")
  n = max(args.bytes // 4, 1)
  counts = [int(c) for c in args.counts.split(",")]
  rows = []

  def median_s(call) -> float:
    for _ in range(3):
      jax.block_until_ready(call())
    times = []
    for _ in range(args.repeats):
      start = time.perf_counter()
      jax.block_until_ready(call())
      times.append(time.perf_counter() - start)
    return statistics.median(times)

  def prefetched_put(values, dst):
    for value in values:
      if value.devices().pop().platform != "cpu":
        value.copy_to_host_async()
    return jax.device_put(values, dst)

  for src, dst in ((last, first), (first, last)):
    on_src = jax.sharding.SingleDeviceSharding(src)
    on_dst = jax.sharding.SingleDeviceSharding(dst)
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), src)
    for k in counts:
      produce = jax.jit(lambda v, k=k: [v * (i + 1.0) for i in range(k)],
                        out_shardings=[on_src] * k)
      pack = jax.jit(lambda vs: jnp.concatenate([v.ravel() for v in vs]),
                     out_shardings=on_src)
      unpack = jax.jit(lambda flat, k=k: list(flat.reshape(k, n)),
                       out_shardings=[on_dst] * k)
      methods = {
          "put": lambda: jax.device_put(produce(x), dst),
          "get": lambda: jax.device_put(jax.device_get(produce(x)), dst),
          "prefetch": lambda: prefetched_put(produce(x), dst),
          "packed": lambda: unpack(jax.device_put(pack(produce(x)), dst)),
      }
      want = [np.asarray(v) for v in produce(x)]
      base = median_s(lambda: produce(x))
      row = {"src": str(src), "dst": str(dst), "count": k,
             "bytes": 4 * n, "producer_us": base * 1e6}
      for name, call in methods.items():
        got = call()
        for a, b in zip(got, want):
          if a.devices() != {dst}:
            raise SystemExit(f"{name}: a value landed on {a.devices()}.")
          np.testing.assert_array_equal(np.asarray(a), b)
        row[f"{name}_us_per_value"] = (median_s(call) - base) / k * 1e6
      rows.append(row)
      print(f"{row['src']:>14} -> {row['dst']:<14} k={k:3d}  producer "
            f"{row['producer_us']:7.1f} us; per value: put "
            f"{row['put_us_per_value']:7.1f} us, get "
            f"{row['get_us_per_value']:7.1f} us, prefetch "
            f"{row['prefetch_us_per_value']:7.1f} us, packed "
            f"{row['packed_us_per_value']:7.1f} us", flush=True)
  if study:
    with open(study.path(JSON_FILE), "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)
    study.write(["Microseconds per value moved (the producer alone "
                 "subtracted):", "",
                 "| source | destination | values | producer us | "
                 + " | ".join(METHODS) + " |",
                 "|---|---|---:|---:|" + "---:|" * len(METHODS)]
                + [f"| {r['src']} | {r['dst']} | {r['count']} | "
                   f"{r['producer_us']:.1f} | " + " | ".join(
                       f"{r[f'{m}_us_per_value']:.1f}" for m in METHODS)
                   + " |" for r in rows])


if __name__ == "__main__":
  main()
