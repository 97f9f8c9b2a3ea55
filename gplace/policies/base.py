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

Policies that decide op by op (ColocRL's seq2seq, HDP's grouper-placer) fit the
same interface by teacher forcing: given ``placements=[K, N_pad]`` they return
logits ``[K, N_pad, D]`` conditioned on the earlier decisions, which
``gplace.rl.log_prob`` accepts unchanged (it broadcasts over a leading ``K``);
they add a ``sample(graphs, rng, num_samples, device_mask=None)`` method for
the decoding loop. Groupers return node logits by gathering each node's group
row, so the RL side never knows about groups.

The registry
------------
One module per policy family registers a factory under its name
(``@register_policy("go")``); :func:`create_policy` builds a policy from that
name, the number of devices and the family's hyperparameters (the keys of
``config.policy`` in ``experiments/configs``, less ``name``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import jax
import jraph

from gplace.errors import PolicyError


class Policy(Protocol):
  """What :mod:`gplace.rl` needs from a policy (any flax module with this
  ``__call__`` signature has it)."""

  def init(self, rng: jax.Array, graphs: jraph.GraphsTuple,
           device_mask: Optional[jax.Array] = None) -> Any:
    """Parameters for graphs of this padded layout."""

  def apply(self, params: Any, graphs: jraph.GraphsTuple,
            device_mask: Optional[jax.Array] = None) -> jax.Array:
    """``f32 [N_pad, D]`` logits (or ``[K, N_pad, D]`` teacher-forced)."""


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
    PolicyError: an unknown family, or hyperparameters it does not accept.
  """
  if name not in _FACTORIES:
    raise PolicyError(f"Unknown policy {name!r}; choose from "
                      f"{', '.join(policy_names())}.")
  return _FACTORIES[name](num_devices, **hparams)
