"""Times one GO training step (sample, simulate, PPO update) by graph size.

  python experiments/bench_train_step.py --sizes=1000,10000,80000
  python experiments/bench_train_step.py --sizes=80000 --max_groups=256 \
      --ppo_epochs=4        # the quickstart's group-level actions
  python experiments/bench_train_step.py --sizes=80000 --max_groups=256 \
      --ppo_epochs=4 --num_samples=64 --reward=host   # and its reward

Graphs are gplace.graphs.graph.random_dag; topology 1cpu+4gpu; the state is
made by ``gplace.rl.state.create_train_state`` and the step is the jitted
``gplace.rl.update.rl_step`` exactly as ``gplace.rl.train`` runs it (one
device, no pmap), in a ``lax.scan`` chunk of ``--steps`` steps. Prints compile
time, seconds per step and the process's peak RSS after each size.
"""

import argparse
import functools
import os
import resource
import time


# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import numpy as np

from gplace.graphs import graph as graph_lib
from gplace.rl import data
from gplace.rl import grouping
from gplace.rl import loop
from gplace.rl import scoring
from gplace.rl import settings as settings_lib
from gplace.rl import state as state_lib
from gplace.rl.types import GraphSetup
from gplace.sim import presets



def parse_args(argv=None) -> argparse.Namespace:
  """The command line (every flag with help)."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", default="1000,10000,80000",
                      help="comma-separated random_dag node counts")
  parser.add_argument("--steps", type=int, default=3,
                      help="training steps per timed chunk")
  parser.add_argument("--num_samples", type=int, default=16,
                      help="K placements sampled per step")
  parser.add_argument("--loss", default="ppo", choices=("ppo", "reinforce"),
                      help="the policy-gradient loss")
  parser.add_argument("--ppo_epochs", type=int, default=4,
                      help="PPO epochs per step")
  parser.add_argument("--max_groups", type=int, default=0,
                      help="> 0: the policy places at most this many op "
                      "groups (settings.groups, as the quickstart does); 0: "
                      "op by op")
  parser.add_argument("--reward", default="static",
                      choices=("static", "host"),
                      help="static: the jitted step's in-step node-id-order "
                      "scan (a lax.scan chunk of rl_step); host: the "
                      "quickstart's own step, sample -> gplace.simulate on "
                      "the host in --reward_schedule -> update "
                      "(gplace.rl.loop.run_chunk)")
  parser.add_argument("--reward_schedule", default="auto",
                      choices=("auto", "best", "dynamic"),
                      help="with --reward=host: rl.reward_schedule")
  parser.add_argument("--hidden_size", type=int, default=64,
                      help="policy width")
  parser.add_argument("--segment_length", type=int, default=128,
                      help="attention segment length of the GO encoder")
  return parser.parse_args(argv)


def peak_rss_gib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def device_peak() -> str:
  """The accelerator's peak memory so far, where JAX reports one."""
  device = jax.devices()[0]
  stats = device.memory_stats() if device.platform != "cpu" else None
  if not stats or "peak_bytes_in_use" not in stats:
    return ""
  return f", {device.platform} peak {stats['peak_bytes_in_use'] / 2**30:.2f} GiB"


def main(argv=None) -> None:
  args = parse_args(argv)
  settings = settings_lib.TrainSettings().replace(rl=dict(
      num_samples=args.num_samples, loss=args.loss,
      ppo_epochs=args.ppo_epochs, reward_schedule=args.reward_schedule,
      reward="simulator_host" if args.reward == "host" else "simulator"))
  policy_settings = settings_lib.PolicySettings("go", dict(
      settings_lib.DEFAULT_POLICY.hparams, hidden_size=args.hidden_size,
      segment_length=args.segment_length))
  topo = presets.preset("1cpu+4gpu")
  print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
  print(f"devices: {jax.devices()}, K={args.num_samples}, loss={args.loss}, "
        f"epochs={args.ppo_epochs}, hidden={args.hidden_size}, "
        f"max_groups={args.max_groups or 'off (op by op)'}")
  for size in [int(s) for s in args.sizes.split(",")]:
    t0 = time.time()
    graph = graph_lib.random_dag(size, seed=0, name=f"random_dag:{size}")
    coarsening = grouping.coarsen_for_policy(
        graph, max_groups=args.max_groups, rule=settings.groups.rule,
        min_nodes=settings.groups.min_nodes)
    setup = GraphSetup(
        name=graph.name, graph=graph, fn=None, args=None, baselines={},
        baseline_runtime_s={}, lower_bound_s=0.0, failing_runtime_s=1.0,
        coarsening=coarsening)
    host = args.reward == "host"
    batch = data.make_batch([setup], topo, with_problems=not host)
    host_s = time.time() - t0
    policy = policy_settings.create(topo.n_devices)
    optimizer = state_lib.create_optimizer(settings)
    fns = loop.make_step_fns(policy, optimizer, settings.rl, parallel=1)
    state = state_lib.create_train_state(settings.seed, batch, policy,
                                         optimizer)
    batch = jax.tree.map(jax.numpy.asarray, batch)
    t0 = time.time()
    if host:
      schedule = scoring.reward_schedule(settings.rl, size)
      rewards = loop.HostRewards([scoring.Scorer(
          graph, topo, schedule=schedule)], np.asarray([size]))
      compiled = functools.partial(loop.run_chunk, fns, target=None,
                                   length=args.steps, warm_start=False,
                                   host_rewards=rewards)
      state, _ = compiled(state, batch)  # compiles the sample and update
      compile_s = time.time() - t0
    else:
      schedule = "node-id order, in the step"
      compiled = fns.rl_chunk.lower(state, batch, args.steps).compile()
      compile_s = time.time() - t0
    state, _ = compiled(state, batch)  # warm-up run
    jax.block_until_ready(state)
    t0, cpu0 = time.time(), time.process_time()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(state)
    step_s = (time.time() - t0) / args.steps
    # CPU seconds: less sensitive than wall time to other processes on a
    # shared machine (XLA may use several threads, so it can exceed wall).
    cpu_s = (time.process_time() - cpu0) / args.steps
    n_pad = batch.graphs.nodes["mask"].shape[1]
    groups = "" if coarsening is None else f", {coarsening.n_groups} groups"
    print(f"nodes={size:>6} (N_pad={n_pad}, edges={graph.n_edges}{groups}, "
          f"reward {args.reward}: {schedule}): "
          f"host setup {host_s:.1f}s, compile {compile_s:.1f}s, "
          f"{step_s:.3f} s/step wall ({cpu_s:.3f} CPU s/step), mean runtime "
          f"{float(metrics['mean_runtime_s'][-1]) * 1e3:.3f} ms, "
          f"peak RSS {peak_rss_gib():.2f} GiB{device_peak()}", flush=True)


if __name__ == "__main__":
  main()
