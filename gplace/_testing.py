"""Shared test fixtures: small programs (control flow, nesting, custom rules),
hand-built padded graphs, and a toy placement problem with tiny policies.

Public for tests, notebooks and users' own tests; the library never imports
it (it is the top layer).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import NamedTuple, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from gplace.errors import FusionError
from gplace.graphs.fusion import fuse
from gplace.graphs.graph import NODE_OP, Graph
from gplace.policies.base import ActionScores
from gplace.rl.state import init_train_state
from gplace.rl.types import Batch


# -- processes of a multi-process run on one host ------------------------------


def free_port() -> int:
  """A TCP port free on the loopback interface now (for a coordinator)."""
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1]


class Finished(NamedTuple):
  """How one process of :func:`start_processes` ended."""
  returncode: int
  stdout: str
  stderr: str


def start_processes(args: Sequence[str], num_processes: int, *,
                    devices: int = 1, root: Optional[str] = None,
                    env: Optional[dict] = None) -> list:
  """``num_processes`` Python processes ``python ARGS... --coordinator_address
  =127.0.0.1:PORT --num_processes=P --process_id=I``, each with ``devices``
  forced CPU devices, gloo over a free loopback port: their ``Popen``
  objects (text stdout and stderr piped), process 0 first.

  Args:
    args: the arguments after ``python`` (a script and its flags, or
      ``-c CODE ...``); ``{address}`` and ``{process_id}`` in an argument
      are filled in, and then no flags are appended.
    num_processes: processes to start.
    devices: forced CPU devices per process.
    root: put on ``PYTHONPATH`` (the repository, for ``experiments``).
    env: variables added to the environment.
  """
  address = f"127.0.0.1:{free_port()}"
  environ = dict(os.environ, JAX_PLATFORMS="cpu",
                 XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} "
                 "--xla_backend_optimization_level=0", **(env or {}))
  if root is not None:
    environ["PYTHONPATH"] = root
  templated = any("{address}" in a or "{process_id}" in a for a in args)
  started = []
  for process_id in range(num_processes):
    if templated:
      argv = [a.replace("{address}", address).replace(
          "{process_id}", str(process_id)) for a in args]
    else:
      argv = list(args) + [f"--coordinator_address={address}",
                           f"--num_processes={num_processes}",
                           f"--process_id={process_id}"]
    started.append(subprocess.Popen(
        [sys.executable] + argv, env=environ, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True))
  return started


def finish_processes(processes: Sequence, timeout_s: float = 300
                     ) -> list[Finished]:
  """Waits for every process of :func:`start_processes`: how each ended, in
  order. After ``timeout_s`` seconds in all it kills every one still
  running (none is left behind) and raises ``subprocess.TimeoutExpired``."""
  deadline = time.monotonic() + timeout_s
  out = []
  try:
    for process in processes:
      stdout, stderr = process.communicate(
          timeout=max(deadline - time.monotonic(), 0.01))
      out.append(Finished(process.returncode, stdout, stderr))
  except BaseException:
    for process in processes:
      if process.poll() is None:
        process.kill()
      process.communicate()
    raise
  return out


@jax.custom_vjp
def _clipped_sin(x):
  return jnp.sin(x)


_clipped_sin.defvjp(lambda x: (jnp.sin(x), x),
                    lambda x, g: (jnp.clip(g * jnp.cos(x), -1.0, 1.0),))


def control_flow_program(params, x):
  """Uses nested jit, custom_jvp (relu), custom_vjp, remat, scan, while, cond.

  Args:
    params: ``{"w": [d, d], "b": [d]}``.
    x: ``[batch, d]``.

  Returns:
    ``{"y": [batch, d], "total": []}``.
  """

  @jax.jit
  def layer(h):
    return jax.nn.relu(h @ params["w"] + params["b"])

  h = jax.checkpoint(layer)(x)
  h = _clipped_sin(h)

  def body(carry, row):
    carry = jnp.tanh(carry + row)
    return carry, carry.sum()

  carry, sums = jax.lax.scan(body, jnp.zeros(h.shape[1]), h)
  h = jax.lax.cond(sums.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, h)
  h = jax.lax.fori_loop(0, 3, lambda i, a: a * 0.5 + carry, h)
  count = jax.lax.while_loop(lambda c: c[0] < 5,
                             lambda c: (c[0] + 1, c[1] * 1.5),
                             (0, jnp.float32(1.0)))[1]
  return {"y": h * count, "total": jnp.sum(h)}


def control_flow_args(d: int = 8, batch: int = 4, seed: int = 0):
  """Example arguments of :func:`control_flow_program`."""
  k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
  params = {"w": jax.random.normal(k1, (d, d)) / d**0.5,
            "b": jax.random.normal(k2, (d,)) * 0.1}
  return params, jax.random.normal(k3, (batch, d))


# -- hand-built padded graphs (policy and RL tests) ----------------------------


def make_graphs_tuple(graphs, n_pad: int, e_pad: int, g_pad=None,
                      n_features: int = 3, seed: int = 0) -> jraph.GraphsTuple:
  """A tiny stand-in for ``gplace.graphs.features.to_graphs_tuple``.

  Builds the documented GraphsTuple layout (forward + reversed edges, masks,
  ``graph_index``, ``position``, random node features and op types) from edge
  lists, padded to the given budgets, so layer and RL tests do not depend on
  the feature extractor.

  Args:
    graphs: list of ``(n_nodes, [(src, dst), ...])`` in topological order.
    n_pad, e_pad: node and edge budgets (``n_pad`` > all real nodes).
    g_pad: graph budget (default: one padding graph).
    n_features: node feature width.
    seed: of the random features.
  """
  rng = np.random.default_rng(seed)
  g_pad = g_pad or len(graphs) + 1
  feats = np.zeros((n_pad, n_features), np.float32)
  op_type = np.zeros(n_pad, np.int32)
  mask = np.zeros(n_pad, bool)
  graph_index = np.full(n_pad, g_pad - 1, np.int32)
  position = np.zeros(n_pad, np.int32)
  senders = np.zeros(e_pad, np.int32)
  receivers = np.zeros(e_pad, np.int32)
  direction = np.zeros(e_pad, np.int32)
  edge_mask = np.zeros(e_pad, bool)
  n_node = np.zeros(g_pad, np.int32)
  n_edge = np.zeros(g_pad, np.int32)
  node_offset = edge_offset = 0
  for g, (n, edges) in enumerate(graphs):
    sl = slice(node_offset, node_offset + n)
    feats[sl] = rng.normal(size=(n, n_features))
    op_type[sl] = rng.integers(1, 6, size=n)
    mask[sl] = True
    graph_index[sl] = g
    position[sl] = np.arange(n)
    for d in (0, 1):
      for s, t in edges:
        if d == 1:
          s, t = t, s
        senders[edge_offset] = node_offset + s
        receivers[edge_offset] = node_offset + t
        direction[edge_offset] = d
        edge_mask[edge_offset] = True
        edge_offset += 1
    n_node[g] = n
    n_edge[g] = 2 * len(edges)
    node_offset += n
  assert node_offset < n_pad and edge_offset <= e_pad
  n_node[-1] = n_pad - node_offset
  n_edge[-1] = e_pad - edge_offset
  senders[edge_offset:] = n_pad - 1
  receivers[edge_offset:] = n_pad - 1
  return jraph.GraphsTuple(
      nodes=dict(features=feats, op_type=op_type, mask=mask,
                 graph_index=graph_index, position=position,
                 hint=np.full(n_pad, -1, np.int32)),
      edges=dict(features=np.ones((e_pad, 1), np.float32),
                 direction=direction, mask=edge_mask),
      senders=senders, receivers=receivers, n_node=n_node, n_edge=n_edge,
      globals=dict(mask=np.arange(g_pad) < g_pad - 1))


def chain(n: int):
  """A path graph ``0 -> 1 -> ... -> n-1`` for :func:`make_graphs_tuple`."""
  return (n, [(i, i + 1) for i in range(n - 1)])


# -- a toy placement problem (RL tests) ----------------------------------------


class ToyProblem(NamedTuple):
  """Load balancing with memory: per-node costs and bytes, device capacity."""
  costs: jax.Array      # [N, D]
  node_bytes: jax.Array  # [N]
  capacity: jax.Array   # [D]


def toy_simulate(problem: ToyProblem, placements: jax.Array):
  """A ``SimulateFn``: runtime = the busiest device's load ``[K]``; failed
  (out of memory) where a device's bytes exceed its capacity ``[K]``."""
  one_hot = jax.nn.one_hot(placements, problem.costs.shape[1])  # [K, N, D]
  load = jnp.einsum("knd,nd->kd", one_hot, problem.costs)
  used = jnp.einsum("knd,n->kd", one_hot, problem.node_bytes)
  return load.max(-1), jnp.any(used > problem.capacity, -1)


