"""Execution: running a placement of a real program on the local devices.

``partition`` decides the dispatch order (from a schedule) and cuts a placed
program into same-device clusters; ``cache`` compiles clusters and keeps the
executables; ``executor`` runs them (:func:`place`); ``timing`` measures
runtimes (:func:`measure`); ``profiler`` calibrates a
:class:`~gplace.sim.topology.Topology` and a cost table against the executor
(:func:`profile`).
"""

from gplace.execution.executor import place, PlacedFunction, default_devices
from gplace.execution.timing import measure, Measurement
from gplace.execution.profiler import profile, Profile
