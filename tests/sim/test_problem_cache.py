"""gplace.sim.cache: gplace.simulate builds each problem once per graph."""

import gc

import numpy as np
import pytest

import gplace
from gplace.graphs.graph import random_dag
from gplace.sim import cache, native, runner, simulator
from gplace.sim.presets import preset


@pytest.fixture()
def builds(monkeypatch):
  """Counts the problems gplace.simulate builds, by builder name."""
  cache.clear()
  counts = {"make_problem": 0, "make_dispatch_problem": 0,
            "make_native_problem": 0}
  for name in counts:
    module = {"make_problem": simulator, "make_dispatch_problem": runner,
              "make_native_problem": native}[name]
    real = getattr(module, name)

    def counted(*args, _real=real, _name=name, **kwargs):
      counts[_name] += 1
      return _real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
  yield counts
  cache.clear()


def test_repeated_calls_build_once_and_agree(builds):
  graph, topology = random_dag(60, seed=2), preset("1cpu+4gpu")
  placements = np.random.default_rng(0).integers(0, 5, (8, 60))
  dynamic_builder = ("make_native_problem" if native.available()
                     else "make_dispatch_problem")
  for schedule, builder in (("static", "make_problem"),
                            ("dynamic", dynamic_builder)):
    first = gplace.simulate(graph, placements, topology, schedule=schedule)
    again = gplace.simulate(graph, placements[::-1], topology,
                            schedule=schedule)
    assert builds[builder] == 1
    np.testing.assert_array_equal(again.runtime_s, first.runtime_s[::-1])
    cache.clear()
    fresh = gplace.simulate(graph, placements, topology, schedule=schedule)
    assert builds[builder] == 2
    np.testing.assert_array_equal(fresh.runtime_s, first.runtime_s)
    np.testing.assert_array_equal(fresh.peak_bytes, first.peak_bytes)


def test_costs_order_topology_and_graph_are_part_of_the_key(builds):
  graph, topology = random_dag(40, seed=3), preset("1cpu+4gpu")
  placements = np.random.default_rng(1).integers(0, 5, (4, 40))
  costs = np.asarray(topology.op_costs(graph), np.float64)

  def run(**kwargs):
    return gplace.simulate(graph, placements, kwargs.pop("topology", topology),
                           schedule="static", **kwargs).runtime_s

  base = run(costs=costs)
  np.testing.assert_array_equal(run(costs=costs.copy()), base)  # same content
  assert builds["make_problem"] == 1
  slower = run(costs=costs * 2)                 # other content: rebuilt
  assert builds["make_problem"] == 2 and np.all(slower > base)
  run(costs=costs, order=np.arange(40))
  assert builds["make_problem"] == 3            # an order: another problem
  run(costs=costs, topology=preset("1cpu+4gpu"))  # another topology object
  assert builds["make_problem"] == 4
  copy = graph.replace()                        # equal graph, other object
  gplace.simulate(copy, placements, topology, schedule="static", costs=costs)
  assert builds["make_problem"] == 5


def test_at_most_per_graph_problems_and_none_after_the_graph_goes(builds):
  topology = preset("1cpu+4gpu")
  graph = random_dag(30, seed=4)
  placement = np.zeros(30, np.int32)
  costs = np.asarray(topology.op_costs(graph), np.float64)
  for scale in range(cache.PER_GRAPH + 2):
    gplace.simulate(graph, placement, topology, costs=costs * (scale + 1),
                    schedule="static")
  assert len(cache._problems[id(graph)][1]) == cache.PER_GRAPH  # pylint: disable=protected-access
  # The oldest went first: scale 0 is built again, the newest is not.
  gplace.simulate(graph, placement, topology, costs=costs * (
      cache.PER_GRAPH + 2), schedule="static")
  assert builds["make_problem"] == cache.PER_GRAPH + 2
  gplace.simulate(graph, placement, topology, costs=costs, schedule="static")
  assert builds["make_problem"] == cache.PER_GRAPH + 3
  graph_id = id(graph)
  del graph
  gc.collect()
  assert graph_id not in cache._problems  # pylint: disable=protected-access


def test_digest_tells_content_dtype_and_shape_apart():
  a = np.arange(6, dtype=np.int32)
  assert cache.digest(a) == cache.digest(a.copy())
  assert cache.digest(a) != cache.digest(a.astype(np.int64))
  assert cache.digest(a) != cache.digest(a.reshape(2, 3))
  assert cache.digest(a[::2]) == cache.digest(np.array([0, 2, 4], np.int32))
  assert cache.digest(None) is None


def test_a_frozen_table_is_hashed_once_and_read_only(monkeypatch):
  table = np.random.default_rng(1).random((30, 5))
  expected = cache.digest(table)
  frozen = cache.freeze(table.copy())
  assert not frozen.flags.writeable
  with pytest.raises(ValueError):
    frozen[0, 0] = 1.0
  calls = []
  real = cache._digest
  monkeypatch.setattr(cache, "_digest", lambda a: calls.append(1) or real(a))
  assert cache.digest(frozen) == expected and not calls   # the kept digest
  assert cache.digest(table) == expected and len(calls) == 1
  # made writeable again (against the rule), it is hashed afresh
  frozen.setflags(write=True)
  frozen[0, 0] += 1.0
  assert cache.digest(frozen) != expected
  del frozen
  gc.collect()
  assert all(ref() is not None for ref, _ in cache._frozen.values())


def test_simulate_hashes_a_table_once_per_call_and_sees_it_change(
    monkeypatch):
  """A table the caller did not freeze is hashed once per call, however
  many problems the default schedule looks up with it; changed in place
  between calls, the next call simulates the new costs."""
  graph, topology = random_dag(70, seed=4), preset("1cpu+4gpu")
  table = np.array(topology.op_costs(graph))
  placement = np.random.default_rng(4).integers(0, 5, graph.n_nodes)
  before = float(gplace.simulate(graph, placement, topology, table).runtime_s)
  calls = []
  real = cache._digest
  monkeypatch.setattr(cache, "_digest", lambda a: calls.append(1) or real(a))
  again = float(gplace.simulate(graph, placement, topology, table).runtime_s)
  assert again == before and len(calls) == 1
  assert table.flags.writeable            # the caller's array is untouched
  table *= 3.0
  slower = float(gplace.simulate(graph, placement, topology, table).runtime_s)
  fresh = cache.freeze(table.copy())
  assert slower > before and slower == float(
      gplace.simulate(graph, placement, topology, fresh).runtime_s)


@pytest.mark.parametrize("seed", [0, 3])
def test_simulate_in_order_is_simulate_of_one_placement(seed):
  """The unchecked path a search scores its candidates with gives
  gplace.simulate's result in the same order, schedule and memory."""
  graph, topology = random_dag(90, seed=seed), preset("1cpu+4gpu")
  rng = np.random.default_rng(seed)
  table = cache.freeze(np.array(topology.op_costs(graph)) * rng.uniform(
      0.5, 2.0, (graph.n_nodes, topology.n_devices)))
  placement = rng.integers(0, topology.n_devices, graph.n_nodes)
  order = np.asarray(gplace.simulate(graph, placement, topology, table,
                                     schedule="dynamic",
                                     return_schedule=True).order)
  want = gplace.simulate(graph, placement, topology, table, order=order,
                         return_schedule=True)
  got = simulator.simulate_in_order(graph, placement, topology, table,
                                    order)
  for field in ("runtime_s", "peak_bytes", "oom", "start_s", "finish_s",
                "order"):
    np.testing.assert_array_equal(np.asarray(getattr(got, field)),
                                  np.asarray(getattr(want, field)), field)
