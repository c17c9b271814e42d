"""Number formatting shared by the renderers: milliseconds, shares, counts and bytes, "-" for a missing value,
so a table never prints "None" and every page says a number the same way."""
from __future__ import annotations

MISSING = "-"


def ms(seconds: float | None, digits: int = 1) -> str:
    """Seconds as milliseconds: 0.0012 -> "1.2 ms"; sub-0.1 ms values keep two significant digits."""
    if seconds is None:
        return MISSING
    v = seconds * 1e3
    if 0 < abs(v) < 0.1:
        return f"{v:.2g} ms"
    return f"{v:.{digits}f} ms"


def seconds(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:.{digits}f} s"


def pct(share: float | None, digits: int = 0) -> str:
    """A share (0.29) as a percentage ("29%")."""
    return MISSING if share is None else f"{share * 100:.{digits}f}%"


def num(value: float | None, digits: int = 2) -> str:
    """A count or rate: integers stay integers (3), others get `digits` decimals (1.88)."""
    if value is None:
        return MISSING
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}"


def nbytes(n: float | None) -> str:
    """Bytes in binary units: 1536 -> "1.5 KiB"."""
    if n is None:
        return MISSING
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"  # unreachable; keeps type checkers quiet
