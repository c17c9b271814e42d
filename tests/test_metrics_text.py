"""Parser for torch_xla metrics-report text: real torch_xla 2.9 fixtures (checked against in-process ground truth),
hand-written legacy samples, and property-based fuzz / round-trip tests."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ptxla_perf.diff.metrics_text import MetricsParseError, Snapshot, parse, parse_bytes, parse_duration, parse_value

FIX = Path(__file__).parent / "fixtures" / "metrics"


def _read(name: str) -> str:
    return (FIX / name).read_text()


# ------------------------------------------------------------------------------------- real torch_xla fixtures

def _check_truth(snap: Snapshot, truth: dict, counters: bool = True) -> None:
    for name, t in truth["metrics"].items():
        m = snap.metrics[name]
        assert m.total_samples == t["total_samples"], name
        raw = t["accumulator_raw"]
        if m.unit == "s":  # the report prints us with 3 decimals: exact to the ns
            assert m.accumulator * 1e9 == pytest.approx(raw, abs=1.0), name
        elif m.unit == "B":  # 2 decimals after scaling by 1024^k
            assert m.accumulator == pytest.approx(raw, rel=0.006, abs=0.006), name
        else:
            assert m.accumulator == pytest.approx(raw, abs=0.006), name
    if counters:
        assert snap.counters == truth["counters"]


@pytest.mark.parametrize("name", ["item_per_step", "item_fixed", "fallback_nonzero"])
def test_real_metrics_report_matches_in_process_truth(name):
    snaps = parse(_read(f"{name}.txt"))
    assert len(snaps) == 1 and snaps[0].step is None and not snaps[0].truncated
    _check_truth(snaps[0], json.loads(_read(f"{name}.truth.json")))


def test_real_report_values_and_quirk():
    snap = parse(_read("item_per_step.txt"))[0]
    assert snap.counters["MarkStep"] == 5
    assert snap.counters["aten::_local_scalar_dense"] == 5
    d2h = snap.metrics["TransferFromDeviceTime"]
    assert d2h.total_samples == 5 and d2h.unit == "s"
    assert set(d2h.percentiles) == {"1%", "5%", "10%", "20%", "50%", "80%", "90%", "95%", "99%"}
    assert d2h.rate is not None and d2h.value_rate is not None
    inbound = snap.metrics["InboundData"]
    assert inbound.unit == "B" and inbound.accumulator == 20.0
    assert snap.metrics["OutboundData"].accumulator == pytest.approx(4.91 * 1024)
    assert snap.metrics["TensorsGraphSize"].unit is None
    assert snap.metrics["CompileTime"].accumulator == pytest.approx(0.376353510, abs=1e-12)
    # the time formatter's round-on-print: "124ms731.803us" is 123.731803 ms (the ms part was rounded up)
    text = _read("fallback_nonzero.txt")
    assert "Metric: DeviceLockWait\n  TotalSamples: 20\n  Accumulator: 124ms731.803us" in text
    assert parse(text)[0].metrics["DeviceLockWait"].accumulator == pytest.approx(0.123731803, abs=1e-12)
    truth = json.loads(_read("fallback_nonzero.truth.json"))["metrics"]["DeviceLockWait"]["accumulator_raw"]
    assert truth == 123731803.0


def test_real_short_metrics_report():
    snaps = parse(_read("short_report.txt"))
    assert len(snaps) == 1
    snap = snaps[0]
    truth = json.loads(_read("short_report.truth.json"))
    assert set(snap.metrics) == {"CompileTime", "ExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime"}
    assert set(snap.counters) == {"CachedCompile", "MarkStep", "aten::_local_scalar_dense"}
    _check_truth(snap, {"metrics": {k: truth["metrics"][k] for k in snap.metrics},
                        "counters": {k: truth["counters"][k] for k in snap.counters}})


def test_real_metrics_file_keeps_every_step_in_order():
    snaps = parse(_read("metrics_file_steps.txt"))
    assert [s.step for s in snaps] == [0, 1, 2, 3]
    assert [s.counters["MarkStep"] for s in snaps] == [1, 2, 3, 4]
    assert [s.metrics["TransferFromDeviceTime"].total_samples for s in snaps] == [1, 2, 3, 4]
    truth = json.loads(_read("metrics_file_steps.truth.json"))
    _check_truth(snaps[-1], truth, counters=False)  # truth was taken after the last sync; metrics did not move


# ------------------------------------------------------------------------------------------ hand-written

def test_legacy_xrt_format():
    snap = parse(_read("legacy_xrt.txt"))[0]
    xa = snap.metrics["XrtAllocateFromTensor"]
    assert xa.total_samples == 1378
    assert xa.accumulator == pytest.approx(2.034440040)
    assert xa.mean == pytest.approx(1.474921e-3)
    assert xa.stddev == pytest.approx(10.046066e-3)
    assert xa.rate == pytest.approx(0.0318891)
    assert list(xa.percentiles) == ["25%", "50%", "80%", "90%", "95%", "99%"]
    assert xa.percentiles["25%"] == pytest.approx(16.24e-6)
    assert xa.percentiles["99%"] == pytest.approx(28.548760e-3)  # `029ms548.760us`: ms rounded up
    assert snap.metrics["XrtReadLiteral"].stddev == pytest.approx(100e-6)
    assert snap.metrics["CompileTime"].accumulator == pytest.approx(61.2)
    assert snap.metrics["TransferFromServerTime"].total_samples == 20
    assert snap.metrics["TransferFromServerTime"].rate is None  # no ValueRate/Rate lines: fine
    assert snap.counters == {"CachedCompile": 37, "CreateCompileHandles": 3, "MarkStep": 20,
                             "aten::_local_scalar_dense": 20, "XrtCompileCacheHits": 0}


def test_legacy_counter_label_for_accumulator():
    snap = parse(_read("legacy_counter_label_2019.txt"))[0]
    ct = snap.metrics["CompileTime"]
    assert ct.total_samples == 202
    assert ct.accumulator == pytest.approx(6 * 60 + 9.400746001)
    assert ct.unit == "s"
    assert ct.percentiles["1%"] == pytest.approx(1.032778e-3)  # unpadded `001ms32.778us`
    assert ct.percentiles["99%"] == pytest.approx(21.101853173)
    assert snap.metrics["InboundData"].accumulator == 1536.0
    assert snap.metrics["TensorsGraphSize"].accumulator == 2120.0
    # `Counter:` inside a metric block is the accumulator, not a counter
    assert set(snap.counters) == {"CachedXlaCompile", "MarkStep", "aten::_local_scalar_dense", "aten::nonzero"}


def test_edge_cases_junk_nan_units_durations_truncation():
    snaps = parse(_read("edge_cases.txt"))
    assert len(snaps) == 1
    snap = snaps[0]
    long = snap.metrics["LongCompile"]
    assert long.accumulator == pytest.approx(86400 + 2 * 3600 + 3 * 60 + 4.005006)
    assert long.value_rate == pytest.approx(6 * 60 + 59.5)  # `07m60s500ms...`: 6 min 59.5 s
    assert long.rate == pytest.approx(1e-5)
    assert long.percentiles["50%"] == pytest.approx(7200)
    assert long.percentiles["99%"] == pytest.approx(86400 + 184.005006)
    nb = snap.metrics["NanBytes"]
    assert nb.unit == "B" and math.isnan(nb.accumulator) and all(math.isnan(v) for v in nb.percentiles.values())
    assert len(nb.percentiles) == 9
    nt = snap.metrics["NanTime"]
    assert nt.unit == "s" and math.isnan(nt.accumulator) and math.isnan(nt.percentiles["1%"])
    empty = snap.metrics["EmptyPercentiles"]
    assert empty.total_samples == 0 and empty.percentiles == {} and empty.accumulator == 0.0
    sizes = snap.metrics["Sizes"]
    assert sizes.accumulator == 3 * 1024**5 and sizes.value_rate == 1.5 * 1024**4
    assert [sizes.percentiles[k] for k in ("1%", "5%", "10%", "20%", "50%", "80%")] == [
        512, 2048, 3.5 * 1024**2, 4 * 1024**3, 5 * 1024**4, 1024**5]
    assert snap.counters == {"PrefixedCounter": 7, "MarkStep": 4, "aten::nonzero": 4}
    trunc = snap.metrics["TruncatedAtTheEnd"]
    assert trunc.total_samples == 9 and trunc.accumulator is None
    assert snap.truncated


def test_metrics_file_with_junk_and_truncated_last_block():
    snaps = parse(_read("metrics_file_junk_truncated.txt"))
    assert [s.step for s in snaps] == [0, 1, 2]
    assert [s.truncated for s in snaps] == [False, False, True]
    assert snaps[1].metrics["TransferFromDeviceTime"].accumulator == pytest.approx(50e-6)
    assert snaps[1].counters == {"CachedCompile": 1, "MarkStep": 2, "UncachedCompile": 1}
    assert snaps[2].metrics["CompileTime"].total_samples == 2


@pytest.mark.parametrize("text", ["", "\n\n", "hello world\nno metrics here\n", "Metric:\n", "Counter: X\n",
                                  "[MetricsData; step=0]\n\n[MetricsData; step=1]\n", "Metric: X\nMetric: Y\n"])
def test_no_metrics_raises_clear_error(text):
    with pytest.raises(MetricsParseError) as info:
        parse(text)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value) and "no torch_xla metrics" in str(info.value)


@pytest.mark.parametrize("text,expected", [
    ("000.403us", 403e-9), ("122ms732.050us", 0.121732050), ("02s532ms500.218us", 1.531500218),
    ("07m60s700ms000.000us", 6 * 60 + 59.7), ("01h00m00s000ms000.000us", 3600.0),
    ("1m30s", 90.0), ("2h", 7200.0), ("1d", 86400.0), ("0000nanus", None), ("12", None), ("5B", None),
    ("01s900ms000.000us", 1.9),  # impossible for the formatter: read literally
])
def test_parse_duration(text, expected):
    got = parse_duration(text)
    if text == "0000nanus":
        assert math.isnan(got)
    elif expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("text,expected", [
    ("70.00B", 70.0), ("1.50KB", 1536.0), ("2.00MB", 2 * 1024**2), ("1.00GB", 1024**3), ("1.00TB", 1024**4),
    ("3.00PB", 3 * 1024**5), ("12", None), ("1ms", None)])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


def test_parse_value_units():
    assert parse_value("3.00") == (3.0, None)
    assert parse_value("1.23457e+06") == (1234570.0, None)
    assert parse_value("-2.50") == (-2.5, None)
    assert parse_value("4.00B") == (4.0, "B")
    assert parse_value("010.208us") == (pytest.approx(10.208e-6), "s")
    assert parse_value("garbage") is None
    v, u = parse_value("infB")
    assert math.isinf(v) and u == "B"


def test_lines_with_log_prefixes_and_crlf():
    text = ("I0101 00:00:00.0 1 x.cc:1] Metric: ExecuteTime\r\n"
            "I0101 00:00:00.0 1 x.cc:1]   TotalSamples: 3\r\n"
            "I0101 00:00:00.0 1 x.cc:1]   Accumulator: 003ms000.000us\r\n"
            "I0101 00:00:00.0 1 x.cc:1]   Percentiles: 1%=001ms000.000us; 50%=001ms000.000us\r\n")
    snap = parse(text)[0]
    m = snap.metrics["ExecuteTime"]
    assert (m.total_samples, m.accumulator, m.percentiles) == (3, pytest.approx(3e-3),
                                                              {"1%": pytest.approx(1e-3), "50%": pytest.approx(1e-3)})


def test_truncated_percentile_values_are_dropped_not_misread():
    text = ("Metric: ExecuteTime\n  TotalSamples: 3\n  Accumulator: 003ms000.000us\n"
            "  Percentiles: 1%=001ms000.000us; 5%=001ms000.000us; 10%=00")
    m = parse(text)[0].metrics["ExecuteTime"]
    assert set(m.percentiles) == {"1%", "5%"}


# ------------------------------------------------------------------------------------------ property-based

# the C++ formatters, re-expressed for generating reports (torch_xla/csrc/runtime/metrics.cc behaviour as
# documented in ptxla_perf/diff/metrics_text.py: round on print, floor on subtract; bytes base 1024, 2 decimals)
_PARTS = [("d", 86400e9, 2, 0), ("h", 3600e9, 2, 0), ("m", 60e9, 2, 0), ("s", 1e9, 2, 0), ("ms", 1e6, 3, 0),
          ("us", 1e3, 7, 3)]


def fmt_time_ns(value: float) -> str:
    out, count = [], 0
    for i, (suffix, scale, width, precision) in enumerate(_PARTS):
        c = value / scale
        if c >= 1.0 or count > 0 or i == len(_PARTS) - 1:
            out.append(f"{c:0{width}.{precision}f}{suffix}")
            value -= math.floor(c) * scale
            count += 1
    return "".join(out)


def near_half(value: float) -> bool:
    """At an exact half the printed digit cannot tell rounded-up from not: skip those (documented ambiguity)."""
    started = False
    for i, (_, scale, _, _) in enumerate(_PARTS[:-1]):
        c = value / scale
        if c >= 1.0 or started:
            started = True
            frac = c - math.floor(c)
            if abs(frac - 0.5) < 1e-6:
                return True
            value -= math.floor(c) * scale
    return False


def fmt_bytes(value: float) -> str:
    suffixes = ["B", "KB", "MB", "GB", "TB", "PB"]
    i = 0
    while i + 1 < len(suffixes) and value >= 1024.0:
        value /= 1024.0
        i += 1
    return f"{value:.2f}{suffixes[i]}"


def fmt_plain(value: float) -> str:
    return f"{value:.2f}"


_NAME = st.from_regex(r"[A-Z][A-Za-z0-9_]{0,20}", fullmatch=True)
_COUNTER_NAME = st.one_of(_NAME, st.from_regex(r"(aten|xla)::[a-z_]{1,15}", fullmatch=True))


@st.composite
def metric_spec(draw):
    kind = draw(st.sampled_from(["time", "bytes", "plain"]))
    if kind == "time":
        value = st.integers(min_value=0, max_value=5 * 86400 * 10**9).map(float)
    elif kind == "bytes":
        value = st.floats(min_value=0, max_value=2.0 * 1024**5, allow_nan=False)
    else:
        value = st.floats(min_value=0, max_value=1e9, allow_nan=False)
    acc = draw(value)
    if kind == "time":
        assume(not near_half(acc))
    pcts = draw(st.lists(value, min_size=0, max_size=9))
    if kind == "time":
        assume(not any(near_half(p) for p in pcts))
    return {"kind": kind, "samples": draw(st.integers(min_value=0, max_value=10**9)), "acc": acc, "pcts": pcts,
            "rate": draw(st.one_of(st.none(), st.floats(min_value=1e-6, max_value=1e6)))}


def _fmt(kind: str, v: float) -> str:
    return {"time": fmt_time_ns, "bytes": fmt_bytes, "plain": fmt_plain}[kind](v)


def _expected(kind: str, v: float) -> float:
    return v / 1e9 if kind == "time" else v


def _close(kind: str, got: float, v: float) -> bool:
    if kind == "time":
        return abs(got * 1e9 - v) <= 1.0 + v * 1e-12
    if kind == "bytes":
        return abs(got - v) <= 0.0051 * max(1.0, 1024.0 ** max(0, int(math.log(max(v, 1), 1024)) + 1)) + v * 1e-9
    return abs(got - v) <= 0.0051 + v * 1e-12


_JUNK = st.sampled_from(["", "epoch 1 loss=0.5", "2025-01-01 00:00:00 INFO step done",
                         "Traceback (most recent call last):", "  File \"x.py\", line 1", "ValueError: bad Rate: x"])


@st.composite
def report(draw):
    metrics = draw(st.dictionaries(_NAME, metric_spec(), max_size=5))
    counters = draw(st.dictionaries(_COUNTER_NAME, st.integers(min_value=0, max_value=2**62), max_size=5))
    assume(metrics or counters)
    assume(not (set(metrics) & set(counters)))
    blocks = []
    for name, m in metrics.items():
        lines = [f"Metric: {name}", f"  TotalSamples: {m['samples']}", f"  Accumulator: {_fmt(m['kind'], m['acc'])}"]
        if m["rate"] is not None:
            lines.append(f"  ValueRate: {_fmt(m['kind'], m['acc'])} / second")
            lines.append(f"  Rate: {m['rate']:g} / second")
        pct_names = [1, 5, 10, 20, 50, 80, 90, 95, 99][: len(m["pcts"])]
        lines.append("  Percentiles: " + "; ".join(f"{p}%={_fmt(m['kind'], v)}"
                                                    for p, v in zip(pct_names, m["pcts"])))
        blocks.append(lines)
    for name, v in counters.items():
        blocks.append([f"Counter: {name}", f"  Value: {v}"])
    order = draw(st.permutations(range(len(blocks))))
    text_lines = []
    for i in order:
        text_lines.append(draw(_JUNK))
        text_lines.extend(blocks[i])
    text_lines.append(draw(_JUNK))
    return metrics, counters, "\n".join(text_lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])
@given(report(), st.integers(min_value=0, max_value=3))
def test_round_trip_generated_reports(generated, copies):
    metrics, counters, text = generated
    if copies:  # as an XLA_METRICS_FILE: the same report under several step separators
        text = "".join(f"[MetricsData; step={i}]\n{text}\n" for i in range(copies))
    snaps = parse(text)
    assert len(snaps) == max(1, copies)
    for snap in snaps:
        assert snap.step == (snaps.index(snap) if copies else None)
        assert snap.counters == counters
        assert set(snap.metrics) == set(metrics)
        for name, spec in metrics.items():
            m = snap.metrics[name]
            kind = spec["kind"]
            assert m.total_samples == spec["samples"]
            assert m.unit == {"time": "s", "bytes": "B", "plain": None}[kind]
            assert _close(kind, m.accumulator, spec["acc"]), (name, m.accumulator, spec["acc"])
            if spec["rate"] is not None:
                assert _close(kind, m.value_rate, spec["acc"])
                assert m.rate == pytest.approx(spec["rate"], rel=1e-5)
            assert len(m.percentiles) == len(spec["pcts"])
            for got, want in zip(m.percentiles.values(), spec["pcts"]):
                assert _close(kind, got, want)


_KEYWORDS = ["Metric: ", "Counter: ", "  TotalSamples: ", "  Accumulator: ", "  Counter: ", "  ValueRate: ",
             "  Rate: ", "  Mean: ", "  StdDev: ", "  Percentiles: ", "  Value: ", "[MetricsData; step=", "%=", "; "]
_TOKENS = st.one_of(st.sampled_from(_KEYWORDS), st.sampled_from(
    ["01s002ms003.004us", "07m60s", "nanB", "0000nanus", "1.50KB", "3.00PB", "12", "-1", "1e+99", "inf",
     "CompileTime", "aten::nonzero", " / second", "99%", "]", "\n", "\r\n", "\x00", "ms", "us"]),
    st.text(max_size=12))


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=60).map("".join))
def test_fuzz_report_shaped_text_only_raises_parse_error(text):
    try:
        snaps = parse(text)
    except MetricsParseError:
        return
    assert snaps and all(isinstance(s, Snapshot) for s in snaps)
    for s in snaps:
        for m in s.metrics.values():
            assert m.unit in ("s", "B", None)
        assert all(isinstance(v, int) for v in s.counters.values())


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_fuzz_arbitrary_text(text):
    try:
        parse(text)
    except MetricsParseError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=30 * 86400 * 10**9))
def test_duration_decoder_inverts_formatter(ns):
    assume(not near_half(float(ns)))
    assert parse_duration(fmt_time_ns(float(ns))) * 1e9 == pytest.approx(ns, abs=1.0)
