"""HDP (Mirhoseini et al., ICLR 2018) on the quickstart workload (tiny
rnnlm2, 1 CPU + 4 GPUs, simulated): a feed-forward grouper over the ops and
a seq2seq placer (bidirectional LSTM encoder, attentional LSTM decoder) over
its groups, trained jointly by REINFORCE (gplace.policies.hdp; its
deviations: its docstring and docs/design.md).

  python experiments/run.py --config experiments/configs/hdp.py \
      --workdir /tmp/gplace_hdp

Settings from grappler's hierarchical_controller.py (the paper's public
code), and where this config differs:

* HDP learns its groups, so it places the op graph: groups.max_groups=0
  (tiny rnnlm2: 705 ops). The grouper is a per-op feed-forward net and the
  placer's sequence is num_groups long, so the op count only costs
  linearly.
* num_groups = min(256, 20 x devices) (policy.num_groups=0), grouping
  hidden 64: as grappler.
* hidden 64 instead of 512, to train on a CPU.
* REINFORCE, EMA baseline with decay 0.9 (rl.advantage="ema",
  baseline_decay=0.9); reward -sqrt(runtime) as grappler's sqrt reward;
  advantages divided by the EMA's standard deviation.
* Adam with gradient clipping at 1.0 as grappler; learning rate 1e-3
  instead of 0.1: grappler's 0.1 goes with device logits squashed to
  tanh(logits) in [-1, 1] (policy.logit_tanh_constant=1.0 restores that
  squashing), and the loop has no learning-rate decay (grappler: x0.95
  every 50 steps after step 400).
* Grappler's logit noise (sigma 0.5 until step 750) is not implemented (see
  docs/design.md); a small entropy bonus explores instead.
* Failing signal: the loop's penalty (oom_penalty_factor times the best
  single device's runtime) instead of 100 s; failed samples are never
  masked out of the loss (grappler masks them after step 1000).
* num_samples=32 placements per update (grappler: one per controller step,
  several controllers).
"""

import ml_collections

from experiments.configs import colocrl


def get_config():
  # ColocRL's training (REINFORCE, EMA baseline, Adam with clipping), with
  # HDP's policy over the op graph.
  config = colocrl.get_config()
  config.policy = ml_collections.ConfigDict(dict(
      name="hdp", num_groups=0, grouping_hidden_size=64, hidden_size=64,
      attention_size=64, device_embedding_size=16, op_embedding_size=16,
      adjacency_buckets=8, num_position_frequencies=4, node_features="shape",
      feed_encoder_state=True, logit_tanh_constant=0.0))
  config.groups = ml_collections.ConfigDict(dict(
      max_groups=0, rule="colocation", min_nodes=256))
  return config
