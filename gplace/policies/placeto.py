"""The Placeto placement policy: re-place each node once, in topological
order, given the whole current placement (sequential, ``"placeto"``).

Addanki et al., "Placeto: Learning Generalizable Device Placement
Algorithms for Distributed Machine Learning", NeurIPS 2019; code:
github.com/mitdbg/placeto. Each step (:class:`PlacetoNetwork`) embeds node
features, done and current bits and the current device, passes messages
forward and backward, aggregates the current node's ancestors, descendants
and parallel nodes, and a classifier gives its logits. Deviations: episodic
reward; static features; ``message_passing_steps`` synchronous rounds; mean
aggregation; ``O(N^2)`` an episode, so over ``max_nodes`` refused.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from gplace.errors import PolicyError, is_int
from gplace.policies.base import (ActionScores, module_fields,
                                  register_policy, reject_unknown)
from gplace.policies.layers import NEG_INF, device_rows

INITIAL_PLACEMENTS = ("zeros", "round_robin", "random")
AGGREGATIONS = ("ancestors", "descendants", "parallel")


class GraphContext(NamedTuple):
  """What a Placeto step needs of the graphs, computed once per call.

  Attributes:
    features: ``f32 [N, F]`` node features / their per-graph max (0 on
      padding).
    node_mask: ``bool [N]``, real nodes.
    graph_index: ``int32 [N]``.
    reaches: ``bool [N, N]``, ``reaches[u, v]``: a path ``u -> ... -> v``.
    senders, receivers, direction: ``int32 [E]``; edge_weight ``f32 [E]``
      (0 on padding edges).
    has_neighbors: ``f32 [N, 2]``: has a predecessor / a successor.
    initial_placement: ``int32 [N]``.
  """

  features: jax.Array
  node_mask: jax.Array
  graph_index: jax.Array
  reaches: jax.Array
  senders: jax.Array
  receivers: jax.Array
  direction: jax.Array
  edge_weight: jax.Array
  has_neighbors: jax.Array
  initial_placement: jax.Array


def reachability(graphs: jraph.GraphsTuple) -> jax.Array:
  """``bool [N, N]``: ``[u, v]`` is True when a forward path leads from ``u``
  to ``v`` (``u != v``; padding edges excluded). ``ceil(log2 N)`` squarings
  of the adjacency matrix, ``O(N^3 log N)`` once per call."""
  num_nodes = graphs.nodes["mask"].shape[0]
  forward = graphs.edges["mask"] & (graphs.edges["direction"] == 0)
  reach = jnp.zeros((num_nodes, num_nodes), jnp.float32).at[
      graphs.senders, graphs.receivers].max(forward.astype(jnp.float32))
  # After s squarings every path of length <= 2^s is found.
  for _ in range(max(1, math.ceil(math.log2(max(num_nodes - 1, 2))))):
    reach = jnp.maximum(reach, (reach @ reach > 0.5).astype(jnp.float32))
  return reach > 0.5


def initial_placement(graphs: jraph.GraphsTuple, num_devices: int, kind: str,
                      seed: int = 0) -> jax.Array:
  """``int32 [N]``: the placement an episode starts from (see the module
  docstring); a function of node positions only, so padding-invariant."""
  position = graphs.nodes["position"]
  if kind == "zeros":
    return jnp.zeros_like(position, jnp.int32)
  if kind == "round_robin":
    return (position % num_devices).astype(jnp.int32)
  # "random": an integer hash of (position, seed) (Wellons' lowbias32), as
  # good as a PRNG draw here and far cheaper to compile.
  x = position.astype(jnp.uint32) * jnp.uint32(0x9E3779B1) + jnp.uint32(
      seed & 0xFFFFFFFF)
  for shift, factor in ((16, 0x7FEB352D), (15, 0x846CA68B)):
    x = (x ^ (x >> shift)) * jnp.uint32(factor)
  x = x ^ (x >> 16)
  return (x % jnp.uint32(num_devices)).astype(jnp.int32)


def graph_context(graphs: jraph.GraphsTuple, num_devices: int,
                  initial: str = "zeros", seed: int = 0) -> GraphContext:
  """The :class:`GraphContext` of a padded batch (jittable)."""
  graphs = jax.tree.map(jnp.asarray, graphs)  # host numpy or traced
  node_mask = graphs.nodes["mask"]
  graph_index = graphs.nodes["graph_index"]
  num_nodes, num_graphs = node_mask.shape[0], graphs.n_node.shape[0]
  features = jnp.where(node_mask[:, None],
                       graphs.nodes["features"].astype(jnp.float32), 0.0)
  scale = jax.ops.segment_max(jnp.abs(features), graph_index, num_graphs)
  scale = jnp.where(scale > 0, scale, 1.0)[graph_index]
  edge_weight = graphs.edges["mask"].astype(jnp.float32)
  has_neighbors = jax.ops.segment_sum(
      edge_weight, graphs.receivers * 2 + graphs.edges["direction"],
      2 * num_nodes).reshape(num_nodes, 2) > 0
  return GraphContext(
      features=features / scale, node_mask=node_mask, graph_index=graph_index,
      reaches=reachability(graphs), senders=graphs.senders,
      receivers=graphs.receivers, direction=graphs.edges["direction"],
      edge_weight=edge_weight,
      has_neighbors=has_neighbors.astype(jnp.float32),
      initial_placement=initial_placement(graphs, num_devices, initial, seed))


class MLP(nn.Module):
  """Dense layers with ReLU between them (and after the last one with
  ``activate_last``); Placeto's ``FNN``."""

  sizes: Sequence[int]
  activate_last: bool = True
  last_init_scale: Optional[float] = None

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    for i, size in enumerate(self.sizes):
      last = i == len(self.sizes) - 1
      init = (nn.initializers.orthogonal(self.last_init_scale)
              if last and self.last_init_scale is not None
              else nn.linear.default_kernel_init)
      x = nn.Dense(size, kernel_init=init)(x)
      if not last or self.activate_last:
        x = nn.relu(x)
    return x


