"""The user's source lines around a finding's culprit line, read once at report time and stored in the report
(`findings[].source`), so a report (and its HTML page) shows the code on a machine that never had the file."""
from __future__ import annotations

import linecache
from typing import Any

CONTEXT = 3  # lines before and after the culprit line
MAX_CHARS = 240  # per line: a minified or generated line must not bloat the report


def excerpt(file: str, line: int, context: int = CONTEXT) -> dict[str, Any] | None:
    """{"first_line": N, "lines": [...]} around `line` of `file`, or None when the file cannot be read."""
    try:
        linecache.checkcache(file)  # the file may have changed since a traceback cached it
        lines = linecache.getlines(file)
    except Exception:  # noqa: BLE001 - a report never fails because a source file is odd
        return None
    if not lines or not 0 < line <= len(lines):
        return None
    first = max(1, line - context)
    last = min(len(lines), line + context)
    return {"first_line": first,
            "lines": [s.rstrip("\r\n")[:MAX_CHARS] for s in lines[first - 1:last]]}


def attach(findings: list[dict[str, Any]], context: int = CONTEXT) -> list[dict[str, Any]]:
    """Add `source` to each finding that has a location and no source yet (a re-built report keeps its own)."""
    for f in findings:
        loc = f.get("location")
        if loc and "source" not in f and loc.get("file") and isinstance(loc.get("line"), int):
            src = excerpt(loc["file"], loc["line"], context)
            if src:
                f["source"] = src
    return findings
