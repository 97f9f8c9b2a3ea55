"""How far ``jax.jit(fn)`` on the CPU is from ``jax.jit(fn)`` on an accelerator.

    python experiments/cross_platform.py --workloads resnet50,bert,inception_v3

The executor test matrix compares a placed run with ``jax.jit(fn)`` leaf by
leaf (``tests/execution/test_executor.py``: rtol 1e-3 for training steps,
measured against each leaf's scale). Placed across CPU + GPU
(``experiments/device_check.sh``), a few training-step leaves miss that bar.
This script gives the yardstick with no placement at all: the same step
jitted whole on the CPU and whole on the accelerator, the worst difference
per leaf relative to that leaf's largest magnitude, and the leaves over
``--rtol``. If the un-placed step differs across platforms as much as the
placed one differs from it, the gap is the platforms' rounding (convolution
algorithms, reduction order), not the executor.

Needs an accelerator (run it through the device tool); exits with a message
where there is none.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from gplace import workloads


def leaf_gaps(cpu_out, accel_out) -> list[tuple[str, float, float]]:
  """(path, max |difference| / max |leaf|, max |leaf|) per inexact leaf."""
  gaps = []
  for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(cpu_out)[0],
                          jax.tree.leaves(accel_out)):
    a, b = np.asarray(a), np.asarray(b)
    if not np.issubdtype(a.dtype, np.inexact) or not a.size:
      continue
    scale = float(np.max(np.abs(a)))
    diff = float(np.max(np.abs(a.astype(np.float64) - b)))
    gaps.append((jax.tree_util.keystr(path), diff / max(scale, 1e-30), scale))
  return gaps


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workloads", default="resnet50,bert,inception_v3",
                      help="comma-separated workload names")
  parser.add_argument("--size", default="tiny", help="tiny | small | paper")
  parser.add_argument("--step", default="train", choices=("infer", "train"),
                      help="the inference or the training step")
  parser.add_argument("--rtol", type=float, default=1e-3,
                      help="report leaves whose gap exceeds this")
  args = parser.parse_args()
  accelerators = [d for d in jax.devices() if d.platform != "cpu"]
  if not accelerators:
    raise SystemExit("no accelerator: run this where JAX sees a GPU or TPU")
  cpu = jax.devices("cpu")[0]
  for name in args.workloads.split(","):
    fn, fn_args = workloads.get(name, args.size, args.step)
    outs = []
    for device in (cpu, accelerators[0]):
      on_device = jax.device_put(fn_args, device)
      outs.append(jax.device_get(jax.jit(fn)(*on_device)))
    gaps = leaf_gaps(*outs)
    over = [g for g in gaps if g[1] > args.rtol]
    worst = max(gaps, key=lambda g: g[1])
    print(f"{name} ({args.size}, {args.step}): {len(gaps)} leaves, "
          f"{len(over)} over {args.rtol:g} of leaf scale; worst "
          f"{worst[1]:.2e} at {worst[0]} (max |leaf| {worst[2]:.3g})")
    for path, gap, scale in sorted(over, key=lambda g: -g[1])[:5]:
      print(f"  {gap:.2e}  {path}  (max |leaf| {scale:.3g})")


if __name__ == "__main__":
  main()
