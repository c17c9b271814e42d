"""The package's version and the report schema's id, said once. A module of its own, at the bottom of the import
graph, so that the modules which stamp or check a report never import the package face (`__init__`), whose
notebook API would import them back."""
__version__ = "0.6.0"  # pyproject.toml reads it from here (tool.setuptools.dynamic)
SCHEMA_ID = "ptxla_perf.report/1"
