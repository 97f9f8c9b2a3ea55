"""A tiny stand-in for gplace.features.to_graphs_tuple, used by layer/rl tests.

Builds the documented GraphsTuple layout (forward + reversed edges, masks,
graph_index, position) from edge lists, padded to given budgets, so these
tests do not depend on the feature extractor.
"""

import jraph
import numpy as np


def make_graphs_tuple(graphs, n_pad, e_pad, g_pad=None, n_features=3,
                      seed=0):
  """graphs: list of (n_nodes, [(src, dst), ...]) in topological order."""
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
                 graph_index=graph_index, position=position),
      edges=dict(features=np.ones((e_pad, 1), np.float32),
                 direction=direction, mask=edge_mask),
      senders=senders, receivers=receivers, n_node=n_node, n_edge=n_edge,
      globals=dict(mask=np.arange(g_pad) < g_pad - 1))


def chain(n):
  return (n, [(i, i + 1) for i in range(n - 1)])
