"""Training a placement policy: config in, placements and reports out.

Where this sits: ``experiments/run.py`` parses flags and calls
:func:`train_and_evaluate`; everything else lives here. The pipeline:

1. :func:`validate_config` rejects values that cannot work (unknown workload
   or topology, ``num_samples`` not divisible by the local devices, a workdir
   that cannot be written) before anything is traced or compiled.
2. Host side (numpy, :mod:`gplace.problems`): capture the workload(s), build
   padded GraphsTuples and simulator problems of one budget (a batch of ``B``
   graphs), run every baseline under the simulator, pick the best as the
   warm-start target.
3. Device side: the warm start (supervised cross-entropy to the best baseline)
   and RL, each a jitted ``lax.scan`` chunk of steps under ``jax.pmap`` (the
   update written once in ``gplace.rl`` with ``axis_name``); with real
   measurements (``config.rl.reward = "executor"``) sampling and update stay
   jitted and the measurement runs on the host between them.
4. A Python loop around the chunks: tqdm, ``metrics.jsonl``,
   ``best_placement.json``, a ``progress_fn`` hook, orbax checkpoints every
   ``config.train.checkpoint_every`` steps (resuming gives the same results as
   an uninterrupted run: the RNG is in the state and the chunk schedule
   depends only on the step), a learning-curve PNG and a final table of the
   learned placement vs every baseline and the lower bound
   (:mod:`gplace.reports`).
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from gplace import baselines
from gplace.policies import go as policies
from gplace.rl import core as rl
from gplace import workloads
from gplace.rl.checkpoint import Checkpointer
from gplace.errors import ConfigError
from gplace.sim import topology as topology_lib
# GraphSetup and make_batch are re-exported: callers build batches via train.
from gplace.rl.data import (RANDOM_DAG, GraphSetup, Scorer, make_batch,  # pylint: disable=unused-import
                             setup_graphs, simulator_reward,
                             warm_start_target, _make_topology,
                             _placement_devices)
from gplace.rl.reports import (TrainResult, format_table, write_best_placement,
                            _plot_curve, _trim_metrics, _write_json)

AXIS = "devices"
LOSSES = ("ppo", "reinforce")
REWARDS = ("simulator", "executor")
MODULATIONS = ("film", "gate", "none")
AGGREGATORS = ("max", "mean")
ProgressFn = Callable[[int, dict], None]


# -- config -> objects --------------------------------------------------------


def create_policy(config: ml_collections.ConfigDict,
                  num_devices: int) -> policies.GOPolicy:
  """Maps ``config.policy`` onto :class:`~gplace.policies.GOPolicy` fields."""
  p = config.policy
  return policies.GOPolicy(
      num_devices=num_devices, hidden_size=p.hidden_size,
      num_sage_layers=p.num_sage_layers,
      num_attention_layers=p.num_attention_layers, num_heads=p.num_heads,
      segment_length=p.segment_length, aggregator=p.aggregator,
      modulation=p.modulation,
      vocabulary_size=policies.default_vocabulary_size(),
      op_embedding_size=p.op_embedding_size,
      head_hidden_size=p.head_hidden_size)


def create_optimizer(config: ml_collections.ConfigDict
                     ) -> optax.GradientTransformation:
  """Adam with global-norm clipping (HDP clips at 1.0); the warm start's
  learning rate for its ``warm_start.steps`` updates, then RL's."""
  return _optimizer(_optimizer_key(config))


def _optimizer_key(config):
  warm_steps = (0 if config.warm_start.baseline == "none"
                else int(config.warm_start.steps))
  return (float(config.optimizer.learning_rate),
          float(config.warm_start.learning_rate), warm_steps,
          float(config.optimizer.grad_clip))


def _optimizer(key) -> optax.GradientTransformation:
  rl_rate, warm_rate, warm_steps, grad_clip = key
  # Supervised steps make one update each, so the boundary is exact.
  schedule = optax.piecewise_constant_schedule(
      warm_rate, {warm_steps: rl_rate / warm_rate}) if warm_steps else rl_rate
  return optax.chain(optax.clip_by_global_norm(grad_clip),
                     optax.adam(schedule))


def create_hparams(config: ml_collections.ConfigDict) -> rl.RLHyperparams:
  r = config.rl
  return rl.RLHyperparams(
      num_samples=r.num_samples, loss=r.loss, ppo_epochs=r.ppo_epochs,
      ppo_clip=r.ppo_clip, entropy_weight=r.entropy_weight,
      baseline_decay=r.baseline_decay, normalize_rewards=r.normalize_rewards,
      explore_epsilon=float(r.get("explore_epsilon", 0.0)),
      mutate_best=float(r.get("mutate_best", 0.0)))


