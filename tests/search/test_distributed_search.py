"""Searches across processes (gplace.search.rounds, issue 48 item 2).

The round and merge logic runs in one process with threads standing in for
processes (:class:`ThreadExchange`); ``test_two_processes_*`` starts two
real processes (one forced CPU device each, gloo over a free loopback port).
"""

import json
import os
import threading

import numpy as np
import pytest

from gplace import processes
from gplace._testing import finish_processes, start_processes
from gplace.errors import GplaceError, SearchError
from gplace.search import rounds
from gplace.search.annealing import annealing
from gplace.search.joint import joint_annealing
from tests.search.search_cases import small_case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUDGET = 301
SEED = 5

# What each process of the two-process test runs: annealing of a tiny graph,
# the result as one JSON line.
WORKER = """
import json, sys
from gplace import processes
layout = processes.initialize(sys.argv[1], 2, int(sys.argv[2]),
                              heartbeat_timeout_s=10)
from gplace.graphs.graph import random_dag
from gplace.search.annealing import annealing
from gplace.sim.presets import preset
graph, topology = random_dag(12, seed=3), preset("1cpu+2gpu")
result = annealing(graph, topology, seed=int(sys.argv[3]),
                   budget=int(sys.argv[4]), batch_size=8,
                   round_evaluations=16)
import gplace
optimized = gplace.optimize(graph, topology=topology, method="annealing",
                            seed=int(sys.argv[3]), budget_s=60,
                            max_evaluations=int(sys.argv[4]), progress=False)
print(json.dumps({"placement": result.placement.tolist(),
                  "runtime_s": result.runtime_s,
                  "init_runtime_s": result.init_runtime_s,
                  "evaluations": result.evaluations,
                  "own": int(result.history.evaluations[-1]),
                  "optimized": optimized.placement.tolist(),
                  "optimized_s": optimized.runtime_s,
                  "process": processes.process_index()}))
"""


class ThreadExchange(rounds.Exchange):
  """``num_processes`` threads of one process as the searching processes:
  :meth:`allgather` waits for all of them at a barrier."""

  def __init__(self, shared: dict, index: int):
    self.shared, self.index = shared, index

  @property
  def num_processes(self) -> int:
    return self.shared["n"]

  @property
  def process_index(self) -> int:
    return self.index

  def allgather(self, tree):
    slots, barrier = self.shared["slots"], self.shared["barrier"]
    slots[self.index] = tree
    barrier.wait()
    out = {k: np.stack([np.asarray(slots[p][k]) for p in range(len(slots))])
           for k in tree}
    barrier.wait()  # nobody overwrites a slot before all have read
    return out


def in_threads(search, n=2, **kwargs):
  """``search(**kwargs, exchange=...)`` in ``n`` threads; their results."""
  shared = {"n": n, "slots": [None] * n,
            "barrier": threading.Barrier(n, timeout=120)}
  results, errors = [None] * n, []

  def run(index):
    try:
      results[index] = search(exchange=ThreadExchange(shared, index),
                              **kwargs)
    except Exception as err:  # pylint: disable=broad-except
      errors.append(err)
      shared["barrier"].abort()

  threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  if errors:
    raise errors[0]
  return results


# -- the split, the seeds, the checks ------------------------------------------


def test_the_budget_is_split_evenly_with_the_rest_to_the_first():
  assert rounds.split_budget(301, 2) == [151, 150]
  assert rounds.split_budget(10, 3) == [4, 3, 3]
  assert sum(rounds.split_budget(1000, 7)) == 1000
  with pytest.raises(SearchError, match="cannot be split over 4"):
    rounds.split_budget(3, 4)


def test_each_process_has_its_own_seed_stream():
  seeds = [rounds.process_seed(SEED, p) for p in range(4)]
  assert len(set(seeds)) == 4
  assert seeds == [rounds.process_seed(SEED, p) for p in range(4)]
  assert rounds.process_seed(SEED + 1, 0) != seeds[0]


def test_one_process_searches_alone():
  assert rounds.default_exchange() is None
  assert processes.process_count() == 1 and processes.process_index() == 0
  gathered = processes.allgather({"a": np.arange(3)})
  assert gathered["a"].shape == (1, 3)


def test_one_process_is_unchanged_by_the_exchange_argument():
  graph, topology = small_case()
  plain = annealing(graph, topology, seed=SEED, budget=200)
  alone = annealing(graph, topology, seed=SEED, budget=200, exchange=False)
  np.testing.assert_array_equal(plain.placement, alone.placement)
  assert plain.runtime_s == alone.runtime_s
  np.testing.assert_array_equal(plain.history.runtime_s,
                                alone.history.runtime_s)


def test_an_exchange_that_is_none_of_the_kinds_is_refused():
  graph, topology = small_case()
  with pytest.raises(SearchError, match="exchange must be None"):
    annealing(graph, topology, budget=10, exchange="yes")


