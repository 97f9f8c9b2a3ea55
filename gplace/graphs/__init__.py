"""The graph IR: the immutable :class:`Graph` every later stage reads.

``capture`` (function -> graph), ``features`` (padded ``jraph`` batches),
``coarsening`` (ops -> groups), ``fusion`` (ops -> kernels),
``json_format`` / ``interchange`` (graphs
from other tools), ``constraints``, ``placement`` (the placement check).
Never imports :mod:`gplace.sim`.
"""

from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.graphs.capture import capture, trace_program, Program
from gplace.graphs.coarsening import coarsen, expand, Coarsening
from gplace.graphs import fusion
from gplace.graphs import features
from gplace.graphs import constraints, interchange
