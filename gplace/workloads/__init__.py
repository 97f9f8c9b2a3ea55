"""The workload zoo: the models that the placement papers placed.

``get(name, size, step) -> (fn, args)``, ``fn`` pure and jittable;
:func:`load` also takes ``random_dag:N``, graph files and
``module:function``. Explicit ``name=`` everywhere, which the expert
baseline parses.
"""

from gplace.workloads.common import SIZES, STEPS, WorkloadSpec
from gplace.workloads.loader import (RANDOM_DAG, Workload, cache_path,
                                     is_graph_file, is_random_dag, load)
from gplace.workloads.registry import get, names, spec
from gplace.workloads.zoo import export, zoo_table
from gplace.workloads import resolve

__all__ = ["RANDOM_DAG", "SIZES", "STEPS", "Workload", "WorkloadSpec",
           "cache_path",
           "export", "get", "is_graph_file", "is_random_dag", "load", "names", "spec",
           "zoo_table"]
