"""The HDP placement policy: a feed-forward grouper, then a seq2seq placer
over the groups (sequential, actions ``int32 [K, N_pad + G]``, ``"hdp"``).

Mirhoseini et al., "A Hierarchical Model for Device Placement", ICLR 2018;
code: grappler's ``hierarchical_controller.py``. Deviations: learned op-type
embedding, log-bucketed adjacency and position; empty groups skipped; no
logit noise; tanh off by default; OOM penalty instead of 100 s; hidden 64.
"""

from __future__ import annotations

from typing import ClassVar, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError
from gplace.policies import seq2seq, sequence_encoder
from gplace.policies.base import (ActionScores, module_fields,
                                  register_policy, reject_unknown)

# grappler: num_groups = min(256, 20 x devices) when unset.
MAX_DEFAULT_GROUPS = 256
GROUPS_PER_DEVICE = 20


def default_num_groups(num_devices: int) -> int:
  """HDP's default group count, ``min(256, 20 x num_devices)``."""
  return min(MAX_DEFAULT_GROUPS, GROUPS_PER_DEVICE * num_devices)


def _chosen_log_probs(log_p: jax.Array, chosen: jax.Array,
                      mask: jax.Array) -> jax.Array:
  """``log_p [N, G]`` at ``chosen [K, N]``: ``[K, N]``, 0 where not
  ``mask [N]``."""
  taken = jnp.take_along_axis(log_p[None], chosen[..., None], -1)[..., 0]
  return jnp.where(mask, taken, 0.0)