def toy_batch(num_graphs: int = 2, n_pad: int = 12, num_devices: int = 3):
  """A ``gplace.rl.types.Batch`` of chains (6, 9, 5 nodes) with
  :class:`ToyProblem` s as their simulator problems."""
  sizes = [6, 9, 5][:num_graphs]
  graphs, problems = [], []
  rng = np.random.default_rng(0)
  for n in sizes:
    graphs.append(make_graphs_tuple([chain(n)], n_pad=n_pad, e_pad=24,
                                    seed=n))
    costs = np.zeros((n_pad, num_devices), np.float32)
    costs[:n] = rng.uniform(0.5, 1.5, size=(n, num_devices))
    node_bytes = np.zeros(n_pad, np.float32)
    node_bytes[:n] = 1.0
    problems.append(ToyProblem(costs, node_bytes,
                               np.full(num_devices, n - 1.0, np.float32)))
  stack = lambda xs: jax.tree.map(lambda *a: np.stack(a), *xs)
  return Batch(graphs=stack(graphs), problems=stack(problems),
               failing_runtime_s=np.full(num_graphs, 20.0, np.float32),
               device_mask=np.ones((num_graphs, num_devices), bool))


class LinearPolicy(nn.Module):
  """Logits linear in node features: compiles fast, for update tests."""
  num_devices: int = 3

  @nn.compact
  def __call__(self, graphs, device_mask=None):
    logits = nn.Dense(self.num_devices)(graphs.nodes["features"])
    if device_mask is not None:
      logits = jnp.where(device_mask, logits, -1e9)
    return logits