class PlacetoNetwork(nn.Module):
  """One Placeto step: the state (graph + current placement + current node)
  to the current node's device logits. See the module docstring."""

  num_devices: int
  hidden_size: int = 32
  message_passing_steps: int = 2
  normalize_aggregations: bool = True
  small_nn: bool = False
  logit_init_scale: float = 0.01

  def setup(self):
    h = self.hidden_size
    # Placeto's layer sizes; small_nn drops one hidden layer from each.
    hidden = 0 if self.small_nn else 1
    self.node_transform = MLP((h,) * (2 + hidden), activate_last=False)

    def pair(width):  # an (f, g) pair of Placeto's Aggregator
      return MLP((width,) * (1 + hidden)), MLP((width,) * (1 + hidden))

    self.forward_f, self.forward_g = pair(h)
    self.backward_f, self.backward_g = pair(h)
    self.aggregators = {name: pair(2 * h) for name in AGGREGATIONS}
    state = 8 * h  # [ancestors ‖ descendants ‖ parallel ‖ self]
    hidden_sizes = (state,) if self.small_nn else (2 * state, state)
    self.classifier = MLP(hidden_sizes + (self.num_devices,),
                          activate_last=False,
                          last_init_scale=self.logit_init_scale)

  def node_embeddings(self, context: GraphContext, placement: jax.Array,
                      visited: jax.Array, node: jax.Array) -> jax.Array:
    """``f32 [N, 2 hidden_size]``: ``[forward ‖ backward]`` embeddings of
    every node under ``placement int32 [N]`` and ``visited bool [N]`` with
    ``node`` the current one (0 on padding)."""
    num_nodes = placement.shape[0]
    current = jnp.arange(num_nodes) == node
    x = jnp.concatenate([
        context.features, jax.nn.one_hot(placement, self.num_devices),
        visited[:, None].astype(jnp.float32),
        current[:, None].astype(jnp.float32)], -1)
    mask = context.node_mask[:, None].astype(jnp.float32)
    own = self.node_transform(x) * mask
    states = (own, own)  # forward, backward
    segment = context.receivers * 2 + context.direction
    for _ in range(self.message_passing_steps):
      messages = jnp.stack([self.forward_f(states[0]),
                            self.backward_f(states[1])], 1)  # [N, 2, H]
      gathered = messages[context.senders, context.direction]
      summed = jax.ops.segment_sum(
          gathered * context.edge_weight[:, None], segment,
          2 * num_nodes).reshape(num_nodes, 2, -1)
      states = tuple(
          (own + context.has_neighbors[:, d:d + 1] * g(summed[:, d])) * mask
          for d, g in enumerate((self.forward_g, self.backward_g)))
    return jnp.concatenate(states, -1)

  def state_embedding(self, context: GraphContext, placement: jax.Array,
                      visited: jax.Array, node: jax.Array) -> jax.Array:
    """``f32 [8 hidden_size]``: ``[ancestors ‖ descendants ‖ parallel ‖
    self]`` aggregations for the current ``node``."""
    embeddings = self.node_embeddings(context, placement, visited, node)
    num_nodes = placement.shape[0]
    ancestors = context.reaches[:, node] & context.node_mask
    descendants = context.reaches[node, :] & context.node_mask
    parallel = (context.node_mask & ~ancestors & ~descendants
                & (context.graph_index == context.graph_index[node])
                & (jnp.arange(num_nodes) != node))
    pieces = []
    for members, name in zip((ancestors, descendants, parallel),
                             AGGREGATIONS):
      f, g = self.aggregators[name]
      weight = members.astype(jnp.float32)
      total = weight @ f(embeddings)
      if self.normalize_aggregations:
        total = total / jnp.maximum(weight.sum(), 1.0)
      pieces.append(g(total))
    return jnp.concatenate(pieces + [embeddings[node]], -1)

  def __call__(self, context: GraphContext, placement: jax.Array,
               visited: jax.Array, node: jax.Array) -> jax.Array:
    """``f32 [num_devices]`` logits for the current ``node``."""
    return self.classifier(
        self.state_embedding(context, placement, visited, node))


