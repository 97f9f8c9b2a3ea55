"""Tests of coarsening: rules, acyclicity, exact cost sums, expansion."""

import collections

import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.graphs.coarsening import Coarsening, CoarseningError, coarsen, expand
from gplace.errors import GraphError, PlacementError
from gplace.graphs.graph import Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT, random_dag

_SETTINGS = hypothesis.settings(
    max_examples=15, deadline=None, derandomize=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow])


def _graph(n, edges, kind=None, flops=None):
  kind = kind if kind is not None else [NODE_OP] * n
  return Graph.build(
      names=[f"n{i}" for i in range(n)],
      op_type=["input" if k == NODE_INPUT else
               "output" if k == NODE_OUTPUT else "add" for k in kind],
      kind=kind, out_shapes=[(i + 1,) for i in range(n)],
      out_dtype=["float32"] * n, out_bytes=[4 * (i + 1) for i in range(n)],
      flops=flops if flops is not None else [float(i) for i in range(n)],
      bytes_accessed=[8.0 * i for i in range(n)],
      edges=[(s, d, 4 * (s + 1)) for s, d in edges])


def _check(graph: Graph, c: Coarsening):
  """Everything a coarsening must satisfy, against slow reference sums."""
  g = c.graph
  group_of = c.group_of
  assert group_of.dtype == np.int32 and group_of.shape == (graph.n_nodes,)
  # Groups are 0..G-1, none empty.
  np.testing.assert_array_equal(np.unique(group_of), np.arange(g.n_nodes))
  # Acyclic: group ids are a topological order of the quotient.
  src, dst = graph.edge_src, graph.edge_dst
  assert np.all(group_of[src] <= group_of[dst])
  np.testing.assert_allclose(
      g.flops, [graph.flops[group_of == k].sum() for k in range(g.n_nodes)],
      rtol=1e-12)
  np.testing.assert_allclose(
      g.bytes_accessed,
      [graph.bytes_accessed[group_of == k].sum() for k in range(g.n_nodes)],
      rtol=1e-12)
  # out_bytes: members read outside their group or by nobody.
  out_bytes = collections.Counter()
  for node in range(graph.n_nodes):
    succ = graph.successors(node)
    if succ.size == 0 or np.any(group_of[succ] != group_of[node]):
      out_bytes[group_of[node]] += int(graph.out_bytes[node])
  assert g.out_bytes.tolist() == [out_bytes[k] for k in range(g.n_nodes)]
  # Edges: bytes of crossing edges summed per group pair; internal ones gone.
  crossing = collections.Counter()
  for s, d, b in zip(src, dst, graph.edge_bytes):
    if group_of[s] != group_of[d]:
      crossing[(group_of[s], group_of[d])] += int(b)
  assert dict(zip(zip(g.edge_src.tolist(), g.edge_dst.tolist()),
                  g.edge_bytes.tolist())) == crossing
  for k in range(g.n_nodes):
    kinds = set(graph.kind[group_of == k].tolist())
    expect = kinds.pop() if kinds in ({NODE_INPUT}, {NODE_OUTPUT}) else NODE_OP
    assert g.kind[k] == expect
  assert g.name == graph.name


_dags = st.builds(
    lambda n, degree, seed: random_dag(n, avg_degree=degree, seed=seed),
    st.integers(2, 60), st.sampled_from([1.0, 1.5, 2.0, 3.0]),
    st.integers(0, 10_000))


@_SETTINGS
@hypothesis.given(_dags)
def test_colocation_rule(graph):
  c = coarsen(graph, "colocation")
  _check(graph, c)
  single = graph.out_degree == 1
  ptr, _ = graph.succ_csr
  successor = graph.edge_dst[ptr[:-1][single]]
  # An op whose only consumer is X joins X ...
  np.testing.assert_array_equal(c.group_of[single], c.group_of[successor])
  # ... and nothing else merges: each group has one node without a single
  # consumer (its sink).
  np.testing.assert_array_equal(
      np.bincount(c.group_of[~single], minlength=c.n_groups), 1)


@_SETTINGS
@hypothesis.given(_dags)
def test_hsdag_rule(graph):
  c = coarsen(graph, "hsdag")
  _check(graph, c)
  src, dst = graph.edge_src, graph.edge_dst
  merge = (graph.out_degree[src] == 1) & (graph.in_degree[dst] == 1)
  np.testing.assert_array_equal(c.group_of[src[merge]], c.group_of[dst[merge]])
  # The merged edges form chains, so each one removes exactly one group.
  assert c.n_groups == graph.n_nodes - merge.sum()


