"""Pretrains the GO policy gplace ships (gplace/pretrained/go_1cpu+4gpu.npz):
GO given each graph's best classical plan.

The same training graphs, topology and PPO as
``experiments/configs/pretrain.py``, with ``policy.hint`` on: every node
also gets the device the graph's best baseline (default schedule) puts it
on, as an input and as a learned logit offset
(:class:`gplace.policies.GOPolicy`). The policy starts at that plan, so
there is no imitation phase, and RL learns where to leave it. Ops are
placed one by one (no groups): a group's majority device would blur the
plan it is given.

  python experiments/run.py --config experiments/configs/pretrain_hint.py \
      --workdir /tmp/gplace_pretrain_hint
  python experiments/transfer.py --policy /tmp/gplace_pretrain_hint/policy.npz
  cp /tmp/gplace_pretrain_hint/policy.npz gplace/pretrained/go_1cpu+4gpu.npz
"""

from experiments.configs import pretrain


def get_config():
  config = pretrain.get_config()
  config.policy.hint = True
  config.policy.hint_init = 5.0
  config.groups.max_groups = 0
  config.warm_start.baseline = "none"
  config.warm_start.steps = 0
  return config
