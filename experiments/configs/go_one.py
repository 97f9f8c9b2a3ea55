"""GO-one: one suite workload at paper size (train step) on a preset topology.

  python experiments/run.py --config experiments/configs/go_one.py \
      --workdir /tmp/go_one --config.workload=gnmt4 --config.topology=1cpu+4gpu
"""

from experiments.configs import quickstart


def get_config():
  config = quickstart.get_config()
  config.workload = "gnmt2"
  config.workload_size = "paper"
  config.topology = "1cpu+4gpu"
  config.policy.segment_length = 256
  config.rl.num_samples = 32
  config.rl.ppo_epochs = 2
  # About a dozen nodes re-drawn per sample on a 20k-node graph.
  config.rl.mutate_best = 0.0005
  # Scored inside the jitted step (node-id order): host scoring under the
  # dynamic default (quickstart's simulator_host) takes ~1 s per 64
  # placements of a 2.5k-node graph on 2 CPU cores.
  config.rl.reward = "simulator"
  config.warm_start.baseline = "best"
  config.rl.explore_epsilon = 0.01
  config.optimizer.learning_rate = 3e-4
  config.warm_start.steps = 300
  config.train.num_steps = 1000
  config.train.chunk_steps = 50
  config.train.checkpoint_every = 100
  return config
