"""Placement policies: flax linen modules over padded graph batches.

Every policy has one interface: ``policy.apply(params, graphs,
device_mask=None) -> logits [N_pad, n_devices]``. ``layers`` holds the shared
building blocks; one module per policy family (``go`` today).
"""

from gplace.policies import layers
from gplace.policies.go import GOEncoder, GOPolicy