@_SETTINGS
@hypothesis.given(_dags, st.integers(1, 20),
                  st.sampled_from(["size", "colocation", "hsdag"]))
def test_max_groups(graph, max_groups, rule):
  c = coarsen(graph, rule, max_groups=max_groups)
  _check(graph, c)
  assert c.n_groups <= max_groups
  assert c.rule == rule


def test_size_rule_keeps_graph_when_it_is_small_enough():
  graph = random_dag(30, seed=4)
  c = coarsen(graph, "size", max_groups=30)
  np.testing.assert_array_equal(c.group_of, np.arange(30))
  assert c.graph == graph


def test_chains_collapse_transitively():
  # 0 -> 1 -> 2 -> 3 -> 5, 4 -> 5, 5 -> 6, 5 -> 7.
  graph = _graph(8, [(0, 1), (1, 2), (2, 3), (3, 5), (4, 5), (5, 6), (5, 7)])
  c = coarsen(graph, "colocation")
  np.testing.assert_array_equal(c.group_of, [0, 0, 0, 0, 0, 0, 1, 2])
  # 5 has two parents, so hsdag keeps 0..3 apart from 5 and 4.
  h = coarsen(graph, "hsdag")
  np.testing.assert_array_equal(h.group_of, [0, 0, 0, 0, 1, 2, 3, 4])
  # The representative is the op with the most FLOPs; shapes come from the
  # largest member whose output leaves the group.
  assert c.graph.names[0] == "n5" and h.graph.names[0] == "n3"
  assert c.graph.shape_of(0) == (6,)
  assert c.graph.out_bytes[0] == 24 and h.graph.out_bytes[0] == 16
  np.testing.assert_array_equal(c.graph.edge_bytes, [24, 24])
  _check(graph, c)
  _check(graph, h)


def test_no_safe_edge_falls_back_to_contiguous_runs():
  # Layers of two nodes, complete between consecutive layers: every node has
  # two successors and every successor two parents, so no edge is safe.
  edges = [(2 * layer + i, 2 * layer + 2 + j)
           for layer in range(5) for i in range(2) for j in range(2)]
  graph = _graph(12, edges)
  assert coarsen(graph, "colocation").n_groups == 12
  c = coarsen(graph, "size", max_groups=3)
  _check(graph, c)
  assert c.n_groups <= 3
  # Isolated nodes: no edges at all.
  lonely = _graph(10, [])
  c = coarsen(lonely, "size", max_groups=4)
  _check(lonely, c)
  assert 1 < c.n_groups <= 4


def test_kinds_of_groups():
  kind = [NODE_INPUT, NODE_INPUT, NODE_INPUT, NODE_OP, NODE_OP, NODE_OUTPUT,
          NODE_OUTPUT, NODE_INPUT, NODE_OUTPUT]
  # Params 0 and 1 feed op 3 only; param 2 feeds ops 3 and 4; 3 -> 4; op 4
  # feeds outputs 5 and 6; param 7 is passed straight to output 8.
  graph = _graph(9, [(0, 3), (1, 3), (2, 3), (2, 4), (3, 4), (4, 5), (4, 6),
                     (7, 8)], kind=kind, flops=[0, 0, 0, 3, 4, 0, 0, 0, 0])
  c = coarsen(graph, "colocation")
  _check(graph, c)
  np.testing.assert_array_equal(c.group_of, [1, 1, 0, 1, 1, 2, 3, 4, 4])
  np.testing.assert_array_equal(
      c.graph.kind, [NODE_INPUT, NODE_OP, NODE_OUTPUT, NODE_OUTPUT, NODE_OP])
  # Groups are numbered by their last member (a topological order).
  # The representative is the op with the most FLOPs (node 4), or the first
  # member if the group has no op.
  assert c.graph.names.tolist() == ["n2", "n4", "n5", "n6", "n7"]
  assert c.graph.op_type.tolist() == ["input", "add", "output", "output",
                                      "input"]


