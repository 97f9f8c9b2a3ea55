"""Pretrains a plain GO policy (the base of the one gplace ships, which
``experiments/configs/pretrain_hint.py`` makes: the same training plus the
best classical plan as an input).

One policy over eight training graphs of three zoo families (RNN language
models, Transformer-XL, ResNet-50) and generated random DAGs, tiny train
steps, on 1 CPU + 4 GPUs (simulated); whole families (WaveNet, GNMT, BERT)
are held out for ``experiments/transfer.py``. Imitation of each graph's best
classical placement first, then PPO on the simulator's default schedule,
batches of four graphs switched every chunk (gplace.rl.pretrain).

  python experiments/run.py --config experiments/configs/pretrain.py \
      --workdir /tmp/gplace_pretrain
  python experiments/transfer.py --policy /tmp/gplace_pretrain/policy.npz
"""

import ml_collections

from experiments.configs import quickstart

TRAIN_GRAPHS = ("rnnlm2", "rnnlm4", "transformer_xl2", "transformer_xl4",
                "resnet50", "random_dag:500:1", "random_dag:1000:2",
                "random_dag:2000:3")
HELD_OUT = ("wavenet2", "wavenet4", "gnmt2", "gnmt4", "bert")


def get_config():
  config = quickstart.get_config()
  config.workload = ",".join(TRAIN_GRAPHS)
  config.workload_size = "tiny"
  config.topology = "1cpu+4gpu"
  # Graph-independent: no per-position logits (they do not transfer).
  config.policy.free_logits = 0
  config.rl.reward = "simulator_dynamic"
  config.rl.num_samples = 16
  # The shipped policy's settings: no entropy floor, two PPO epochs.
  config.rl.entropy_floor = 0.0
  config.rl.ppo_epochs = 2
  config.optimizer.learning_rate = 1e-3
  config.warm_start.baseline = "best"
  config.warm_start.steps = 200
  config.warm_start.learning_rate = 3e-3
  config.train.num_steps = 300
  # One chunk per batch visit: the batch changes every chunk_steps steps.
  config.train.chunk_steps = 10
  config.train.checkpoint_every = 100
  config.print_table = False
  config.pretrain = ml_collections.ConfigDict(dict(
      graphs_per_batch=4,
      # The dynamic scheduler's candidate buffer: 256 slots hold the ready
      # parameter updates of these graphs (64 overflow; see
      # gplace.rl.pretrain).
      dispatch_width=256))
  return config
