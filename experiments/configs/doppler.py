"""A DOPPLER-style dual policy (Yao et al., ICLR 2026) on the quickstart
workload: one policy picks the next ready op, another its device
(:mod:`gplace.policies.doppler`), so each placement comes with its own
schedule, and it is scored in that schedule.

  python experiments/run.py --config experiments/configs/doppler.py \
      --workdir /tmp/gplace_doppler

DOPPLER trains in stages: imitation of a critical-path list scheduler (the
warm start fits HEFT's placement in its best order, order and devices),
then RL in the simulator (here in the jitted step, each placement run in
the policy's order). Stage three, RL on the real engine, needs an executor
that runs a given order and is refused for now. An episode costs O(N^2), so
the policy places coarse groups, about the size of DOPPLER's graphs
(112-261 ops): tiny rnnlm2's 705 ops become co-location groups at
``max_groups=128``.
"""

import ml_collections

from experiments.configs import quickstart


def get_config():
  config = quickstart.get_config()
  # The fields of gplace.policies.doppler.DopplerPolicy.
  config.policy = ml_collections.ConfigDict(dict(
      name="doppler",
      hidden_size=64,              # every embedding
      message_passing_steps=3,     # GraphSAGE layers of the encoder
      max_nodes=256,               # padded nodes: 128 groups pad to 256 at most
      logit_init_scale=0.01))
  config.groups.update(max_groups=128, min_nodes=128)
  # Stage one: imitate HEFT (a critical-path list scheduler).
  config.warm_start.update(baseline="heft", steps=100, learning_rate=3e-3)
  config.optimizer.learning_rate = 1e-3
  # Stage two: RL in the simulator, each placement in its own order.
  config.rl.update(reward="simulator_dynamic", loss="ppo", num_samples=32,
                   entropy_weight=1e-3, explore_epsilon=0.0, mutate_best=0.0,
                   entropy_floor=0.0, ppo_epochs=2)
  config.train.update(num_steps=200, chunk_steps=25, eval_samples=32)
  return config