def test_expand():
  graph = random_dag(40, seed=2)
  c = coarsen(graph, "size", max_groups=6)
  groups = np.arange(c.n_groups) % 3
  nodes = c.expand(groups)
  assert nodes.shape == (40,)
  np.testing.assert_array_equal(nodes, groups[c.group_of])
  batch = np.stack([groups, 2 - groups])
  np.testing.assert_array_equal(expand(c, batch), batch[:, c.group_of])
  np.testing.assert_array_equal(gplace.coarsen.expand(c, groups), nodes)
  jitted = jax.jit(c.expand)(jnp.asarray(batch))
  np.testing.assert_array_equal(jitted, batch[:, c.group_of])
  with pytest.raises(PlacementError, match=str(c.n_groups)):
    c.expand(np.zeros(c.n_groups + 1, np.int32))
  with pytest.raises(PlacementError):
    c.expand(np.int32(0))


def test_expand_refuses_placements_that_are_not_integers():
  # Float and string group placements came back as node "devices" of that
  # dtype before (issue 47); the check reads the dtype, so jit still works.
  c = coarsen(random_dag(10), "size", max_groups=3)
  for placement in (np.array([0.0, 1.0, 2.0]), np.array(["a", "b", "c"]),
                    np.ones(3, bool), [0.5, 1.0, 2.0], jnp.zeros(3)):
    with pytest.raises(PlacementError, match="integer device indices, got "
                       "dtype"):
      expand(c, placement)
  with pytest.raises(PlacementError, match="dtype float32"):
    jax.jit(c.expand)(jnp.zeros(3, jnp.float32))
  for dtype in (jnp.int32, jnp.uint8):
    assert jax.jit(c.expand)(jnp.ones(3, dtype)).dtype == dtype


def test_expand_takes_one_placement_or_a_batch():
  # A rank-3 placement came back expanded, unlike simulate's [N] or [K, N]
  # (issue 47); the check reads the shape, so jit still works.
  c = coarsen(random_dag(10), "size", max_groups=3)
  with pytest.raises(PlacementError, match=r"got shape \(2, 2, 3\); "
                     r"reshape .* to \(-1, 3\)"):
    expand(c, np.zeros((2, 2, 3), np.int32))
  with pytest.raises(PlacementError, match="shape"):
    jax.jit(c.expand)(jnp.zeros((1, 2, 3), jnp.int32))
  assert jax.jit(c.expand)(jnp.zeros((2, 3), jnp.int32)).shape == (2, 10)


def test_members():
  graph = random_dag(20, seed=5)
  c = coarsen(graph, "colocation")
  all_members = np.concatenate([c.members(k) for k in range(c.n_groups)])
  np.testing.assert_array_equal(np.sort(all_members), np.arange(20))


def test_package_exports():
  graph = random_dag(25, seed=1)
  c = gplace.coarsen(graph, "hsdag")
  assert isinstance(c, gplace.Coarsening)
  assert gplace.features.n_node_features > 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(rule="nope"), "colocation"),
    (dict(rule="size"), "max_groups"),
    (dict(rule="size", max_groups=0), "positive"),
    (dict(rule="hsdag", max_groups=2.5), "positive"),
    (dict(rule="size", max_groups="4"), "positive"),     # ValueError before
    (dict(rule="size", max_groups=float("nan")), "positive"),
    (dict(rule="colocation", max_groups=[4]), "positive"),
    (dict(rule=np.array(["size"])), "colocation"),
])
def test_bad_arguments(kwargs, match):
  with pytest.raises(CoarseningError, match=match):
    coarsen(random_dag(10), **kwargs)


def test_coarsen_and_expand_name_a_wrong_argument_type():
  with pytest.raises(GraphError, match="gplace.coarsen needs graph"):
    coarsen(None)                                 # AttributeError before
  with pytest.raises(CoarseningError, match="gplace.coarsen"):
    expand("not a coarsening", np.zeros(3, np.int32))
  c = coarsen(random_dag(10), "size", max_groups=3)
  with pytest.raises(PlacementError, match="length 3"):
    expand(c, [0, 1])
  assert expand(c, [0, 1, 2]).shape == (10,)      # a list: TypeError before


def test_large_graph_is_fast_enough_to_run():
  # The 80k-node timing is measured outside the suite; this only checks that
  # the vectorized paths hold up on a mid-size graph.
  graph = random_dag(5000, seed=3)
  for rule in ("colocation", "hsdag"):
    c = coarsen(graph, rule)
    assert np.all(c.group_of[graph.edge_src] <= c.group_of[graph.edge_dst])
  c = coarsen(graph, "size", max_groups=64)
  assert c.n_groups <= 64
  np.testing.assert_allclose(c.graph.flops.sum(), graph.flops.sum(),
                             rtol=1e-12)
  assert c.graph.edge_bytes.sum() <= graph.edge_bytes.sum()
