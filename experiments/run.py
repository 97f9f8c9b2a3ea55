"""Trains a placement policy: parses flags and calls gplace.rl.train (or
gplace.rl.pretrain for a config with a ``pretrain`` section).

  python experiments/run.py --config experiments/configs/quickstart.py \
      --workdir /tmp/gplace_quickstart [--config.rl.num_samples=64 ...]

Several processes (one per host, or per GPU) train one policy when each is
started with ``--coordinator_address=HOST:PORT --num_processes=P
--process_id=I`` (or ``$JAX_COORDINATOR_ADDRESS``, ``$JAX_NUM_PROCESSES``,
``$JAX_PROCESS_ID``, or inside a SLURM job step with none of them); see
docs/guide.md, "How to launch".

An override that names no field of the config (``--config.rl.num_sample``),
or a config file that cannot be loaded, exits with status 2 and one line
(naming the closest valid fields, or why the file failed); any other
:class:`~gplace.errors.GplaceError` (a value the config cannot take, a
workload that does not exist, a corrupted checkpoint) exits with status 1
and one line ``ErrorType: message``, without absl's usage text.
"""

import difflib
import os
import re
import sys
from typing import Any

# Configs import each other as experiments.configs.*: the repository root
# must be importable however this script is started.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from gplace.errors import ConfigError, GplaceError, first_line
from gplace.rl import checks
from gplace.rl import data
from gplace.rl import distributed
from gplace.rl import pretraining
from gplace.rl import settings as settings_lib
from gplace.rl import training

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a config file (experiments/configs/*.py); "
    "override its fields with --config.<field>=<value>.", lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Output directory: checkpoints, metrics.jsonl, "
    "results.json, best_placement.json; a run resumes from it.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "Multi-process runs: HOST:PORT of process "
    "0's coordinator, the same for every process (default "
    "$JAX_COORDINATOR_ADDRESS; found by JAX under SLURM).")
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Multi-process runs: how many processes, all "
    "hosts together (default $JAX_NUM_PROCESSES, or SLURM's task count; "
    "none: one process).")
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "Multi-process runs: this process, 0 .. "
    "num_processes - 1; process 0 writes the workdir (default "
    "$JAX_PROCESS_ID, or SLURM's task id).")
_HEARTBEAT = flags.DEFINE_integer(
    "heartbeat_timeout_s", 100, "Multi-process runs: seconds without a "
    "heartbeat after which a process counts as dead and the others stop.")
flags.mark_flags_as_required(["config", "workdir"])

_OVERRIDE = re.compile(r"^--?config\.([^=]+)")
_CONFIG_FILE = re.compile(r"^--?config(?:=(.*))?$")


def config_argument(argv: list[str]) -> str | None:
  """The ``--config`` value of ``argv`` (the last one), or None."""
  config_arg = None
  for i, arg in enumerate(argv):
    match = _CONFIG_FILE.match(arg)
    if match:
      config_arg = match.group(1) if match.group(1) is not None else (
          argv[i + 1] if i + 1 < len(argv) else None)
  return config_arg


def config_file_problem(config_arg: str) -> str:
  """Why the config file ``config_arg`` (``path[:argument]``, as
  ml_collections takes it) cannot give a config, as one line
  ``ConfigError: ...``; "" if it can.

  A config file is Python that defines ``get_config()`` returning a
  ``ConfigDict``; the file is run here as ml_collections runs it."""
  path, *argument = config_arg.split(":", 1)
  fix = ("a config is a Python file that defines get_config() returning an "
         "ml_collections.ConfigDict, e.g. experiments/configs/quickstart.py")
  where = f"--config {path}"
  kind = "" if path.endswith(".py") else " (not a .py file)"
  try:
    with open(path, "rb") as f:
      source = f.read()
  except OSError as err:  # missing, a directory, unreadable
    return (f"ConfigError: --config cannot be loaded ({err}); pass a config "
            "file, e.g. --config experiments/configs/quickstart.py.")
  try:
    code = compile(source, path, "exec")
  except (SyntaxError, ValueError) as err:  # ValueError: null bytes
    line = getattr(err, "lineno", None)
    return (f"ConfigError: {where} is not valid Python{kind}: "
            f"{type(err).__name__}"
            f"{f' at line {line}' if line else ''}: "
            f"{getattr(err, 'msg', None) or err}; {fix}.")
  namespace = {"__name__": "config_config", "__file__": path}
  try:
    exec(code, namespace)  # pylint: disable=exec-used
  except Exception as err:  # pylint: disable=broad-except
    return (f"ConfigError: {where} fails when run{kind}: "
            f"{first_line(err)}; {fix}.")
  get_config = namespace.get("get_config")
  if not callable(get_config):
    return f"ConfigError: {where} defines no get_config(){kind}; {fix}."
  try:
    config = get_config(*argument)
  except Exception as err:  # pylint: disable=broad-except
    return (f"ConfigError: {where}: get_config({', '.join(map(repr, argument))}) "
            f"failed: {first_line(err)}.")
  if not hasattr(config, "keys"):
    return (f"ConfigError: {where}: get_config() returned "
            f"{type(config).__name__}, not a ConfigDict; {fix}.")
  return ""


def unknown_override(argv: list[str]) -> str:
  """The one-line message for the first ``--config.<path>`` of ``argv`` that
  names no field of the config file ``argv`` gives ("" if all do, or if
  the config file itself cannot be read: absl reports that)."""
  config_arg = config_argument(argv)
  if config_arg is None:
    return ""
  try:
    config = flags.FLAGS["config"].parser.parse(config_arg)
  except Exception:  # pylint: disable=broad-except
    return ""
  for arg in argv:
    match = _OVERRIDE.match(arg)
    if match:
      try:
        check_override(config, match.group(1))
      except ConfigError as err:
        return f"{type(err).__name__}: {err}"
  return ""


_MISSING = object()


def lookup(config, path: str, default: Any = _MISSING) -> Any:
  """``config.a.b`` for ``path="a.b"``; ``default`` where a key is missing."""
  node = config
  for key in path.split("."):
    if not hasattr(node, "keys") or key not in node:
      return default
    node = node[key]
  return node


def check_override(config, path: str) -> None:
  """Checks that ``--config.<path>=...`` names a field of ``config``.

  Raises:
    ConfigError: one line naming the unknown key and the closest valid
      ones (difflib), or every key of its group when none is close.
  """
  node, walked, keys_in_path = config, [], path.split(".")
  for depth, key in enumerate(keys_in_path):
    where = "config." + ".".join(walked) if walked else "the config"
    if not hasattr(node, "keys"):
      raise ConfigError(f"--config.{path}: {where} is a value ({node!r}), "
                        f"not a group of fields; set --config."
                        f"{'.'.join(walked)}=... instead.")
    if key not in node:
      keys = sorted(node.keys())
      tail = keys_in_path[depth + 1:]
      # Only candidates under which the rest of the path exists.
      close = [c for c in difflib.get_close_matches(key, keys, n=3,
                                                    cutoff=0.5)
               if lookup(node[c], ".".join(tail)) is not _MISSING or not tail]
      prefix = "--config." + "".join(k + "." for k in walked)
      rest = "".join("." + k for k in keys_in_path[depth + 1:])
      hint = (f"did you mean {' or '.join(prefix + c + rest for c in close)}?"
              if close else f"{where} has {', '.join(keys)}.")
      raise ConfigError(f"--config.{path}: unknown field {key!r} in "
                        f"{where}; {hint}")
    node, walked = node[key], walked + [key]


_HELP_FLAGS = ("-h", "--help", "-?", "--helpshort", "--helpfull")


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, with a misspelt ``--config.`` override reported
  as one line (exit status 2) instead of ml_collections' traceback, and
  ``--help`` exiting with status 0 as the argparse scripts do (absl: 1)."""
  config_arg = config_argument(argv)
  if config_arg and not any(arg in _HELP_FLAGS for arg in argv[1:]):
    # absl runs the config file while it parses flags; a file that is not
    # Python, fails, has no get_config() or returns no ConfigDict would end
    # in a traceback (or absl's FATAL line) there: say why here instead.
    problem = config_file_problem(config_arg)
    if problem:
      sys.stderr.write(" ".join(problem.split()) + "\n")
      sys.exit(2)
  try:
    return app.parse_flags_with_usage(argv)  # exits on absl's own errors
  except SystemExit as exit_:
    if exit_.code == 1 and any(arg in _HELP_FLAGS for arg in argv[1:]):
      sys.exit(0)
    raise
  except Exception as err:  # pylint: disable=broad-except
    # An override that names no field (or a config file that failed only
    # when absl ran it) lands here.
    message = ((config_file_problem(config_arg) if config_arg else "")
               or unknown_override(argv)
               or f"ConfigError: bad --config or override: {first_line(err)}")
    sys.stderr.write(" ".join(message.split()) + "\n")
    sys.exit(2)


def error_line(err: GplaceError) -> str:
  """``"ErrorType: message"`` on one line (a message's line breaks become
  spaces), what a failed run prints."""
  return f"{type(err).__name__}: " + " ".join(str(err).split())


def check(config, log=print):
  """What :func:`run` checks before training, without training: the
  settings, the graphs (loaded) and the run's checks; returns ``(loaded
  workloads, topology, experiment)``.

  Raises:
    GplaceError: what :func:`run` would raise before its first step.
  """
  experiment = settings_lib.from_config(config)
  if experiment.settings.pretrain is not None:
    pretraining.check_pretrain(experiment.policy, experiment.settings)
  loaded, topology = data.load_experiment(experiment, log=log)
  checks.check_run(loaded, topology, experiment.policy, experiment.settings)
  return loaded, topology, experiment


def run(config, workdir: str, **kwargs):
  """Runs what ``config`` describes into ``workdir``: its settings, graphs
  and topology (:func:`gplace.rl.settings.from_config`,
  :func:`gplace.rl.data.load_experiment`) handed to
  :func:`gplace.rl.train`, or for a config with a ``pretrain``
  section to :func:`gplace.rl.pretrain`; ``kwargs`` go to them
  (``log``, ``stop_after_step``; ``progress`` for training)."""
  experiment = settings_lib.from_config(config)
  log = kwargs.get("log", print)
  loaded, topology = data.load_experiment(experiment, log=log)
  entry = (pretraining.pretrain if experiment.settings.pretrain is not None
           else training.train)
  return entry(loaded, topology, experiment.policy, experiment.settings,
               workdir=workdir, **kwargs)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    sys.stderr.write(f"run.py takes no positional arguments, got "
                     f"{argv[1:]}; pass --config=FILE --workdir=DIR and "
                     "--config.<field>=<value> overrides.\n")
    sys.exit(2)
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  config = _CONFIG.value
  try:
    "pretrain" in config  # pylint: disable=pointless-statement
  except OSError as err:  # ml_collections could not load the file
    reason = [line.strip() for line in str(err).splitlines() if line.strip()]
    sys.stderr.write(f"ConfigError: --config cannot be loaded ({reason[-1]});"
                     " pass a config file, e.g. --config "
                     "experiments/configs/quickstart.py.\n")
    sys.exit(2)
  except TypeError:  # get_config() returned no ConfigDict (a number...)
    pass
  if not hasattr(config, "keys"):
    sys.stderr.write(f"ConfigError: --config: get_config() returned "
                     f"{type(config).__name__}, not a ConfigDict; return an "
                     "ml_collections.ConfigDict, e.g. as experiments/configs/"
                     "quickstart.py does.\n")
    sys.exit(2)
  try:
    # Before anything runs on a device: JAX joins the processes first.
    distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value,
                           _PROCESS_ID.value,
                           heartbeat_timeout_s=_HEARTBEAT.value)
    run(config, _WORKDIR.value)
  except GplaceError as err:
    # One clear line and a nonzero status: absl's UsageError would print
    # the whole usage text first and bury it.
    sys.stderr.write(error_line(err) + "\n")
    if distributed.is_distributed():
      # Every process is failing: JAX's shutdown barrier at exit can only
      # wait for a process that has gone (seen hanging for minutes), so
      # leave without it, as a lost peer does (processes.
      # exit_when_a_peer_is_lost); outputs were written as the error passed.
      sys.stdout.flush()
      sys.stderr.flush()
      os._exit(1)  # pylint: disable=protected-access
    sys.exit(1)


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
