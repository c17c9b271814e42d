"""The report: a run's outputs assembled once, then rendered (console, TensorBoard scalars)."""
