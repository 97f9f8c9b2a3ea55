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

import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError
from gplace.policies import seq2seq
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
    self.encoder = seq2seq.SequenceEncoder(self.hidden_size,
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
  """A :class:`ColocRLPolicy` from flat hyperparameters (``config.policy``
  less ``name``).

  Raises:
    PolicyError: an unknown hyperparameter or a value that cannot work.
  """
  reject_unknown("ColocRL", hparams,
                 module_fields(ColocRLPolicy) - {"num_devices"})
  return ColocRLPolicy(num_devices=num_devices, **hparams)
