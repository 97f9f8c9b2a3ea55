"""Refining a placement op by op: a per-op policy trained on its own moves.

:func:`refine_placement`: logits ``[N, D]`` at the start placement; samples
move 1 to ``max_moves`` ops off the greedy placement, whose runtime is their
baseline (per-move credit); gradient ascent with a line search, so the
greedy placement never gets slower
(``docs/design.md#the-per-op-refinement-rlrefine``).
"""

from __future__ import annotations

import functools
import time
from typing import Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gplace.errors import ConfigError
from gplace.rl.types import RewardFn

#: Row names of the refined policy's placements in tables, and their keys in
#: ``results.json``.
REFINED_GREEDY_ROW = "policy refined per op: greedy"
REFINED_BEST_ROW = "policy refined per op: best sample"
REFINED_GREEDY_KEY = "refined_greedy"
REFINED_BEST_KEY = "refined_best_sample"
#: ``RefineResult.start_name`` when the refinement starts at the placement it
#: was given (no alternative was faster).
START_GIVEN = "given"


class RefineResult(NamedTuple):
  """What :func:`refine_placement` returns (runtimes in seconds; inf: the
  placement fails, e.g. runs out of memory).

  Attributes:
    greedy_placement: ``int32 [N]``, the refined policy's argmax per op.
    greedy_runtime_s: its runtime.
    best_sample: ``int32 [N]``, the fastest placement the policy sampled.
    best_sample_runtime_s: its runtime.
    start_runtime_s: the starting placement's runtime.
    evaluations: reward evaluations spent (starting and greedy placements
      included).
    moved_ops: ops whose greedy device differs from the start.
    wall_s: wall-clock seconds.
    curve: ``(evaluations [S], greedy runtime [S], sample mean [S])`` per
      step.
    start_name: where it started: :data:`START_GIVEN` (the placement it was
      given) or the name of the alternative that was faster.
    start_placement: ``int32 [N]``, the starting placement (None in results
      built before alternatives existed).
  """

  greedy_placement: np.ndarray
  greedy_runtime_s: float
  best_sample: np.ndarray
  best_sample_runtime_s: float
  start_runtime_s: float
  evaluations: int
  moved_ops: int
  wall_s: float
  curve: tuple
  start_name: str = START_GIVEN
  start_placement: Optional[np.ndarray] = None

  def rows(self) -> list[tuple[str, float]]:
    """``(row name, runtime_s)`` for a printed table."""
    return [(REFINED_GREEDY_ROW, self.greedy_runtime_s),
            (REFINED_BEST_ROW, self.best_sample_runtime_s)]

  def record(self) -> dict:
    """The ``results.json`` entries."""
    return {REFINED_GREEDY_KEY: self.greedy_runtime_s,
            REFINED_BEST_KEY: self.best_sample_runtime_s,
            "refine_evaluations": self.evaluations,
            "refined_moved_ops": self.moved_ops,
            "refine_start": self.start_name}


@functools.partial(jax.jit, static_argnames=("num_samples", "max_moves"))
def propose_moves(logits: jax.Array, allowed: jax.Array, key: jax.Array, *,
                  num_samples: int, max_moves: int):
  """The policy's greedy placement and ``K`` samples that move a few ops.

  Args:
    logits: ``f32 [N, D]``.
    allowed: ``bool [N, D]``, the devices each op may use.
    key: a PRNG key.
    num_samples: ``K``.
    max_moves: each sample moves between 1 and this many ops (fewer if fewer
      ops have a second allowed device).

  Returns:
    ``(placements int32 [K, N], moved bool [K, N])``; the rows not moved
    are the greedy placement (the argmax of the allowed logits).
  """
  num_nodes, num_devices = logits.shape
  masked = jnp.where(allowed, logits, -jnp.inf)
  greedy = jnp.argmax(masked, -1).astype(jnp.int32)
  elsewhere = allowed & (jnp.arange(num_devices) != greedy[:, None])
  movable = elsewhere.any(-1)  # [N]
  count_key, op_key, device_key = jax.random.split(key, 3)
  counts = jax.random.randint(count_key, (num_samples,), 1, max_moves + 1)
  # Uniform ops without replacement: the max_moves smallest of uniform
  # draws, immovable ops ranked last.
  draws = jnp.where(movable, jax.random.uniform(op_key, (num_samples,
                                                         num_nodes)), 2.0)
  _, chosen = jax.lax.top_k(-draws, min(max_moves, num_nodes))  # [K, M]
  take = (jnp.arange(chosen.shape[1]) < counts[:, None]) & movable[chosen]
  rows = jnp.arange(num_samples)[:, None]
  moved = jnp.zeros((num_samples, num_nodes), bool).at[rows, chosen].max(take)
  new_device = jax.random.categorical(
      device_key, jnp.where(elsewhere, logits, -jnp.inf),
      shape=(num_samples, num_nodes)).astype(jnp.int32)
  placements = jnp.where(moved, new_device, greedy[None])
  return placements, moved


