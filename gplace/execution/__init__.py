"""Execution: running a placement of a real program on the local devices.

:func:`place` (``executor``, over ``partition``, ``cache``, ``plan``),
:func:`measure` (``timing``) and :func:`profile` (``profiler``, ``fitting``,
``calibration``): a calibrated topology and cost table for the simulator.
"""

from gplace.execution.executor import place, PlacedFunction, default_devices
from gplace.execution.timing import measure, Measurement
from gplace.execution.profile_file import Profile
from gplace.execution.profiler import profile
