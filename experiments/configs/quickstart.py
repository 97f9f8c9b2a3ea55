"""Quickstart: GO on a tiny RNN language model, 1 CPU + 4 GPUs (simulated).

Pure RL: the policy starts near uniform (no warm start, no search around
the best) and places 192 op groups; 200 steps of 64 samples. Finishes in
about a minute on a laptop CPU and prints the policy's own greedy and
sampled placements, the best placement sampled, every baseline and the lower
bound, and whether the policy itself beats the best baseline.

  python experiments/run.py --config experiments/configs/quickstart.py \
      --workdir /tmp/gplace_quickstart

Every other config imports this one (``from experiments.configs import
quickstart``) and overrides fields; this file documents them all.
"""

import ml_collections


def get_config():
  config = ml_collections.ConfigDict()
  config.seed = 0
  # Graphs of the batch, comma-separated for a multi-graph batch: workload
  # names (gplace.workloads.names()), "random_dag:N[:seed]", a saved graph
  # (path.npz / path.json, see gplace.graphs.json_format) or
  # "module:function" (gplace.workloads.resolve).
  config.workload = "rnnlm2"
  config.workload_size = "tiny"    # tiny | small | paper
  config.workload_step = "train"   # train | infer
  # A gplace.sim.topology preset, "local" (this machine's devices) or
  # "file": the devices the workload's graph file describes (its measured
  # costs, if any, are used with any topology of as many devices).
  config.topology = "1cpu+4gpu"
  config.baselines = "all"         # or a comma-separated list of names
  # Directory of captured graphs <name>_<size>_<step>.npz (as written by
  # experiments/baselines.py), read instead of capturing with simulated
  # rewards and written after a capture; "" captures every time.
  config.graph_cache = ""
  config.pmap = True               # split samples over local devices
  config.progress_bar = True
  config.print_table = True

  # name: a policy family (gplace.policies.policy_names()); the other keys
  # are its hyperparameters (for "go": the fields of gplace.policies.GOEncoder
  # and head_hidden_size).
  config.policy = ml_collections.ConfigDict(dict(
      name="go", hidden_size=64, num_sage_layers=2, num_attention_layers=2,
      num_heads=4, segment_length=128, aggregator="max", modulation="film",
      op_embedding_size=16, head_hidden_size=64,
      # > 0: a learned logit offset per node (group) position, for a policy
      # trained on one graph: lets RL place look-alike nodes apart (see
      # gplace.policies.GOPolicy.free_logits); 0 for policies meant to
      # transfer to unseen graphs.
      free_logits=256,
      # >= 2: the policy also picks a priority level per group and its
      # placement runs in the default schedule ranked by level, then by the
      # critical path (GO's joint placement + scheduling); 0: placement
      # only. Off by default: at equal evaluations it did not beat the
      # critical-path schedule (experiments/RESULTS.md, "priority levels").
      priority_levels=0))
  # A trained policy file (.npz, gplace.rl.policy_file) to start from instead
  # of a fresh initialisation: fine-tuning a pretrained policy
  # (experiments/configs/pretrain.py). Its policy settings (above) and
  # device count must match. "" starts fresh.
  config.policy_init = ""
  # Group-level actions (gplace.rl.grouping): a graph of more than min_nodes
  # nodes is coarsened (gplace.coarsen, by rule) to at most max_groups groups;
  # the policy places groups and every op runs on its group's device.
  # max_groups=0 places ops one by one.
  config.groups = ml_collections.ConfigDict(dict(
      max_groups=256, rule="colocation", min_nodes=256))
  # learning_rate is RL's; the warm start has its own. decay: "none" (a
  # constant rate) or "cosine" (RL's rate falls along a half cosine to
  # final_fraction of it over the run's RL updates).
  config.optimizer = ml_collections.ConfigDict(dict(
      learning_rate=3e-3, grad_clip=1.0, decay="none", final_fraction=0.1))
  config.rl = ml_collections.ConfigDict(dict(
      # simulator_host: gplace.simulate on the host under its default
      # schedule, as the baselines and the final table are scored;
      # simulator_dynamic: the dynamic schedule (the default's other half
      # is the planned one, host-only), scored inside the jitted step
      # (gplace.rl.rewards.dispatch_reward; no host round trip);
      # simulator: scored inside the jitted step in static node-id order (so
      # it optimises another schedule than the table's); executor: measured.
      reward="simulator_host",
      # The schedule simulator_host scores RL's samples in: "best" (the
      # default schedule, as the baselines and the table), "dynamic" (its
      # cheaper half: a third of the cost on paper gnmt4, and a placement's
      # default-schedule runtime is never slower), or "auto": dynamic on
      # graphs of over 10,000 ops
      # (gplace.rl.reward_setup.AUTO_DYNAMIC_NODES), where the planned half
      # is two thirds of a train step. The policy's own placements and the
      # best one sampled are scored in "best" at the end either way.
      reward_schedule="auto",
      # The simulator is fast: many samples per step, few steps.
      # ppo_epochs: gradient steps per batch of samples. 4 (was 2) learns
      # more per simulator evaluation: by 10^4 evaluations the best own
      # sample of paper rnnlm2 was 11.4% faster than HEFT, not 4.1%
      # (experiments/RESULTS.md, "Four PPO epochs").
      num_samples=64, loss="ppo", ppo_epochs=4, ppo_clip=0.2,
      entropy_weight=1e-2, baseline_decay=0.9, normalize_rewards=True,
      # > 0 (nats): each group whose entropy falls under the floor is
      # penalised by entropy_floor_weight x the shortfall, so no decision
      # becomes certain (gplace.rl.losses.entropy_terms). Without it, pure
      # RL collapsed in one step onto a placement whose deciding groups were
      # certain (paper resnet50 on 1cpu+2gpu at 200 steps, wavenet2 on
      # 1cpu+4gpu at 245); with 0.05 neither did, and elsewhere it changed
      # nothing one seed can show (experiments/RESULTS.md, "An entropy
      # floor" and "The entropy floor on by default"). 0 turns it off.
      entropy_floor=0.05, entropy_floor_weight=1.0,
      # "batch": advantages relative to this step's samples (mean / std);
      # "ema": to a moving average of past rewards (lags, one sign for all).
      advantage="batch",
      # Reset Adam's moments when RL starts after the warm start.
      fresh_optimizer=True,
      oom_penalty_factor=10.0,
      # > 0: sample (and train) the mixture (1 - eps) softmax + eps uniform
      # per node, so a warm-started policy samples around its baseline.
      explore_epsilon=0.0,
      # > 0: policy-guided search, not learning: samples are the best
      # placement so far with this fraction of nodes (groups) re-drawn from
      # the policy (see gplace.rl.state.RLHyperparams); the table then
      # labels the best row "includes search". 0: the policy's own samples.
      mutate_best=0.0))
  # A second stage after RL (gplace.rl.refine): a per-op policy starts at
  # the trained policy's greedy placement (expanded to ops) and learns which
  # single ops to move. Each sample is its own greedy placement with 1 to
  # max_moves ops moved (1: each move gets its own credit), rewarded by the
  # runtime change against that greedy placement (per-move credit), so it
  # can split the groups the first stage places. evaluations: its reward
  # budget (0: no second stage; the run then spends train.num_steps x
  # rl.num_samples + this many). learning_rate: the logit step of each
  # step's best move (4 with init_logit 5: that op flips); init_logit: the
  # starting device's logit. Off by default: at equal evaluations a local
  # search over ops from the same placement did as well or better
  # (experiments/RESULTS.md, "Per-op refinement").
  # start: "policy" (its greedy placement) or "best" (the fastest of it
  # and every baseline's placement, each scored once from the budget; the
  # table and the verdict then say which it started from).
  config.refine = ml_collections.ConfigDict(dict(
      evaluations=0, num_samples=64, max_moves=1, learning_rate=4.0,
      init_logit=5.0, start="policy"))
  # Supervised fit to a baseline before RL ("best", "none" or a name).
  # label_smoothing > 0 leaves the policy entropy to explore with (untuned:
  # 0.05 let PPO drift towards uniform on paper-size rnnlm2).
  # "none" (here): pure RL from the near-uniform initial policy.
  config.warm_start = ml_collections.ConfigDict(dict(
      steps=50, baseline="none", learning_rate=1e-2, label_smoothing=0.0))
  # A workdir with checkpoints resumes its run if its config.json matches
  # this config (num_steps, chunk_steps, checkpoint_every, max_to_keep,
  # resume, progress_bar, print_table, graph_cache and the refine section
  # may differ; see gplace.rl.resume.FREE_ON_RESUME) and is refused
  # otherwise;
  # resume=False deletes its checkpoints and starts over. results.json and
  # learning_curve.png are rewritten at every checkpoint.
  # At the end, the policy's own placements are scored apart from the best
  # found: its greedy (argmax) placement and eval_samples fresh samples, no
  # search and no best-ever bookkeeping ("policy greedy", "policy sampled"
  # rows of the table and results.json). greedy_every > 0 also scores the
  # greedy placement every that many RL steps during training (a
  # "phase": "greedy" line of metrics.jsonl each; not train samples), for
  # learning curves of the policy itself.
  config.train = ml_collections.ConfigDict(dict(
      num_steps=200,               # RL steps after the warm start
      chunk_steps=25, checkpoint_every=100, max_to_keep=2, resume=True,
      eval_samples=64, greedy_every=0))
  config.executor = ml_collections.ConfigDict(dict(repeats=5, warmup=1))
  return config
