"""Packaging detail pyproject.toml cannot say: the top-level configs/ and recipes/ folders (the product card's
layout) ship inside the wheel as ptxla_perf.configs and ptxla_perf.recipes, so `pip install .` works anywhere."""
from setuptools import find_namespace_packages, setup

# namespace lookup: data-only folders (ptxla_perf/schema, configs/recipe) are packages too, so their files ship
packages = [p for p in find_namespace_packages(include=["ptxla_perf", "ptxla_perf.*"]) if "__pycache__" not in p]
packages += [f"ptxla_perf.{p}" for p in find_namespace_packages(include=["configs", "configs.*", "recipes", "recipes.*"])
             if "__pycache__" not in p]
setup(packages=packages, package_dir={"ptxla_perf.configs": "configs", "ptxla_perf.recipes": "recipes"})
