"""Placement policies: flax linen modules over padded graph batches.

Every policy has one interface (:mod:`gplace.policies.base`):
``policy.apply(params, graphs, device_mask=None) -> logits [N_pad,
n_devices]``, and is built by name with :func:`create_policy`. ``layers``
holds the shared building blocks; one module per policy family registers
itself (``go`` today).
"""

from gplace.policies import layers
from gplace.policies.base import (Policy, create_policy, policy_names,
                                  register_policy)
from gplace.policies import go
from gplace.policies.go import GOEncoder, GOPolicy

__all__ = ["GOEncoder", "GOPolicy", "Policy", "create_policy", "go", "layers",
           "policy_names", "register_policy"]
