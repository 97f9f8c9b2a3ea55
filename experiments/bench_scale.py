"""Training throughput over processes (issue 48), and a projection to hosts.

Measures :func:`gplace.rl.train` (rewards in the jitted step) as 1 and 2
processes of one forced CPU device each on this machine, with the same
global batch: RL steps/s, samples/s, the time of one step, and the time of
the update's gradient mean across the processes (gloo over loopback). Two
processes on a machine of two cores share those cores with each other (and
with anything else running): this cannot show a speed-up, only that the
split works and what it costs.

The projection to ``H`` hosts of ``D`` devices keeps each device's share
of samples, ``k = K / D`` (the global batch grows with the hosts; ``K``
samples cannot be split over more than ``K`` devices)::

  step_s(H)    = fixed_s + per_sample_s * k + comm_s(H)
  comm_s(H)    = (D - 1) grad_bytes / nvlink_Bps
                 + overhead_s + (H - 1) D grad_bytes / link_Bps   (H > 1)
  samples/s(H) = H D k B / step_s(H)                      (B graphs)

``fixed_s`` and ``per_sample_s`` are fitted to one process at ``K`` and
``K / 2`` samples; the update gathers every device's gradient into every
device (:mod:`gplace.rl.update`), ``(H - 1) D`` copies over each host's
link (``link_Bps``: 400 Gb/s) and ``D - 1`` over NVLink (450 GB/s);
``overhead_s`` is the step's collective latency, shown twice: as measured
here (the 2-process step minus one process's step at ``K / 2``, gloo over
loopback on two shared cores: an upper bound) and at a nominal 0.1 ms (an
assumption, not a measurement). The projection scales this machine's
compute, so it says how the split scales, not how fast a GPU is.

  python experiments/bench_scale.py [--num_samples 32] [--steps 120]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

#: Bytes per second of one host's link to the others (400 Gb/s), and of
#: NVLink inside a host (450 GB/s each way), as gplace.topology's
#: ``2x8h100`` preset takes them.
LINK_BPS = 400e9 / 8
NVLINK_BPS = 450e9


def worker(args) -> dict:
  """One process of a measured run: trains, then times the gradient mean;
  returns the measurements (process 0's are reported)."""
  # pylint: disable=g-import-not-at-top
  from gplace.rl import distributed
  distributed.initialize(
      f"127.0.0.1:{args.port}" if args.num_processes > 1 else None,
      args.num_processes if args.num_processes > 1 else None,
      args.process_id if args.num_processes > 1 else None,
      heartbeat_timeout_s=30)
  import jax
  import jax.numpy as jnp
  import numpy as np
  import gplace
  from gplace.graphs.graph import random_dag
  from gplace.rl import settings as settings_lib
  from gplace.rl import training

  graphs = [random_dag(100, seed=s, name=f"random_dag:100:{s}")
            for s in (1, 2)]
  policy = settings_lib.PolicySettings("go", dict(
      hidden_size=32, num_sage_layers=2, num_attention_layers=1,
      num_heads=2, segment_length=32, op_embedding_size=8,
      head_hidden_size=32))
  settings = settings_lib.TrainSettings(
      seed=0, progress_bar=False, print_table=False,
      baselines=("single_device", "round_robin"),
      rl=settings_lib.RLSettings(reward="simulator",
                                 num_samples=args.num_samples),
      warm_start=settings_lib.WarmStartSettings(baseline="none"),
      train=settings_lib.LoopSettings(
          num_steps=args.steps, chunk_steps=args.steps // 4,
          checkpoint_every=10**6, eval_samples=2))
  stamps = []
  result = training.train(
      graphs, gplace.topology.preset("1cpu+2gpu"), policy, settings,
      progress=lambda step, _: stamps.append((step, time.perf_counter())),
      log=lambda _: None)
  # Steady state: the chunks after the first (its compile); the fastest,
  # the one least slowed by whatever else shares the cores.
  step_s = min((t1 - t0) / (s1 - s0)
               for (s0, t0), (s1, t1) in zip(stamps, stamps[1:]))
  params = result.state.params
  grad_bytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves(params))
  allreduce_s = 0.0
  if jax.device_count() > 1:
    mean = jax.pmap(
        lambda t: jax.tree.map(lambda v: jnp.mean(
            jax.lax.all_gather(v, "d"), 0), t),
        axis_name="d", devices=jax.devices())
    share = jax.tree.map(lambda x: np.broadcast_to(
        np.asarray(x), (jax.local_device_count(),) + np.shape(x)), params)
    jax.block_until_ready(mean(share))  # compile
    repeats = 20
    t0 = time.perf_counter()
    for _ in range(repeats):
      jax.block_until_ready(mean(share))
    allreduce_s = (time.perf_counter() - t0) / repeats
  return dict(processes=jax.process_count(), devices=jax.device_count(),
              num_samples=args.num_samples, graphs=len(graphs),
              step_s=step_s, steps_per_s=1 / step_s,
              samples_per_s=args.num_samples * len(graphs) / step_s,
              allreduce_s=allreduce_s, grad_bytes=int(grad_bytes))


def free_port() -> int:
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1]


