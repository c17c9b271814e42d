"""The findings of two reports side by side: which appeared, disappeared or changed severity, and the counts a CI
gate reads (`warnings:device_to_host_sync>0`). A gate on a finding's severity follows the profiler's judgement: a
read every step is a warning, a read every 10 steps is info, where a per-step count cannot tell the two apart."""
from __future__ import annotations

from dataclasses import dataclass

# rule-name prefix -> the severities it counts (None: any)
PREFIXES = {"warnings": ("warning",), "errors": ("error",), "infos": ("info",), "findings": None}
_RANK = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: str
    where: str  # "file.py:15" (the file's base name), "" when the finding has no line
    message: str


@dataclass(frozen=True)
class FindingChange:
    status: str  # appeared | disappeared | severity (changed severity)
    kind: str
    a: str | None  # A's severity
    b: str | None  # B's severity
    where: str
    message: str  # B's message (A's for a finding that disappeared)

    def to_dict(self) -> dict:
        return {"status": self.status, "kind": self.kind, "a": self.a, "b": self.b, "where": self.where,
                "message": self.message}

    def line(self) -> str:
        at = f" [{self.where}]" if self.where else ""
        if self.status == "appeared":
            head = f"NEW {self.b}"
        elif self.status == "disappeared":
            head = f"GONE {self.a}"
        else:
            head = f"{self.a} -> {self.b}"
        return f"{head}  {self.kind}{at}: {_short(self.message)}"


def _short(text: str, most: int = 110) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= most else text[: most - 3].rstrip() + "..."


def collect(report: dict) -> list[Finding]:
    """A report's findings, as (kind, severity, where, message)."""
    out = []
    for f in report.get("findings") or []:
        if not isinstance(f, dict) or not isinstance(f.get("kind"), str):
            continue
        loc = f.get("location") if isinstance(f.get("location"), dict) else {}
        where = ""
        if loc.get("file"):
            where = f"{str(loc['file']).replace(chr(92), '/').rsplit('/', 1)[-1]}:{loc.get('line', '?')}"
        out.append(Finding(kind=f["kind"], severity=str(f.get("severity", "info")), where=where,
                           message=str(f.get("message", ""))))
    return out


def judged(report: dict) -> set[str]:
    """The finding kinds the report's rules looked for (absent from `findings`: looked for, not found)."""
    rules = report.get("rules") if isinstance(report.get("rules"), dict) else {}
    return {k for k in rules.get("judged") or [] if isinstance(k, str)}


def is_rule_name(name: str) -> bool:
    """`warnings`, `errors`, `infos`, `findings`, or one of them with `:KIND` (`warnings:device_to_host_sync`)."""
    return name.partition(":")[0] in PREFIXES and (":" in name or name in PREFIXES)


def count(findings: list[Finding], name: str) -> float:
    prefix, _, kind = name.partition(":")
    severities = PREFIXES[prefix]
    return float(sum(1 for f in findings if (not kind or f.kind == kind)
                     and (severities is None or f.severity in severities)))


def rule_names(findings: list[Finding]) -> set[str]:
    """Every `PREFIX:KIND` name these findings give a count to (what a glob such as `warnings:*` expands over)."""
    return {f"{p}:{f.kind}" for f in findings for p, sev in PREFIXES.items() if sev is None or f.severity in sev}


def changes(a: list[Finding], b: list[Finding]) -> list[FindingChange]:
    """Findings that appeared in B, disappeared from A or changed severity, worst first. Findings pair up by kind:
    same line first (the fix usually moves lines, so then in order of appearance)."""
    out: list[FindingChange] = []
    for kind in dict.fromkeys([f.kind for f in a] + [f.kind for f in b]):
        left = [f for f in a if f.kind == kind]
        right = [f for f in b if f.kind == kind]
        pairs = []
        for f in list(left):
            match = next((g for g in right if g.where == f.where), None)
            if match is not None:
                pairs.append((f, match))
                left.remove(f)
                right.remove(match)
        n = min(len(left), len(right))
        pairs += list(zip(left[:n], right[:n]))
        for f, g in pairs:
            if f.severity != g.severity:
                out.append(FindingChange("severity", kind, f.severity, g.severity, g.where or f.where, g.message))
        for f in left[n:]:
            out.append(FindingChange("disappeared", kind, f.severity, None, f.where, f.message))
        for g in right[n:]:
            out.append(FindingChange("appeared", kind, None, g.severity, g.where, g.message))
    worst = lambda c: max(_RANK.get(c.a or "", -1), _RANK.get(c.b or "", -1))
    return sorted(out, key=lambda c: -worst(c))
