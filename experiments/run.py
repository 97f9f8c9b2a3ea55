"""Trains a placement policy: parses flags and calls gplace.rl.train.

  python experiments/run.py --config experiments/configs/quickstart.py \
      --workdir /tmp/gplace_quickstart [--config.rl.num_samples=64 ...]

An override that names no field of the config (``--config.rl.num_sample``),
or a config file that cannot be loaded, exits with status 2 and one line
(naming the closest valid fields, or why the file failed); any other
:class:`~gplace.errors.GplaceError` (a value the config cannot take, a
workload that does not exist, a corrupted checkpoint) exits with status 1
and one line ``ErrorType: message``, without absl's usage text.
"""

import os
import re
import sys

# Configs import each other as experiments.configs.*: the repository root
# must be importable however this script is started.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from gplace.errors import ConfigError, GplaceError
from gplace.rl import config_fields
from gplace.rl import pretrain
from gplace.rl import train

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a config file (experiments/configs/*.py); "
    "override its fields with --config.<field>=<value>.", lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Output directory: checkpoints, metrics.jsonl, "
    "results.json, best_placement.json; a run resumes from it.")
flags.mark_flags_as_required(["config", "workdir"])

_OVERRIDE = re.compile(r"^--?config\.([^=]+)")
_CONFIG_FILE = re.compile(r"^--?config(?:=(.*))?$")


def unknown_override(argv: list[str]) -> str:
  """The one-line message for the first ``--config.<path>`` of ``argv`` that
  names no field of the config file ``argv`` gives ("" if all do, or if
  the config file itself cannot be read: absl reports that)."""
  config_arg = None
  for i, arg in enumerate(argv):
    match = _CONFIG_FILE.match(arg)
    if match:
      config_arg = match.group(1) if match.group(1) is not None else (
          argv[i + 1] if i + 1 < len(argv) else None)
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
        config_fields.check_override(config, match.group(1))
      except ConfigError as err:
        return f"{type(err).__name__}: {err}"
  return ""


_HELP_FLAGS = ("-h", "--help", "-?", "--helpshort", "--helpfull")


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, with a misspelt ``--config.`` override reported
  as one line (exit status 2) instead of ml_collections' traceback, and
  ``--help`` exiting with status 0 as the argparse scripts do (absl: 1)."""
  try:
    return app.parse_flags_with_usage(argv)  # exits on absl's own errors
  except SystemExit as exit_:
    if exit_.code == 1 and any(arg in _HELP_FLAGS for arg in argv[1:]):
      sys.exit(0)
    raise
  except (KeyError, AttributeError) as err:
    message = unknown_override(argv) or f"Bad --config override: {err!r}"
    sys.stderr.write(message + "\n")
    sys.exit(2)


def error_line(err: GplaceError) -> str:
  """``"ErrorType: message"`` on one line (a message's line breaks become
  spaces), what a failed run prints."""
  return f"{type(err).__name__}: " + " ".join(str(err).split())


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
    pretraining = "pretrain" in config  # one policy over many graphs
  except OSError as err:  # ml_collections could not load the file
    reason = [line.strip() for line in str(err).splitlines() if line.strip()]
    sys.stderr.write(f"ConfigError: --config cannot be loaded ({reason[-1]});"
                     " pass a config file, e.g. --config "
                     "experiments/configs/quickstart.py.\n")
    sys.exit(2)
  try:
    if pretraining:
      pretrain.pretrain(config, _WORKDIR.value)
    else:
      train.train_and_evaluate(config, _WORKDIR.value)
  except GplaceError as err:
    # One clear line and a nonzero status: absl's UsageError would print
    # the whole usage text first and bury it.
    sys.stderr.write(error_line(err) + "\n")
    sys.exit(1)


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