class HDPPolicy(seq2seq.Seq2SeqPlacer):
  """HDP: a feed-forward grouper and a seq2seq placer over its groups.

  Actions ``int32 [K, N_pad + G]``: the group of every node (0 on padding),
  then the device of every group (0 on empty groups).

  Hyperparameters: those of :class:`~gplace.policies.seq2seq.Seq2SeqPlacer`
  (``hidden_size``: the placer's, even: two directions of ``H / 2``;
  ``feed_encoder_state``: the state of the group being placed;
  ``logit_tanh_constant``: grappler's is 1.0) and the attributes below.

  Attributes:
    num_groups: ``G`` (0: :func:`default_num_groups`); at least ``D``.
    grouping_hidden_size: the grouper's hidden width.
  """

  sequential: ClassVar[bool] = True
  placement_actions: ClassVar[bool] = False

  num_groups: int = 0
  grouping_hidden_size: int = 64

  def __post_init__(self):
    seq2seq.validate_seq2seq_fields(self, "HDP")
    seq2seq.check_positive("HDP",
                           grouping_hidden_size=self.grouping_hidden_size)
    if self.hidden_size % 2:
      raise PolicyError(
          f"HDP: hidden_size={self.hidden_size} must be even (the encoder "
          "is bidirectional, hidden_size / 2 per direction); set "
          "config.policy.hidden_size to an even number.")
    groups = self.num_groups
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 0:
      raise PolicyError(
          f"HDP: num_groups={groups!r} must be a non-negative integer; set "
          "config.policy.num_groups to 0 (min(256, 20 x devices)) or a "
          "count of at least the number of devices.")
    if groups and groups < self.num_devices:
      raise PolicyError(
          f"HDP: num_groups={groups!r} is below the {self.num_devices} "
          "devices, so some device could never be used; set "
          f"config.policy.num_groups to at least {self.num_devices}, or to "
          f"0 for min(256, 20 x devices) = "
          f"{default_num_groups(self.num_devices)}.")
    super().__post_init__()

  @property
  def groups(self) -> int:
    """``G``: the number of groups in use."""
    return self.num_groups or default_num_groups(self.num_devices)

  def setup(self):
    super().setup()
    self.grouper_hidden = nn.Dense(self.grouping_hidden_size)
    self.grouper_output = nn.Dense(self.groups)
    self.group_norm = nn.LayerNorm()
    self.encoder = sequence_encoder.SequenceEncoder(self.hidden_size,
                                           bidirectional=True)

  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None,
               actions: Optional[jax.Array] = None) -> ActionScores:
    """Scores ``actions`` (``int [K, N_pad + G]``) by teacher forcing; None
    scores one all-zero row (for ``init``).

    Returns:
      :class:`~gplace.policies.base.ActionScores`: ``[K, N_pad + G]``
      log-probabilities and entropies (grouper's, then placer's) and the
      mask ``[N_pad + G]`` (padding nodes False).
    """
    mask = graphs.nodes["mask"]
    n_pad = mask.shape[0]
    width = n_pad + self.groups
    if actions is None:
      actions = jnp.zeros((1, width), jnp.int32)
    if actions.ndim != 2 or actions.shape[1] != width:
      raise PolicyError(
          f"HDP scores actions [K, {width}] (a group per node for "
          f"{n_pad} node slots, then a device per group for "
          f"{self.groups} groups), got shape {actions.shape}.")
    op_embeddings, group_log_p = self._group_distribution(graphs)
    group_of = jnp.where(mask, jnp.clip(actions[:, :n_pad], 0,
                                        self.groups - 1), 0)
    group_log_probs = _chosen_log_probs(group_log_p, group_of, mask)
    group_entropy = jnp.where(
        mask, -jnp.sum(jnp.exp(group_log_p) * group_log_p, -1), 0.0)
    decoded = self._place(graphs, device_mask, op_embeddings, group_of,
                          actions=actions[:, n_pad:])
    return ActionScores(
        jnp.concatenate([group_log_probs, decoded.log_probs], -1),
        jnp.concatenate([jnp.broadcast_to(group_entropy, group_of.shape),
                         decoded.entropy], -1),
        jnp.concatenate([mask, jnp.ones((self.groups,), bool)]))

  def sample(self, graphs: jraph.GraphsTuple,
             device_mask: Optional[jax.Array], keys: jax.Array,
             greedy: bool = False) -> tuple[jax.Array, jax.Array]:
    """Samples a grouping, then a device per group, per key
    (``keys [K, 2]``); ``greedy``: the most likely group of every op and
    argmax decoding (all rows alike); a Python bool or a traced bool scalar.

    Returns:
      ``(placements int32 [K, N_pad], actions int32 [K, N_pad + G])``.
    """
    placements, actions, _ = self._sample(graphs, device_mask, keys, greedy)
    return placements, actions

  def _sample(self, graphs: jraph.GraphsTuple,
              device_mask: Optional[jax.Array], keys: jax.Array,
              greedy: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """:meth:`sample`, and the log-probabilities ``f32 [K, N_pad + G]`` of
    the actions it took (what ``__call__`` must reproduce)."""
    mask = graphs.nodes["mask"]
    op_embeddings, group_log_p = self._group_distribution(graphs)
    split = jax.vmap(jax.random.split)(keys)  # [K, 2, ...]
    noise = seq2seq.sampling_noise(split[:, 0], group_log_p.shape, greedy)
    group_of = jnp.argmax(group_log_p + noise, -1)  # [K, N_pad]
    group_of = jnp.where(mask, group_of, 0).astype(jnp.int32)
    decoded = self._place(graphs, device_mask, op_embeddings, group_of,
                          keys=split[:, 1], greedy=greedy)
    placements = jnp.take_along_axis(decoded.actions, group_of, -1)
    group_log_probs = _chosen_log_probs(group_log_p, group_of, mask)
    return (placements, jnp.concatenate([group_of, decoded.actions], -1),
            jnp.concatenate([group_log_probs, decoded.log_probs], -1))

  def _group_distribution(
      self, graphs: jraph.GraphsTuple) -> tuple[jax.Array, jax.Array]:
    """Op embeddings ``[N_pad, E]`` and the grouper's log-probabilities
    ``[N_pad, G]``."""
    op_embeddings = self.op_embedding(graphs)
    logits = self.grouper_output(nn.relu(self.grouper_hidden(op_embeddings)))
    return op_embeddings, jax.nn.log_softmax(logits, -1)

  def _place(self, graphs: jraph.GraphsTuple,
             device_mask: Optional[jax.Array], op_embeddings: jax.Array,
             group_of: jax.Array, **mode) -> seq2seq.Decoded:
    """Runs the placer over the groups of ``group_of [K, N_pad]``."""
    embeddings, nonempty = self._group_embeddings(graphs, op_embeddings,
                                                  group_of)
    memory, carry = self.encoder(embeddings, nonempty)
    allowed = self._group_device_mask(graphs, device_mask, group_of)
    return self.decoder(memory, nonempty, carry, allowed, **mode)

  def _group_embeddings(self, graphs: jraph.GraphsTuple,
                        op_embeddings: jax.Array,
                        group_of: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-sample group embeddings ``[K, G, E + 1 + 2G]`` and which groups
    have members ``bool [K, G]`` (padding nodes and edges count nothing)."""
    num_groups = self.groups
    weight = graphs.nodes["mask"].astype(jnp.float32)
    forward = (graphs.edges["mask"]
               & (graphs.edges["direction"] == 0)).astype(jnp.float32)

    def one(group):
      count = jax.ops.segment_sum(weight, group, num_groups)
      total = jax.ops.segment_sum(op_embeddings * weight[:, None], group,
                                  num_groups)
      edge_cell = group[graphs.senders] * num_groups + group[graphs.receivers]
      adjacency = jax.ops.segment_sum(forward, edge_cell,
                                      num_groups * num_groups).reshape(
                                          num_groups, num_groups)
      embedding = jnp.concatenate([
          total / jnp.maximum(count, 1.0)[:, None],
          jnp.log1p(count)[:, None], jnp.log1p(adjacency),
          jnp.log1p(adjacency.T)], -1)
      return embedding, count > 0

    embeddings, nonempty = jax.vmap(one)(group_of)
    embeddings = self.group_norm(embeddings)
    return embeddings * nonempty[..., None], nonempty

  def _group_device_mask(self, graphs: jraph.GraphsTuple,
                         device_mask: Optional[jax.Array],
                         group_of: jax.Array) -> jax.Array:
    """Allowed devices per group, ``bool [K, G, D]`` or ``[G, D]``."""
    num_groups, num_devices = self.groups, self.num_devices
    if device_mask is None or jnp.ndim(device_mask) == 1:
      return seq2seq.device_mask_rows(device_mask, num_groups, num_devices)
    mask = graphs.nodes["mask"]
    rows = seq2seq.device_mask_rows(device_mask, mask.shape[0], num_devices)
    forbidden = (~rows & mask[:, None]).astype(jnp.float32)

    def one(group):
      allowed = jax.ops.segment_sum(forbidden, group, num_groups) == 0
      # No device in common: any device (the constraint checks flag it).
      return jnp.where(allowed.any(-1, keepdims=True), allowed, True)

    return jax.vmap(one)(group_of)


@register_policy("hdp")
def create_hdp_policy(num_devices: int, **hparams) -> HDPPolicy:
  """An :class:`HDPPolicy` from flat hyperparameters
  (``PolicySettings.hparams``).

  Raises:
    PolicyError: an unknown hyperparameter or a value that cannot work
      (e.g. ``num_groups`` below ``num_devices``).
  """
  reject_unknown("HDP", hparams, module_fields(HDPPolicy) - {"num_devices"})
  return HDPPolicy(num_devices=num_devices, **hparams)
