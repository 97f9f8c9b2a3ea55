"""The one interface every placement policy follows, and the policy registry.

The policy interface
--------------------
A placement policy is a flax module whose ``__call__`` maps a padded batch of
graphs (the ``jraph.GraphsTuple`` layout of ``gplace.graphs.features``) to
one row of device logits per node::

    logits = policy.apply(params, graphs, device_mask=None)  # f32 [N_pad, D]

* ``device_mask``: optional ``bool [D]`` or ``[N_pad, D]``; disallowed devices
  get a large negative logit.
* Rows of padding nodes (``graphs.nodes["mask"] == False``) are ignored by
  :mod:`gplace.rl` (they never count in log-probabilities or entropies).
* The logits define a factorised distribution: each node's device is an
  independent categorical given the graph ("one-shot" placement, as in GO).
  ``gplace.rl.sample_placements(logits, rng, K) -> [K, N_pad]`` and
  ``gplace.rl.log_prob(logits, placements, node_mask) -> [K]`` are the only
  two things RL needs from a policy.

Sequential policies
-------------------
Policies that decide step by step (ColocRL's seq2seq, HDP's grouper-placer,
Placeto's node walk) set the class attribute ``sequential = True`` and
describe their decisions as *actions* ``int32 [K, A]`` (``A`` fixed by the
padded layout: e.g. one device per node, or a group per node followed by a
device per group). They have two entry points::

  scores = policy.apply(params, graphs, device_mask, actions)   # ActionScores
  placements, actions = policy.apply(params, graphs, device_mask, keys,
                                     greedy=False, method="sample")

* ``__call__(graphs, device_mask=None, actions=None)`` scores given actions
  by teacher forcing: an :class:`ActionScores` of per-action
  log-probabilities and entropies ``[K, A]`` and the mask ``[A]`` of real
  actions (``actions=None``: one all-zero row, for ``init``).
* ``sample(graphs, device_mask, keys, greedy=False)``: one decoding per key
  (``keys [K, 2]``), a ``lax.scan`` inside the jitted step; returns the node
  (or group) placements ``int32 [K, N_pad]`` and the actions taken
  ``int32 [K, A]``. ``greedy=True`` takes the most likely action at every
  step (every row the same).
* ``placement_actions = True`` says the actions *are* the placements
  (``A = N_pad``), so a warm start can teacher-force a baseline placement
  and a search can mutate placements; otherwise neither is possible.

* ``orders = True`` says the policy chooses the schedule too: the first
  ``N_pad`` actions are the nodes in the order they are scheduled (a
  topological order; DOPPLER's op selection). The loop then scores each
  placement with that order as the dynamic schedule's priority (a free
  device runs its arrived op scheduled first, see
  :func:`gplace.rl.grouping.order_priority`) instead of the critical
  path. Such a policy may define ``plan_actions(placement, order,
  senders, receivers, num_padded)``, the teacher actions of a baseline's
  plan, for the warm start.

Scoring the sampled actions again must reproduce the sampler's
log-probabilities (tests check it per policy). :mod:`gplace.rl` turns either
kind of policy into the same sample / score / greedy functions
(:func:`gplace.rl.policy_fns.policy_fns`).

The registry
------------
One module per policy family registers a factory under its name
(``@register_policy("go")``); :func:`create_policy` builds a policy from that
name, the number of devices and the family's hyperparameters (the keys of
``config.policy`` in ``experiments/configs``, less ``name``).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable, NamedTuple, Optional, Protocol

import jax
import jraph

from gplace.errors import PolicyError, first_line


class Policy(Protocol):
  """What :mod:`gplace.rl` needs from a policy (any flax module with this
  ``__call__`` signature has it)."""

  def init(self, rng: jax.Array, graphs: jraph.GraphsTuple,
           device_mask: Optional[jax.Array] = None) -> Any:
    """Parameters for graphs of this padded layout."""

  def apply(self, params: Any, graphs: jraph.GraphsTuple,
            device_mask: Optional[jax.Array] = None) -> jax.Array:
    """``f32 [N_pad, D]`` logits (or ``[K, N_pad, D]`` teacher-forced)."""


class ActionScores(NamedTuple):
  """A sequential policy's teacher-forced view of actions ``[K, A]``.

  Attributes:
    log_probs: ``f32 [K, A]``, log-probability of each action given the
      earlier ones (0 where ``mask`` is False).
    entropy: ``f32 [K, A]``, entropy (nats) of each step's distribution.
    mask: ``bool [A]``, real actions (padding nodes and groups: False).
  """

  log_probs: jax.Array
  entropy: jax.Array
  mask: jax.Array


def is_sequential(policy: Any) -> bool:
  """Whether ``policy`` (a module or its bound ``apply``) is a sequential
  policy (see the module docstring)."""
  module = getattr(policy, "__self__", policy)
  return bool(getattr(type(module), "sequential", False))


def module_fields(module_class) -> set[str]:
  """The hyperparameter fields of a flax module class."""
  return {f.name for f in dataclasses.fields(module_class)} - {"parent",
                                                               "name"}


def reject_unknown(owner: str, hparams: dict, known: set[str]) -> None:
  """Raises PolicyError naming hyperparameters the family does not take."""
  unknown = set(hparams) - known
  if unknown:
    raise PolicyError(
        f"Unknown {owner} policy hyperparameters {sorted(unknown)}; remove "
        f"them from config.policy. The policy takes {sorted(known)}.")


# factory(num_devices, **hyperparameters) -> Policy
PolicyFactory = Callable[..., Policy]

_FACTORIES: dict[str, PolicyFactory] = {}


def register_policy(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
  """Decorator: registers ``factory(num_devices, **hparams) -> Policy`` as
  the policy family ``name``."""

  def register(factory: PolicyFactory) -> PolicyFactory:
    _FACTORIES[name] = factory
    return factory

  return register


def policy_names() -> tuple[str, ...]:
  """Names of the registered policy families (``config.policy.name``)."""
  return tuple(sorted(_FACTORIES))


def create_policy(name: str, num_devices: int, **hparams) -> Policy:
  """A policy of family ``name`` for ``num_devices`` devices.

  Args:
    name: a registered family, see :func:`policy_names` (``"go"``).
    num_devices: ``D``, devices of the topology.
    **hparams: the family's hyperparameters; omitted ones take the
      family's defaults.

  Raises:
    PolicyError: an unknown family, a device count that is not a positive
      integer, or hyperparameters it does not accept.
  """
  if not isinstance(name, str) or name not in _FACTORIES:
    raise PolicyError(f"Unknown policy {name!r}; choose from "
                      f"{', '.join(policy_names())}.")
  if (isinstance(num_devices, bool) or not isinstance(
      num_devices, numbers.Integral) or num_devices < 1):
    raise PolicyError(f"num_devices must be a positive integer (the "
                      f"topology's device count), got {num_devices!r}.")
  try:
    return _FACTORIES[name](int(num_devices), **hparams)
  except (TypeError, ValueError, ZeroDivisionError) as err:
    # A hyperparameter of the wrong type fails in a comparison or in flax.
    raise PolicyError(f"The {name!r} policy rejects these hyperparameters "
                      f"({first_line(err)}); compare them with "
                      "experiments/configs/quickstart.py.") from err
