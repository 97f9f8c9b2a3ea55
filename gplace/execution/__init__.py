"""Execution: running a placement of a real program on the local devices.

``inputs`` checks what the entry points are given; ``partition`` decides
the dispatch order (from a schedule; ``effects`` keeps side effects in
program order) and cuts a placed program into same-device clusters;
``cache`` compiles clusters and keeps the executables; ``plan`` flattens them
into the steps a call replays; ``executor`` runs them (:func:`place`;
``weak_types`` decides which argument types may run a captured program);
``timing`` measures runtimes (:func:`measure`); ``profiler`` calibrates a
:class:`~gplace.sim.topology.Topology` and a cost table against the executor
(:func:`profile`; ``calibration`` fits its link and host-cost factors).
"""

from gplace.execution.executor import place, PlacedFunction, default_devices
from gplace.execution.timing import measure, Measurement
from gplace.execution.profile_file import Profile
from gplace.execution.profiler import profile
