"""Execution: running a placement of a real program on the local devices.

``partition`` cuts a placed program into same-device clusters; ``executor``
compiles and runs them (:func:`place`); ``timing`` measures runtimes
(:func:`measure`); ``profiler`` calibrates a :class:`~gplace.Topology` and a
cost table against the executor (:func:`profile`).
"""

from gplace.execution.executor import place, PlacedFunction, default_devices
from gplace.execution.timing import measure, Measurement
from gplace.execution.profiler import profile, Profile