def workload_names(config) -> list[str]:
  """The graphs of the batch: ``config.workload`` split at commas."""
  return [w.strip() for w in str(config.workload).split(",") if w.strip()]


def num_parallel_devices(config) -> int:
  """Devices the RL update is split over (pmap over local devices)."""
  if config.rl.reward == "executor" or not config.pmap:
    return 1
  return jax.local_device_count()


def validate_config(config: ml_collections.ConfigDict, workdir: str) -> None:
  """Raises :class:`ConfigError` for any value that cannot work.

  Runs before any graph is captured or any function compiled.
  """
  names = workload_names(config)
  if not names:
    raise ConfigError("config.workload is empty; name a workload, e.g. "
                      "'rnnlm2', or 'random_dag:1000'.")
  for name in names:
    if not RANDOM_DAG.match(name) and name not in workloads.names():
      raise ConfigError(
          f"Unknown workload {name!r} in config.workload; choose from "
          f"{', '.join(workloads.names())}, or 'random_dag:N[:seed]'.")
  if config.workload_size not in workloads.SIZES:
    raise ConfigError(f"Unknown config.workload_size "
                      f"{config.workload_size!r}; choose from "
                      f"{', '.join(workloads.SIZES)}.")
  if config.workload_step not in workloads.STEPS:
    raise ConfigError(f"Unknown config.workload_step "
                      f"{config.workload_step!r}; choose from "
                      f"{', '.join(workloads.STEPS)}.")
  if config.rl.reward not in REWARDS:
    raise ConfigError(f"config.rl.reward must be one of {REWARDS}, got "
                      f"{config.rl.reward!r}.")
  if config.rl.reward == "executor":
    if any(RANDOM_DAG.match(n) for n in names):
      raise ConfigError("Executor rewards need a runnable workload, not a "
                        "random_dag.")
  if (config.topology != "local"
      and config.topology not in topology_lib.preset_names()):
    raise ConfigError(
        f"Unknown topology {config.topology!r}; choose from "
        f"{', '.join(topology_lib.preset_names())} or 'local'.")
  if config.rl.loss not in LOSSES:
    raise ConfigError(f"config.rl.loss must be one of {LOSSES}, got "
                      f"{config.rl.loss!r}.")
  n_dev = num_parallel_devices(config)
  k = config.rl.num_samples
  if k < 1 or k % n_dev:
    raise ConfigError(
        f"config.rl.num_samples={k} must be a positive multiple of the "
        f"{n_dev} local devices the update is split over; use e.g. "
        f"--config.rl.num_samples={max(n_dev, (k // n_dev + 1) * n_dev)} or "
        "--config.pmap=False.")
  p = config.policy
  if p.hidden_size % p.num_heads:
    raise ConfigError(f"config.policy.hidden_size={p.hidden_size} must be "
                      f"divisible by num_heads={p.num_heads}.")
  if p.modulation not in MODULATIONS:
    raise ConfigError(f"config.policy.modulation must be one of "
                      f"{MODULATIONS}, got {p.modulation!r}.")
  if p.aggregator not in AGGREGATORS:
    raise ConfigError(f"config.policy.aggregator must be one of "
                      f"{AGGREGATORS}, got {p.aggregator!r}.")
  if p.segment_length < 1:
    raise ConfigError("config.policy.segment_length must be positive.")
  t = config.train
  for field in ("chunk_steps", "checkpoint_every"):
    if t[field] < 1:
      raise ConfigError(f"config.train.{field} must be positive.")
  if t.num_steps < 0 or config.warm_start.steps < 0:
    raise ConfigError("Step counts must be non-negative.")
  if not (config.optimizer.learning_rate > 0
          and config.warm_start.learning_rate > 0):
    raise ConfigError("Learning rates must be positive.")
  if not 0.0 <= float(config.rl.get("explore_epsilon", 0.0)) < 1.0:
    raise ConfigError("config.rl.explore_epsilon must be in [0, 1).")
  if not 0.0 <= float(config.rl.get("mutate_best", 0.0)) <= 1.0:
    raise ConfigError("config.rl.mutate_best must be in [0, 1].")
  if config.rl.oom_penalty_factor < 1:
    raise ConfigError("config.rl.oom_penalty_factor must be at least 1.")
  warm = config.warm_start.baseline
  if warm not in ("best", "none"):
    if warm not in baselines.names():
      raise ConfigError(f"config.warm_start.baseline={warm!r}: use 'best', "
                        f"'none' or one of {', '.join(baselines.names())}.")
  try:
    os.makedirs(workdir, exist_ok=True)
    probe = os.path.join(workdir, ".gplace_write_test")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as err:
    raise ConfigError(f"Cannot write to workdir {workdir!r}: {err}. Pass a "
                      "writable --workdir.") from err


