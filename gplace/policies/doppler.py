"""A DOPPLER-style dual policy: SEL picks the next ready op, PLC its device
(sequential and ``orders``: actions ``int32 [K, 2 N_pad]``, ``"doppler"``).

Yao et al., "Dual-Policy Learning for Device Assignment in Asynchronous
Dataflow Graphs", ICLR 2026. A GraphSAGE encoder over features with bottom
and top levels; SEL scores each ready op from its embedding and input
arrival; PLC scores each device from the op, a device embedding and the
device's free time, load, pending communication and the op's start there;
the state advances as a list scheduler on cost proxies. Deviations: proxies
from FLOPs and bytes; episodic reward from gplace's dynamic rule with the
chosen order as priority; HEFT imitation as warm start; no executor rewards.
"""

from __future__ import annotations

import heapq
from typing import ClassVar, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from gplace.errors import PolicyError, is_int
from gplace.policies.base import (ActionScores, module_fields,
                                  register_policy, reject_unknown)
from gplace.policies.doppler_context import DopplerContext, doppler_context
from gplace.policies.layers import NEG_INF, GraphSAGE, device_rows

class StepState(NamedTuple):
  """The list scheduler's state between two steps (one episode).

  Attributes:
    done: ``bool [N]``, scheduled nodes.
    waiting: ``int32 [N]``, unscheduled producers of each node.
    placement: ``int32 [N]`` (0 until scheduled).
    finish: ``f32 [N]``, estimated finish of scheduled nodes.
    arrival: ``f32 [N]``, the latest estimated finish among each node's
      scheduled producers (kept step by step: ``O(N)``, not ``O(N^2)``).
    free: ``f32 [D]``, when each device is free.
    load: ``f32 [D]``, cost placed on each device.
  """

  done: jax.Array
  waiting: jax.Array
  placement: jax.Array
  finish: jax.Array
  arrival: jax.Array
  free: jax.Array
  load: jax.Array


class DopplerNetwork(nn.Module):
  """The encoder, SEL and PLC (module docstring)."""

  num_devices: int
  hidden_size: int
  message_passing_steps: int
  logit_init_scale: float

  def setup(self):
    h = self.hidden_size
    self.project = nn.Dense(h)
    self.layers = [GraphSAGE(h, aggregator="mean")
                   for _ in range(self.message_passing_steps)]
    self.select_node = nn.Dense(h)
    self.select_state = nn.Dense(h, use_bias=False)
    self.select_out = nn.Dense(
        1, kernel_init=nn.initializers.orthogonal(self.logit_init_scale))
    self.place_node = nn.Dense(h)
    self.place_state = nn.Dense(h, use_bias=False)
    self.device_embedding = nn.Embed(self.num_devices, h)
    self.place_out = nn.Dense(
        1, kernel_init=nn.initializers.orthogonal(self.logit_init_scale))

  def encode(self, context: DopplerContext,
             graphs: jraph.GraphsTuple) -> tuple[jax.Array, jax.Array]:
    """``(embeddings [N, H], SEL's node term [N, H])``."""
    h = nn.relu(self.project(context.features))
    for layer in self.layers:
      h = h + layer(h, graphs)
    return h, self.select_node(h)

  def select_logits(self, node_term: jax.Array,
                    state: jax.Array) -> jax.Array:
    """``node_term [N, H]``, ``state [N, S]`` -> logits ``[N]``."""
    return self.select_out(nn.relu(node_term + self.select_state(state)))[:, 0]

  def place_logits(self, embedding: jax.Array,
                   state: jax.Array) -> jax.Array:
    """One node's ``embedding [H]``, ``state [D, S]`` -> logits ``[D]``."""
    devices = self.device_embedding(jnp.arange(self.num_devices))
    hidden = nn.relu(self.place_node(embedding)[None] + devices
                     + self.place_state(state))
    return self.place_out(hidden)[:, 0]

  def __call__(self, context: DopplerContext, graphs: jraph.GraphsTuple):
    """Makes every parameter (``init``): one encode, one SEL, one PLC."""
    embedding, node_term = self.encode(context, graphs)
    self.select_logits(node_term, jnp.zeros((node_term.shape[0], 2)))
    return self.place_logits(embedding[0], jnp.zeros((self.num_devices, 5)))


