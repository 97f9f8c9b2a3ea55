"""The graph IR: what every later stage of gplace reads.

``graph`` holds the immutable :class:`Graph` value (``schema`` its node
kinds and fields; ``storage`` reads and writes it, ``build_checks``
validates ``Graph.build``'s input, ``placement`` validates placements of
it); ``capture`` turns a jittable function into one (and into a
re-executable ``Program`` for the executor; ``op_costs`` prices each
equation); ``features`` turns graphs into padded ``jraph.GraphsTuple``
batches for the policies; ``coarsening`` merges ops into groups;
``interchange`` converts ``networkx`` graphs, ``json_format`` is the graph
part of the JSON format (``records`` reads node and edge records,
``export`` writes them); ``constraints`` holds the optional device
constraints a graph may carry. Graph files with their topology and costs
are the cost model's (:mod:`gplace.sim.graph_files`): this package never
imports :mod:`gplace.sim`.
"""

from gplace.graphs.graph import (Graph, NODE_INPUT, NODE_OP, NODE_OUTPUT,
                                 random_dag)
from gplace.graphs.capture import capture, trace_program, Program
from gplace.graphs.coarsening import coarsen, expand, Coarsening
from gplace.graphs import features
from gplace.graphs import constraints, interchange
