"""gplace experiments: ``run.py``, configs and benchmark scripts (a package so
that configs can import each other as ``experiments.configs.*``)."""
