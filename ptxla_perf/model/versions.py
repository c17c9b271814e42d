"""The framework versions measured here, said once: doctor, the report's note, pyproject.toml's lower bounds, the
README's table and docs/jax.md all state this range (tests/test_versions.py holds them to it).

A version older than the oldest measured is outside the supported range; one newer than the newest measured is not
refused (installing us never replaces a user's framework): it is "not measured here", and the features whose names it
lacks say so one by one. Versions compare by their release numbers ('2.9.0+cu128' is 2.9.0)."""
from __future__ import annotations

import re

# name -> (the oldest version run, the newest version run): `make test` and the legs of `make test-compat`
# (README: "Supported versions"). Move a bound only with a run of the suite on that version.
MEASURED = {
    "jax": ("0.7.0", "0.12.0.1"),
    "torch_xla": ("2.8.0", "2.9.0"),
    "torch": ("2.8.0", "2.9.0"),
}


def release(version: str) -> tuple[int, ...]:
    """'2.9.0+cu128' -> (2, 9, 0); '0.7.0rc1' -> (0, 7, 0); '0.12.0.1' -> (0, 12, 0, 1). Trailing zeros do not
    count ('0.7' is 0.7.0)."""
    m = re.match(r"\d+(?:\.\d+)*", version)
    parts = [int(x) for x in m.group(0).split(".")] if m else []
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def where(name: str, version: str | None) -> str | None:
    """'measured', 'older' (below the supported range), 'newer' (than measured: not measured here), or None for a
    package without a range or not installed."""
    if version is None or name not in MEASURED:
        return None
    low, high = (release(v) for v in MEASURED[name])
    v = release(version)
    return "older" if v < low else "newer" if v > high else "measured"


def range_text(name: str) -> str:
    """'0.7.0 to 0.12.0.1': how every place that states the range writes it."""
    low, high = MEASURED[name]
    return f"{low} to {high}"


def standing(name: str, version: str | None) -> str | None:
    """Where `version` stands, in the words every place uses (doctor's package lines and features, the report's
    note): 'measured (0.7.0 to 0.12.0.1)', 'newer than measured (...): not measured here', 'older than the supported
    range (...)'; None for a package without a range or not installed."""
    state = where(name, version)
    if state is None:
        return None
    span = range_text(name)
    return {"measured": f"measured ({span})", "newer": f"newer than measured ({span}): not measured here",
            "older": f"older than the supported range ({span})"}[state]


def words(name: str, version: str) -> str | None:
    """One line on a version outside the measured range (doctor and the report's note say the same), else None."""
    return f"{name} {version} is {standing(name, version)}" if where(name, version) in ("newer", "older") else None
