"""Quickstart: GO on a tiny RNN language model, 1 CPU + 4 GPUs (simulated).

Pure RL over 192 op groups, 200 steps of 64 samples (about a minute on two
CPU cores); prints the policy's own greedy and sampled placements against
every baseline and the lower bound.

  python experiments/run.py --config experiments/configs/quickstart.py \
      --workdir /tmp/gplace_quickstart

Every training setting is at its default (``gplace.rl.settings``, where each
one is documented); other configs import this one and override fields.
"""

from gplace.rl import settings


def get_config():
  config = settings.to_config(settings.TrainSettings(),
                              settings.DEFAULT_POLICY)
  # Graphs of the batch, comma-separated: workload names
  # (gplace.workloads.names()), "random_dag:N[:seed]", a graph file
  # (.npz / .json) or "module:function".
  config.workload = "rnnlm2"
  config.workload_size = "tiny"    # tiny | small | paper
  config.workload_step = "train"   # train | infer
  # A preset (gplace.topology.preset_names()), "local" or "file" (the
  # devices the workload's graph file describes).
  config.topology = "1cpu+4gpu"
  # A directory caching captured graphs (<name>_<size>_<step>.npz); "" off.
  config.graph_cache = ""
  return config

