"""Times one GO training step (sample, simulate, PPO update) by graph size.

  python experiments/bench_train_step.py --sizes=1000,10000,80000

Graphs are gplace.graphs.graph.random_dag; topology 1cpu+4gpu; the state is
made by ``gplace.rl.state.create_train_state`` and the step is the jitted
``gplace.rl.update.rl_step`` exactly as ``gplace.rl.train`` runs it (one
device, no pmap), in a ``lax.scan`` chunk of ``--steps`` steps. Prints compile
time, seconds per step and the process's peak RSS after each size.
"""

import os
import resource
import sys
import time

# The quickstart config is imported as experiments.configs.quickstart.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
import jax

from experiments.configs import quickstart
from gplace.graphs import graph as graph_lib
from gplace.rl import data
from gplace.rl import state as state_lib
from gplace.rl import train
from gplace.sim import topology

_SIZES = flags.DEFINE_string("sizes", "1000,10000,80000", "Node counts.")
_STEPS = flags.DEFINE_integer("steps", 3, "Steps per timed chunk.")
_SAMPLES = flags.DEFINE_integer("num_samples", 16, "K placements per step.")
_LOSS = flags.DEFINE_string("loss", "ppo", "ppo or reinforce.")
_EPOCHS = flags.DEFINE_integer("ppo_epochs", 4, "PPO epochs per step.")
_HIDDEN = flags.DEFINE_integer("hidden_size", 64, "Policy width.")
_SEGMENT = flags.DEFINE_integer("segment_length", 128, "Attention segment.")


def peak_rss_gib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv):
  del argv
  config = quickstart.get_config()
  config.policy.hidden_size = _HIDDEN.value
  config.policy.segment_length = _SEGMENT.value
  config.rl.num_samples = _SAMPLES.value
  config.rl.loss = _LOSS.value
  config.rl.ppo_epochs = _EPOCHS.value
  topo = topology.preset("1cpu+4gpu")
  print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
  print(f"devices: {jax.devices()}, K={_SAMPLES.value}, loss={_LOSS.value}, "
        f"epochs={_EPOCHS.value}, hidden={_HIDDEN.value}")
  for size in [int(s) for s in _SIZES.value.split(",")]:
    t0 = time.time()
    graph = graph_lib.random_dag(size, seed=0, name=f"random_dag:{size}")
    setup = data.GraphSetup(
        name=graph.name, graph=graph, fn=None, args=None, baselines={},
        baseline_runtime_s={}, lower_bound_s=0.0, failing_runtime_s=1.0)
    batch = data.make_batch([setup], topo)
    host_s = time.time() - t0
    policy = state_lib.create_policy(config, topo.n_devices)
    optimizer = state_lib.create_optimizer(config)
    fns = train.make_step_fns(policy, optimizer,
                              state_lib.create_hparams(config), parallel=1)
    state = state_lib.create_train_state(config, batch, policy, optimizer)
    batch = jax.tree.map(jax.numpy.asarray, batch)
    t0 = time.time()
    compiled = fns.rl_chunk.lower(state, batch, _STEPS.value).compile()
    compile_s = time.time() - t0
    state, _ = compiled(state, batch)  # warm-up run
    jax.block_until_ready(state)
    t0, cpu0 = time.time(), time.process_time()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(state)
    step_s = (time.time() - t0) / _STEPS.value
    # CPU seconds: less sensitive than wall time to other processes on a
    # shared machine (XLA may use several threads, so it can exceed wall).
    cpu_s = (time.process_time() - cpu0) / _STEPS.value
    n_pad = batch.graphs.nodes["mask"].shape[1]
    print(f"nodes={size:>6} (N_pad={n_pad}, edges={graph.n_edges}): "
          f"host setup {host_s:.1f}s, compile {compile_s:.1f}s, "
          f"{step_s:.3f} s/step wall ({cpu_s:.3f} CPU s/step), mean runtime "
          f"{float(metrics['mean_runtime_s'][-1]) * 1e3:.3f} ms, "
          f"peak RSS {peak_rss_gib():.2f} GiB", flush=True)


if __name__ == "__main__":
  app.run(main)
