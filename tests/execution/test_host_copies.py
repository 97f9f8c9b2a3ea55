"""Tests of the executor's copies between platforms (CPU and GPU): they are
read back to the host as soon as their value exists and put on their
destination right before the first reader (gplace.execution.plan
.defer_host_copies). On forced CPU devices nothing crosses a platform, so
the executor cases force every cross-device copy through that path."""

import jax
import numpy as np
import pytest

import gplace
from gplace import _testing
from gplace.execution import plan as plan_lib


def _check_slots_written_before_read(steps, written):
  """Every slot a step reads was written before; returns the slots written
  (put destinations)."""
  written = set(written)
  for step in steps:
    if step[0] == "run":
      assert set(step[2]) <= written, step
      written |= set(step[3])
    elif step[0] == "fetch":
      assert set(step[1]) <= written, step
    else:
      assert set(step[1]) <= written, step
      assert written.isdisjoint(step[2]), step
      written |= set(step[2])
  return written


def test_defer_host_copies_moves_each_put_to_its_first_reader():
  # Slots: 0 arg on device 0 (CPU); run A on 1 (GPU) makes 1, 2; 1 and 2
  # go to device 0 (slots 3, 4) and 1 goes to device 2, a second GPU
  # (slot 5); run B on 2 reads 5; run C on 0 reads 4; slot 3 is an output.
  slot_device = [0, 1, 1, 0, 0, 2]
  steps = [("put", [0], [6], "d1"), ("run", "A", [6], [1, 2]),
           ("put", [1, 2], [3, 4], "d0"), ("put", [1], [5], "d2"),
           ("run", "B", [5], [7]), ("run", "C", [4], [8])]
  slot_device += [1, 2, 0]
  gpu = {1, 2}
  crosses = lambda a, b: (a in gpu) != (b in gpu)
  got = plan_lib.defer_host_copies(steps, slot_device, crosses)
  # A CPU value is read in place: not fetched, only put late.
  on_cpu = plan_lib.defer_host_copies(steps, slot_device, crosses,
                                      lambda src: src in gpu)
  assert on_cpu == got[1:]
  # The arg's copy into the GPU is fetched where it was and put right
  # before run A, its reader.
  assert got[:3] == [("fetch", [0]), ("put", [0], [6], "d1"),
                     ("run", "A", [6], [1, 2])]
  # GPU -> CPU copies of 1 and 2 are fetched right after A, and put right
  # before C; the GPU -> GPU copy keeps its place.
  assert got[3:] == [("fetch", [1, 2]), ("put", [1], [5], "d2"),
                     ("run", "B", [5], [7]), ("put", [1, 2], [3, 4], "d0"),
                     ("run", "C", [4], [8])]
  _check_slots_written_before_read(got, written={0})


def test_defer_host_copies_splits_mixed_puts_and_keeps_unread_ones():
  # One put into device 0 from a CPU slot (stays) and a GPU slot (deferred);
  # nothing reads the deferred destination: it is put at the end.
  slot_device = [0, 1, 0, 0]
  steps = [("put", [0, 1], [2, 3], "d0"), ("run", "X", [2], [])]
  got = plan_lib.defer_host_copies(steps, slot_device + [0],
                                   lambda a, b: a != b)
  assert got == [("put", [0], [2], "d0"), ("fetch", [1]),
                 ("run", "X", [2], []), ("put", [1], [3], "d0")]


def test_defer_host_copies_leaves_same_platform_plans_alone():
  steps = [("put", [0], [2], "d1"), ("run", "A", [2], [3]),
           ("put", [3], [4], "d0"), ("run", "B", [4, 1], [5])]
  slot_device = [0, 0, 1, 1, 0, 0]
  assert plan_lib.defer_host_copies(steps, slot_device,
                                    lambda a, b: False) == steps


@pytest.fixture
def every_copy_through_the_host(monkeypatch):
  """Treats every copy between two devices as one between platforms, and
  device 0 alone as a CPU (its values read in place, the others fetched)."""
  monkeypatch.setattr(plan_lib, "crosses_platform", lambda a, b: a != b)
  defer = plan_lib.defer_host_copies
  monkeypatch.setattr(
      plan_lib, "defer_host_copies",
      lambda steps, slot_device, crosses, read_back: defer(
          steps, slot_device, crosses, lambda src: src != 0))


@pytest.mark.parametrize("mode", ["cluster", "op"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_deferred_host_copies_give_jits_outputs(every_copy_through_the_host,
                                                mode, seed):
  fn = _testing.control_flow_program
  args = _testing.control_flow_args()
  graph = gplace.capture(fn, *args)
  want = jax.jit(fn)(*args)
  placement = np.random.default_rng(seed).integers(0, 3, graph.n_nodes)
  placed = gplace.place(fn, graph, placement, jax.devices()[:3], mode=mode)
  got = placed(*args)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5,
                               atol=1e-6)
  steps = placed._plan.steps  # pylint: disable=protected-access
  assert any(step[0] == "fetch" for step in steps)
  plan = placed._plan  # pylint: disable=protected-access
  initial = ({s for s in plan.arg_slots if s >= 0}
             | {s for s, _ in plan.const_slots})
  written = _check_slots_written_before_read(steps, initial)
  assert {s for s in plan.output_slots if isinstance(s, int)} <= written
