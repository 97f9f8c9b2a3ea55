"""Placeto (Addanki et al. 2019) on the quickstart workload: the iterative
node walk of :mod:`gplace.policies.placeto`, trained by REINFORCE.

  python experiments/run.py --config experiments/configs/placeto.py \
      --workdir /tmp/gplace_placeto

Placeto re-embeds the whole graph at every one of its ``N`` moves, so an
episode costs ``O(N^2)``: the policy places coarse groups (tiny rnnlm2's 705
ops become 37 co-location groups at ``max_groups=64``), and a batch of more
than ``policy.max_nodes`` padded nodes is refused. Rewards are episodic: the
final placement of a walk is scored (``-sqrt(runtime)``, the default
schedule on the host), which is the sum of Placeto's per-move improvements;
the deviations from the paper: the policy's docstring and docs/design.md.

Results: experiments/results/seed_systems/README.md.
"""

import ml_collections

from experiments.configs import quickstart


def get_config():
  config = quickstart.get_config()
  # The fields of gplace.policies.placeto.PlacetoPolicy.
  config.policy = ml_collections.ConfigDict(dict(
      name="placeto",
      hidden_size=32,              # message width (Placeto: 5 + devices)
      message_passing_steps=2,     # Placeto's radial_mp rounds
      normalize_aggregations=True,  # mean over ancestors / ... (normalize_aggs)
      small_nn=False,              # Placeto's layer sizes
      initial_placement="zeros",   # zeros | round_robin | random
      initial_seed=0,
      max_nodes=128,               # padded nodes: 64 groups pad to 128 at most
      logit_init_scale=0.01))
  # Coarse groups for the quadratic cost (every graph of more than min_nodes
  # ops is coarsened).
  config.groups.update(max_groups=64, min_nodes=64)
  config.optimizer.learning_rate = 1e-3  # Placeto's Adam learning rate
  # Placeto trains by REINFORCE (no PPO); every episode is a full walk, so
  # fewer samples per step than the one-shot quickstart.
  config.rl.update(loss="reinforce", num_samples=32, entropy_weight=1e-2,
                   reward="simulator_host", explore_epsilon=0.0,
                   mutate_best=0.0, entropy_floor=0.0)
  config.train.update(num_steps=200, chunk_steps=25, eval_samples=32)
  return config
