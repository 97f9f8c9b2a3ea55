"""gplace.execution.fidelity_dumps: what a fidelity run saves is read back
next to the profile it was predicted with."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplace
from gplace.execution import fidelity_dumps


def _mlp(params, x):
  for w in params:
    x = jnp.tanh(x @ w)
  return jnp.sum(x)


def test_run_orders_put_named_schedules_in_node_id_order():
  orders = fidelity_dumps.run_orders(["device_greedy", [2, 0, 1]], 3)
  np.testing.assert_array_equal(orders, [[0, 1, 2], [2, 0, 1]])
  assert orders.dtype == np.int64


def test_saved_figures_come_back_with_their_profile(tmp_path):
  params = [jnp.full((8, 8), 0.1) for _ in range(2)]
  prof = gplace.profile(_mlp, params, jnp.ones((2, 8)),
                        devices=jax.devices()[:2], repeats=1,
                        transfer_repeats=1, calibration_placements=0)
  n = prof.graph.n_nodes
  prof.save(str(tmp_path / "profile_mlp_tiny_cpu+cpu_fastest.npz"))
  placements = np.stack([np.zeros(n, np.int32), np.arange(n) % 2])
  kinds = ["sim", "device_greedy"]
  measured = {(stat, kind): np.full((3, 2), 1e-3)
              for stat in ("min", "median") for kind in kinds}
  fidelity_dumps.save(
      fidelity_dumps.dump_path(str(tmp_path / "dump"), "mlp", "tiny"),
      ["all_on_0", "halves"], placements, kinds,
      {"sim": [np.arange(n)[::-1]] * 2, "device_greedy": ["device_greedy"] * 2},
      {"sim": np.array([1.0, 2.0]), "device_greedy": np.array([3.0, 4.0])},
      measured, {kind: [1, 3] for kind in kinds}, np.array([False, True]),
      refit_predicted={"sim": np.array([5.0, 6.0])})
  (dump,) = fidelity_dumps.load_all(str(tmp_path / "dump"), str(tmp_path))
  assert (dump.name, dump.size) == ("mlp", "tiny")
  assert dump.profile.graph.n_nodes == n
  data = dump.data
  np.testing.assert_array_equal(data["placements"], placements)
  np.testing.assert_array_equal(data["order_sim"][0], np.arange(n)[::-1])
  np.testing.assert_array_equal(data["order_device_greedy"][1], np.arange(n))
  np.testing.assert_array_equal(data["predicted_refit_sim"], [5.0, 6.0])
  assert "predicted_refit_device_greedy" not in data
  assert "calibration_rounds" not in data
  assert str(data["host_reads"]) == "overlapped"
  np.testing.assert_array_equal(data["failed"], [False, True])
  # The profiles elsewhere: said so, with where to look.
  with pytest.raises(gplace.GplaceError, match="expected one profile"):
    list(fidelity_dumps.load_all(str(tmp_path / "dump")))
