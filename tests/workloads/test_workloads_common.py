"""Tests of gplace.workloads.common (specs into steps, the loss) and of the
registry in gplace.workloads: names, and bad requests as WorkloadErrors."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gplace import workloads
from gplace.errors import WorkloadError
from gplace.workloads.common import (BatchField, WorkloadSpec, cross_entropy,
                                     make_step)

# Every workload of the papers; each model module's test file covers its own.
PAPER_WORKLOADS = {
    "inception_v3", "resnet50", "amoebanet", "bert", "gnmt2", "gnmt4",
    "gnmt8", "rnnlm2", "rnnlm4", "transformer_xl2", "transformer_xl4",
    "transformer_xl8", "wavenet2", "wavenet4"}
TESTED_MODULES = {"cnn", "rnn", "attention", "wavenet", "amoebanet"}


def test_names_cover_the_papers():
  assert set(workloads.names()) == PAPER_WORKLOADS
  for name in workloads.names():
    module = type(workloads.spec(name).model).__module__
    assert module.rsplit(".", 1)[-1] in TESTED_MODULES, (name, module)


@pytest.mark.parametrize("bad", [
    dict(name="alexnet"), dict(size="huge"), dict(step="eval"),
    dict(name=["rnnlm2"]), dict(size=["tiny"]),  # TypeError before
    dict(step=None)])
def test_unknown_request_lists_choices(bad):
  request = {**dict(name="rnnlm2", size="tiny", step="train"), **bad}
  with pytest.raises(WorkloadError) as err:
    workloads.get(request["name"], request["size"], request["step"])
  message = str(err.value)
  assert "choose one of" in message
  assert any(choice in message for choice in ("gnmt8", "paper", "infer"))


def test_cross_entropy_of_uniform_logits_is_log_classes():
  logits = jnp.zeros((3, 4))
  labels = jnp.array([0, 1, 3])
  assert float(cross_entropy(logits, labels)) == pytest.approx(np.log(4))
  logits = logits.at[0, 0].set(100.0)       # first example: certain, right
  weights = jnp.array([1.0, 0.0, 1.0])      # second one: ignored
  assert float(cross_entropy(logits, labels, weights)) == pytest.approx(
      np.log(4) / 2, rel=1e-5)


class _Tiny(nn.Module):

  @nn.compact
  def __call__(self, x):
    return nn.Dense(2, name="dense")(x)


def _tiny_spec():
  return WorkloadSpec(
      model=_Tiny(),
      batch={"x": BatchField((4, 3)),
             "labels": BatchField((4,), jnp.int32, max_value=2)},
      model_inputs=lambda batch: (batch["x"],),
      loss=lambda logits, batch: cross_entropy(logits, batch["labels"]),
      optimizer=optax.sgd(0.5))


def test_make_step_builds_a_train_step_that_learns():
  fn, (variables, opt_state, batch) = make_step(_tiny_spec(), "train")
  assert set(variables) == {"params"}
  np.testing.assert_array_equal(variables["params"]["dense"]["bias"],
                                np.zeros(2))
  labels = np.asarray(batch["labels"])
  assert labels.dtype == np.int32 and labels.min() >= 0 and labels.max() < 2
  step = jax.jit(fn)
  losses = []
  for _ in range(5):
    variables, opt_state, loss = step(variables, opt_state, batch)
    assert np.shape(loss) == ()
    losses.append(float(loss))
  assert losses[-1] < losses[0], losses


def test_make_step_abstract_infer_and_seeds():
  spec = _tiny_spec()
  fn, (variables, batch) = make_step(spec, "infer")
  assert fn(variables, batch).shape == (4, 2)
  _, abstract = make_step(spec, "train", abstract=True)
  leaves = jax.tree_util.tree_leaves(abstract)
  assert leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  _, again = make_step(spec, "infer", seed=0)
  _, other = make_step(spec, "infer", seed=1)
  same = jax.tree_util.tree_map(np.array_equal, (variables, batch), again)
  assert all(jax.tree_util.tree_leaves(same))
  np.testing.assert_raises(AssertionError, np.testing.assert_array_equal,
                           other[1]["x"], batch["x"])
