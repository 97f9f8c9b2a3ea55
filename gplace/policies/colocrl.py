"""The ColocRL placement policy: seq2seq over co-location groups in
topological order, one device per group (sequential, ``"colocrl"``).

Mirhoseini et al., "Device Placement Optimization with Reinforcement
Learning", ICML 2017. Deviations: log-bucketed adjacency and position for
one-hot adjacency; the decoder also reads the placed op's encoder state
(``feed_encoder_state``); hidden 64; over ``max_length`` nodes refused.
"""

from __future__ import annotations

from typing import ClassVar, Optional

import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError
from gplace.policies import seq2seq, sequence_encoder
from gplace.policies.base import (ActionScores, module_fields,
                                  register_policy, reject_unknown)


class ColocRLPolicy(seq2seq.Seq2SeqPlacer):
  """ColocRL's seq2seq placer: an op (group) embedding, an LSTM encoder and
  an attentional LSTM decoder emitting one device per node.

  Actions are the placements: ``int32 [K, N_pad]`` (0 on padding nodes).

  Hyperparameters: those of :class:`~gplace.policies.seq2seq.Seq2SeqPlacer`
  (``hidden_size`` even when ``bidirectional``) and the attributes below.

  Attributes:
    bidirectional: a bidirectional encoder (the paper's is not).
    max_length: the longest padded sequence (``N_pad``) accepted.
  """

  sequential: ClassVar[bool] = True
  placement_actions: ClassVar[bool] = True

  bidirectional: bool = False
  max_length: int = 1024

  def __post_init__(self):
    seq2seq.validate_seq2seq_fields(self, "ColocRL")
    seq2seq.check_positive("ColocRL", max_length=self.max_length)
    if self.bidirectional and self.hidden_size % 2:
      raise PolicyError(
          f"ColocRL: hidden_size={self.hidden_size} must be even with "
          "bidirectional=True (each direction is hidden_size / 2 wide); set "
          "config.policy.hidden_size to an even number.")
    super().__post_init__()

  def setup(self):
    super().setup()
    self.encoder = sequence_encoder.SequenceEncoder(self.hidden_size,
                                           self.bidirectional)

  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None,
               actions: Optional[jax.Array] = None) -> ActionScores:
    """Scores ``actions`` (``int [K, N_pad]``, a device per node) by teacher
    forcing; None scores one all-zero row (for ``init``).

    Returns:
      :class:`~gplace.policies.base.ActionScores` with ``[K, N_pad]``
      log-probabilities and entropies and the node mask ``[N_pad]``.
    """
    mask = graphs.nodes["mask"]
    n_pad = mask.shape[0]
    if actions is None:
      actions = jnp.zeros((1, n_pad), jnp.int32)
    if actions.ndim != 2 or actions.shape[1] != n_pad:
      raise PolicyError(
          f"ColocRL scores actions [K, {n_pad}] (a device per node), got "
          f"shape {actions.shape}.")
    decoded = self._decode(graphs, device_mask, actions=actions)
    return ActionScores(decoded.log_probs, decoded.entropy, mask)

  def sample(self, graphs: jraph.GraphsTuple,
             device_mask: Optional[jax.Array], keys: jax.Array,
             greedy: bool = False) -> tuple[jax.Array, jax.Array]:
    """One decoding per key (``keys [K, 2]``); ``greedy``: argmax at every
    step (all rows alike), a Python bool or a traced bool scalar.

    Returns:
      ``(placements, actions)``, both the same ``int32 [K, N_pad]``.
    """
    decoded = self._decode(graphs, device_mask, keys=keys, greedy=greedy)
    return decoded.actions, decoded.actions

  def _decode(self, graphs: jraph.GraphsTuple,
              device_mask: Optional[jax.Array], **mode) -> seq2seq.Decoded:
    mask = graphs.nodes["mask"]
    n_pad = mask.shape[0]
    if n_pad > self.max_length:
      raise PolicyError(
          f"ColocRL decodes one step per node and this graph is padded to "
          f"{n_pad} nodes (groups plus padding), past max_length="
          f"{self.max_length}. Coarsen it further (lower "
          "config.groups.max_groups with config.groups.rule='colocation') "
          "or raise config.policy.max_length (decoding costs grow with its "
          "square).")
    memory, carry = self.encoder(self.op_embedding(graphs)[None],
                                 mask[None])
    rows = seq2seq.device_mask_rows(device_mask, n_pad, self.num_devices)
    return self.decoder(memory, mask[None], carry, rows, **mode)


@register_policy("colocrl")
def create_colocrl_policy(num_devices: int, **hparams) -> ColocRLPolicy:
  """A :class:`ColocRLPolicy` from flat hyperparameters
  (``PolicySettings.hparams``).

  Raises:
    PolicyError: an unknown hyperparameter or a value that cannot work.
  """
  reject_unknown("ColocRL", hparams,
                 module_fields(ColocRLPolicy) - {"num_devices"})
  return ColocRLPolicy(num_devices=num_devices, **hparams)
