"""One place for how numbers read, in every renderer (console summary, sweep table, trace tables, diff, HTML):
"-" for a missing value, ms/us/s for seconds, KiB/MiB for bytes, percentages, so a table never prints "None" and
every page says a number the same way."""
from __future__ import annotations

import math

MISSING = "-"


def ms(seconds: float | None, digits: int = 1, unit: bool = True) -> str:
    """Seconds as milliseconds: 0.0012 -> "1.2 ms"; sub-millisecond values keep two significant digits ("0.14 ms",
    "0.041 ms": one precision on every backend, never "0.1 ms" beside "0.041 ms") (unit=False: "1.2", for a column
    whose header says ms)."""
    if seconds is None:
        return MISSING
    v = seconds * 1e3
    places = digits if v == 0 or abs(v) >= 1 else max(digits, 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{places}f}"
    return text + (" ms" if unit else "")


def duration(seconds: float | None) -> str:
    """A short time at three significant digits, in the unit that reads best: "14.7 ms", "25.6 us", "1.2 s"."""
    if seconds is None:
        return MISSING
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} us"


def seconds(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:.{digits}f} s"


def pct(share: float | None, digits: int = 0) -> str:
    """A share (0.29) as a percentage ("29%")."""
    return MISSING if share is None else f"{share * 100:.{digits}f}%"


def times(per: float) -> str:
    """How often, as a person says it: "once", "twice", "3 times", "1.50 times" (a rate that is not whole)."""
    k = round(per)
    if k >= 1 and abs(per - k) < 0.05 * k:
        return {1: "once", 2: "twice"}.get(k, f"{k} times")
    return f"{per:.2f} times"


def ranges(indices, most: int = 6) -> str:
    """Step numbers as runs: [3, 4, ..., 40] -> "3-40", [1, 3, 4, 5, 9] -> "1, 3-5, 9"; past `most` runs, the
    first ones and "...". """
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    return ", ".join(text[:most]) + (", ..." if len(text) > most else "")


def steps(indices, most: int = 6) -> str:
    """Step numbers as every view writes them: the loop's own, 0-based (the report's `steps[].index`), so one
    read is "step 5" on the console, the HTML card and a merged summary alike, never "step 6" in one of them."""
    idx = sorted(set(indices))
    return f"step {idx[0]}" if len(idx) == 1 else f"steps {ranges(idx, most)}"


def period(indices, total: int | None = None) -> str:
    """How often steps come, from the steps themselves: [0, 200, 400] -> "every 200" (evenly spaced: exact,
    never "about every 201" from a count divided into a total); uneven gaps -> "about every N" (the median gap;
    one step alone: the total over the count)."""
    idx = sorted(set(indices))
    gaps = [b - a for a, b in zip(idx, idx[1:])]
    if gaps and len(set(gaps)) == 1:
        return f"every {gaps[0]}"
    if gaps:
        return f"about every {sorted(gaps)[len(gaps) // 2]}"
    return f"about every {round(total / len(idx))}" if total and idx else "once"


def ratio(x: float | None) -> str:
    """A ratio that stays readable: "1.18x", "37x", "> 1000x" (never "2402845.40x"), "< 0.01x" (never "0.00x":
    a wall step the host dispatched ahead of the device in)."""
    if x is None:
        return MISSING
    if x > 1000:
        return "> 1000x"
    if 0 < x < 0.01:
        return "< 0.01x"
    return f"{x:.2f}x" if x < 10 else f"{x:.0f}x"


def num(value: float | None, digits: int = 2, keep_int: bool = True) -> str:
    """A count or rate: integers stay integers (3), others get `digits` decimals (1.88); keep_int=False always
    shows the decimals (a per-step rate in a fixed-width line)."""
    if value is None:
        return MISSING
    if keep_int and (isinstance(value, int) or float(value).is_integer()):
        return str(int(value))
    return f"{value:.{digits}f}"


def flops_rate(tflops: float | None) -> str:
    """A compute rate given in TFLOP/s, in the SI prefix that reads: 0.0111 -> "11.1 GFLOP/s" (never "0.000 TFLOP/s"
    beside an MFU of 2 %)."""
    if tflops is None:
        return MISSING
    v = tflops * 1e12
    for prefix in ("", "k", "M", "G", "T"):
        if abs(v) < 1000 or prefix == "T":
            return f"{v:.3g} {prefix}FLOP/s" if abs(v) < 1000 else f"{v:.0f} {prefix}FLOP/s"
        v /= 1000
    return MISSING


def nbytes(n: float | None) -> str:
    """Bytes in binary units: 1536 -> "1.5 KiB"."""
    return value(n, "B") if n is not None else MISSING


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


def slowest_rank(aggregate: dict) -> str | None:
    """A merged report's slowest rank (merge.aggregate) as the console and the page say it: the straggler the others
    wait for, or (no straggler, or a report from before `slowest_rank_basis`) the rank with the largest p50."""
    rank = aggregate.get("slowest_rank")
    if rank is None:
        return None
    spread = ms(aggregate.get("step_time_spread_s"), 2)
    if aggregate.get("slowest_rank_basis") == "straggler":
        return f"slowest rank {rank}, the straggler the others wait for (p50 spread {spread})"
    return f"slowest rank {rank} (largest p50; p50 spread {spread})"