def measure(num_processes: int, num_samples: int, steps: int) -> dict:
  """Runs ``num_processes`` workers of one CPU device each; process 0's
  measurements."""
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu",
             XLA_FLAGS="--xla_force_host_platform_device_count=1")
  port = free_port()
  procs = [subprocess.Popen(
      [sys.executable, os.path.abspath(__file__), "--worker",
       f"--process_id={i}", f"--num_processes={num_processes}",
       f"--port={port}", f"--num_samples={num_samples}",
       f"--steps={steps}"], env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for i in range(num_processes)]
  outs = [p.communicate(timeout=900) for p in procs]
  for p, (_, err) in zip(procs, outs):
    if p.returncode:
      raise SystemExit(f"worker failed ({p.returncode}):\n{err[-3000:]}")
  return json.loads(outs[0][0].strip().splitlines()[-1])


def projection(one: dict, half: dict, two: dict, hosts=(1, 2, 4, 8, 16),
               devices_per_host: int = 8,
               nominal_overhead_s: float = 1e-4) -> list[str]:
  """Lines of the projected throughput for ``hosts`` hosts (module
  docstring)."""
  k = one["num_samples"]
  # step_s = fixed + per_sample * samples, from k and k/2 on one device.
  per_sample = max((one["step_s"] - half["step_s"])
                   / (k - half["num_samples"]), 0.0)
  fixed = max(one["step_s"] - per_sample * k, 0.0)
  # Two processes take k/2 each: what their step costs beyond that.
  measured_overhead = max(two["step_s"] - (fixed + per_sample * k / 2), 0.0)
  grad, d, graphs = two["grad_bytes"], devices_per_host, one["graphs"]
  per_device = k / d
  lines = [
      "projection (module docstring): step_s(H) = fixed_s + per_sample_s * "
      "k + comm_s(H),",
      "  comm_s(H) = (D-1) grad_bytes / nvlink_Bps + [H > 1] (overhead_s + "
      "(H-1) D grad_bytes / link_Bps), samples/s = H D k B / step_s",
      f"  fixed_s={fixed:.4g}  per_sample_s={per_sample:.4g}  "
      f"k={per_device:g} per device  D={d}  B={graphs}  "
      f"grad_bytes={grad}  nvlink_Bps={NVLINK_BPS:.3g}  "
      f"link_Bps={LINK_BPS:.3g} (400 Gb/s)"]
  for label, overhead in (
      (f"overhead_s={measured_overhead:.4g} (measured here: gloo, loopback, "
       "2 shared cores)", measured_overhead),
      (f"overhead_s={nominal_overhead_s:g} (nominal, assumed)",
       nominal_overhead_s)):
    lines.append(f"  {label}:")
    lines.append(f"  {'hosts':>7} {'devices':>7} {'step_s':>9} "
                 f"{'comm_s':>9} {'steps/s':>8} {'samples/s':>10}")
    for h in hosts:
      comm = (d - 1) * grad / NVLINK_BPS + (
          0.0 if h == 1 else overhead + (h - 1) * d * grad / LINK_BPS)
      step = fixed + per_sample * per_device + comm
      samples = h * d * per_device * graphs / step
      lines.append(f"  {h:>7} {h * d:>7} {step:>9.4g} {comm:>9.3g} "
                   f"{1 / step:>8.3g} {samples:>10.4g}")
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_samples", type=int, default=32,
                      help="global samples per graph per step (K)")
  parser.add_argument("--steps", type=int, default=120,
                      help="RL steps per measured run, in 4 chunks: the "
                      "first compiles; the fastest of the others is timed")
  parser.add_argument("--worker", action="store_true",
                      help="internal: run as one process of a measurement")
  parser.add_argument("--process_id", type=int, default=0,
                      help="internal: this worker's process id")
  parser.add_argument("--num_processes", type=int, default=1,
                      help="internal: processes of the measurement")
  parser.add_argument("--port", type=int, default=0,
                      help="internal: the coordinator's loopback port")
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(worker(args)))
    return
  print(f"load before: {os.getloadavg()}  cores: {os.cpu_count()}")
  one = measure(1, args.num_samples, args.steps)
  half = measure(1, args.num_samples // 2, args.steps)
  two = measure(2, args.num_samples, args.steps)
  print(f"load after: {os.getloadavg()}")
  print(f"{'processes':>9} {'devices':>7} {'samples':>7} {'steps/s':>8} "
        f"{'samples/s':>9} {'step_s':>8} {'mean_s':>8}")
  for row in (one, half, two):
    print(f"{row['processes']:>9} {row['devices']:>7} "
          f"{row['num_samples']:>7} {row['steps_per_s']:>8.3g} "
          f"{row['samples_per_s']:>9.4g} {row['step_s']:>8.4g} "
          f"{row['allreduce_s']:>8.3g}")
  print(f"(samples = per graph per step, {one['graphs']} graphs; mean_s = "
        "one gradient mean across the processes)")
  print(f"This machine has {os.cpu_count()} CPU cores, shared by both "
        "processes (and other jobs): 2 processes cannot be faster here; the "
        "2-process row shows the cost of the split, not a speed-up. mean_s "
        "is one gradient mean dispatched alone (a host round trip each).")
  for line in projection(one, half, two):
    print(line)


if __name__ == "__main__":
  main()