@jax.jit
def credit_update(logits: jax.Array, placements: jax.Array, moved: jax.Array,
                  advantages: jax.Array, learning_rate: jax.Array,
                  max_logit: jax.Array) -> jax.Array:
  """One gradient-ascent step on the moved ops' log-probabilities.

  Args:
    logits: ``f32 [N, D]``.
    placements: ``int32 [K, N]``.
    moved: ``bool [K, N]``, the ops each sample drew.
    advantages: ``f32 [K]``.
    learning_rate: step size.
    max_logit: the logits are clipped to ``[-max_logit, max_logit]``.

  Returns:
    the new ``f32 [N, D]`` logits.
  """

  def objective(values):
    log_p = jax.nn.log_softmax(values, -1)  # [N, D]
    chosen = jnp.take_along_axis(log_p[None], placements[..., None],
                                 -1)[..., 0]  # [K, N]
    return jnp.sum(advantages[:, None] * jnp.where(moved, chosen, 0.0))

  grad = jax.grad(objective)(logits)
  return jnp.clip(logits + learning_rate * grad, -max_logit, max_logit)


def _check_placement(placement: np.ndarray, num_devices: int, allowed,
                     what: str) -> np.ndarray:
  """Validated ``allowed [N, D]`` for ``placement`` (``what`` names it in
  the :class:`ConfigError`)."""
  if placement.ndim != 1 or placement.size == 0:
    raise ConfigError(f"refine_placement: {what} must be int [N] with "
                      f"N >= 1, got shape {placement.shape}.")
  if not np.issubdtype(placement.dtype, np.integer):
    raise ConfigError(f"refine_placement: {what} must hold integer device "
                      f"indices, got {placement.dtype}.")
  if num_devices < 1 or placement.min() < 0 or placement.max() >= num_devices:
    raise ConfigError(f"refine_placement: {what} uses devices "
                      f"{placement.min()}..{placement.max()}, the topology "
                      f"has {num_devices}; pass a placement of this "
                      f"topology.")
  n = placement.size
  allowed = (np.ones((n, num_devices), bool) if allowed is None else
             np.asarray(allowed, bool))
  if allowed.shape != (n, num_devices):
    raise ConfigError(f"refine_placement: allowed must be bool [N, D] = "
                      f"[{n}, {num_devices}] for {what}, got "
                      f"{allowed.shape}.")
  if not allowed[np.arange(n), placement].all():
    raise ConfigError(f"refine_placement: {what} puts an op on a device it "
                      "does not allow; repair it first "
                      "(gplace.graphs.constraints.repair).")
  return allowed


