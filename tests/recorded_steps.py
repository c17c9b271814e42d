"""Step records a real run wrote with `--steps-file` (tests/fixtures/steps/, recorded by its make.py), judged by the
analysis a live session runs: timing verdicts tested on what a real run measured, whatever the load of the machine
running the suite (test_timing_verdicts.py; conftest.TIMING_KINDS)."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, SCRIPTS, TIMING_KINDS
from ptxla_perf.rules.iteration import analyze
from ptxla_perf.rules.memory import RULES as MEMORY_RULES
from ptxla_perf.model.records import StepRecord
from ptxla_perf.rules.registry import backend_rules

RECORDED = ROOT / "tests" / "fixtures" / "steps"
OWN_PARTS = ("data", "host", "launch", "compile", "read_wait", "device")  # the program's own (not other/profiler)


class Judged:
    """One recorded run, judged: its findings (as report JSON) and summary figures."""

    def __init__(self, case: str):
        meta = json.loads((RECORDED / f"{case}.meta.json").read_text())
        text = (RECORDED / f"{case}.jsonl").read_text().replace("$ROOT", str(ROOT))
        records = [StepRecord.from_json(json.loads(line)) for line in text.splitlines()]
        analysis = analyze(records, rules=(*backend_rules(meta["backend"]), *MEMORY_RULES))
        self.script = SCRIPTS / Path(meta["script"]).name
        self.findings = [f.to_json() for f in analysis.findings]
        self.summary = analysis.figures.summary().to_json()
        self.split = self.summary["time_breakdown"]
        self.steady = list(analysis.figures.steady)  # the steady iterations (StepRecord)

    def only(self, kind: str) -> dict:
        found = [f for f in self.findings if f["kind"] == kind]
        assert len(found) == 1, [(f["kind"], f["severity"], f["message"]) for f in self.findings]
        return found[0]

    def timing(self) -> list[str]:
        return [f["kind"] for f in self.findings if f["kind"] in TIMING_KINDS]

    def own_largest(self) -> str:
        parts = self.split["components_s"]
        return max(OWN_PARTS, key=parts.get)
