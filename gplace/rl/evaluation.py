"""The policy's own placements at the end of a run: greedy and sampled.

:func:`evaluate_policy` scores the greedy placement and ``K`` fresh samples
from the softmax, with no search and no best-ever bookkeeping
(``docs/design.md#reporting-only-what-the-policy-placed``).
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplace.rl.grouping import expand_to_nodes
from gplace.rl.policy_fns import policy_fns
from gplace.rl.types import ApplyFn, Batch, RewardFn

#: Row names of the policy's own placements, in tables and ``results.json``.
GREEDY_ROW = "policy greedy"
SAMPLED_MEAN_ROW = "policy sampled: mean of {k}"
SAMPLED_BEST_ROW = "policy sampled: best of {k}"
#: Keys of the same rows in ``results.json`` tables.
GREEDY_KEY = "policy_greedy"
SAMPLED_MEAN_KEY = "policy_sampled_mean"
SAMPLED_BEST_KEY = "policy_sampled_best"


class PolicyEvaluation(NamedTuple):
  """The policy's own placements of one graph, scored.

  Attributes:
    greedy_placement: ``int32 [N]``, argmax device per node.
    greedy_runtime_s: its runtime (inf: OOM / failed).
    sampled_runtime_s: ``float64 [K]``, runtimes of ``K`` fresh samples.
    best_sample: ``int32 [N]``, the fastest of them (None if not kept).
    greedy_order, best_sample_order: ``int32 [N]``, node ids in the order
      the policy's own schedule runs them (ordering policies), else None.
    greedy_fusion, best_sample_fusion: ``int32 [N]``, their fusion choices
      (1 where a node fuses into its consumer; policies with a fusion
      head), else None.
  """

  greedy_placement: np.ndarray
  greedy_runtime_s: float
  sampled_runtime_s: np.ndarray
  best_sample: Any = None
  greedy_order: Any = None
  best_sample_order: Any = None
  greedy_fusion: Any = None
  best_sample_fusion: Any = None

  @property
  def num_samples(self) -> int:
    return int(self.sampled_runtime_s.shape[0])

  @property
  def sampled_mean_s(self) -> float:
    """Mean over the samples (inf if any failed)."""
    return float(np.mean(self.sampled_runtime_s))

  @property
  def sampled_best_s(self) -> float:
    return float(np.min(self.sampled_runtime_s))

  def rows(self) -> list[tuple[str, float]]:
    """``(row name, runtime_s)`` for a printed table."""
    k = self.num_samples
    return [(GREEDY_ROW, self.greedy_runtime_s),
            (SAMPLED_MEAN_ROW.format(k=k), self.sampled_mean_s),
            (SAMPLED_BEST_ROW.format(k=k), self.sampled_best_s)]

  def record(self) -> dict:
    """The ``results.json`` entries (``policy_samples``: ``K``)."""
    return {GREEDY_KEY: self.greedy_runtime_s,
            SAMPLED_MEAN_KEY: self.sampled_mean_s,
            SAMPLED_BEST_KEY: self.sampled_best_s,
            "policy_samples": self.num_samples}


class OwnPlacements(NamedTuple):
  """:func:`policy_placements`' result (priorities: policies that schedule
  only, fusion choices: policies with a fusion head only, else None)."""
  greedy: Any
  samples: Any
  greedy_priority: Any = None
  sample_priority: Any = None
  greedy_fusion: Any = None
  sample_fusion: Any = None


def policy_placements(params: Any, batch: Batch, rng: jax.Array, *,
                      apply_fn: ApplyFn, num_samples: int):
  """The policy's greedy and sampled placements of every graph, per node.

  Pure and jittable (``num_samples`` static).

  Args:
    params: policy parameters.
    batch: ``B`` graphs (with ``group_of``: the policy places groups).
    rng: a PRNG key; graph ``b`` samples with ``split(rng, B)[b]``.
    apply_fn: the policy (its ``apply``, the module, or
      :class:`~gplace.rl.policy_fns.PolicyFns`).
    num_samples: ``K``.

  Returns:
    :class:`OwnPlacements`: ``greedy int32 [B, N_pad]``, ``samples int32
    [B, K, N_pad]``, one device per node of the original graphs; for a
    policy that schedules too also their schedules (``greedy_priority [B,
    N_pad]``, ``sample_priority [B, K, N_pad]``: the dynamic schedule's
    priority, :attr:`~gplace.rl.policy_fns.PolicyFns.schedule`); for a
    policy with a fusion head its fusion choices (``greedy_fusion [B,
    N_pad]``, ``sample_fusion [B, K, N_pad]``,
    :attr:`~gplace.rl.policy_fns.PolicyFns.fusion`).
  """
  fns = policy_fns(apply_fn)  # the plain policy, never the exploration mix
  num_graphs = batch.graphs.nodes["mask"].shape[0]
  keys = jax.random.split(rng, num_graphs)

  def draw(graph, device_mask, key):
    keys = jax.random.split(key, num_samples)
    return fns.sample(params, graph, device_mask, keys)

  samples, sample_actions = jax.vmap(draw)(batch.graphs, batch.device_mask,
                                           keys)
  if fns.schedule is None and fns.fusion is None:
    greedy = jax.vmap(lambda g, m: fns.greedy(params, g, m))(
        batch.graphs, batch.device_mask)  # [B, G_pad]
    return OwnPlacements(expand_to_nodes(greedy, batch.group_of),
                         expand_to_nodes(samples, batch.group_of))
  greedy, greedy_actions = jax.vmap(
      lambda g, m: fns.greedy_decode(params, g, m))(batch.graphs,
                                                    batch.device_mask)
  schedule = fns.schedule or (lambda *args: None)
  fusion = fns.fusion or (lambda actions: None)
  return OwnPlacements(
      expand_to_nodes(greedy, batch.group_of),
      expand_to_nodes(samples, batch.group_of),
      schedule(greedy_actions, batch.group_of, batch.critical_path),
      schedule(sample_actions, batch.group_of, batch.critical_path),
      fusion(greedy_actions), fusion(sample_actions))



@functools.lru_cache(maxsize=8)
def jitted_policy_placements(apply_fn: ApplyFn, num_samples: int):
  """:func:`policy_placements` jitted for one policy and ``K``, as
  ``fn(params, batch, rng) -> OwnPlacements`` (cached: the same policy and
  ``K`` reuse the compiled function)."""
  return jax.jit(functools.partial(policy_placements, apply_fn=apply_fn,
                                   num_samples=num_samples))


def evaluate_policy(params: Any, batch: Batch, *, apply_fn: ApplyFn,
                    reward_fns: Sequence[RewardFn], num_nodes: Sequence[int],
                    num_samples: int, seed: int = 0
                    ) -> list[PolicyEvaluation]:
  """Scores the policy's greedy placement and ``K`` fresh samples per graph
  (host side; no search, no best-ever bookkeeping).

  Args:
    params: policy parameters (unreplicated).
    batch: the run's ``B`` graphs.
    apply_fn: the policy.
    reward_fns: one per graph, ``int [K, N_b] -> runtime_s [K]`` (inf for
      OOM / failed), e.g. :class:`gplace.rl.scoring.Scorer`.
    num_nodes: ``[B]`` real node counts ``N_b``.
    num_samples: ``K``.
    seed: the samples' PRNG seed (independent of the training RNG).

  Returns:
    One :class:`PolicyEvaluation` per graph.
  """
  rng = jax.random.fold_in(jax.random.PRNGKey(seed), 0x5EED)
  own = jax.tree.map(np.asarray, jitted_policy_placements(
      apply_fn, int(num_samples))(params, jax.tree.map(jnp.asarray, batch),
                                  rng))
  greedy, samples = own.greedy, own.samples
  out = []
  for b, (fn, n) in enumerate(zip(reward_fns, num_nodes)):
    n = int(n)
    placements = np.concatenate([greedy[b, None, :n], samples[b, :, :n]])
    extra = {}
    if own.greedy_priority is not None:  # in the policy's own schedule
      extra["priority"] = np.concatenate(
          [own.greedy_priority[b, None, :n], own.sample_priority[b, :, :n]])
    if own.greedy_fusion is not None:    # with the policy's own fusion
      extra["fusion"] = np.concatenate(
          [own.greedy_fusion[b, None, :n], own.sample_fusion[b, :, :n]])
    runtimes = fn(placements, **extra)
    runtimes = np.asarray(runtimes, np.float64)
    runtimes = np.where(np.isfinite(runtimes), runtimes, np.inf)
    best = int(np.argmin(runtimes[1:])) if runtimes.size > 1 else None
    orders = [None, None]
    if own.greedy_priority is not None:
      orders[0] = _order(own.greedy_priority[b, :n])
      if best is not None:
        orders[1] = _order(own.sample_priority[b, best, :n])
    fusions = [None, None]
    if own.greedy_fusion is not None:
      fusions[0] = own.greedy_fusion[b, :n].astype(np.int32)
      if best is not None:
        fusions[1] = own.sample_fusion[b, best, :n].astype(np.int32)
    out.append(PolicyEvaluation(
        greedy[b, :n].astype(np.int32), float(runtimes[0]), runtimes[1:],
        None if best is None else samples[b, best, :n].astype(np.int32),
        *orders, *fusions))
  return out


def _order(priority: np.ndarray) -> np.ndarray:
  """Node ids by decreasing dynamic-schedule ``priority``."""
  return np.argsort(-np.asarray(priority), kind="stable").astype(np.int32)


def policy_verdict(greedy_runtime_s: float,
                   classical_runtime_s: Mapping[str, float],
                   who: str = "the policy itself (greedy, no search)") -> str:
  """One line: the policy's own greedy placement against the best classical
  plan, ``classical_runtime_s`` (``{label: runtime_s}``: every baseline and
  each list scheduler in its own planned order,
  :func:`gplace.rl.reports.classical_runtimes`), e.g. ``"the policy itself
  (greedy, no search) is 12.3% faster than the best classical plan, heft
  (own plan)"``; ``who`` names the placement."""
  name = min(classical_runtime_s, key=classical_runtime_s.get)
  best = classical_runtime_s[name]
  if not np.isfinite(greedy_runtime_s):
    return f"{who} runs out of memory / fails"
  if not np.isfinite(best):
    return f"{who} runs; no baseline does"
  change = (greedy_runtime_s / best - 1.0) * 100
  word = "slower" if change > 0 else "faster"
  return (f"{who} is {abs(change):.1f}% {word} than the best classical "
          f"plan, {name}")
