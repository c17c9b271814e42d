"""How right are the findings? Runs every corpus script (tests/corpus/*.py with a .truth.json) under
`python -m ptxla_perf profile`, compares each report with its ground truth and prints one table plus the four
totals issue 9 names: planted problems found, found at the right line, warnings not called for, step counts right.

    python benchmarks/accuracy.py [--only NAME...] [--json OUT] [--keep DIR] [--reports DIR]

Exit 0 when every total is perfect, 1 otherwise, 2 on a usage error. The comparison is `score(report, truth,
script)`, which tests/test_corpus.py reuses.

Rules (a finding "is at the line" when its location.file is the script and location.line is the truth's line or
one of its `also_lines`; its kind must be the truth's kind or one of its `also_kinds`):
- an expected entry is *found* when any finding of its kind exists, *at the line* when one is at its line, and
  *severity right* when one at its line (or, if none is, any of its kind) has the expected severity, and
  *cause right* (entries with a `cause`, e.g. recompilations) when one of those has evidence.cause == cause;
- a warning is *not called for* unless an expected **warning** entry has its kind (a warning where the truth
  expects an info is not called for; a planted problem reported at the wrong line is counted under "at line");
- steps are right when report.summary.steps equals the truth's iterations.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"


def corpus_names() -> list[str]:
    return sorted(p.name[:-len(".truth.json")] for p in CORPUS.glob("*.truth.json"))


def load_truth(name: str) -> dict:
    return json.loads((CORPUS / f"{name}.truth.json").read_text())


def _in_script(finding: dict, script: Path) -> bool:
    loc = finding.get("location") or {}
    file = loc.get("file")
    if not file:
        return False
    p = Path(file)
    if p.is_absolute():
        return os.path.realpath(p) == os.path.realpath(script)
    return p.name == script.name


def _kinds(entry: dict) -> set[str]:
    return {entry["kind"], *entry.get("also_kinds", [])}


def _lines(entry: dict) -> set[int] | None:
    if entry.get("line") is None:
        return None  # any line
    return {entry["line"], *entry.get("also_lines", [])}


def _at(finding: dict, entry: dict, script: Path) -> bool:
    lines = _lines(entry)
    if lines is None:
        return True
    return _in_script(finding, script) and (finding.get("location") or {}).get("line") in lines


def _where(f: dict) -> str:
    loc = f.get("location") or {}
    return f"{f['kind']}@{Path(loc['file']).name}:{loc.get('line')}" if loc.get("file") else f"{f['kind']}@?"


def score(report: dict, truth: dict, script: str | Path) -> dict:
    """Compare one report with its truth. Pure: no I/O."""
    script = Path(script)
    findings = report.get("findings") or []
    expected = truth.get("expected") or []
    entries = []
    for e in expected:
        same_kind = [f for f in findings if f.get("kind") in _kinds(e)]
        at_line = [f for f in same_kind if _at(f, e, script)]
        pool = at_line or same_kind
        entries.append({
            "kind": e["kind"], "line": e.get("line"), "severity": e["severity"],
            "planted": bool(e.get("planted", e["severity"] == "warning")),
            "found": bool(same_kind), "at_line": bool(at_line),
            "severity_right": any(f.get("severity") == e["severity"] for f in pool),
            "cause": e.get("cause"),
            "cause_right": e.get("cause") is None or any((f.get("evidence") or {}).get("cause") == e["cause"]
                                                         for f in pool),
            "got": sorted({f"{_where(f)} {f.get('severity')}" for f in same_kind}),
        })
    warn_kinds = set().union(*[_kinds(e) for e in expected if e["severity"] == "warning"]) if expected else set()
    not_called_for = [f for f in findings if f.get("severity") == "warning" and f.get("kind") not in warn_kinds]
    steps_got = (report.get("summary") or {}).get("steps")
    planted = [x for x in entries if x["planted"]]
    infos = [x for x in entries if not x["planted"]]
    result = {
        "steps_expected": truth["iterations"], "steps_got": steps_got,
        "steps_right": steps_got == truth["iterations"],
        "planted": len(planted), "planted_found": sum(x["found"] for x in planted),
        "planted_at_line": sum(x["at_line"] for x in planted),
        "expected": len(entries), "severity_right": sum(x["severity_right"] and x["found"] for x in entries),
        "causes": sum(x["cause"] is not None for x in entries),
        "cause_right": sum(x["cause"] is not None and x["found"] and x["cause_right"] for x in entries),
        "infos": len(infos), "infos_found": sum(x["found"] and x["at_line"] and x["severity_right"] for x in infos),
        "not_called_for": [_where(f) for f in not_called_for],
        "entries": entries,
    }
    result["perfect"] = (result["steps_right"] and not result["not_called_for"]
                         and all(x["found"] and x["at_line"] and x["severity_right"] and x["cause_right"]
                                 for x in entries))
    return result


def profile_env() -> dict:
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "xla_force_host_platform_device_count" not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_profile(name: str, outdir: Path, python: str = sys.executable, timeout: float = 600) -> tuple[dict | None, str]:
    """Profile one corpus script; return (report or None, error text)."""
    truth = load_truth(name)
    script = CORPUS / f"{name}.py"
    report_path = outdir / f"{name}.json"
    proc = subprocess.run([python, "-m", "ptxla_perf", "profile", "--port", "none", "--report", str(report_path),
                           str(script), *truth.get("args", [])],
                          cwd=outdir, env=profile_env(), capture_output=True, text=True, timeout=timeout)
    if not report_path.exists():
        return None, f"no report (rc {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
    err = "" if proc.returncode == 0 else f"exit {proc.returncode}"
    return json.loads(report_path.read_text()), err


def _row(name: str, s: dict | None, err: str, secs: float) -> list[str]:
    if s is None:
        return [name, "-", "-", "-", "-", "-", "-", err or "no report", f"{secs:.0f}"]
    steps = f"{s['steps_expected']}/{s['steps_got']}" + ("" if s["steps_right"] else " X")
    planted = f"{s['planted_found']}/{s['planted']}" if s["planted"] else "-"
    at_line = f"{s['planted_at_line']}/{s['planted']}" if s["planted"] else "-"
    sev = f"{s['severity_right']}/{s['expected']}" if s["expected"] else "-"
    infos = f"{s['infos_found']}/{s['infos']}" if s["infos"] else "-"
    cause = f"{s['cause_right']}/{s['causes']}" if s["causes"] else "-"
    ncf = ", ".join(s["not_called_for"]) or "0"
    if err:
        ncf += f" [{err}]"
    return [name, steps, planted, at_line, sev, cause, infos, ncf, f"{secs:.0f}"]


def print_table(rows: list[list[str]]) -> None:
    head = ["script", "steps exp/got", "planted found", "at right line", "severity right", "cause right",
            "infos found", "warnings not called for", "s"]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    widths[7] = min(widths[7], 70)
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


def totals(scores: dict[str, dict | None]) -> dict:
    got = [s for s in scores.values() if s is not None]
    return {
        "scripts": len(scores), "reports": len(got),
        "planted_found": sum(s["planted_found"] for s in got), "planted": sum(s["planted"] for s in got),
        "planted_at_line": sum(s["planted_at_line"] for s in got),
        "severity_right": sum(s["severity_right"] for s in got), "expected": sum(s["expected"] for s in got),
        "infos_found": sum(s["infos_found"] for s in got), "infos": sum(s["infos"] for s in got),
        "cause_right": sum(s["cause_right"] for s in got), "causes": sum(s["causes"] for s in got),
        "warnings_not_called_for": sum(len(s["not_called_for"]) for s in got),
        "steps_right": sum(s["steps_right"] for s in got),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="corpus scripts to run (default: all)")
    parser.add_argument("--json", metavar="OUT", help="write every score and the totals here")
    parser.add_argument("--keep", metavar="DIR", help="keep the reports in DIR (default: a temporary folder)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs ptxla_perf")
    parser.add_argument("--reports", metavar="DIR", help="score the reports already in DIR (NAME.json, as --keep "
                                                          "writes them) instead of profiling again")
    ns = parser.parse_args(argv)
    names = corpus_names()
    if ns.only:
        unknown = [n for n in ns.only if n.removesuffix(".py") not in names]
        if unknown:
            print(f"accuracy: unknown corpus script(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        names = [n.removesuffix(".py") for n in ns.only]
    tmp = tempfile.TemporaryDirectory(prefix="ptxla_accuracy_")
    outdir = Path(ns.keep) if ns.keep else Path(tmp.name)
    outdir.mkdir(parents=True, exist_ok=True)
    scores: dict[str, dict | None] = {}
    rows = []
    for name in names:
        t0 = time.time()
        if ns.reports:
            path = Path(ns.reports) / f"{name}.json"
            report, err = (json.loads(path.read_text()), "") if path.exists() else (None, "no report in --reports")
        else:
            try:
                report, err = run_profile(name, outdir, ns.python)
            except subprocess.TimeoutExpired:
                report, err = None, "timed out"
        s = score(report, load_truth(name), CORPUS / f"{name}.py") if report else None
        if s is not None and err:
            s["perfect"] = False
        scores[name] = s
        rows.append(_row(name, s, err, time.time() - t0))
        print(f"  {name}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    print_table(rows)
    t = totals(scores)
    print(f"\nplanted problems found     {t['planted_found']}/{t['planted']}")
    print(f"found at the right line    {t['planted_at_line']}/{t['planted']}")
    print(f"warnings not called for    {t['warnings_not_called_for']}")
    print(f"step counts right          {t['steps_right']}/{t['scripts']}")
    print(f"(severity right {t['severity_right']}/{t['expected']}, recompile cause right {t['cause_right']}/"
          f"{t['causes']}, expected infos found {t['infos_found']}/{t['infos']}, "
          f"reports written {t['reports']}/{t['scripts']})")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"scores": scores, "totals": t}, indent=1) + "\n")
    perfect = all(s is not None and s["perfect"] for s in scores.values())
    return 0 if perfect else 1


if __name__ == "__main__":
    sys.exit(main())