# -- jitted chunks ------------------------------------------------------------


class StepFns(NamedTuple):
  """The compiled pieces of a run (``num_steps`` is a static argument)."""
  supervised_chunk: Callable  # (state, batch, target, num_steps)
  rl_chunk: Optional[Callable]  # (state, batch, num_steps), simulator
  sample: Callable  # (state, batch) -> (state, rollout), host rewards
  update: Callable  # (state, batch, rollout) -> (state, metrics)
  optimizer: optax.GradientTransformation


def make_step_fns(policy, optimizer, hparams, *, parallel: int,
                  label_smoothing: float = 0.0,
                  simulate_fn=simulator_reward) -> StepFns:
  """Builds the jitted / pmapped chunk functions.

  With ``parallel > 1`` the chunks run under ``jax.pmap`` over that many
  local devices with a replicated state (leading device axis) and a
  broadcast batch.
  """
  apply_fn = policy.apply

  def supervised_chunk(state, batch, target, num_steps, axis_name=None):
    step = functools.partial(rl.supervised_step, apply_fn=apply_fn,
                             optimizer=optimizer,
                             label_smoothing=label_smoothing,
                             axis_name=axis_name)
    return rl.scan_chunk(step, state, batch, target, num_steps=num_steps)

  def rl_chunk(state, batch, num_steps, axis_name=None):
    step = functools.partial(rl.rl_step, apply_fn=apply_fn,
                             optimizer=optimizer, hparams=hparams,
                             simulate_fn=simulate_fn, axis_name=axis_name)
    return rl.scan_chunk(step, state, batch, num_steps=num_steps)

  sample = jax.jit(functools.partial(rl.sample_rollout, apply_fn=apply_fn,
                                     hparams=hparams))
  update = jax.jit(functools.partial(rl.update_from_rollout,
                                     apply_fn=apply_fn, optimizer=optimizer,
                                     hparams=hparams))
  if parallel > 1:
    devices = jax.local_devices()[:parallel]
    sup = jax.pmap(functools.partial(supervised_chunk, axis_name=AXIS),
                   axis_name=AXIS, in_axes=(0, None, None),
                   static_broadcasted_argnums=(3,), devices=devices)
    rlc = jax.pmap(functools.partial(rl_chunk, axis_name=AXIS),
                   axis_name=AXIS, in_axes=(0, None),
                   static_broadcasted_argnums=(2,), devices=devices)
  else:
    sup = jax.jit(supervised_chunk, static_argnums=(3,))
    rlc = jax.jit(rl_chunk, static_argnums=(2,))
  return StepFns(sup, rlc, sample, update, optimizer)


@functools.lru_cache(maxsize=8)
def _cached_step_fns(policy, hparams, optimizer_key, parallel,
                     label_smoothing):
  """Same model, optimizer and settings -> the same compiled functions (a run
  resumed in the same process does not compile again)."""
  optimizer = _optimizer(optimizer_key)
  return make_step_fns(policy, optimizer, hparams, parallel=parallel,
                       label_smoothing=label_smoothing)


@functools.lru_cache(maxsize=8)
def _jitted_init(policy):
  return jax.jit(policy.init)


def replicate(tree, n: int):
  """A leading device axis of size ``n`` (for pmap); identity for 1."""
  if n == 1:
    return tree
  return jax.tree.map(lambda x: np.broadcast_to(np.asarray(x),
                                                (n,) + np.shape(x)), tree)


def unreplicate(tree, n: int):
  if n == 1:
    return tree
  return jax.tree.map(lambda x: x[0], tree)