def _entropy(log_p: jax.Array) -> jax.Array:
  return -jnp.sum(jnp.where(log_p > NEG_INF / 2, jnp.exp(log_p) * log_p, 0.0))


class DopplerPolicy(nn.Module):
  """DOPPLER's two policies as one sequential gplace policy (module
  docstring).

  Attributes:
    num_devices: ``D``.
    hidden_size: width of every embedding.
    message_passing_steps: GraphSAGE layers of the encoder.
    max_nodes: the largest padded node count accepted (an episode costs
      ``O(N^2)``).
    logit_init_scale: scale of both heads' orthogonal output init (near
      uniform at the start).
  """

  num_devices: int
  hidden_size: int = 64
  message_passing_steps: int = 3
  max_nodes: int = 1024
  logit_init_scale: float = 0.01

  sequential: ClassVar[bool] = True
  placement_actions: ClassVar[bool] = False
  orders: ClassVar[bool] = True

  def __post_init__(self):
    for name in ("num_devices", "hidden_size", "max_nodes"):
      if not is_int(getattr(self, name)) or getattr(self, name) < 1:
        raise PolicyError(f"DOPPLER {name}={getattr(self, name)!r} must be a "
                          "positive integer.")
    if (not is_int(self.message_passing_steps)
        or self.message_passing_steps < 0):
      raise PolicyError(
          f"DOPPLER message_passing_steps={self.message_passing_steps!r} "
          "must be a non-negative integer.")
    super().__post_init__()

  def setup(self):
    self.network = DopplerNetwork(self.num_devices, self.hidden_size,
                                  self.message_passing_steps,
                                  self.logit_init_scale)

  def context(self, graphs: jraph.GraphsTuple) -> DopplerContext:
    """The :class:`DopplerContext` of ``graphs`` (checks ``max_nodes``)."""
    num_nodes = graphs.nodes["mask"].shape[0]
    if num_nodes > self.max_nodes:
      raise PolicyError(
          f"DOPPLER schedules one op per step over {num_nodes} padded nodes, "
          f"more than max_nodes={self.max_nodes}: an episode costs O(N^2). "
          "Place coarser groups (config.groups.max_groups, with "
          "config.groups.min_nodes below the graph size) or raise "
          "config.policy.max_nodes.")
    return doppler_context(graphs)

  def _episode(self, graphs, device_mask, choose_node, choose_device):
    """A function of (key or teacher actions) -> (actions [2N], log_probs
    [2N], entropy [2N]), and the mask ``[2N]`` of real steps."""
    num_nodes = graphs.nodes["mask"].shape[0]
    num_devices = self.num_devices
    allowed = device_rows(device_mask, num_nodes, num_devices,
                          "DOPPLER")
    context = self.context(graphs)
    network, variables = self.network.unbind()
    embedding, node_term = network.apply(variables, context, graphs,
                                         method=DopplerNetwork.encode)
    num_real = context.node_mask.sum()

    def step(per_episode, state: StepState, t):
      # SEL: the ready nodes; past the real ones, the first unscheduled
      # padding node (a masked step).
      real = t < num_real
      ready = ~state.done & context.node_mask & (state.waiting == 0)
      earliest = jnp.min(state.free)
      select_state = jnp.stack([state.arrival, state.arrival - earliest], 1)
      logits = network.apply(variables, node_term, select_state,
                             method=DopplerNetwork.select_logits)
      logits = jnp.where(ready, logits, NEG_INF)
      log_p_node = jax.nn.log_softmax(logits)
      fallback = jnp.argmax(~state.done)
      node = jnp.where(real, choose_node(per_episode, t, logits),
                       fallback).astype(jnp.int32)
      # PLC: the devices for that node.
      feeds = context.producer[:, node]  # [N], all scheduled
      elsewhere = state.placement[:, None] != jnp.arange(num_devices)[None]
      pending = jnp.sum(jnp.where(feeds[:, None] & elsewhere,
                                  context.transfer[:, node, None], 0.0), 0)
      arrival = jnp.max(jnp.where(
          feeds[:, None],
          state.finish[:, None] + jnp.where(
              elsewhere, context.transfer[:, node, None], 0.0), 0.0), 0)
      start = jnp.maximum(state.free, arrival)  # [D]
      place_state = jnp.stack(
          [state.free - earliest, state.load, pending, start - earliest,
           jnp.broadcast_to(context.cost[node], (num_devices,))], 1)
      logits_d = network.apply(variables, embedding[node], place_state,
                               method=DopplerNetwork.place_logits)
      logits_d = jnp.where(allowed[node], logits_d, NEG_INF)
      log_p_device = jax.nn.log_softmax(logits_d)
      device = jnp.where(real, choose_device(per_episode, t, logits_d),
                         0).astype(jnp.int32)
      finish = start[device] + context.cost[node]
      new_state = StepState(
          done=state.done.at[node].set(True),
          waiting=state.waiting - context.producer[node].astype(jnp.int32),
          placement=state.placement.at[node].set(device),
          finish=state.finish.at[node].set(finish),
          arrival=jnp.maximum(state.arrival, jnp.where(
              context.producer[node], finish, 0.0)),
          free=jnp.where(real, state.free.at[device].set(finish), state.free),
          load=state.load.at[device].add(jnp.where(real, context.cost[node],
                                                   0.0)))
      outputs = (node, device,
                 jnp.where(real, log_p_node[node], 0.0),
                 jnp.where(real, log_p_device[device], 0.0),
                 jnp.where(real, _entropy(log_p_node), 0.0),
                 jnp.where(real, _entropy(log_p_device), 0.0))
      return new_state, outputs

    def episode(per_episode):
      start = StepState(
          done=jnp.zeros(num_nodes, bool), waiting=context.waiting,
          placement=jnp.zeros(num_nodes, jnp.int32),
          finish=jnp.zeros(num_nodes, jnp.float32),
          arrival=jnp.zeros(num_nodes, jnp.float32),
          free=jnp.zeros(num_devices, jnp.float32),
          load=jnp.zeros(num_devices, jnp.float32))
      final, (nodes, devices, lp_node, lp_device, ent_node, ent_device) = (
          jax.lax.scan(lambda s, t: step(per_episode, s, t), start,
                       jnp.arange(num_nodes)))
      return (final.placement, jnp.concatenate([nodes, devices]),
              jnp.concatenate([lp_node, lp_device]),
              jnp.concatenate([ent_node, ent_device]))

    real_step = jnp.arange(num_nodes) < num_real
    return episode, jnp.concatenate([real_step, real_step])

  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None,
               actions: Optional[jax.Array] = None) -> ActionScores:
    """Teacher-forced :class:`ActionScores` of ``actions int32 [K, 2
    N_pad]`` (nodes in order, then their devices; None: one all-zero row,
    for ``init``, which makes the parameters without decoding)."""
    num_nodes = graphs.nodes["mask"].shape[0]
    if actions is None:
      actions = jnp.zeros((1, 2 * num_nodes), jnp.int32)
    if self.is_initializing():
      device_rows(device_mask, num_nodes, self.num_devices,
                          "DOPPLER")
      self.network(self.context(graphs), graphs)
      zeros = jnp.zeros(actions.shape, jnp.float32)
      real = jnp.arange(num_nodes) < graphs.nodes["mask"].sum()
      return ActionScores(zeros, zeros, jnp.concatenate([real, real]))
    episode, mask = self._episode(
        graphs, device_mask, lambda row, t, logits: row[t],
        lambda row, t, logits: row[num_nodes + t])
    _, _, log_probs, entropy = jax.vmap(episode)(actions)
    return ActionScores(log_probs, entropy, mask)

  def sample(self, graphs: jraph.GraphsTuple,
             device_mask: Optional[jax.Array], keys: jax.Array,
             greedy: bool = False) -> tuple[jax.Array, jax.Array]:
    """One episode per key (``keys [K, 2]``): ``(placements int32 [K,
    N_pad], actions int32 [K, 2 N_pad])``. Step ``t`` draws its node with
    ``fold_in(key, 2 t)`` and its device with ``fold_in(key, 2 t + 1)``;
    ``greedy`` (bool or traced): the most likely node and device."""
    placements, actions, _ = self.sample_with_scores(graphs, device_mask,
                                                     keys, greedy)
    return placements, actions

  def sample_with_scores(self, graphs, device_mask, keys, greedy=False):
    """:meth:`sample` and the :class:`ActionScores` the sampler saw."""

    def chooser(offset):
      def choose(key, t, logits):
        return jnp.where(greedy, jnp.argmax(logits), jax.random.categorical(
            jax.random.fold_in(key, 2 * t + offset), logits))
      return choose

    episode, mask = self._episode(graphs, device_mask, chooser(0), chooser(1))
    placements, actions, log_probs, entropy = jax.vmap(episode)(keys)
    return placements, actions, ActionScores(log_probs, entropy, mask)

  @staticmethod
  def order_of(actions: jax.Array) -> jax.Array:
    """The scheduling order ``int32 [..., N]`` (node ids, first first) of
    actions ``[..., 2 N]``."""
    return actions[..., :actions.shape[-1] // 2]

  @staticmethod
  def plan_actions(placement: np.ndarray, order: np.ndarray,
                   senders: np.ndarray, receivers: np.ndarray,
                   num_padded: int) -> np.ndarray:
    """Teacher actions ``int32 [2 num_padded]`` for a plan: the nodes in
    ``order`` (made a topological order of the ``n`` real nodes, earliest
    planned first, should it not be one), then each one's device from
    ``placement [n]``; padding steps follow (padding node ids, device 0).
    ``senders``/``receivers``: the real forward edges."""
    n = len(placement)
    rank = np.empty(n, np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(n)
    topo = topological_order(rank, senders, receivers, n)
    nodes = np.concatenate([topo, np.arange(n, num_padded)])
    devices = np.zeros(num_padded, np.int64)
    devices[:n] = np.asarray(placement)[topo]
    return np.concatenate([nodes, devices]).astype(np.int32)


def topological_order(rank: np.ndarray, senders: np.ndarray,
                      receivers: np.ndarray, n: int) -> np.ndarray:
  """``int [n]``: Kahn's order of the DAG, the lowest ``rank`` first among
  ready nodes (host-side; ``rank`` a topological order already: itself)."""
  successors = [[] for _ in range(n)]
  waiting = np.zeros(n, np.int64)
  for u, v in zip(np.asarray(senders), np.asarray(receivers)):
    successors[int(u)].append(int(v))
    waiting[int(v)] += 1
  ready = [(int(rank[v]), v) for v in range(n) if waiting[v] == 0]
  heapq.heapify(ready)
  out = []
  while ready:
    _, u = heapq.heappop(ready)
    out.append(u)
    for v in successors[u]:
      waiting[v] -= 1
      if waiting[v] == 0:
        heapq.heappush(ready, (int(rank[v]), v))
  if len(out) != n:
    raise PolicyError("DOPPLER plan_actions: the graph has a cycle.")
  return np.asarray(out, np.int64)


@register_policy("doppler")
def create_doppler_policy(num_devices: int, **hparams) -> DopplerPolicy:
  """A :class:`DopplerPolicy` from flat hyperparameters
  (``PolicySettings.hparams``).

  Raises:
    PolicyError: an unknown hyperparameter or a value the policy rejects.
  """
  reject_unknown("DOPPLER", hparams,
                 module_fields(DopplerPolicy) - {"num_devices"})
  return DopplerPolicy(num_devices=num_devices, **hparams)
