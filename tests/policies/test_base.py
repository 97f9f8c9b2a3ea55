"""Tests of gplace.policies.base: the policy registry and interface."""

import flax.linen as nn
import jax
import pytest

from gplace import policies
from gplace._testing import chain, make_graphs_tuple
from gplace.errors import PolicyError
from gplace.policies import base


def test_go_is_registered():
  assert "go" in policies.policy_names()
  assert policies.create_policy is base.create_policy


def test_unknown_family_is_a_policy_error():
  with pytest.raises(PolicyError, match="Unknown policy 'placeto_v9'"):
    policies.create_policy("placeto_v9", 3)
  with pytest.raises(PolicyError, match=r"Unknown policy \['go'\]"):
    policies.create_policy(["go"], 3)       # TypeError before


@pytest.mark.parametrize("num_devices", [0, -1, "3", 2.5, None, True])
def test_a_bad_device_count_is_a_policy_error(num_devices):
  # Accepted before; the policy failed when first applied.
  with pytest.raises(PolicyError, match="num_devices must be a positive"):
    policies.create_policy("go", num_devices)


@pytest.mark.parametrize("family", ["go", "placeto", "hsdag", "doppler"])
@pytest.mark.parametrize("value", ["64", True, 1.5])
def test_a_hyperparameter_of_the_wrong_type_is_a_policy_error(family, value):
  # "64" was a TypeError, then "the 'go' policy rejects these
  # hyperparameters"; True was taken for 1 ("must be divisible by
  # num_heads", or accepted by placeto, hsdag and doppler).
  with pytest.raises(PolicyError, match=f"hidden_size={value!r} must be"):
    policies.create_policy(family, 3, hidden_size=value)


def test_a_registered_family_is_built_by_name(monkeypatch):
  monkeypatch.setattr(base, "_FACTORIES", dict(base._FACTORIES))

  class Constant(nn.Module):
    num_devices: int
    scale: float = 1.0

    @nn.compact
    def __call__(self, graphs, device_mask=None):
      bias = self.param("bias", nn.initializers.zeros, (self.num_devices,))
      return self.scale * (graphs.nodes["features"][:, :1] + bias)

  @base.register_policy("constant")
  def create_constant(num_devices, **hparams):
    return Constant(num_devices, **hparams)

  assert "constant" in policies.policy_names()
  policy: base.Policy = policies.create_policy("constant", 4, scale=2.0)
  graphs = make_graphs_tuple([chain(3)], n_pad=4, e_pad=4)
  params = policy.init(jax.random.PRNGKey(0), graphs)
  assert policy.apply(params, graphs).shape == (4, 4)
