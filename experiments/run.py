"""Trains a placement policy: parses flags and calls gplace.rl.train.

  python experiments/run.py --config experiments/configs/quickstart.py \
      --workdir /tmp/gplace_quickstart [--config.rl.num_samples=64 ...]
"""

import os
import sys

# Configs import each other as experiments.configs.*: the repository root
# must be importable however this script is started.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from gplace.errors import GplaceError
from gplace.rl import train

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a config file (experiments/configs/*.py).",
    lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output directory.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  try:
    train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  except GplaceError as err:
    raise app.UsageError(f"{type(err).__name__}: {err}") from err


if __name__ == "__main__":
  app.run(main)
