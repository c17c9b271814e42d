"""`ptxla_perf diff`: comparisons of metrics text and report JSON, the --fail-on rules engine, renderers, CLI.

Fixtures: tests/fixtures/metrics/ (item_per_step.txt / item_fixed.txt / fallback_nonzero.txt made by the real
torch_xla 2.9 on the CPU with make_fixtures.py; report_*.json hand-written, schema-valid)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxla_perf import diff as d
from ptxla_perf.cli import main

FIX = Path(__file__).parent / "fixtures" / "metrics"
ROOT = Path(__file__).resolve().parents[1]
ITEM, FIXED, NONZERO = FIX / "item_per_step.txt", FIX / "item_fixed.txt", FIX / "fallback_nonzero.txt"
R_ITEM, R_FIXED, R_FALLBACK = FIX / "report_item.json", FIX / "report_fixed.json", FIX / "report_fallback.json"


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "ptxla_perf", "diff", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60)


# ------------------------------------------------------------------------------------------ the case

def test_item_vs_fixed_twin_device_to_host_per_step_drops_to_zero():
    cmp = d.compare(d.load(ITEM), d.load(FIXED))
    row = cmp.row("device_to_host_transfers_per_step")
    assert (row.a, row.b, row.delta, row.status) == (1.0, 0.0, -1.0, "changed")
    assert cmp.row("device_to_host_transfers").a == 5 and cmp.row("device_to_host_transfers").b == 0
    assert cmp.row("steps").a == cmp.row("steps").b == 5
    assert cmp.row("aten::_local_scalar_dense").status == "vanished"
    names = [r.name for r in cmp.rows]
    # headline rows first, in the documented order
    assert names[:3] == ["compiles", "compiles_per_step", "cached_compiles"]
    assert names.index("executions") < names.index("device_to_host_transfers") < names.index("host_to_device") \
        < names.index("steps") < names.index("fallback_ops") < names.index("aten::_local_scalar_dense") \
        < names.index("CompileTime")


def test_cli_fail_on_device_to_host_per_step_real_subprocess():
    bad = _cli(FIXED, ITEM, "--fail-on", "device_to_host_per_step>0")
    assert bad.returncode == 1, bad.stderr
    assert "FAIL device_to_host_per_step>0: device_to_host_per_step: B = 1" in bad.stdout
    good = _cli(ITEM, FIXED, "--fail-on", "device_to_host_per_step>0")
    assert good.returncode == 0, good.stderr
    assert "All 1 rule(s) passed." in good.stdout
    assert "Traceback" not in bad.stderr + good.stderr


def test_cli_report_json_inputs_real_subprocess():
    bad = _cli(R_FIXED, R_ITEM, "--fail-on", "device_to_host_per_step>0", "--format", "json")
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)
    assert [v["rule"] for v in doc["violations"]] == ["device_to_host_per_step>0"]
    assert bad.stderr.strip().splitlines() == ["FAIL device_to_host_per_step>0: device_to_host_per_step: B = 1"]
    assert _cli(R_ITEM, R_FIXED, "--fail-on", "device_to_host_per_step>0").returncode == 0


def test_cli_bad_input_exits_2_with_one_line():
    for args in [(FIX / "missing.txt", FIXED), (FIX / "make_fixtures.py", FIXED), (FIXED, FIXED, "--fail-on", "x>>1"),
                 (FIXED, FIXED, "--fail-on", "step_time_p50>+5%"), (FIXED, FIXED, "--format", "xml")]:
        r = _cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("ptxla_perf: error: "), r.stderr
        assert "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------------ compare

def test_new_fallback_is_the_headline():
    cmp = d.compare(d.load(FIXED), d.load(NONZERO))
    assert cmp.new_fallback_ops == ["aten::nonzero"]
    assert cmp.row("aten::nonzero").status == "new" and cmp.row("aten::nonzero").b == 5
    assert cmp.row("fallback_ops").b == 5 and cmp.row("fallback_ops").a == 0
    assert "xla::nonzero" in cmp.new_counters
    table = d.render_table(cmp)
    first = table.splitlines()[:4]
    assert any(line.startswith("!!! NEW FALLBACK OPS in B") and "aten::nonzero" in line for line in first)
    md = d.render_markdown(cmp)
    assert "!!! NEW FALLBACK OPS in B" in md and "| `aten::nonzero` |" in md and "**NEW**" in md
    doc = json.loads(d.render_json(cmp))
    assert doc["new_fallback_ops"] == ["aten::nonzero"]


def test_local_scalar_dense_is_a_read_not_a_fallback():
    cmp = d.compare(d.load(FIXED), d.load(ITEM))
    assert cmp.row("fallback_ops").b == 0
    assert cmp.new_fallback_ops == ["aten::_local_scalar_dense"]
    assert "device-to-host reads" in d.render_table(cmp)


def test_per_step_normalisation():
    cmp = d.compare(d.load(FIXED), d.load(NONZERO), per_step=True)
    assert cmp.per_step
    assert cmp.row("executions").a == 1.0 and cmp.row("executions").b == 2.0
    assert cmp.row("steps").a == 5  # not divided
    assert cmp.row("aten::nonzero").b == 1.0
    assert cmp.row("UncachedCompile").a == pytest.approx(0.2)


def test_per_step_needs_both_step_counts():
    text = "Counter: UncachedCompile\n  Value: 2\n"
    a = d.from_text(text, "nosteps")
    cmp = d.compare(a, d.load(FIXED), per_step=True)
    assert not cmp.per_step and any("--per-step ignored" in n for n in cmp.notes)
    assert cmp.row("device_to_host_transfers_per_step").status == "n/a"


def test_report_json_rows():
    src = d.load(R_ITEM)
    assert src.kind == "report_json" and src.steps == 5
    assert src.values["device_to_host"] == (5.0, None)
    assert src.values["device_to_host_per_step"] == (1.0, None)
    # a report before 0.5.0 has no gross count in its summary: its steps' counts give it
    assert src.values["device_to_host_transfers"] == (5.0, None)
    assert src.values["device_to_host_transfers_per_step"] == (1.0, None)
    assert src.values["executions"] == (10.0, None)
    assert src.values["step_time_p50"] == (0.012, "s")
    cmp = d.compare(src, d.load(R_FIXED))
    assert cmp.row("step_time_p50").delta == pytest.approx(-0.0019)
    assert cmp.row("execute_time_s") is None  # neither report has it


def test_cross_kind_compares_shared_rows_only():
    cmp = d.compare(d.load(ITEM), d.load(R_FIXED))
    assert any("different kinds" in n for n in cmp.notes)
    assert cmp.row("UncachedCompile") is None and cmp.row("aten::_local_scalar_dense") is None
    assert cmp.row("device_to_host_transfers_per_step").a == 1 and cmp.row("device_to_host_transfers_per_step").b == 0
    assert cmp.row("step_time_p50").status == "n/a"


def test_metrics_file_last_snapshot_and_step_selection():
    last = d.load(FIX / "metrics_file_steps.txt")
    assert last.snapshot_step == 3 and last.steps == 4
    two = d.load(FIX / "metrics_file_steps.txt", step=1)
    assert two.snapshot_step == 1 and two.steps == 2
    cmp = d.compare(two, last)
    assert cmp.row("device_to_host_transfers").a == 2 and cmp.row("device_to_host_transfers").b == 4
    with pytest.raises(d.DiffInputError, match=r"no \[MetricsData; step=9\] block \(it has steps 0..3\)"):
        d.load(FIX / "metrics_file_steps.txt", step=9)
    with pytest.raises(d.DiffInputError, match="single report"):
        d.load(ITEM, step=1)


def test_truncated_last_block_falls_back_to_the_previous_one():
    src = d.load(FIX / "metrics_file_junk_truncated.txt")
    assert src.snapshot_step == 1 and any("truncated" in n for n in src.notes)
    assert src.values["device_to_host_transfers"] == (1.0, None)


def test_legacy_xrt_maps_server_transfers():
    src = d.load(FIX / "legacy_xrt.txt")
    assert src.values["device_to_host_transfers"] == (20.0, None)
    assert src.values["host_to_device"] == (60.0, None)
    assert src.values["compiles"] == (3.0, None)  # no UncachedCompile counter: CompileTime samples
    assert src.values["device_to_host_transfers_per_step"] == (1.0, None)


def test_bad_json_inputs(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"schema": "other/1"}')
    with pytest.raises(d.DiffInputError, match="not a ptxla_perf report"):
        d.load(p)
    p.write_text('{"schema": ')
    with pytest.raises(d.DiffInputError, match="invalid JSON"):
        d.load(p)
    with pytest.raises(d.DiffInputError, match="is a directory"):
        d.load(tmp_path)


# ------------------------------------------------------------------------------------------ rules

def test_parse_rules_forms():
    rules = d.parse_rules("compiles>0, device_to_host_per_step>0,step_time_p50>+5%,aten::*>0,"
                          "UncachedCompile>=10,ExecuteTime>+10%,compiles>+0,step_time<=-3%,ExecuteTime.p50>20ms,"
                          "device_to_host_bytes_per_step>1KB,compiles!=2,")
    got = [(r.name, r.op, r.threshold, r.mode, r.unit) for r in rules]
    assert got == [
        ("compiles", ">", 0.0, "absolute", None),
        ("device_to_host_per_step", ">", 0.0, "absolute", None),
        ("step_time_p50", ">", 5.0, "relative", None),
        ("aten::*", ">", 0.0, "absolute", None),
        ("UncachedCompile", ">=", 10.0, "absolute", None),
        ("ExecuteTime", ">", 10.0, "relative", None),
        ("compiles", ">", 0.0, "delta", None),
        ("step_time_p50", "<=", -3.0, "relative", None),
        ("ExecuteTime.p50", ">", pytest.approx(0.02), "absolute", "s"),
        ("device_to_host_transfer_bytes_per_step", ">", 1024.0, "absolute", "B"),
        ("compiles", "!=", 2.0, "absolute", None),
    ]
    assert rules[3].is_glob and not rules[0].is_glob
    assert d.parse_rules("device_to_host_bytes>0")[0].name == "device_to_host_transfer_bytes"  # its 0.4.0 name


@pytest.mark.parametrize("bad", ["", ",", "compiles", "compiles>", ">0", "compiles=>1", "compiles>>1",
                                 "compiles>abc", "compiles>5parsecs", "a b>1", "compiles > 1 2"])
def test_parse_rules_errors(bad):
    with pytest.raises(d.RuleError):
        d.parse_rules(bad)


def _check(a, b, rules, per_step=False):
    return d.check(d.compare(d.load(a), d.load(b), per_step=per_step), d.parse_rules(rules))


def test_check_absolute_delta_relative_glob():
    assert [v.name for v in _check(FIXED, ITEM, "compiles>0")] == ["compiles"]  # B compiled at all
    assert [v.value for v in _check(FIXED, ITEM, "compiles>+0")] == [1.0]  # one more compile than A
    assert _check(ITEM, FIXED, "compiles>+0") == []
    assert [v.name for v in _check(FIXED, NONZERO, "aten::*>0")] == ["aten::nonzero"]
    assert _check(NONZERO, FIXED, "aten::*>0") == []
    assert [v.name for v in _check(FIXED, ITEM, "UncachedCompile>=2")] == ["UncachedCompile"]
    assert _check(FIXED, ITEM, "UncachedCompile>=10") == []
    rel = _check(FIXED, NONZERO, "ExecuteTime>+10%")
    assert len(rel) == 1 and rel[0].value > 10 and "change +" in rel[0].message
    assert _check(FIXED, FIXED, "ExecuteTime>+0%,ExecuteTime<-0%") == []
    # a relative rule from zero: any increase is +inf%
    assert [v.value for v in _check(FIXED, ITEM, "device_to_host>+1000%")] == [float("inf")]
    # fields of a metric, and thresholds with units
    assert _check(FIXED, ITEM, "TransferFromDeviceTime.samples>4") != []
    assert _check(FIXED, ITEM, "ExecuteTime.p50>10s") == []
    # absent counter on one side counts as zero
    assert [v.a for v in _check(FIXED, ITEM, "aten::_local_scalar_dense>+0")] == [0.0]
    assert _check(ITEM, FIXED, "aten::_local_scalar_dense_per_step>0") == []


def test_check_report_json_step_time():
    broken = _check(R_FIXED, R_FALLBACK, "step_time_p50>+5%,aten::*>0,recompiles_after_warmup>0")
    assert [v.name for v in broken] == ["step_time_p50", "aten::nonzero"]
    assert _check(R_ITEM, R_FIXED, "step_time_p50>+5%,step_time>+5%") == []


@pytest.mark.parametrize("rule,msg", [
    ("step_time_p50>+5%", "no wall-clock step times"),
    ("NoSuchThing>0", "neither input has 'NoSuchThing'"),
    ("ExecuteTime.p50>1kg", None),
])
def test_check_unknown_names_are_errors(rule, msg):
    with pytest.raises(d.RuleError) as info:
        _check(FIXED, ITEM, rule)
    if msg:
        assert msg in str(info.value)


def test_check_unit_mismatch_and_missing_side():
    with pytest.raises(d.RuleError, match="threshold"):
        _check(FIXED, ITEM, "ExecuteTime>1MB")
    with pytest.raises(d.RuleError, match="has no value"):
        _check(R_FIXED, ITEM, "step_time_p50>0")  # B is metrics text
    nosteps = d.from_text("Counter: UncachedCompile\n  Value: 2\n", "nosteps")
    with pytest.raises(d.RuleError, match="step count is unknown"):
        d.check(d.compare(d.load(FIXED), nosteps), d.parse_rules("device_to_host_per_step>0"))


# ------------------------------------------------------------------------------------------ CLI in-process

def test_cli_formats_in_process(capsys):
    assert main(["diff", str(ITEM), str(FIXED), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in doc["rows"]}
    assert rows["device_to_host_transfers_per_step"]["a"] == 1 and rows["device_to_host_transfers_per_step"]["b"] == 0
    assert doc["a"]["steps"] == 5 and "violations" not in doc
    assert main(["diff", str(ITEM), str(FIXED), "--format", "markdown", "--per-step"]) == 0
    md = capsys.readouterr().out
    assert "### Headline" in md and "Totals are per step" in md
    assert main(["diff", str(ITEM), str(FIXED), "--color", "always"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    assert main(["diff", str(ITEM), str(FIXED), "--fail-on", "compiles>+0", "--fail-on", "aten::*>0"]) == 0
    assert "All 2 rule(s) passed." in capsys.readouterr().out


def test_cli_lists_each_broken_rule(capsys):
    rc = main(["diff", str(FIXED), str(NONZERO), "--fail-on",
               "device_to_host_per_step>0,aten::*>0,compiles>+0,ExecuteTime>+1000%"])
    out = capsys.readouterr().out
    assert rc == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert [f.split(":")[0] for f in fails] == ["FAIL device_to_host_per_step>0", "FAIL aten", "FAIL compiles>+0"]
    assert "FAILED 3 rule check(s):" in out


def test_cli_usage_errors_in_process(capsys):
    assert main(["diff", str(ITEM)]) == 2
    assert main(["diff", str(ITEM), str(FIXED), "--step", "x"]) == 2
    assert main(["diff", str(FIX / "metrics_file_steps.txt"), str(ITEM), "--step", "1"]) == 2
    err = capsys.readouterr().err
    assert "single report" in err and "Traceback" not in err
