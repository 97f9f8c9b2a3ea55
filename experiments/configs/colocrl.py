"""ColocRL (Mirhoseini et al., ICML 2017) on the quickstart workload (tiny
rnnlm2, 1 CPU + 4 GPUs, simulated): co-location groups, an LSTM encoder over
them in topological order and an attentional LSTM decoder emitting one
device per group (gplace.policies.colocrl; its deviations: its docstring and
docs/design.md), REINFORCE with an EMA baseline.

  python experiments/run.py --config experiments/configs/colocrl.py \
      --workdir /tmp/gplace_colocrl

Settings from the paper, and where this config differs:

* Co-location grouping (an op whose only consumer is X joins X):
  groups.rule="colocation", min_nodes=0. The loop coarsens graphs of more
  than groups.max_groups=256 ops, and merges by size down to 256 groups
  where co-location leaves more (the paper's groups were under ~1k; 256
  keeps decoding, quadratic in the sequence length, fast on a CPU, and
  the padded sequence far within the policy's max_length=1024). Tiny rnnlm2
  has 705 ops in 192 co-location groups; graphs of at most 256 ops are
  placed op by op.
* REINFORCE on -sqrt(runtime) with an exponential-moving-average baseline:
  rl.loss="reinforce", rl.advantage="ema" (decay 0.9, grappler's; the paper
  gives none), advantages divided by the EMA's standard deviation
  (normalize_rewards), a small entropy bonus (the paper has none; the
  decoder is otherwise free to collapse early).
* K placements per update: num_samples=32 (the paper's controllers each ran
  K placements on real hardware; simulated rewards are cheap, but decoding
  costs grow with K times the squared sequence length on a CPU).
* Failed / OOM placements: the loop's penalty (oom_penalty_factor times the
  best single device's runtime) stands for the paper's large fixed runtime.
* Adam, learning rate 1e-3, gradient clipping at norm 1.0 (the paper's
  optimizer settings are not recorded; these train the small LSTMs here).
* Sizes: hidden 64, attention 64 (CPU-sized).
"""

import ml_collections

from experiments.configs import quickstart


def get_config():
  config = quickstart.get_config()
  config.policy = ml_collections.ConfigDict(dict(
      name="colocrl", hidden_size=64, attention_size=64,
      device_embedding_size=16, op_embedding_size=16, adjacency_buckets=8,
      num_position_frequencies=4, node_features="shape", bidirectional=False,
      feed_encoder_state=True, logit_tanh_constant=0.0, max_length=1024))
  config.groups = ml_collections.ConfigDict(dict(
      max_groups=256, rule="colocation", min_nodes=0))
  config.optimizer = ml_collections.ConfigDict(dict(
      learning_rate=1e-3, grad_clip=1.0))
  config.rl.update(loss="reinforce", advantage="ema", baseline_decay=0.9,
                   normalize_rewards=True, num_samples=32,
                   entropy_weight=1e-2, reward="simulator_host",
                   explore_epsilon=0.0, mutate_best=0.0,
                   entropy_floor=0.0)
  config.warm_start.baseline = "none"
  config.train.num_steps = 200
  return config
