"""experiments/multihost.py: the network between hosts scaled, what a
placement cuts, and a tiny end-to-end run."""

import numpy as np

from experiments import multihost
from gplace.graphs.graph import random_dag
from gplace.sim.presets import preset


def test_with_network_scales_only_the_links_between_hosts():
  topology = preset("2x8h100")
  slow = multihost.with_network(topology, 25.0)
  hosts = multihost.hosts_of(topology)
  np.testing.assert_array_equal(hosts, np.arange(16) // 8)
  across = ~np.equal.outer(hosts, hosts)
  assert np.all(slow.link_bandwidth[across] == 25e9 / 8)
  np.testing.assert_array_equal(slow.link_bandwidth[~across],
                                topology.link_bandwidth[~across])
  np.testing.assert_array_equal(slow.link_latency, topology.link_latency)
  # The preset's own network is 400 Gb/s.
  np.testing.assert_array_equal(
      multihost.with_network(topology, 400.0).link_bandwidth,
      topology.link_bandwidth)


def test_cut_counts_edges_and_sends_each_value_once_per_device():
  graph = random_dag(30, seed=2)
  hosts = multihost.hosts_of(preset("2x8h100"))
  one_host = multihost.cut(graph, np.zeros(graph.n_nodes, np.int64), hosts)
  assert (one_host["hosts"], one_host["devices"], one_host["bytes_across"],
          one_host["edges_across"], one_host["edges_within"]) == (
              1, 1, 0.0, 0, 0)
  placement = np.where(np.arange(graph.n_nodes) % 2 == 0, 0, 8)
  split = multihost.cut(graph, placement, hosts)
  across = placement[graph.edge_src] != placement[graph.edge_dst]
  assert split["edges_across"] == across.sum() and split["edges_within"] == 0
  assert (split["hosts"], split["devices"]) == (2, 2)
  # One destination device per host: one copy per producer crossing.
  sent = {}
  for src, size in zip(graph.edge_src[across], graph.edge_bytes[across]):
    sent[src] = max(sent.get(src, 0), size)
  assert split["bytes_across"] == sum(sent.values())


def test_a_tiny_run_writes_one_row_per_topology_and_speed(tmp_path):
  out = tmp_path / "multihost"
  multihost.main(["--workloads", "random_dag:40", "--topologies", "2x8h100",
                  "--network_gbps", "400", "25", "--budget_s", "2",
                  "--out", str(out)])
  rows = [line for line in (out / "README.md").read_text().splitlines()
          if line.startswith("| random_dag:40 ")]
  assert [r.split("|")[4].strip() for r in rows] == ["400", "25"]
