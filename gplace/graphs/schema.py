"""What a :class:`~gplace.Graph` is made of: its node kinds and its fields.

Below :mod:`gplace.graphs.graph`, so that ``storage`` and ``export``
(called by ``Graph``'s methods) read them without importing the class.
"""

NODE_INPUT = 0
NODE_OP = 1
NODE_OUTPUT = 2
KIND_NAMES = ("input", "op", "output")

#: The array fields every graph has (``[N]`` or ``[E]`` long).
ARRAY_FIELDS = (
    "names", "op_type", "kind", "out_shape", "out_rank", "out_dtype",
    "out_bytes", "flops", "bytes_accessed", "edge_src", "edge_dst",
    "edge_bytes")
#: The optional device-constraint fields (None where a graph has none).
CONSTRAINT_FIELDS = ("allowed_devices", "colocation")
