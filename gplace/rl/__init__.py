"""Learning placements: distributions, losses, the jitted update, training.

Imported lazily by ``gplace`` (orbax and optax load on first use).
"""

from gplace.rl.core import *  # noqa: F401,F403
