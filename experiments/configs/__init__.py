"""Training configs (``get_config()`` per file). Every config starts from
:mod:`experiments.configs.quickstart`, which documents every field, and
overrides some: ``from experiments.configs import quickstart``. Beside
them, :mod:`experiments.configs.suite` names the studies' workload suite."""