@pytest.mark.parametrize("kwargs, words", [
    (dict(round_evaluations=0), "round_evaluations must be a positive"),
    (dict(round_evaluations=2.5), "round_evaluations must be a positive"),
    (dict(budget=1), "cannot be split over 2 processes"),
])
def test_bad_arguments_are_refused(kwargs, words):
  graph, topology = small_case()
  with pytest.raises(GplaceError, match=words):
    in_threads(annealing, graph=graph, topology=topology,
               **dict(dict(seed=SEED, budget=BUDGET), **kwargs))


# -- rounds and merges, processes as threads ------------------------------------


@pytest.mark.parametrize("search", [annealing, joint_annealing])
def test_threads_agree_on_the_best_and_rerun_the_same(search):
  graph, topology = small_case()
  kwargs = dict(graph=graph, topology=topology, seed=SEED, budget=BUDGET,
                batch_size=16, round_evaluations=32)
  first = in_threads(search, **kwargs)
  again = in_threads(search, **kwargs)
  for got in first[1:] + again:
    np.testing.assert_array_equal(got.placement, first[0].placement)
    assert got.runtime_s == first[0].runtime_s
    assert got.evaluations == first[0].evaluations == BUDGET
  assert first[0].runtime_s <= first[0].init_runtime_s
  if search is annealing:  # each thread spent its share
    assert [int(r.history.evaluations[-1]) for r in first] == [151, 150]
    assert [r.history.runtime_s[-1] for r in first] == [first[0].runtime_s] * 2


def test_the_shared_best_is_the_best_of_the_processes_own():
  graph, topology = small_case()
  init = annealing(graph, topology, budget=6, exchange=False).placement
  results = in_threads(annealing, graph=graph, topology=topology, seed=SEED,
                       budget=BUDGET, init=init, batch_size=16,
                       round_evaluations=10_000)
  # One round only: each thread searched alone, then took the faster best.
  alone = [annealing(graph, topology, seed=rounds.process_seed(SEED, p),
                     budget=share, init=init, batch_size=16, exchange=False)
           for p, share in enumerate(rounds.split_budget(BUDGET, 2))]
  assert results[0].runtime_s == results[1].runtime_s == min(
      r.runtime_s for r in alone)
  winner = int(np.argmin([r.runtime_s for r in alone]))
  np.testing.assert_array_equal(results[1].placement, alone[winner].placement)


# -- two real processes -----------------------------------------------------------


def two_processes(seed=SEED, budget=BUDGET, timeout_s=120):
  """The two processes' results (JSON), process 0 first."""
  started = start_processes(["-c", WORKER, "{address}", "{process_id}",
                             str(seed), str(budget)], 2, root=ROOT)
  out = []
  for returncode, stdout, stderr in finish_processes(started, timeout_s):
    assert returncode == 0, stderr[-3000:]
    out.append(json.loads([line for line in stdout.splitlines()
                           if line.startswith("{")][-1]))
  return out


def test_two_processes_find_the_same_best_and_rerun_the_same():
  first = two_processes()
  assert [r["process"] for r in first] == [0, 1]
  keys = ("placement", "runtime_s", "init_runtime_s", "evaluations",
          "optimized", "optimized_s")
  assert {k: first[0][k] for k in keys} == {k: first[1][k] for k in keys}
  assert first[0]["runtime_s"] <= first[0]["init_runtime_s"]
  assert first[0]["evaluations"] == BUDGET
  assert [r["own"] for r in first] == rounds.split_budget(BUDGET, 2)
  again = two_processes()
  assert again[0]["placement"] == first[0]["placement"]
  assert again[0]["runtime_s"] == first[0]["runtime_s"]
  assert again[1]["optimized"] == first[1]["optimized"]


# Process 1 dies after the processes have met once; process 0 searches on.
KILLED = """
import os, signal, sys
from gplace import processes
processes.initialize(sys.argv[1], 2, int(sys.argv[2]), heartbeat_timeout_s=5)
import numpy as np
processes.allgather(np.zeros(1))
if processes.process_index() == 1:
  os.kill(os.getpid(), signal.SIGKILL)
from gplace.graphs.graph import random_dag
from gplace.search.annealing import annealing
from gplace.sim.presets import preset
annealing(random_dag(12, seed=3), preset("1cpu+2gpu"), seed=1,
          budget=100_000, batch_size=8, round_evaluations=16)
print("finished")
"""


def test_a_search_whose_peer_dies_stops_with_one_line():
  started = start_processes(["-c", KILLED, "{address}", "{process_id}"], 2,
                            root=ROOT)
  survivor, killed = finish_processes(started, timeout_s=120)
  assert killed.returncode == -9
  assert survivor.returncode == processes.PEER_LOST_STATUS, \
      survivor.stderr[-3000:]
  assert "finished" not in survivor.stdout
  assert ("ProcessLostError: gplace: process 1 of 2 stopped responding"
          in survivor.stderr)
  assert "a search keeps nothing on disk" in survivor.stderr
