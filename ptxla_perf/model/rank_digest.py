"""What `merge` reads of a rank's steps, written beside them (`rank_digest`, docs/report.md#rank-digest).

A merge of a pod compares the ranks step by step over their steady iterations: step time, host time, data wait
and the time breakdown's parts (rules/ranks.py, rank_wait.py, pods/heatmap.py). Every per-process report carries
those columns in `rank_digest`, written when the report is assembled from the same `steps[]` by the same code
(`Steady.of_rows`), as float64 arrays (little-endian, zlib, base64): a merge of 1,024 long-run reports reads
~110 KB of each instead of parsing ~4 MB of `steps[]` (pods/inputs.py stops reading a report at its digest). Reading
`steps[]` or the digest gives the same columns, hence the same merged report (tests/test_merge_digest.py)."""
from __future__ import annotations

import base64
import sys
import zlib
from array import array
from typing import Any, Iterable, Mapping, Sequence

VERSION = 1
ENCODING = "float64-le-zlib-base64"
KEY = "rank_digest"


def _pack(values: Sequence[float]) -> str:
    a = array("d", values)
    if sys.byteorder != "little":
        a.byteswap()
    return base64.b64encode(zlib.compress(a.tobytes(), 6)).decode("ascii")


def _unpack(text: str, n: int) -> array:
    """The column as an array of float64 (8 bytes a value: a merge of 1,024 ranks holds millions of them; each
    reads back as the float it was)."""
    a = array("d")
    try:
        a.frombytes(zlib.decompress(base64.b64decode(text, validate=True)))
    except zlib.error as exc:
        raise ValueError(str(exc)) from None
    if sys.byteorder != "little":
        a.byteswap()
    if len(a) != n:
        raise ValueError(f"{len(a)} values, {n} expected")
    return a


class Steady:
    """A rank's steady training iterations as columns, in order: `step_s` (step time), `host_s` (wall time net of
    device-to-host waits; None when a row lacks it), `data_s` (data wait; None when a row lacks it), `parts_s`
    (each time-breakdown part per row, 0.0 where a row has no such part or no breakdown; a part that is 0.0 on
    every row is left out) and whether every row has a breakdown (`breakdown_complete`). Read from a digest, a
    column is decoded when first used (a merge uses some of them)."""

    def __init__(self, step_s: Any, host_s: Any, data_s: Any, parts_s: Mapping[str, Any], breakdown_complete: bool,
                 n: int | None = None):
        self._cols: dict[str, Any] = {"step": step_s, "host": host_s, "data": data_s,
                                      **{f"part:{k}": v for k, v in parts_s.items()}}
        self._n = len(step_s) if n is None else n
        self.breakdown_complete = breakdown_complete

    def _col(self, key: str) -> Sequence[float] | None:
        v = self._cols.get(key)
        if isinstance(v, str):  # still encoded
            v = self._cols[key] = _unpack(v, self._n)
        return v

    @property
    def step_s(self) -> Sequence[float]:
        return self._col("step")

    @property
    def host_s(self) -> Sequence[float] | None:
        return self._col("host")

    @property
    def data_s(self) -> Sequence[float] | None:
        return self._col("data")

    @property
    def parts_s(self) -> dict[str, Sequence[float]]:
        return {k[5:]: self._col(k) for k in self._cols if k.startswith("part:")}

    def __len__(self) -> int:
        return self._n

    def _plain(self) -> tuple:
        def as_list(v: Any) -> list[float] | None:
            return None if v is None else list(v)
        return (as_list(self.step_s), as_list(self.host_s), as_list(self.data_s),
                {k: list(v) for k, v in self.parts_s.items()}, self.breakdown_complete)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Steady) and self._plain() == other._plain()

    def series(self, what: str) -> Sequence[float]:
        """"step", "host" or "data" per row (a list, or an array read from a digest: not to be changed); [] when
        a row lacks it (as values.row_series)."""
        col = self._col(what)
        return col if col is not None else []

    def part(self, name: str) -> Sequence[float]:
        col = self._col(f"part:{name}")
        return col if col is not None else [0.0] * self._n

    @classmethod
    def of_rows(cls, rows: Iterable[Any]) -> "Steady":
        """The columns of steady StepRows (values.StepRow), as the merge reads them."""
        rows = list(rows)
        names: dict[str, None] = {}
        for r in rows:
            for k in (r.time_breakdown or {}):
                names.setdefault(str(k), None)
        host = [r.host_time_s for r in rows]
        data = [r.data_wait_s for r in rows]
        parts = {k: [float((r.time_breakdown or {}).get(k) or 0.0) for r in rows] for k in names}
        return cls([float(r.step_time_s) for r in rows],
                   None if any(v is None for v in host) else [float(v) for v in host],
                   None if any(v is None for v in data) else [float(v) for v in data],
                   {k: v for k, v in parts.items() if any(v)},  # a part that is 0 on every row: `part` says 0s
                   all(r.time_breakdown is not None for r in rows))

    def to_json(self, keys: Sequence[str]) -> dict[str, Any]:
        """The report's `rank_digest`; `keys`: the report's top-level keys in the order they are written."""
        return {"version": VERSION, "encoding": ENCODING, "keys": list(keys), "steady_steps": self._n,
                "step_time_s": _pack(self.step_s),
                "host_time_s": _pack(self.host_s) if self.host_s is not None else None,
                "data_wait_s": _pack(self.data_s) if self.data_s is not None else None,
                "breakdown_complete": self.breakdown_complete,
                "time_breakdown": {k: _pack(v) for k, v in self.parts_s.items()}}

    @classmethod
    def from_json(cls, d: Any) -> "Steady | None":
        """A report's `rank_digest` as columns (decoded when used); None when it is of another version or not of
        this shape. Its step times are decoded here: a column that does not decode raises ValueError when used."""
        if not isinstance(d, Mapping) or d.get("version") != VERSION or d.get("encoding") != ENCODING:
            return None
        try:
            n = int(d["steady_steps"])
            cols = [d["step_time_s"], d.get("host_time_s"), d.get("data_wait_s")]
            parts = dict(d.get("time_breakdown") or {})
            if not all(isinstance(v, str) for v in [cols[0], *parts.values()]) or \
                    not all(v is None or isinstance(v, str) for v in cols[1:]):
                return None
            out = cls(*cols, {str(k): v for k, v in parts.items()}, bool(d.get("breakdown_complete")), n=n)
            out.step_s  # noqa: B018 - decoded now: a digest that does not decode is no digest
            return out
        except (KeyError, TypeError, ValueError):
            return None


def usable(report: Mapping[str, Any]) -> bool:
    """The report's digest can stand for its steps (a version this reader knows)."""
    d = report.get(KEY)
    return isinstance(d, Mapping) and d.get("version") == VERSION and d.get("encoding") == ENCODING
