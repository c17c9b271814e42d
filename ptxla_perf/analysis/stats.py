"""Statistics, one definition: the percentile, the `stats` shape every section of a report uses, and the same over
weighed values (a long run's folded records stand for several iterations each, fold.py)."""
from __future__ import annotations

from typing import Iterable


def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default): the one percentile of every report."""
    v = sorted_values
    k = (len(v) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def median(values: Iterable[float]) -> float | None:
    v = sorted(values)
    return percentile(v, 0.5) if v else None


def stats(values: Iterable[float], ndigits: int | None = None) -> dict[str, float] | None:
    """p50/p90, mean, min, max, n: the one statistics shape every section of a report uses."""
    v = sorted(values)
    if not v:
        return None
    out = {"p50": percentile(v, 0.5), "p90": percentile(v, 0.9), "mean": sum(v) / len(v), "min": v[0],
           "max": v[-1]}
    if ndigits is not None:
        out = {k: round(float(x), ndigits) for k, x in out.items()}
    return {**out, "n": len(v)}


def wstats(pairs: list[tuple[float, float]]) -> dict[str, float] | None:
    """`stats` of weighed values ((value, weight) pairs): the same figures as over the values repeated by their
    weights."""
    if not pairs:
        return None
    if all(w == 1.0 for _, w in pairs):
        return stats([v for v, _ in pairs])
    pairs = sorted(pairs)
    total = sum(w for _, w in pairs)
    cum, acc = [], 0.0
    for _, w in pairs:
        acc += w
        cum.append(acc)

    def at(rank: float) -> float:
        lo, hi = 0, len(cum) - 1
        while lo < hi:  # the first value whose cumulative weight passes the rank
            mid = (lo + hi) // 2
            if cum[mid] > rank:
                hi = mid
            else:
                lo = mid + 1
        return pairs[lo][0]

    def pct(p: float) -> float:
        k = (total - 1) * p
        lo = int(k)
        a, b = at(lo), at(min(lo + 1, total - 1))
        return a + (b - a) * (k - lo)

    return {"p50": pct(0.5), "p90": pct(0.9), "mean": sum(v * w for v, w in pairs) / total, "min": pairs[0][0],
            "max": pairs[-1][0], "n": round(total)}