def _check(placement: np.ndarray, num_devices: int, allowed, evaluations,
           num_samples, max_moves, learning_rate, init_logit) -> np.ndarray:
  """Validated ``allowed [N, D]``; raises :class:`ConfigError` naming the
  argument and a fix."""
  allowed = _check_placement(placement, num_devices, allowed,
                             "the starting placement")
  checks = [("evaluations", evaluations, evaluations >= 3,
             ">= 3 (the start and a few samples)"),
            ("num_samples", num_samples, num_samples >= 1, ">= 1"),
            ("max_moves", max_moves, max_moves >= 1, ">= 1"),
            ("learning_rate", learning_rate,
             np.isfinite(learning_rate) and learning_rate > 0, "> 0"),
            ("init_logit", init_logit,
             np.isfinite(init_logit) and init_logit >= 0, ">= 0")]
  for name, value, ok, valid in checks:
    if not ok:
      raise ConfigError(f"refine_placement: {name}={value!r}; it must be "
                        f"{valid} (config.refine.{name}).")
  return allowed


def _scores(reward_fn: RewardFn, placements: np.ndarray) -> np.ndarray:
  runtime = np.asarray(reward_fn(np.asarray(placements)), np.float64)
  return np.where(np.isfinite(runtime), runtime, np.inf)


def relative_change(base_s: float, runtime_s) -> np.ndarray:
  """``(base_s - runtime_s) / base_s`` (positive: faster than the base); a
  failed run is ``-inf``; against a failed base, every run that does not
  fail is ``+inf`` and a failed one 0."""
  runtime_s = np.asarray(runtime_s, np.float64)
  ok = np.isfinite(runtime_s)
  if not np.isfinite(base_s):
    return np.where(ok, np.inf, 0.0)
  with np.errstate(invalid="ignore"):
    return np.where(ok, (base_s - runtime_s) / base_s, -np.inf)


def scaled_advantages(change: np.ndarray, scale: float) -> np.ndarray:
  """``change / scale`` clipped to ``[-1, 1]`` (``scale > 0``); with an
  infinite scale (the base failed), 1 for the runs that did not fail and 0
  for the rest."""
  if not np.isfinite(scale):
    return np.where(np.isposinf(change), 1.0, 0.0)
  with np.errstate(invalid="ignore"):
    return np.nan_to_num(np.clip(change / scale, -1.0, 1.0))


#: Halvings of a rejected update before it is dropped.
MAX_HALVINGS = 3


def _line_search(reward_fn, logits, update, allowed, greedy, greedy_s,
                 spent, evaluations):
  """Accepts ``update`` (or the first of its halvings) whose greedy
  placement is no slower than ``greedy``: ``(logits, greedy, greedy_s,
  spent)``. An update that leaves the greedy placement as it is costs
  nothing; each changed one costs an evaluation; with no budget left, or
  after :data:`MAX_HALVINGS` halvings, the old logits stay."""
  candidate = update
  for _ in range(MAX_HALVINGS + 1):
    proposal = np.asarray(jnp.argmax(jnp.where(allowed, candidate, -jnp.inf),
                                     -1)).astype(np.int32)
    if np.array_equal(proposal, greedy):
      return candidate, greedy, greedy_s, spent
    if spent >= evaluations:
      break
    proposal_s = float(_scores(reward_fn, proposal[None])[0])
    spent += 1
    if proposal_s <= greedy_s:
      return candidate, proposal, proposal_s, spent
    candidate = 0.5 * (logits + candidate)
  return logits, greedy, greedy_s, spent


