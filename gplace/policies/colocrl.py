"""The ColocRL placement policy: seq2seq over co-location groups in
topological order, one device per group (sequential, ``"colocrl"``).

Mirhoseini et al., "Device Placement Optimization with Reinforcement
Learning", ICML 2017. Deviations: log-bucketed adjacency and position for
one-hot adjacency; the decoder also reads the placed op's encoder state
(``feed_encoder_state``); hidden 64; over ``max_length`` nodes refused.
"""

from __future__ import annotations

from typing import ClassVar, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError
from gplace.graphs import features as features_lib
from gplace.policies import seq2seq
from gplace.policies.base import (ActionScores, module_fields,
                                  register_policy, reject_unknown)


class ColocRLPolicy(nn.Module):
  """ColocRL's seq2seq placer: an op (group) embedding, an LSTM encoder and
  an attentional LSTM decoder emitting one device per node.

  Actions are the placements: ``int32 [K, N_pad]`` (0 on padding nodes).

  Attributes:
    num_devices: ``D``.
    hidden_size: LSTM width ``H`` (even when ``bidirectional``).
    attention_size: width of the additive attention's hidden layer.
    device_embedding_size: width of the fed-back device embedding.
    op_embedding_size: width of the op-type embedding.
    adjacency_buckets: log-distance buckets of the adjacency encoding per
      direction (0: no adjacency).
    num_position_frequencies: frequencies of the relative-position
      encoding in the op embedding (0: only the fraction).
    node_features: ``"shape"`` (the paper's output shapes) or ``"all"``.
    bidirectional: a bidirectional encoder (the paper's is not).
    feed_encoder_state: the decoder also reads the encoder state of the
      node being placed (False: the paper's decoder).
    logit_tanh_constant: ``c > 0`` squashes device logits to
      ``c tanh(logits)`` (0: off).
    max_length: the longest padded sequence (``N_pad``) accepted.
    vocabulary_size: op-type ids (larger ids share the last row).
  """

  sequential: ClassVar[bool] = True
  placement_actions: ClassVar[bool] = True

  num_devices: int
  hidden_size: int = 64
  attention_size: int = 64
  device_embedding_size: int = 16
  op_embedding_size: int = 16
  adjacency_buckets: int = 8
  num_position_frequencies: int = 4
  node_features: str = "shape"
  bidirectional: bool = False
  feed_encoder_state: bool = True
  logit_tanh_constant: float = 0.0
  max_length: int = 1024
  vocabulary_size: int = features_lib.VOCABULARY_SIZE

  def __post_init__(self):
    validate_seq2seq_fields(self, "ColocRL")
    seq2seq.check_positive("ColocRL", max_length=self.max_length)
    if self.bidirectional and self.hidden_size % 2:
      raise PolicyError(
          f"ColocRL: hidden_size={self.hidden_size} must be even with "
          "bidirectional=True (each direction is hidden_size / 2 wide); set "
          "config.policy.hidden_size to an even number.")
    super().__post_init__()

  def setup(self):
    self.op_embedding = seq2seq.OpEmbedding(
        self.vocabulary_size, self.op_embedding_size, self.adjacency_buckets,
        self.node_features, self.num_position_frequencies)
    self.encoder = seq2seq.SequenceEncoder(self.hidden_size,
                                           self.bidirectional)
    self.decoder = seq2seq.AttentionDecoder(
        self.num_devices, self.hidden_size, self.attention_size,
        self.device_embedding_size, self.feed_encoder_state,
        self.logit_tanh_constant)

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


def validate_seq2seq_fields(module, owner: str) -> None:
  """Checks the hyperparameters ColocRL and HDP share (PolicyError)."""
  seq2seq.check_positive(
      owner, num_devices=module.num_devices, hidden_size=module.hidden_size,
      attention_size=module.attention_size,
      device_embedding_size=module.device_embedding_size,
      op_embedding_size=module.op_embedding_size,
      vocabulary_size=module.vocabulary_size)
  for name in ("adjacency_buckets", "num_position_frequencies"):
    value = getattr(module, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      raise PolicyError(
          f"{owner}: {name}={value!r} must be a non-negative integer; set "
          f"config.policy.{name} to e.g. 4 (0: none).")
  seq2seq.check_choice(owner, "node_features", module.node_features,
                       seq2seq.NODE_FEATURE_CHOICES)
  if not module.logit_tanh_constant >= 0:
    raise PolicyError(
        f"{owner}: logit_tanh_constant={module.logit_tanh_constant!r} must "
        "be >= 0; set config.policy.logit_tanh_constant to 0 (off) or e.g. "
        "2.5.")


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
