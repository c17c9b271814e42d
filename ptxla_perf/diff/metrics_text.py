"""Parse torch_xla metrics-report text (`torch_xla.debug.metrics.metrics_report()` and friends) into data.

Accepted, in one pass, line by line:

- torch_xla 2.x `metrics_report()` (lazy-tensor section, then runtime section; counters may sit between metric
  blocks) and `short_metrics_report()`;
- the old XRT format (`Mean:` / `StdDev:` lines, `25%=` percentiles, `Xrt*` metrics);
- the 2019 label `Counter:` in place of `Accumulator:` inside a metric block;
- `XLA_METRICS_FILE` / metrics_saver files: one `[MetricsData; step=N]` block per sync, all kept in order;
- log lines, timestamps or other text before, between and after blocks (lines are matched by keyword, so a log
  prefix such as `I0101 12:00:00.1 1 x.py:1] Metric: CompileTime` is tolerated); truncated last blocks;
  `nan`/`inf` with units (`nanB`, `0000nanus`); empty percentile lists.

Values are normalised: durations to seconds, byte sizes to bytes (base 1024: KB, MB, GB, TB, PB), plain numbers
as they are. Durations are decoded the way torch_xla's C++ time formatter writes them: every leading unit is
*rounded* when printed but only its *floor* is subtracted before the next unit is printed, so `02s532ms500.218us`
means 1.532500218 s and `07m60s...` can appear. The decoder undoes that (see `parse_duration`); a duration that
could not have come from that formatter (`1m30s`, `2h`) is read literally.

Unknown lines are skipped; text with no metric and no counter at all raises `MetricsParseError`.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

__all__ = [
    "Metric", "Snapshot", "MetricsParseError", "parse", "parse_value", "parse_duration", "parse_bytes",
]


class MetricsParseError(ValueError):
    """The text holds no torch_xla metrics report (no `Metric:` or `Counter:` block)."""


@dataclass
class Metric:
    name: str
    total_samples: int | None = None
    accumulator: float | None = None  # seconds ('s'), bytes ('B') or a plain number (None)
    unit: str | None = None  # 's' | 'B' | None
    value_rate: float | None = None  # accumulator units per second
    rate: float | None = None  # samples per second
    percentiles: dict[str, float] = field(default_factory=dict)  # {'1%': v, '5%': v, ...} in `unit`
    mean: float | None = None  # old XRT reports only
    stddev: float | None = None  # old XRT reports only
    complete: bool = False  # its Percentiles line was seen (the block is not truncated)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Snapshot:
    step: int | None  # N of `[MetricsData; step=N]`, None for a plain report
    metrics: dict[str, Metric] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    truncated: bool = False  # the text ended inside this block (a metric without Percentiles, a counter without Value)

    @property
    def empty(self) -> bool:
        return not self.metrics and not self.counters

    def to_dict(self) -> dict:
        return {"step": self.step, "truncated": self.truncated,
                "metrics": {k: v.to_dict() for k, v in self.metrics.items()}, "counters": dict(self.counters)}


# ---------------------------------------------------------------------------------------------------- values

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_SPECIAL_RE = re.compile(r"^0*([-+]?)(nan|inf|infinity)(.*)$", re.IGNORECASE)
_BYTES_RE = re.compile(rf"^({_NUM})(B|KB|MB|GB|TB|PB)$")
_BYTE_SCALE = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "PB": 1024**5}
# units in the formatter's order; scale in seconds
_TIME_UNITS = [("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6)]
_TIME_SCALE = dict(_TIME_UNITS)
_TIME_PART_RE = re.compile(r"(\d+\.?\d*|\.\d+)(ms|us|d|h|m|s)")
_TIME_RE = re.compile(r"^(?:(?:\d+\.?\d*|\.\d+)(?:ms|us|d|h|m|s))+$")
_TIME_UNIT_NAMES = {u for u, _ in _TIME_UNITS}


def _special(text: str) -> tuple[float, str] | None:
    """`nan`, `0000nanus`, `nanB`, `-inf` ... -> (value, unit suffix)."""
    m = _SPECIAL_RE.match(text)
    if not m:
        return None
    sign, word, suffix = m.groups()
    value = math.nan if word.lower() == "nan" else (-math.inf if sign == "-" else math.inf)
    return value, suffix


def parse_duration(text: str) -> float | None:
    """A torch_xla duration (`02s532ms500.218us`, `07m60s000ms000.000us`, `1d02h`) in seconds, or None.

    torch_xla prints each unit from the largest one that is >= 1 down to `us`, each as round(remaining / unit)
    with the *floor* subtracted afterwards; only the final `us` part is exact. Going from the end we know each
    part's exact remainder, hence whether its printed value was rounded up (remainder >= half a unit), and so its
    floor. Strings that are not in that shape (not contiguous down to `us`, or impossible roundings) are summed
    literally.
    """
    text = text.strip()
    special = _special(text)
    if special is not None:
        value, suffix = special
        return value if suffix in _TIME_UNIT_NAMES else None
    if not _TIME_RE.match(text):
        return None
    parts = [(float(n), u) for n, u in _TIME_PART_RE.findall(text)]
    units = [u for _, u in parts]
    order = [u for u, _ in _TIME_UNITS]
    if len(set(units)) != len(units) or units != sorted(units, key=order.index):
        return None  # repeated or out-of-order units: not a duration
    literal = sum(n * _TIME_SCALE[u] for n, u in parts)
    start = order.index(units[0])
    canonical = units == order[start:] and len(parts) > 1
    if not canonical:
        return literal
    if any(n != int(n) for n, _ in parts[:-1]):
        return literal
    # undo round-on-print / floor-on-subtract, from the exact last part upwards
    remainder = parts[-1][0] * _TIME_SCALE["us"]  # seconds below the `ms` part
    total = remainder
    for i in range(len(parts) - 2, -1, -1):
        printed, unit = parts[i]
        scale = _TIME_SCALE[unit]
        frac = remainder / scale
        floor = printed
        minimum = 1 if i == 0 else 0  # the first printed part had a value >= 1 unit
        if frac >= 0.5 - 1e-9 and printed - 1 >= minimum:
            floor = printed - 1
        elif frac >= 0.5 + 1e-9:
            return literal  # not the formatter's output (e.g. `01s900ms...` cannot be printed by it)
        remainder = floor * scale + remainder
        total = remainder
    return total


def parse_bytes(text: str) -> float | None:
    """`70.00B`, `1.50KB`, `3.00PB`, `nanB` -> bytes (base 1024), or None."""
    text = text.strip()
    special = _special(text)
    if special is not None:
        value, suffix = special
        return value if suffix in _BYTE_SCALE else None
    m = _BYTES_RE.match(text)
    if not m:
        return None
    return float(m.group(1)) * _BYTE_SCALE[m.group(2)]


def parse_value(text: str) -> tuple[float, str | None] | None:
    """Any metrics value -> (normalised value, unit) with unit 's', 'B' or None; None when it is not a value."""
    text = text.strip()
    if not text:
        return None
    special = _special(text)
    if special is not None:
        value, suffix = special
        if suffix == "":
            return value, None
        if suffix in _BYTE_SCALE:
            return value, "B"
        if suffix in _TIME_UNIT_NAMES:
            return value, "s"
        return None
    if re.fullmatch(_NUM, text):
        return float(text), None
    b = parse_bytes(text)
    if b is not None:
        return b, "B"
    d = parse_duration(text)
    if d is not None:
        return d, "s"
    return None


# ---------------------------------------------------------------------------------------------------- lines

_SEPARATOR_RE = re.compile(r"\[MetricsData;\s*step\s*=\s*(-?\d+)\s*\]")
_KEYS = ("Metric", "Counter", "TotalSamples", "Accumulator", "ValueRate", "Rate", "Mean", "StdDev",
         "Percentiles", "Value")
# a keyword at the start of the line or after whitespace / a log prefix's closing bracket or colon
_LINE_RE = re.compile(r"(?:^|(?<=[\s\]>|:]))(" + "|".join(_KEYS) + r"):[ \t]*(.*?)\s*$")
_NAME_RE = re.compile(r"^(\S+)$")
_PCT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s*=\s*(\S+)\s*$")
_PER_SECOND_RE = re.compile(r"\s*/\s*(?:second|sec|s)\s*$")


class _Builder:
    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.current: Snapshot | None = None
        self.metric: Metric | None = None  # the metric block we are in
        self.counter: str | None = None  # a `Counter: NAME` waiting for its `Value:`

    def _snapshot(self) -> Snapshot:
        if self.current is None:
            self.current = Snapshot(step=None)
            self.snapshots.append(self.current)
        return self.current

    def _close_metric(self) -> None:
        m = self.metric
        if m is not None and (m.total_samples is not None or m.accumulator is not None or m.percentiles
                              or m.rate is not None or m.value_rate is not None or m.mean is not None):
            self._snapshot().metrics[m.name] = m
        self.metric = None

    def _close(self) -> None:
        self._close_metric()
        self.counter = None

    def separator(self, step: int) -> None:
        self._close()
        self.current = Snapshot(step=step)
        self.snapshots.append(self.current)

    def _value(self, text: str) -> tuple[float, str | None] | None:
        """A value for the current metric, checked against the metric's unit (drops truncated values)."""
        parsed = parse_value(_PER_SECOND_RE.sub("", text))
        if parsed is None or self.metric is None:
            return None
        value, unit = parsed
        if self.metric.unit is None and unit is not None and self.metric.accumulator is None:
            self.metric.unit = unit
        elif unit != self.metric.unit and not (math.isnan(value) and unit is None):
            return None
        return value, unit

    def line(self, key: str, rest: str, indented: bool) -> None:
        m = self.metric
        if key == "Metric":
            name = _NAME_RE.match(rest)
            self._close()
            if name:
                self.metric = Metric(name=name.group(1))
            return
        if key == "Counter":
            # the 2019 label for the accumulator inside a metric block: `  Counter: 06m09s401ms746.001us`
            if m is not None and m.accumulator is None:
                if parse_value(rest) is not None:
                    self.line("Accumulator", rest, indented)
                    return
                if indented and m.total_samples is not None:
                    return  # an accumulator we cannot read; counter headers are never indented

            name = _NAME_RE.match(rest)
            self._close()
            if name:
                self.counter = name.group(1)
            return
        if key == "Value":
            if self.counter is not None:
                value = int(rest) if re.fullmatch(r"[-+]?\d+", rest) else None
                if value is not None:
                    self._snapshot().counters[self.counter] = value
                self.counter = None
            return
        if m is None:
            return
        if key == "TotalSamples":
            if re.fullmatch(r"\d+", rest):
                m.total_samples = int(rest)
        elif key == "Accumulator":
            parsed = parse_value(rest)
            if parsed is not None:
                m.accumulator, m.unit = parsed
        elif key in ("ValueRate", "Mean", "StdDev"):
            parsed = self._value(rest)
            if parsed is not None:
                setattr(m, {"ValueRate": "value_rate", "Mean": "mean", "StdDev": "stddev"}[key], parsed[0])
        elif key == "Rate":
            text = _PER_SECOND_RE.sub("", rest)
            parsed = parse_value(text)
            if parsed is not None and parsed[1] is None:
                m.rate = parsed[0]
        elif key == "Percentiles":
            m.complete = True
            for item in rest.split(";"):
                pm = _PCT_RE.match(item)
                if not pm:
                    continue
                parsed = self._value(pm.group(2))
                if parsed is not None:
                    pct = pm.group(1)
                    pct = pct.rstrip("0").rstrip(".") if "." in pct else pct
                    m.percentiles[f"{pct}%"] = parsed[0]

    def finish(self) -> list[Snapshot]:
        if self.current is not None and (
                (self.metric is not None and not self.metric.complete) or self.counter is not None):
            self.current.truncated = True
        self._close()
        return self.snapshots


def parse(text: str) -> list[Snapshot]:
    """Metrics-report text -> snapshots: one per `[MetricsData; step=N]` block (in file order), or a single
    snapshot with `step=None` for a plain report. Raises MetricsParseError when no metric or counter is found."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise TypeError(f"parse() takes text, not {type(text).__name__}")
    builder = _Builder()
    for raw in text.splitlines():
        line = raw.replace("\x00", "")
        sep = _SEPARATOR_RE.search(line)
        if sep:
            builder.separator(int(sep.group(1)))
            continue
        km = _LINE_RE.search(line)
        if not km:
            continue
        start = km.start(1)
        builder.line(km.group(1), km.group(2), indented=start > 0 and line[start - 1] in " \t")
    snapshots = builder.finish()
    if all(s.empty for s in snapshots):
        raise MetricsParseError("no torch_xla metrics found (expected 'Metric: NAME' or 'Counter: NAME' blocks "
                                "from torch_xla.debug.metrics.metrics_report())")
    # a plain report preceded by junk only: drop empty leading non-step snapshot
    return [s for s in snapshots if not (s.step is None and s.empty)]