def refine_placement(reward_fn: RewardFn, placement, num_devices: int, *,
                     evaluations: int, num_samples: int = 64,
                     max_moves: int = 1, learning_rate: float = 4.0,
                     init_logit: float = 5.0,
                     allowed: Optional[np.ndarray] = None,
                     seed: int = 0,
                     alternatives: Optional[Mapping[str, np.ndarray]] = None
                     ) -> RefineResult:
  """Trains a per-op policy from ``placement`` with per-move credit (see the
  module docstring) and returns its greedy placement and best own sample.

  Args:
    reward_fn: ``int [K, N] -> runtime_s [K]`` (inf or NaN: failed), e.g.
      :class:`gplace.rl.scoring.Scorer` or a function around
      :func:`gplace.simulate`.
    placement: ``int [N]``, the starting placement (e.g. a group policy's
      greedy placement, expanded to ops).
    num_devices: ``D``.
    evaluations: reward evaluations to spend, the start and every greedy
      placement the line search scores included; ``>= 3``.
    num_samples: ``K`` samples per step.
    max_moves: each sample moves between 1 and this many ops.
    learning_rate: gradient-ascent step on the logits (the step's best move
      has advantage 1).
    init_logit: the starting placement's logit (0 elsewhere).
    allowed: optional ``bool [N, D]`` devices each op may use (the graph's
      :func:`gplace.graphs.constraints.device_mask`).
    seed: PRNG seed.
    alternatives: other starting placements by name, ``int [N]`` each (e.g.
      the classical plans). The policy starts at the fastest of
      ``placement`` and these (``placement`` on ties), all scored in one
      call whose evaluations count against ``evaluations``;
      ``RefineResult.start_name`` says which.

  Returns:
    :class:`RefineResult`.

  Raises:
    ConfigError: a bad argument (named, with its valid range).
  """
  start = time.perf_counter()
  placement = np.asarray(placement)
  allowed = _check(placement, int(num_devices), allowed, int(evaluations),
                   int(num_samples), int(max_moves), float(learning_rate),
                   float(init_logit))
  names = [START_GIVEN] + list(alternatives or {})
  candidates = [placement] + [
      np.asarray(alternatives[name]) for name in names[1:]]
  for name, candidate in zip(names[1:], candidates[1:]):
    _check_placement(candidate, int(num_devices), allowed,
                     f"the alternative start {name!r}")
  if int(evaluations) < len(candidates) + 2:
    raise ConfigError(f"refine_placement: evaluations={evaluations} leaves "
                      f"no budget after scoring the {len(candidates)} "
                      f"starting placements; give at least "
                      f"{len(candidates) + 2}.")
  start_runtimes = _scores(reward_fn, np.stack(candidates).astype(np.int32))
  chosen = int(np.argmin(start_runtimes))  # the first of equals: the given
  start_name = names[chosen]
  placement = candidates[chosen].astype(np.int32)
  logits = jnp.asarray(init_logit * np.eye(num_devices, dtype=np.float32)[
      placement])
  allowed_j = jnp.asarray(allowed)
  lr = jnp.float32(learning_rate)
  max_logit = jnp.float32(max(30.0, 2 * init_logit))
  key = jax.random.PRNGKey(seed)
  greedy_s = start_s = float(start_runtimes[chosen])
  greedy_np, spent = placement, len(candidates)
  best, best_s = placement, np.inf
  curve = ([], [], [])
  while spent < evaluations:
    key, step_key = jax.random.split(key)
    placements, moved = propose_moves(
        logits, allowed_j, step_key, num_samples=int(num_samples),
        max_moves=int(max_moves))
    k = min(int(num_samples), evaluations - spent)
    runtime = _scores(reward_fn, np.asarray(placements[:k]))
    spent += k
    if runtime.min() < best_s:
      best, best_s = np.asarray(placements[int(np.argmin(runtime))]), float(
          runtime.min())
    change = relative_change(greedy_s, runtime)
    if change.max() > 0:  # else no move helped: nothing to adopt
      # Unscored samples (the last step's tail) get no credit: same
      # shapes, one compile.
      advantages = np.pad(scaled_advantages(change, float(change.max())),
                          (0, int(num_samples) - k))
      update = credit_update(logits, placements, moved,
                             jnp.asarray(advantages, jnp.float32), lr,
                             max_logit)
      logits, greedy_np, greedy_s, spent = _line_search(
          reward_fn, logits, update, allowed_j, greedy_np, greedy_s, spent,
          evaluations)
    curve[0].append(spent)
    curve[1].append(greedy_s)
    curve[2].append(float(np.mean(runtime)))
  final = greedy_np
  return RefineResult(final, greedy_s, np.asarray(best, np.int32), best_s,
                      start_s, spent, int(np.sum(final != placement)),
                      time.perf_counter() - start,
                      tuple(np.asarray(c) for c in curve), start_name,
                      placement)
