"""One place for how numbers read, in every renderer (console summary, sweep table, trace tables, diff): "-" for a
missing value, ms/us/s for seconds, KiB/MiB for bytes, percentages."""
from __future__ import annotations

import math


def ms(seconds: float | None, digits: int = 1, unit: bool = True) -> str:
    """Seconds as milliseconds: '2.4 ms' (unit=False: '2.4', for a column whose header says ms)."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.{digits}f}" + (" ms" if unit else "")


def pct(share: float | None, digits: int = 0) -> str:
    """A share (0..1) as a percentage: '42%'."""
    return "-" if share is None else f"{share:.{digits}%}"


def num(v: float | None, digits: int = 2) -> str:
    """A plain number with fixed decimals."""
    return "-" if v is None else f"{v:.{digits}f}"


def value(v: float | None, unit: str | None, signed: bool = False) -> str:
    """A value in its unit ('s', 'B' or none), scaled to read well: 1.234 ms, 2.00 MiB, 17."""
    if v is None:
        return "-"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    sign = "+" if signed and v > 0 else ""
    v = float(f"{v:.12g}")  # 0.000999999999 -> 0.001, so the unit picked below is the one a reader expects
    if unit == "s":
        x = abs(v)
        neg = "-" if v < 0 else sign
        if x == 0:
            return f"{sign}0 s"
        if x >= 60:
            return f"{neg}{x:.1f} s"
        if x >= 1:
            return f"{neg}{x:.3f} s"
        if x >= 1e-3:
            return f"{neg}{x * 1e3:.3f} ms"
        return f"{neg}{x * 1e6:.3f} us"
    if unit == "B":
        x = abs(v)
        neg = "-" if v < 0 else sign
        for label in ("B", "KiB", "MiB", "GiB", "TiB"):
            if x < 1024:
                return f"{neg}{x:.0f} {label}" if label == "B" else f"{neg}{x:.2f} {label}"
            x /= 1024
        return f"{neg}{x:.2f} PiB"
    if v == int(v) and abs(v) < 1e15:
        return f"{sign}{int(v)}"
    return f"{sign}{v:.4g}"
