"""A search across the processes of a ``jax.distributed`` run.

Process ``p`` of ``P`` spends its share of the evaluation budget
(:func:`split_budget`) with its own seed (:func:`process_seed`), in rounds of
``round_evaluations`` evaluations; after each round every process learns
every process's best (:meth:`Exchange.allgather`), adopts the fastest (the
lowest process index on ties) and continues from it. Rounds end on
evaluation counts, so for a seed and a budget (no time limit) the result is
the same on every process and in every rerun. With one process nothing of
this runs.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from gplace import processes
from gplace.errors import SearchError, check_seed, is_int

#: Batches of evaluations a process spends between two exchanges.
DEFAULT_ROUND_BATCHES = 4


class Exchange:
  """Who this process is among the searching processes, and how they share
  their bests: the processes of the ``jax.distributed`` run.

  Tests substitute another (e.g. threads with a barrier) by overriding
  :attr:`num_processes`, :attr:`process_index` and :meth:`allgather`.
  """

  @property
  def num_processes(self) -> int:
    return processes.process_count()

  @property
  def process_index(self) -> int:
    return processes.process_index()

  def allgather(self, tree: Any) -> Any:
    """Every process's ``tree`` stacked on a leading ``[P]`` axis. A peer
    that died ends this process with one line
    (:func:`gplace.processes.exit_when_a_peer_is_lost`)."""
    with processes.exit_when_a_peer_is_lost(nothing_on_disk):
      return processes.allgather(tree)


def nothing_on_disk() -> str:
  """What survives a lost peer during a search or ``optimize``: nothing was
  written, so nothing is lost."""
  return "a search keeps nothing on disk, so nothing was lost"


def default_exchange() -> Optional[Exchange]:
  """The run's :class:`Exchange` when it has several processes, else None
  (a search alone)."""
  return Exchange() if processes.is_distributed() else None


def resolve_exchange(exchange) -> Optional[Exchange]:
  """A search's ``exchange`` argument as an :class:`Exchange`, or None for a
  search alone: None is :func:`default_exchange`, False alone, True the
  run's processes.

  Raises:
    SearchError: anything else.
  """
  if exchange is None:
    return default_exchange()
  if isinstance(exchange, bool):
    return Exchange() if exchange else None
  if not isinstance(exchange, Exchange):
    raise SearchError(
        f"exchange must be None (the processes of a jax.distributed run), "
        f"False (this process alone), True or a gplace.search.rounds."
        f"Exchange, got {type(exchange).__name__} {exchange!r}.")
  return exchange


def split_budget(budget: int, num_processes: int) -> list[int]:
  """Each process's share of ``budget`` evaluations: ``budget // P``, and one
  more for the first ``budget % P`` processes (they sum to ``budget``).

  Raises:
    SearchError: a budget smaller than the number of processes.
  """
  if budget < num_processes:
    raise SearchError(
        f"budget={budget} evaluations cannot be split over {num_processes} "
        f"processes (each needs at least one to score its start); pass "
        f"budget >= {num_processes}, or run fewer processes.")
  share, extra = divmod(budget, num_processes)
  return [share + (p < extra) for p in range(num_processes)]


def process_seed(seed: int, process_index: int) -> int:
  """Process ``process_index``'s seed, derived from ``seed`` and the index
  (distinct streams per process, the same in every rerun)."""
  seed = check_seed(seed, "gplace.search", SearchError)
  state = np.random.SeedSequence((seed, process_index)).generate_state(1)
  return int(state[0] >> 1)


def check_round_evaluations(value, batch_size: int) -> int:
  """``round_evaluations`` as a positive int (None:
  :data:`DEFAULT_ROUND_BATCHES` batches)."""
  if value is None:
    return DEFAULT_ROUND_BATCHES * batch_size
  if not is_int(value) or value < 1:
    raise SearchError(
        f"round_evaluations must be a positive integer (evaluations each "
        f"process spends between two exchanges of the best), got {value!r}; "
        f"e.g. {DEFAULT_ROUND_BATCHES * batch_size}.")
  return int(value)


class Share(NamedTuple):
  """This process's part of a distributed search.

  Attributes:
    budget: its evaluations.
    seed: its seed.
  """
  budget: int
  seed: int


def share(exchange: Optional[Exchange], budget, seed: int) -> Share:
  """This process's budget and seed (unchanged without an exchange)."""
  if exchange is None:
    return Share(budget, seed)
  if not is_int(budget) or budget < 1:
    return Share(budget, seed)  # start() says what is wrong with it
  index = exchange.process_index
  return Share(split_budget(int(budget), exchange.num_processes)[index],
               process_seed(seed, index))


def run_rounds(evaluator, step: Callable[[], None], active: Callable[[], bool],
               restart: Callable[[np.ndarray, Optional[np.ndarray], float],
                                 None],
               exchange: Exchange, round_evaluations: int) -> int:
  """Runs ``step`` (one batch) while ``active()``, exchanging the best every
  ``round_evaluations`` evaluations, until no process is active.

  After each exchange the evaluator holds the fastest best of all processes
  (:meth:`~gplace.search.common.Evaluator.adopt`) and ``restart(placement,
  priority, runtime_s)`` moves this process's chain to it.

  Returns:
    Evaluations spent by all processes together.
  """
  while True:
    began = evaluator.evaluations
    while active() and evaluator.evaluations - began < round_evaluations:
      step()
    total, still_active = merge(evaluator, restart, exchange, active())
    if not still_active:
      return total


def merge(evaluator, restart, exchange: Exchange, active: bool
          ) -> tuple[int, bool]:
  """One exchange: every process's best, the fastest adopted (lowest index
  on ties). Returns ``(evaluations of all processes, whether any process
  is still active)``."""
  n = evaluator.graph.n_nodes
  placement = (np.zeros(n, np.int32) if evaluator.best_placement is None
               else np.asarray(evaluator.best_placement, np.int32))
  has_priority = evaluator.best_priority is not None
  priority = (np.asarray(evaluator.best_priority, np.float32) if has_priority
              else np.zeros(n, np.float32))
  gathered = exchange.allgather({
      "runtime_s": np.asarray([evaluator.best_runtime_s], np.float64),
      "placement": placement, "priority": priority,
      "flags": np.asarray([evaluator.best_placement is not None,
                           has_priority, active], np.int32),
      "evaluations": np.asarray([evaluator.evaluations], np.int64)})
  runtime_s = np.where(gathered["flags"][:, 0] > 0,
                       gathered["runtime_s"][:, 0], np.inf)
  winner = int(np.argmin(runtime_s))  # the first minimum: lowest index
  if gathered["flags"][winner, 0]:
    priority = (gathered["priority"][winner]
                if gathered["flags"][winner, 1] else None)
    evaluator.adopt(gathered["placement"][winner], priority,
                    float(gathered["runtime_s"][winner, 0]))
    restart(evaluator.best_placement, evaluator.best_priority,
            evaluator.best_runtime_s)
  return (int(gathered["evaluations"][:, 0].sum()),
          bool(gathered["flags"][:, 2].any()))
