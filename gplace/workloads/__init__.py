"""The workload zoo: the models that the placement papers placed.

``get(name, size, step)`` returns ``(fn, args)`` with ``fn`` pure and jittable
and ``fn(*args)`` runnable; ``gplace.capture(fn, *args)`` turns it into a
:class:`gplace.Graph`, the input of everything downstream (features,
simulator, baselines, policies). ``zoo_table`` and ``python -m gplace.workloads
export --out DIR`` capture the whole zoo.

Workloads (flax linen models written here; the modules' docstrings record the
paper-size choices):

* ``inception_v3``, ``resnet50`` (``cnn``), ``amoebanet`` (``amoebanet``):
  image classifiers with batch norm.
* ``bert`` (``attention``): the BERT-base encoder with a masked-LM head.
* ``gnmt2/4/8``, ``rnnlm2/4`` (``rnn``): LSTM seq2seq with attention and LSTM
  language models, unrolled in time as in the papers' graphs.
* ``transformer_xl2/4/8`` (``attention``): relative-position attention over
  the previous segment's memory.
* ``wavenet2/4`` (``wavenet``): stacks of dilated causal convolutions.

Every module passes explicit ``name=`` to its submodules, so captured node
names carry the layer structure (``GNMT/Encoder/layer_2/...``,
``Bert/BertEncoder/layer_5/...``), which the expert baseline parses.
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
