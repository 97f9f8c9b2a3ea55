"""The one interface every placement policy follows, and the registry.

A policy is a flax module on a padded ``jraph.GraphsTuple``. One-shot:
``apply(params, graphs, device_mask=None) -> f32 [N_pad, D]``, each node an
independent categorical. Sequential (``sequential = True``, actions ``int32
[K, A]``): ``apply(params, graphs, mask, actions) -> ActionScores`` by
teacher forcing, reproducing the log-probabilities of ``apply(params,
graphs, mask, keys [K, 2], method="sample") -> (placements [K, N_pad],
actions)``. ``placement_actions``: actions are placements; ``orders``: the
first ``N_pad`` actions are a schedule. :func:`create_policy` ``(name,
num_devices, **hparams)``, :func:`register_policy`.
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
  """Names of the registered policy families (``PolicySettings.name``)."""
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
