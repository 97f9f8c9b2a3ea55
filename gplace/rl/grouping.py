"""Group-level actions: the policy places groups of ops, the simulator ops.

Where this sits: :mod:`gplace.rl.data` coarsens each graph that is large
enough (:func:`gplace.coarsen`) and puts the coarse graph in the
:class:`~gplace.rl.types.Batch` the policy sees, with ``group_of`` mapping
every original node to its group; :mod:`gplace.rl.update` samples one device
per group and :func:`expand_to_nodes` gives every op its group's device
before the simulator (or the executor) scores it.
"""

from __future__ import annotations

from typing import Optional

import jax


def expand_to_nodes(placements: jax.Array,
                    group_of: Optional[jax.Array]) -> jax.Array:
  """Group placements -> node placements, per graph.

  Args:
    placements: ``int [B, ..., G_pad]``, a device per group.
    group_of: ``int32 [B, N_pad]``, the group of every node (padding nodes
      point at any group), or None: ``placements`` are already per node.

  Returns:
    ``int [B, ..., N_pad]`` (``placements`` itself for ``group_of=None``).
  """
  if group_of is None:
    return placements
  return jax.vmap(lambda p, g: p[..., g])(placements, group_of)