class PlacetoPolicy(nn.Module):
  """Placeto's node walk as a sequential gplace policy (module docstring).

  ``__call__`` scores actions by teacher forcing, ``sample`` decodes; both
  walk the padded nodes in index order (topological within each graph) with
  a ``lax.scan``, re-embedding the graph at every step.

  Attributes:
    num_devices: ``D``.
    hidden_size: message width (every embedding is a multiple of it).
    message_passing_steps: synchronous forward / backward rounds (0: none,
      Placeto's ``no_msg_passing``).
    normalize_aggregations: mean (True) or sum (False) over ancestors,
      descendants and parallel nodes.
    small_nn: Placeto's smaller networks (one hidden layer fewer in every
      MLP: node transform ``[H]``, ``f`` and ``g`` single layers, classifier
      ``[in]``).
    initial_placement: ``"zeros"``, ``"round_robin"`` or ``"random"``.
    initial_seed: the seed of ``"random"``.
    max_nodes: the largest padded node count accepted (the cost is
      quadratic in it).
    logit_init_scale: scale of the logits layer's orthogonal init.
  """

  num_devices: int
  hidden_size: int = 32
  message_passing_steps: int = 2
  normalize_aggregations: bool = True
  small_nn: bool = False
  initial_placement: str = "zeros"
  initial_seed: int = 0
  max_nodes: int = 320
  logit_init_scale: float = 0.01

  sequential: ClassVar[bool] = True
  placement_actions: ClassVar[bool] = True

  def __post_init__(self):
    for name in ("num_devices", "hidden_size", "max_nodes"):
      if not is_int(getattr(self, name)) or getattr(self, name) < 1:
        raise PolicyError(f"Placeto {name}={getattr(self, name)!r} must be a "
                          "positive integer.")
    if (not is_int(self.message_passing_steps)
        or self.message_passing_steps < 0):
      raise PolicyError(
          f"Placeto message_passing_steps={self.message_passing_steps!r} "
          "must be a non-negative integer (0: no message passing).")
    if self.initial_placement not in INITIAL_PLACEMENTS:
      raise PolicyError(
          f"Placeto initial_placement={self.initial_placement!r}; choose one "
          f"of {INITIAL_PLACEMENTS}.")
    super().__post_init__()

  def setup(self):
    self.network = PlacetoNetwork(
        self.num_devices, self.hidden_size, self.message_passing_steps,
        self.normalize_aggregations, self.small_nn, self.logit_init_scale)

  def context(self, graphs: jraph.GraphsTuple) -> GraphContext:
    """The :class:`GraphContext` of ``graphs`` (checks ``max_nodes``)."""
    num_nodes = graphs.nodes["mask"].shape[0]
    if num_nodes > self.max_nodes:
      raise PolicyError(
          f"Placeto re-embeds the whole graph at each of its {num_nodes} "
          f"steps (padded nodes), more than max_nodes={self.max_nodes}: the "
          "cost is quadratic in the node count. Place coarser groups "
          "(config.groups.max_groups, with config.groups.min_nodes below the "
          "graph size) or raise config.policy.max_nodes.")
    return graph_context(graphs, self.num_devices, self.initial_placement,
                         self.initial_seed)

  def embed_state(self, graphs: jraph.GraphsTuple, placement: jax.Array,
                  node: int) -> jax.Array:
    """``f32 [8 hidden_size]``: the embedding the logits of ``node`` come
    from when the graph is placed as ``placement int32 [N]`` and the nodes
    before ``node`` are visited (for inspection and tests)."""
    num_nodes = placement.shape[0]
    context = self.context(graphs)
    visited = (jnp.arange(num_nodes) < node) & context.node_mask
    return self.network.state_embedding(context, placement, visited,
                                        jnp.asarray(node))

  def _walk(self, graphs, device_mask, choose):
    """One episode per row of ``choose``'s inputs: returns a function of
    (key or teacher actions) -> (actions [N], log_probs [N], entropy [N])."""
    num_nodes = graphs.nodes["mask"].shape[0]
    allowed = device_rows(device_mask, num_nodes, self.num_devices,
                          "Placeto")
    context = self.context(graphs)
    # Flax modules cannot be called inside jax transforms: apply the
    # network as a pure function of its variables.
    network, variables = self.network.unbind()

    def episode(per_episode):
      def step(carry, node):
        placement, visited = carry
        logits = network.apply(variables, context, placement, visited, node)
        logits = jnp.where(allowed[node], logits, NEG_INF)
        log_p = jax.nn.log_softmax(logits)
        real = context.node_mask[node]
        action = jnp.where(real, choose(per_episode, node, logits),
                           placement[node]).astype(jnp.int32)
        entropy = -jnp.sum(jnp.where(log_p > NEG_INF / 2,
                                     jnp.exp(log_p) * log_p, 0.0))
        outputs = (action, jnp.where(real, log_p[action], 0.0),
                   jnp.where(real, entropy, 0.0))
        return (placement.at[node].set(action),
                visited.at[node].set(real)), outputs

      carry = (context.initial_placement, jnp.zeros(num_nodes, bool))
      _, outputs = jax.lax.scan(step, carry, jnp.arange(num_nodes))
      return outputs

    return context, episode

  def __call__(self, graphs: jraph.GraphsTuple,
               device_mask: Optional[jax.Array] = None,
               actions: Optional[jax.Array] = None) -> ActionScores:
    """Teacher-forced :class:`ActionScores` of ``actions int32 [K, N_pad]``
    (None: one all-zero row, for ``init``).

    Under ``init`` one step of the network makes every parameter (it cannot
    be made inside the walk's ``scan``) and the walk is skipped: the scores
    are zeros, and ``init`` compiles in a fraction of the time.
    """
    num_nodes = graphs.nodes["mask"].shape[0]
    if actions is None:
      actions = jnp.zeros((1, num_nodes), jnp.int32)
    if self.is_initializing():
      context = self.context(graphs)
      device_rows(device_mask, num_nodes, self.num_devices,
                          "Placeto")
      self.network(context, context.initial_placement,
                   jnp.zeros(num_nodes, bool), jnp.asarray(0))
      zeros = jnp.zeros(actions.shape, jnp.float32)
      return ActionScores(zeros, zeros, context.node_mask)
    context, episode = self._walk(
        graphs, device_mask, lambda row, node, logits: row[node])
    _, log_probs, entropy = jax.vmap(episode)(actions)
    return ActionScores(log_probs, entropy, context.node_mask)

  def sample(self, graphs: jraph.GraphsTuple,
             device_mask: Optional[jax.Array], keys: jax.Array,
             greedy: bool = False) -> tuple[jax.Array, jax.Array]:
    """One episode per key (``keys [K, 2]``): ``(placements, actions)``,
    both ``int32 [K, N_pad]`` (the same array: actions are placements).
    ``greedy`` (a bool, or a traced one): the most likely device at every
    step (every row the same)."""
    actions, _ = self.sample_with_scores(graphs, device_mask, keys, greedy)
    return actions, actions

  def sample_with_scores(self, graphs: jraph.GraphsTuple,
                         device_mask: Optional[jax.Array], keys: jax.Array,
                         greedy: bool = False
                         ) -> tuple[jax.Array, ActionScores]:
    """:meth:`sample`'s actions ``int32 [K, N_pad]`` and their
    :class:`ActionScores` as the sampler saw them (``__call__`` on these
    actions reproduces them). Step ``i`` of key ``k`` draws with
    ``fold_in(k, i)``, so padding never changes a real node's draw."""

    def choose(key, node, logits):
      # A where, not an if: greedy may be traced (one compile for both).
      return jnp.where(greedy, jnp.argmax(logits), jax.random.categorical(
          jax.random.fold_in(key, node), logits))

    context, episode = self._walk(graphs, device_mask, choose)
    actions, log_probs, entropy = jax.vmap(episode)(keys)
    return actions, ActionScores(log_probs, entropy, context.node_mask)


@register_policy("placeto")
def create_placeto_policy(num_devices: int, **hparams) -> PlacetoPolicy:
  """A :class:`PlacetoPolicy` from flat hyperparameters
  (``PolicySettings.hparams``).

  Raises:
    PolicyError: an unknown hyperparameter or a value the policy rejects.
  """
  reject_unknown("Placeto", hparams,
                 module_fields(PlacetoPolicy) - {"num_devices"})
  return PlacetoPolicy(num_devices=num_devices, **hparams)