def chunk_schedule(step: int, *, warm_steps: int, total_steps: int,
                   chunk_steps: int, checkpoint_every: int) -> int:
  """Steps in the next chunk: up to ``chunk_steps``, never across the end of
  the warm start, a checkpoint step or the end. Depends only on ``step``, so
  a resumed run replays the uninterrupted schedule."""
  bounds = [total_steps, (step // checkpoint_every + 1) * checkpoint_every]
  if step < warm_steps:
    bounds.append(warm_steps)
  return max(1, min([chunk_steps] + [b - step for b in bounds]))


# -- the loop -----------------------------------------------------------------


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       progress_fn: Optional[ProgressFn] = None,
                       stop_after_step: Optional[int] = None,
                       log: Callable[[str], None] = print) -> TrainResult:
  """Trains a GO policy as ``config`` says; writes everything to ``workdir``.

  Args:
    config: see ``experiments/configs/quickstart.py`` for every field.
    workdir: output directory (checkpoints, ``metrics.jsonl``,
      ``best_placement.json``, ``learning_curve.png``); a run with
      checkpoints there resumes from the latest.
    progress_fn: called as ``progress_fn(step, metrics)`` after every chunk.
    stop_after_step: stop (after checkpointing) once this step is reached,
      without the final evaluation: simulates a preempted run in tests.
    log: where lines of text go.

  Returns:
    A :class:`TrainResult`.

  Raises:
    ConfigError: a config value that cannot work (before any compile).
  """
  run_start = time.time()
  workdir = os.path.abspath(workdir)
  validate_config(config, workdir)
  names = workload_names(config)
  topology = _make_topology(config)
  executor_reward = config.rl.reward == "executor"
  parallel = num_parallel_devices(config)

  setups = setup_graphs(config, topology, names, log=log)
  batch = make_batch(setups, topology, with_problems=not executor_reward)
  n_pad = batch.graphs.nodes["mask"].shape[1]
  policy = create_policy(config, topology.n_devices)
  hparams = create_hparams(config)
  fns = _cached_step_fns(policy, hparams, _optimizer_key(config), parallel,
                         float(config.warm_start.get("label_smoothing", 0.0)))
  optimizer = fns.optimizer

  init_rng, state_rng = jax.random.split(jax.random.PRNGKey(config.seed))
  graph0 = jax.tree.map(lambda x: x[0], batch.graphs)
  params = _jitted_init(policy)(init_rng, graph0)
  state = rl.init_train_state(state_rng, params, optimizer, batch)

  # Warm-start target; it also seeds the best-known placement, so the result
  # is never worse than that baseline.
  warm_steps = int(config.warm_start.steps)
  target = np.zeros((len(setups), n_pad), np.int32)
  if config.warm_start.baseline != "none":
    best_rt = np.full(len(setups), np.inf, np.float32)
    for b, s in enumerate(setups):
      name, placement, runtime = warm_start_target(
          s, config.warm_start.baseline)
      target[b, :s.graph.n_nodes] = placement
      best_rt[b] = runtime
      log(f"[gplace] {s.name}: warm start from {name!r} "
          f"({runtime * 1e3:.4f} ms)")
    state = state.replace(best_runtime_s=jnp.asarray(best_rt),
                          best_placement=jnp.asarray(target))
  else:
    warm_steps = 0
  total_steps = warm_steps + int(config.train.num_steps)

  checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"),
                              max_to_keep=config.train.max_to_keep)
  metrics_path = os.path.join(workdir, "metrics.jsonl")
  if checkpointer.latest_step() is not None:
    state = checkpointer.restore(state)
    log(f"[gplace] resumed from step {int(state.step)} in {workdir}")
    _trim_metrics(metrics_path, int(state.step))
  elif os.path.exists(metrics_path):
    os.remove(metrics_path)
  _write_json(os.path.join(workdir, "config.json"),
              json.loads(config.to_json_best_effort()))

  state_dev = replicate(state, parallel)
  batch_dev = jax.tree.map(jnp.asarray, batch)
  target_dev = jnp.asarray(target)
  step = int(state.step)
  best_seen = np.asarray(state.best_runtime_s).copy()

  try:
    from tqdm import tqdm  # pylint: disable=g-import-not-at-top
    bar = tqdm(total=total_steps, initial=step, disable=not config.progress_bar,
               dynamic_ncols=True)
  except ImportError:  # pragma: no cover
    bar = None
  steps_per_second = 0.0
  reward_fns = None
  if executor_reward:
    reward_fns = [Scorer(s.graph, s.fn, s.args, topology, config,
                         devices=_placement_devices()) for s in setups]
  num_nodes = np.asarray([s.graph.n_nodes for s in setups])

  try:
    with open(metrics_path, "a") as metrics_file:
      while step < total_steps:
        length = chunk_schedule(step, warm_steps=warm_steps,
                                total_steps=total_steps,
                                chunk_steps=config.train.chunk_steps,
                                checkpoint_every=config.train.checkpoint_every)
        phase = "warm_start" if step < warm_steps else "rl"
        t0 = time.time()
        if phase == "warm_start":
          state_dev, metrics = fns.supervised_chunk(state_dev, batch_dev,
                                                    target_dev, length)
        elif not executor_reward:
          state_dev, metrics = fns.rl_chunk(state_dev, batch_dev, length)
        else:
          state_dev, metrics = _host_reward_chunk(fns, state_dev, batch_dev,
                                                  reward_fns, num_nodes, length)
        metrics = jax.tree.map(np.asarray, unreplicate(metrics, parallel))
        jax.block_until_ready(state_dev)
        elapsed = time.time() - t0
        if phase == "rl":
          steps_per_second = length / max(elapsed, 1e-9)
        records = []
        for i in range(length):
          # wall_s: seconds since this call started (set-up and compiles
          # included), steps of a chunk interpolated over its time.
          record = {"step": step + i + 1, "phase": phase,
                    "wall_s": round(t0 - run_start
                                    + elapsed * (i + 1) / length, 3)}
          for key, value in metrics.items():
            value = value[i]
            record[key] = value.tolist() if value.ndim else float(value)
          records.append(record)
        for record in records:
          metrics_file.write(json.dumps(record) + "\n")
        metrics_file.flush()
        step += length
        state = unreplicate(state_dev, parallel)
        last = records[-1]
        best_now = np.asarray(state.best_runtime_s)
        if np.any(best_now < best_seen) or step == length:
          write_best_placement(os.path.join(workdir, "best_placement.json"),
                               setups, state, topology, step)
          best_seen = best_now.copy()
        if bar is not None:
          bar.update(length)
          post = {"best_ms": f"{np.mean(best_now) * 1e3:.4g}",
                  "steps/s": f"{length / max(elapsed, 1e-9):.2f}"}
          if phase == "rl":
            post.update(mean_ms=f"{last['mean_runtime_s'] * 1e3:.4g}",
                        entropy=f"{last['entropy']:.3f}")
          else:
            post.update(accuracy=f"{last['accuracy']:.3f}")
          bar.set_postfix(post)
        if progress_fn is not None:
          progress_fn(step, last)
        if step % config.train.checkpoint_every == 0 or step == total_steps:
          checkpointer.save(step, state)
        if stop_after_step is not None and step >= stop_after_step:
          break
  finally:
    # Also on errors: pending asynchronous saves must finish.
    if bar is not None:
      bar.close()
    checkpointer.close()
  state = unreplicate(state_dev, parallel)
  if not os.path.exists(os.path.join(workdir, "best_placement.json")):
    write_best_placement(os.path.join(workdir, "best_placement.json"),
                         setups, state, topology, step)

  best_runtime = [float(x) for x in np.asarray(state.best_runtime_s)]
  best_placements = [np.asarray(state.best_placement)[b, :s.graph.n_nodes]
                     for b, s in enumerate(setups)]
  tables = []
  if stop_after_step is None or step >= total_steps:
    with open(metrics_path) as f:
      records = [json.loads(l) for l in f if l.strip()]
    _plot_curve(os.path.join(workdir, "learning_curve.png"), records, setups)
    for b, s in enumerate(setups):
      row = dict(s.baseline_runtime_s)
      row["gplace"] = best_runtime[b]
      row["lower_bound"] = s.lower_bound_s
      tables.append(row)
      if config.print_table:
        log(format_table(s, best_runtime[b]))
    _write_json(os.path.join(workdir, "results.json"),
                {"tables": [{k: (v if np.isfinite(v) else None)
                             for k, v in t.items()} for t in tables],
                 "workloads": names, "topology": topology.name})
  return TrainResult(state, best_placements, best_runtime, tables,
                     steps_per_second)


def _host_reward_chunk(fns: StepFns, state, batch, reward_fns, num_nodes,
                       length):
  """``length`` RL steps with host-measured rewards (single device)."""
  all_metrics = []
  for _ in range(length):
    state, rollout = fns.sample(state, batch)
    rollout = rl.host_scored_rollout(rollout, reward_fns, num_nodes)
    state, metrics = fns.update(state, batch, rollout)
    all_metrics.append(metrics)
  return state, jax.tree.map(lambda *xs: jnp.stack(xs), *all_metrics)
