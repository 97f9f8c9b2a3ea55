"""The workload suite of the studies: one train step of each model family
the placement papers placed (``gplace.workloads``), the default
``--workloads`` of ``experiments/search_controls.py``,
``learning_vs_search.py`` and ``compare_systems.py``."""

SUITE = ("rnnlm2", "transformer_xl4", "wavenet2", "resnet50", "inception_v3",
         "bert", "gnmt4")
