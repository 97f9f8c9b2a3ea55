"""The ColocRL placement policy (Mirhoseini et al., "Device Placement
Optimization with Reinforcement Learning", ICML 2017): a seq2seq model that
reads the co-location groups in topological order and emits one device per
group.

Where this sits: a *sequential* policy of :mod:`gplace.policies.base`
(``sequential = True``; its actions are the placements, ``A = N_pad``),
registered as ``"colocrl"``. The training loop (:mod:`gplace.rl`) coarsens
each graph first (``config.groups.rule = "colocation"``), so the nodes this
policy sees are groups; it samples, scores and decodes greedily through
:func:`gplace.rl.policy_fns.policy_fns`. The layers are the shared ones of
:mod:`gplace.policies.seq2seq`.

The paper's architecture, and what gplace does
-----------------------------------------------
* Co-location first (paper: TF co-location constraints, and "an op whose only
  consumer is X joins X"), to keep sequences under ~1k. gplace:
  :func:`gplace.coarsen` with rule ``"colocation"`` (capture's name scopes
  stand in for TF's constraints), applied by the loop to every graph of
  more than ``config.groups.max_groups`` ops, and going on merging by size
  down to ``max_groups`` groups where co-location leaves more, which the
  paper did not need. Graphs of at most ``max_groups`` ops are placed op by
  op.
* Op embedding = op-type embedding ‖ output shapes (a fixed-size, zero-padded
  list) ‖ one-hot adjacency. gplace: a learned op-type embedding ‖ the
  output-shape node features (``log1p`` of the bytes and of each dimension;
  a gplace node has one output, so the list has one entry) ‖ a log-bucketed
  adjacency encoding (:func:`gplace.policies.seq2seq.adjacency_encoding`)
  ‖ the op's relative position in topological order. Deviation: one-hot
  adjacency is ``N`` wide, so it neither fits a fixed input width nor
  scales to 1k-group sequences; the buckets record how far back the inputs
  and how far ahead the consumers sit, at ``2 * adjacency_buckets``
  columns, and the position says where the op sits, which the absolute
  one-hot also said. The float features are layer-normalised (unnormalised
  ``log1p`` values saturate LSTM gates); ``node_features="all"`` adds every
  node feature (flops, bytes accessed, depth, degrees, kind), which the
  paper did not have.
* Encoder: an LSTM over the sequence. Same (``bidirectional=True`` gives
  HDP's bidirectional one).
* Decoder: an LSTM with content-based (Bahdanau) attention over the encoder
  states, one step per op, the previous step's device embedding fed back.
  Same; the decoder starts from the encoder's final state. Deviation
  (``feed_encoder_state=True``, the default): the decoder also reads the
  encoder state of the op it is placing, so it need not learn the
  op/step alignment through attention alone, which costs many samples;
  ``False`` is the paper's decoder.
* Objective: minimise ``E[sqrt(runtime)]`` by REINFORCE with an EMA baseline,
  ``K`` sampled placements per update, failed / OOM placements given a large
  fixed runtime. gplace's loop does this with ``config.rl.loss="reinforce"``,
  ``advantage="ema"``, ``num_samples=K`` and ``oom_penalty_factor``; the
  paper's distributed training (controllers sharing a parameter server,
  placements run on real GPUs) is one learner with simulated (or executed)
  rewards here.
* Sizes: PAPERS.md records none of the paper's widths or optimizer
  settings; gplace's defaults (hidden 64, attention 64) are small enough to
  train on a CPU.

Length budget: decoding costs ``O(L^2)`` per sample (every step attends over
all ``L`` steps) and the paper kept ``L`` under ~1k. A graph padded to more
than ``max_length`` node slots is refused at trace time with a
:class:`~gplace.errors.PolicyError` that names the fix; nothing is
truncated.

The policy reads a ``GraphsTuple`` of one graph plus padding (the loop vmaps
over graphs); with several graphs in one tuple it would decode their nodes
as one sequence.
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
  """A :class:`ColocRLPolicy` from flat hyperparameters (``config.policy``
  less ``name``).

  Raises:
    PolicyError: an unknown hyperparameter or a value that cannot work.
  """
  reject_unknown("ColocRL", hparams,
                 module_fields(ColocRLPolicy) - {"num_devices"})
  return ColocRLPolicy(num_devices=num_devices, **hparams)
