"""Placement policies: flax linen modules over padded graph batches.

One interface (:mod:`gplace.policies.base`), built by name with
:func:`create_policy`; ``layers`` and ``seq2seq`` are the shared blocks, and
each family module registers itself.
"""

from gplace.policies import layers
from gplace.policies.base import (ActionScores, Policy, create_policy,
                                  is_sequential, policy_names,
                                  register_policy)
from gplace.policies import go
# The seed systems; each module registers its family.
from gplace.policies import colocrl, doppler, hdp, hsdag, placeto  # noqa: F401
from gplace.policies.go import GOEncoder, GOPolicy

__all__ = ["ActionScores", "GOEncoder", "GOPolicy", "Policy", "create_policy",
           "go", "is_sequential", "layers", "policy_names",
           "register_policy"]
