"""A trained policy in one file: its parameters and the settings that made it.

:func:`save_policy` writes a plain ``.npz`` atomically: one array per
parameter leaf, keyed by path, and ``__meta__`` JSON (format, the
:class:`~gplace.rl.settings.PolicySettings`, grouping, topology, training
settings); :func:`load_policy` needs no orbax or pickle;
:func:`shipped_policy_path` finds the policy gplace ships.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import zipfile
from typing import Any, Mapping, NamedTuple, Optional

import jax
import numpy as np

from gplace import policies
from gplace.errors import ConfigError, GplaceError, PolicyError, first_line
from gplace.rl.fields import flatten
from gplace.rl.settings import (PolicySettings, TrainSettings,
                                to_record)

FORMAT = "gplace-policy/1"
META_KEY = "__meta__"
# Where the shipped policies live, inside the package.
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "pretrained")
SHIPPED_PREFIX = "go_"


class PolicyFile(NamedTuple):
  """A loaded policy file.

  Attributes:
    params: the parameter pytree (nested dicts of numpy arrays).
    policy: the :class:`~gplace.rl.settings.PolicySettings` record
      (``name`` and hyperparameters).
    groups: ``settings.groups`` (how graphs were coarsened for the policy).
    topology: the topology name it was trained for.
    n_devices: ``D``, the width of its device head.
    config: the full training config (a JSON object).
    meta: everything in ``__meta__`` (also ``trained_on``, ``steps``...).
    path: the file it was read from.
  """

  params: Any
  policy: dict
  groups: dict
  topology: str
  n_devices: int
  config: dict
  meta: dict
  path: str


def _flatten(tree: Mapping) -> dict[str, np.ndarray]:
  """``{"params/encoder/.../kernel": array}``: the leaves as numpy."""
  return {k: np.asarray(v) for k, v in flatten(tree, separator="/").items()}


def _unflatten(flat: Mapping[str, np.ndarray]) -> dict:
  tree: dict = {}
  for path, value in flat.items():
    node = tree
    *parents, leaf = path.split("/")
    for key in parents:
      node = node.setdefault(key, {})
    node[leaf] = value
  return tree


def save_policy(path: str, params: Any, policy: PolicySettings,
                settings: TrainSettings, topology: Any, **facts: Any) -> str:
  """Writes ``params`` with the settings that made them to ``path``
  (``.npz``), atomically.

  Args:
    path: the file to write (its directory is created).
    params: the policy's parameters (unreplicated; nested mappings).
    policy: the policy's settings.
    settings: the training settings.
    topology: the :class:`~gplace.Topology` it was trained for.
    **facts: JSON-serialisable extras kept in ``meta`` (e.g. ``steps``,
      ``trained_on``).

  Returns:
    ``path``.

  Raises:
    PolicyError: a parameter holds NaN or infinite entries (nothing is
      written).
  """
  record = dict(to_record(settings), policy=policy.record())
  meta = dict(facts, format=FORMAT, policy=record["policy"],
              groups=record["groups"], topology=topology.name,
              n_devices=int(topology.n_devices), config=record)
  arrays = _flatten(dict(params))
  if META_KEY in arrays:
    raise PolicyError(f"a parameter is named {META_KEY!r}; rename it.")
  check_finite(arrays, f"the policy to be written to {path}")
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(suffix=".npz", dir=directory)
  try:
    with os.fdopen(fd, "wb") as f:
      np.savez_compressed(f, **arrays, **{META_KEY: np.asarray(json.dumps(
          meta))})
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  return path


def load_policy(path: str) -> PolicyFile:
  """Reads a policy file written by :func:`save_policy`.

  Raises:
    PolicyError: a missing, truncated or foreign file, one of another
      format version, or one with NaN or infinite parameters (the message
      names the file and the problem).
  """
  if not isinstance(path, (str, os.PathLike)):
    raise PolicyError(f"load_policy needs the path of a policy file (a str "
                      f"or os.PathLike), got {type(path).__name__}.")
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise PolicyError(f"no policy file at {path!r}; pass the .npz that "
                      "gplace.rl.pretrain wrote (or None for the shipped "
                      "one).")
  try:
    with np.load(path, allow_pickle=False) as data:
      if META_KEY not in data.files:
        raise PolicyError(f"{path} is not a gplace policy file (no "
                          f"{META_KEY!r} entry); write one with "
                          "gplace.rl.policy_file.save_policy.")
      meta = json.loads(str(data[META_KEY]))
      flat = {k: data[k] for k in data.files if k != META_KEY}
  except PolicyError:
    raise
  except (OSError, ValueError, EOFError, zipfile.BadZipFile,
          json.JSONDecodeError) as err:
    raise PolicyError(f"cannot read the policy file {path}: "
                      f"{first_line(err)}; it is truncated or not a gplace "
                      "policy file. Write it again (gplace.rl.pretrain) or "
                      "reinstall gplace for a shipped one.") from err
  if not isinstance(meta, dict) or meta.get("format") != FORMAT:
    found = meta.get("format") if isinstance(meta, dict) else None
    raise PolicyError(f"{path} has format {found!r}, this gplace reads "
                      f"{FORMAT!r}; re-export it with this version.")
  missing = [k for k in ("policy", "groups", "topology", "n_devices",
                         "config") if k not in meta]
  if missing:
    raise PolicyError(f"{path}: its metadata lacks {', '.join(missing)}; "
                      "write it with gplace.rl.policy_file.save_policy.")
  check_finite(flat, f"the policy file {path}")
  return PolicyFile(_unflatten(flat), dict(meta["policy"]),
                    dict(meta["groups"]), str(meta["topology"]),
                    int(meta["n_devices"]), dict(meta["config"]), meta, path)


def check_finite(flat: Mapping[str, np.ndarray], where: str) -> None:
  """Refuses parameters with NaN or infinite entries: such a policy places
  every node on device 0 (the argmax of NaN logits) and would pass for a
  real one.

  Args:
    flat: ``{"params/.../kernel": array}``.
    where: what holds them, for the message (``"the policy file p.npz"``).

  Raises:
    PolicyError: naming the leaves and how many entries are not finite.
  """
  bad = []
  for key in sorted(flat):
    value = np.asarray(flat[key])
    if not np.issubdtype(value.dtype, np.inexact):
      continue
    count = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
    if count:
      bad.append(f"{key} ({count} of {value.size} entries)")
  if bad:
    raise PolicyError(
        f"{where} has non-finite (NaN or infinite) "
        f"parameters: {'; '.join(bad[:4])}"
        + (f"; and {len(bad) - 4} more leaves" if len(bad) > 4 else "")
        + ". The training that wrote it diverged, or the file is damaged; "
        "train it again (e.g. a lower --config.optimizer.learning_rate) or "
        "use another policy file.")


def shipped_policy_path(topology_name: str) -> Optional[str]:
  """The policy gplace ships for ``topology_name``, or None."""
  path = os.path.join(SHIPPED_DIR, f"{SHIPPED_PREFIX}{topology_name}.npz")
  return path if os.path.isfile(path) else None


def shipped_topologies() -> list[str]:
  """Topology names with a shipped policy."""
  if not os.path.isdir(SHIPPED_DIR):
    return []
  return sorted(name[len(SHIPPED_PREFIX):-len(".npz")]
                for name in os.listdir(SHIPPED_DIR)
                if name.startswith(SHIPPED_PREFIX) and name.endswith(".npz"))


def _policy_defaults(name: Any, n_devices: int) -> dict:
  """The default of every hyperparameter of policy family ``name`` (its
  module's and sub-modules' dataclass fields), or {} if it cannot be built:
  a setting a file predates reads as its default."""
  try:
    policy = policies.create_policy(name, n_devices)
  except (GplaceError, TypeError):
    return {}
  defaults = {}
  for module in [policy] + [getattr(policy, f.name) for f in
                            dataclasses.fields(policy)
                            if dataclasses.is_dataclass(
                                getattr(policy, f.name, None))]:
    for field in dataclasses.fields(module):
      if field.name not in ("parent", "name"):
        defaults.setdefault(field.name, getattr(module, field.name))
  return defaults


def policy_differences(policy_file: PolicyFile, policy: PolicySettings,
                       n_devices: int) -> list[str]:
  """What keeps ``policy_file`` from initialising ``policy`` on
  ``n_devices`` devices: ``"policy.hidden_size: 64 (file) vs 32"`` lines
  (empty if none). A setting only one side names compares as the policy's
  default (a file written before a switch existed matches settings that
  leave it off)."""
  diffs = []
  wanted = policy.record()
  defaults = _policy_defaults(wanted.get("name", policy_file.policy.get(
      "name")), n_devices)
  for key in sorted(set(policy_file.policy) | set(wanted)):
    unset = defaults.get(key, "(unset)")
    a, b = policy_file.policy.get(key, unset), wanted.get(key, unset)
    if a != b:
      diffs.append(f"policy.{key}: {a!r} (file) vs {b!r}")
  if policy_file.n_devices != n_devices:
    diffs.append(f"devices: {policy_file.n_devices} (file, "
                 f"{policy_file.topology}) vs {n_devices}")
  return diffs


def params_like(policy_file: PolicyFile, target: Any) -> Any:
  """``policy_file.params`` in the tree structure and dtypes of ``target``
  (parameters of the policy to fill, or their ``jax.eval_shape``).

  Raises:
    ConfigError: a leaf is missing, extra, or of another shape.
  """
  want = flatten(target, separator="/")
  have = _flatten(policy_file.params)
  problems = [f"{k}: missing" for k in sorted(set(want) - set(have))]
  problems += [f"{k}: not in this policy" for k in sorted(set(have) -
                                                          set(want))]
  problems += [f"{k}: shape {have[k].shape} (file) vs {tuple(want[k].shape)}"
               for k in sorted(set(want) & set(have))
               if have[k].shape != tuple(want[k].shape)]
  if problems:
    raise ConfigError(
        f"the policy file {policy_file.path} does not fit this policy ("
        + "; ".join(problems[:4])
        + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        + "): use the policy settings it was trained with "
        f"({policy_file.policy}).")
  flat = {k: have[k].astype(want[k].dtype) for k in want}
  return jax.tree.map(lambda _, v: v, dict(target), _unflatten(flat))
