"""ptxla_perf: why is my XLA training step slow, and which line of my code is to blame."""
__version__ = "0.4.0"
SCHEMA_ID = "ptxla_perf.report/1"
