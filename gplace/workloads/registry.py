"""The zoo's registry: workload names, their specs and runnable steps."""

from __future__ import annotations

import functools
from typing import Callable

from gplace.errors import WorkloadError, check_seed
from gplace.workloads import amoebanet, attention, cnn, rnn, wavenet
from gplace.workloads.common import SIZES, STEPS, WorkloadSpec, make_step

_REGISTRY: dict[str, Callable[[str], WorkloadSpec]] = {
    "inception_v3": cnn.inception_v3_spec,
    "resnet50": cnn.resnet50_spec,
    "amoebanet": amoebanet.amoebanet_spec,
    "bert": attention.bert_spec,
    "gnmt2": functools.partial(rnn.gnmt_spec, 2),
    "gnmt4": functools.partial(rnn.gnmt_spec, 4),
    "gnmt8": functools.partial(rnn.gnmt_spec, 8),
    "rnnlm2": functools.partial(rnn.rnnlm_spec, 2),
    "rnnlm4": functools.partial(rnn.rnnlm_spec, 4),
    "transformer_xl2": functools.partial(attention.transformer_xl_spec, 2),
    "transformer_xl4": functools.partial(attention.transformer_xl_spec, 4),
    "transformer_xl8": functools.partial(attention.transformer_xl_spec, 8),
    "wavenet2": functools.partial(wavenet.wavenet_spec, 2),
    "wavenet4": functools.partial(wavenet.wavenet_spec, 4),
}


def names() -> tuple[str, ...]:
  """All workload names, in a stable order."""
  return tuple(_REGISTRY)


def spec(name: str, size: str = "tiny") -> WorkloadSpec:
  """The :class:`WorkloadSpec` of a workload (model, batch shapes, loss)."""
  if not isinstance(name, str) or name not in _REGISTRY:
    hint = (" (random DAGs, graph files and module:function names: "
            "gplace.workloads.load)" if isinstance(name, str) and (
                name.startswith("random_dag") or ":" in name
                or name.endswith((".npz", ".json"))) else "")
    raise WorkloadError(
        f"Unknown workload {name!r}; choose one of: {', '.join(names())}"
        f"{hint}.")
  if not isinstance(size, str) or size not in SIZES:
    raise WorkloadError(
        f"Unknown size {size!r} for workload {name!r}; choose one of: "
        f"{', '.join(SIZES)}.")
  return _REGISTRY[name](size)


def get(name: str, size: str = "tiny", step: str = "train", *,
        abstract: bool = False, seed: int = 0):
  """Returns ``(fn, args)`` for one workload such that ``fn(*args)`` runs.

  Args:
    name: one of :func:`names`.
    size: ``"tiny"`` (tests; a few hundred to ~2k nodes in training),
      ``"small"`` (a few thousand nodes) or ``"paper"`` (the papers' batch
      sizes and dimensions; see each model module's docstring).
    step: ``"train"``: ``fn(variables, opt_state, batch) -> (variables,
      opt_state, loss)``; ``"infer"``: ``fn(variables, batch) -> outputs``.
    abstract: if true, ``args`` holds ``jax.ShapeDtypeStruct`` leaves only
      (nothing is allocated): enough for ``gplace.capture`` and
      ``jax.make_jaxpr``, not for running. Use it for ``"paper"`` sizes, whose
      real parameters and optimizer state take up to a few GB of host memory.
    seed: numpy seed of parameter and batch values.

  Raises:
    WorkloadError: for an unknown name, size or step.
  """
  workload = spec(name, size)
  check_seed(seed, "gplace.workloads.get", WorkloadError)
  if not isinstance(step, str) or step not in STEPS:
    raise WorkloadError(
        f"Unknown step {step!r} for workload {name!r}; choose one of: "
        f"{', '.join(STEPS)}.")
  return make_step(workload, step, abstract=abstract, seed=seed)
