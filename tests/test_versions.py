"""One stated range everywhere (issue 38): the versions measured (ptxla_perf/model/versions.py) are the ones the legs pin
(.ci/*.txt, constraints.txt), pyproject.toml's lower bounds, and the range README, docs/jax.md, doctor and the report
say. Reads files only: no framework is imported."""
from __future__ import annotations

import re

from conftest import ROOT
from ptxla_perf.model import versions


def _pins(path) -> dict[str, str]:
    pins = {}
    for line in (ROOT / path).read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            pins[m.group(1).lower().replace("-", "_")] = m.group(2)
    return pins


def _extra(name: str) -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(rf"^{re.escape(name)} = \[(.*?)\]$", text, re.M)
    assert m, name
    return re.findall(r'"([^"]+)"', m.group(1))


def test_the_legs_pin_the_bounds_measured():
    jax_low, jax_high = versions.MEASURED["jax"]
    xla_low, xla_high = versions.MEASURED["torch_xla"]
    assert _pins(".ci/compat-jax.txt")["jax"] == jax_low  # oldest jax, default Python
    assert _pins(".ci/compat-jax-new.txt")["jax"] == jax_high  # newest jax, Python 3.13
    assert _pins(".ci/compat-torch_xla.txt")["torch_xla"] == xla_low  # oldest torch_xla
    assert _pins(".ci/compat-torch_xla-py310.txt")["torch_xla"] == xla_high  # newest torch_xla, Python 3.10
    assert _pins("constraints.txt")["torch_xla"] == xla_high and _pins("constraints.txt")["torch"] == \
        versions.MEASURED["torch"][1]
    assert versions.where("jax", _pins("constraints.txt")["jax"]) == "measured"  # the whole suite's jax
    # the Python 3.10 leg links the main venv's nvidia/ CUDA wheels: they are the ones its torch pins only while both
    # venvs have the same torch
    assert _pins(".ci/compat-torch_xla-py310.txt")["torch"] == _pins("constraints.txt")["torch"]
    assert not [p for p in _pins(".ci/compat-torch_xla-py310.txt") if p.startswith(("nvidia", "triton"))]


def test_pyproject_lower_bounds_are_the_oldest_measured_and_jax_has_no_cap():
    bounds = {}
    for req in _extra("torch_xla") + _extra("jax"):
        name, low = re.match(r"([a-z_]+)>=([\d.]+)", req).groups()
        bounds[name] = low
        if name == "jax":
            assert "<" not in req, req  # a cap would replace a newer jax at install time
    for name, (low, _) in versions.MEASURED.items():
        assert versions.release(bounds[name]) == versions.release(low), (name, bounds[name], low)


def test_readme_and_docs_state_the_measured_range():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("### Supported versions"):]
    table = table[:table.index("\n## ")]
    for name in versions.MEASURED:
        low, high = versions.MEASURED[name]
        assert low in table and high in table, name
    assert f"({versions.range_text('jax')})" in (ROOT / "docs" / "jax.md").read_text()
    assert "not run here" not in table  # every row of the table was run
