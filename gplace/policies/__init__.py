"""Placement policies: flax linen modules over padded graph batches.

Every policy has one interface (:mod:`gplace.policies.base`):
``policy.apply(params, graphs, device_mask=None) -> logits [N_pad,
n_devices]``, and is built by name with :func:`create_policy`. ``layers``
holds the shared building blocks; one module per policy family registers
itself (``go``, ``colocrl``, ``doppler``, ``hdp``, ``hsdag``,
``placeto``).
"""

from gplace.policies import layers
from gplace.policies.base import (ActionScores, Policy, create_policy,
                                  is_sequential, policy_names,
                                  register_policy)
from gplace.policies import go
# The seed systems of issue 11; each module registers its family.
from gplace.policies import colocrl, doppler, hdp, hsdag, placeto  # noqa: F401
from gplace.policies.go import GOEncoder, GOPolicy

__all__ = ["ActionScores", "GOEncoder", "GOPolicy", "Policy", "create_policy",
           "go", "is_sequential", "layers", "policy_names",
           "register_policy"]
