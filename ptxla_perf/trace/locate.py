"""Find the .xplane.pb files of one capture from a file, a run folder or a logdir."""
from __future__ import annotations

from pathlib import Path


class TraceError(Exception):
    """Bad input for trace analysis (no capture found, unreadable file); the message is one line."""


def _run_dirs(logdir: Path) -> list[Path]:
    root = logdir / "plugins" / "profile"
    if not root.is_dir():
        return []
    return [p for p in root.iterdir() if p.is_dir() and any(p.glob("*.xplane.pb"))]


def locate_xplanes(path: str | Path, run: str | None = None) -> tuple[Path, list[Path]]:
    """PATH is an .xplane.pb, a run folder (holding *.xplane.pb, one per host), or a logdir (holding
    plugins/profile/<run>/). For a logdir the newest run is taken unless `run` names one.
    Returns (run folder, xplane files sorted by name)."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{path}: no such file or directory")
    if p.is_file():
        if not p.name.endswith(".xplane.pb"):
            raise TraceError(f"{path}: not an .xplane.pb file")
        if run:
            raise TraceError("--run applies to a logdir, not to a single .xplane.pb")
        return p.parent, [p]
    here = sorted(p.glob("*.xplane.pb"))
    if here and not run:
        return p, here
    runs = _run_dirs(p)
    if not runs and (p / "profile").is_dir():  # PATH = LOGDIR/plugins
        runs = _run_dirs(p.parent)
    if not runs and p.name == "profile" and p.parent.name == "plugins":
        runs = _run_dirs(p.parent.parent)
    if not runs:
        raise TraceError(f"{path}: no capture found (expected *.xplane.pb, or plugins/profile/<run>/*.xplane.pb)")
    if run:
        match = [r for r in runs if r.name == run]
        if not match:
            names = ", ".join(sorted(r.name for r in runs)[-5:])
            raise TraceError(f"{path}: no run named {run!r} (runs: {names})")
        chosen = match[0]
    else:  # newest: run folders are named by time (YYYY_MM_DD_HH_MM_SS); tie-break on mtime
        chosen = max(runs, key=lambda r: (r.name, r.stat().st_mtime))
    return chosen, sorted(chosen.glob("*.xplane.pb"))


def list_runs(path: str | Path) -> list[str]:
    return sorted(r.name for r in _run_dirs(Path(path)))
