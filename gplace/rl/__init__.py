"""Learning placements: distributions, losses, rewards, the jitted update.

The modules, in the order a training run uses them (imports only go down
this list; ``update`` names the state's types, ``warm_start`` and
``reward_setup`` the data module's, in annotations only):

* ``train``: :func:`~gplace.rl.train.train_and_evaluate`, the loop over
  jitted chunks (loads orbax and the config machinery: import it directly).
* ``pretrain``: :func:`~gplace.rl.pretrain.pretrain`, one policy over
  switched batches of many graphs (the same chunks; import it directly).
* ``chunks``: the jitted chunks of steps both loops run, and their
  schedule.
* ``policy_file``: a trained policy's parameters and config in one
  ``.npz``, what pretraining writes, fine-tuning starts from and
  ``gplace.optimize`` applies zero-shot.
* ``validation``: config checks before anything is compiled;
  ``config_fields``: the numeric fields' ranges and ``--config`` overrides.
* ``data``: graphs -> padded :class:`Batch` es (host side).
* ``warm_start``: the baseline placements a policy imitates first.
* ``reward_setup``: a batch's stacked simulator problems and host scorers.
* ``state``: :class:`TrainState`, :class:`RLHyperparams`, and their
  construction from a config.
* ``update``: sample, score, update, written once for one or many devices.
* ``policy_fns``: any policy (one-shot or sequential) as sample / score /
  greedy functions.
* ``losses``: REINFORCE, PPO, supervised.
* ``distributions``: sampling, log-probabilities, entropy, exploration.
* ``rewards``: runtimes -> rewards, host and simulator scoring.
* ``types``: :class:`Batch`, :class:`Rollout`, function types.
* ``checkpoint``, ``run_outputs``, ``reports``: what a run saves and
  writes, and its final table.

The names below are the ones most users need; ``gplace`` imports this
package lazily.
"""

from gplace.rl.distributions import (entropy, exploration_logits, log_prob,
                                     node_log_probs, sample_placements)
from gplace.rl.losses import ppo_loss, reinforce_loss, supervised_loss
from gplace.rl.policy_fns import PolicyFns, policy_fns
from gplace.rl.rewards import (Scorer, effective_runtime, host_scored_rollout,
                               reward, simulator_reward)
from gplace.rl.state import RLHyperparams, TrainState, init_train_state
from gplace.rl.types import (ApplyFn, Batch, RewardFn, Rollout, SimulateFn)
from gplace.rl.update import (rl_step, sample_rollout, scan_chunk,
                              supervised_step, update_from_rollout)

__all__ = [
    "ApplyFn", "Batch", "PolicyFns", "RLHyperparams", "RewardFn", "Rollout", "Scorer",
    "SimulateFn", "TrainState", "effective_runtime", "entropy",
    "exploration_logits", "host_scored_rollout", "init_train_state",
    "log_prob", "node_log_probs", "policy_fns", "ppo_loss", "reinforce_loss", "reward",
    "rl_step", "sample_placements", "sample_rollout", "scan_chunk",
    "simulator_reward", "supervised_loss", "supervised_step",
    "update_from_rollout",
]
