"""Learning placements: the training API and the jittable learning under it.

``train(graphs, topology, policy, settings, *, workdir=None, progress=None)``
and ``pretrain`` (one policy over many graphs), set by
:class:`TrainSettings` and :class:`PolicySettings`; across processes after
``distributed.initialize(...)``. Pure and jittable:
``distributions``, ``losses``, ``rewards``, ``update``, ``grouping``,
``policy_fns``; the rest is host-side.
"""

from gplace.rl import distributed
from gplace.rl.distributions import (entropy, exploration_logits, log_prob,
                                     node_log_probs, sample_placements)
from gplace.rl.final import TrainResult
from gplace.rl.losses import ppo_loss, reinforce_loss, supervised_loss
from gplace.rl.policy_fns import PolicyFns, policy_fns
from gplace.rl.pretraining import PretrainResult, pretrain
from gplace.rl.rewards import effective_runtime, reward, simulator_reward
from gplace.rl.scoring import Scorer, host_scored_rollout
from gplace.rl.settings import (ExecutorSettings, GroupSettings, LoopSettings,
                                OptimizerSettings, PolicySettings,
                                PretrainSettings, RefineSettings, RLSettings,
                                TrainSettings, WarmStartSettings)
from gplace.rl.state import TrainState, init_train_state
from gplace.rl.training import train
from gplace.rl.types import ApplyFn, Batch, RewardFn, Rollout, SimulateFn
from gplace.rl.update import (rl_step, sample_rollout, scan_chunk,
                              supervised_step, update_from_rollout)

__all__ = [
    "ApplyFn", "Batch", "ExecutorSettings", "GroupSettings", "LoopSettings",
    "OptimizerSettings", "PolicyFns", "PolicySettings", "PretrainResult",
    "PretrainSettings", "RLSettings", "RefineSettings", "RewardFn", "Rollout",
    "Scorer", "SimulateFn", "TrainResult", "TrainSettings", "TrainState",
    "WarmStartSettings", "distributed", "effective_runtime", "entropy", "exploration_logits",
    "host_scored_rollout", "init_train_state", "log_prob", "node_log_probs",
    "policy_fns", "ppo_loss", "pretrain", "reinforce_loss", "reward",
    "rl_step", "sample_placements", "sample_rollout", "scan_chunk",
    "simulator_reward", "supervised_loss", "supervised_step", "train",
    "update_from_rollout",
]