class TabularPolicy(nn.Module):
  """A free logit per (node position, device): learns anything, fast."""
  num_devices: int = 3
  max_nodes: int = 16

  @nn.compact
  def __call__(self, graphs, device_mask=None):
    table = self.param("table", nn.initializers.zeros,
                       (self.max_nodes, self.num_devices))
    return table[graphs.nodes["position"]]


class SequentialTabularPolicy(nn.Module):
  """A sequential policy (:mod:`gplace.policies.base`) in its smallest form:
  node ``i``'s logits are a free row per position plus a free row per device
  of node ``i - 1``, decoded by a ``lax.scan`` (actions = placements)."""
  num_devices: int = 3
  max_nodes: int = 16
  sequential = True
  placement_actions = True

  def setup(self):
    self.table = self.param("table", nn.initializers.zeros,
                            (self.max_nodes, self.num_devices))
    self.previous = self.param("previous", nn.initializers.normal(0.1),
                               (self.num_devices + 1, self.num_devices))

  def _logits(self, graphs, device_mask, previous):
    logits = self.table[graphs.nodes["position"]] + self.previous[previous]
    if device_mask is not None:
      logits = jnp.where(device_mask, logits, -1e9)
    return logits

  def __call__(self, graphs, device_mask=None, actions=None):
    mask = graphs.nodes["mask"]
    if actions is None:
      actions = jnp.zeros((1,) + mask.shape, jnp.int32)
    start = jnp.full(actions.shape[:1] + (1,), self.num_devices)
    previous = jnp.concatenate([start, actions[:, :-1]], 1)
    log_p = jax.nn.log_softmax(self._logits(graphs, device_mask, previous))
    taken = jnp.take_along_axis(log_p, actions[..., None], -1)[..., 0]
    entropy = -jnp.sum(jnp.exp(log_p) * log_p, -1)
    return ActionScores(jnp.where(mask, taken, 0.0),
                        jnp.where(mask, entropy, 0.0), mask)

  def sample(self, graphs, device_mask, keys, greedy: bool = False):
    n = graphs.nodes["mask"].shape[0]
    logits_all = self.table[graphs.nodes["position"]]  # [N, D]
    masks = (jnp.ones((n, self.num_devices), bool) if device_mask is None
             else jnp.broadcast_to(device_mask, (n, self.num_devices)))

    def decode(key):
      def step(previous, i):
        logits = jnp.where(masks[i], logits_all[i] + self.previous[previous],
                           -1e9)
        action = (jnp.argmax(logits) if greedy else jax.random.categorical(
            jax.random.fold_in(key, i), logits)).astype(jnp.int32)
        return action, action
      return jax.lax.scan(step, jnp.int32(self.num_devices),
                          jnp.arange(n))[1]

    actions = jax.vmap(decode)(keys)
    return actions, actions


def toy_train_state(policy, batch, optimizer, seed: int = 0):
  """``gplace.rl.state.init_train_state`` for ``policy`` on the batch's first
  graph."""
  graph0 = jax.tree.map(lambda x: x[0], batch.graphs)
  params = policy.init(jax.random.PRNGKey(seed), graph0)
  return init_train_state(jax.random.PRNGKey(seed + 1), params, optimizer,
                          batch)


def random_fusion(graph: Graph, placement: np.ndarray,
                  rng: np.random.Generator, *, shuffle: bool = True,
                  skip: float = 0.3) -> np.ndarray:
  """Random valid fusion labels ``[N]``: each op (in random order, or node
  order without ``shuffle``) joins a random same-device op consumer's group,
  unless skipped with probability ``skip``; a join that makes the decision
  invalid is undone."""
  labels = np.full(graph.n_nodes, -1, np.int64)
  ops = np.flatnonzero(graph.kind == NODE_OP)
  for node in (rng.permutation(ops) if shuffle else ops).tolist():
    consumers = [int(w) for w in graph.successors(node)
                 if graph.kind[w] == NODE_OP
                 and placement[w] == placement[node]]
    if not consumers or (skip and rng.random() < skip):
      continue
    target = consumers[int(rng.integers(len(consumers)))]
    trial = labels.copy()
    a = trial[node] if trial[node] >= 0 else node
    b = trial[target] if trial[target] >= 0 else target
    trial[node], trial[target] = a, a
    trial[trial == b] = a
    try:
      fuse(graph, trial)
    except FusionError:
      continue
    labels = trial
  return labels
