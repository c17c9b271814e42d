"""Where `merge` finds a pod's reports: files, globs (`out/report.rank*.json`), a directory (every rank report in
it), and fsspec URLs (`gs://bucket/run/`, `s3://...`, `http://...`, `file://...`) - a bucket when the user has that
filesystem (gcsfs, s3fs) installed. fsspec itself is optional: only URLs need it. Bad input is one MergeInputError
line for the user."""
from __future__ import annotations

import glob
import json
import os
from typing import Any

_GLOB = set("*?[")


class MergeInputError(ValueError):
    """A report that cannot be found or read: one line for the user."""


def is_url(spec: str) -> bool:
    return "://" in spec


def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise MergeInputError("reading reports from a URL needs fsspec (pip install fsspec, plus gcsfs for gs://, "
                              "s3fs for s3://, aiohttp for http://)") from None
    return fsspec


def _url_fs(spec: str):
    fsspec = _fsspec()
    import logging
    for name in ("gcsfs", "s3fs", "fsspec", "aiobotocore", "google"):  # their retries log tracebacks; we say one line
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return fsspec.core.url_to_fs(spec)
    except (ImportError, ValueError) as exc:  # an unknown protocol, or its filesystem not installed
        raise MergeInputError(f"cannot open {spec}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                              ) from None


def _is_report_candidate(name: str) -> bool:
    return name.endswith(".json")


def expand(specs: list[str]) -> list[tuple[str, bool]]:
    """Each spec as the report paths it names, in order: (path or URL, picked from a directory or glob). Files
    picked from a directory or glob that turn out not to be rank reports are left out by `load_all`."""
    out: list[tuple[str, bool]] = []
    for spec in specs:
        if is_url(spec):
            fs, path = _url_fs(spec)
            try:
                if any(c in path for c in _GLOB):
                    found = sorted(fs.glob(path))
                elif fs.isdir(path):
                    found = sorted(p for p in fs.ls(path.rstrip("/") + "/", detail=False) if _is_report_candidate(p))
                else:
                    out.append((spec, False))
                    continue
            except (OSError, ValueError) as exc:
                raise MergeInputError(f"cannot list {spec}: {exc}") from None
            if not found:
                raise MergeInputError(f"no reports at {spec}")
            out.extend((fs.unstrip_protocol(p) if "://" not in p else p, True) for p in found)
        elif os.path.isdir(spec):
            found = sorted(os.path.join(spec, n) for n in os.listdir(spec) if _is_report_candidate(n))
            if not found:
                raise MergeInputError(f"no .json reports in directory {spec}")
            out.extend((p, True) for p in found)
        elif any(c in spec for c in _GLOB) and not os.path.exists(spec):
            found = sorted(glob.glob(spec))
            if not found:
                raise MergeInputError(f"no files match {spec}")
            out.extend((p, True) for p in found)
        else:
            out.append((spec, False))
    return out


def _read_many(paths: list[str]) -> dict[str, bytes]:
    """Every path's bytes: local files directly, URLs through fsspec (one `cat` per filesystem: concurrent where
    the filesystem is, e.g. HTTP, GCS, S3)."""
    data: dict[str, bytes] = {}
    urls = [p for p in paths if is_url(p)]
    for p in paths:
        if not is_url(p):
            try:
                with open(p, "rb") as f:
                    data[p] = f.read()
            except OSError as exc:
                raise MergeInputError(f"cannot read {p}: {exc.strerror}") from None
    if urls:
        fs, _ = _url_fs(urls[0])
        try:
            got = fs.cat(urls, on_error="return")
        except (OSError, ValueError) as exc:
            raise MergeInputError(f"cannot read {urls[0]}: {exc}") from None
        for u in urls:
            v = got.get(u, got.get(fs._strip_protocol(u)))
            if not isinstance(v, bytes):
                raise MergeInputError(f"cannot read {u}: {v}")
            data[u] = v
    return data


def is_rank_report(report: Any, schema: str) -> bool:
    """A per-process report (not a merged one, not another JSON file)."""
    return isinstance(report, dict) and report.get("schema") == schema and not report.get("processes")


def load_all(specs: list[str], schema: str, skip: set[str] = frozenset()) -> tuple[list[dict], list[str], list[str]]:
    """(reports, their paths, notes): every report the specs name. Files named one by one must be JSON (merge
    checks their schema); files picked from a directory or glob that are no rank report (another JSON, a merged
    report, `skip` - the merge's own output) are left out, and a note counts them."""
    picked = [(p, auto) for p, auto in expand(specs) if os.path.abspath(p) not in skip]
    raw = _read_many([p for p, _ in picked])
    reports, paths, left = [], [], 0
    for p, auto in picked:
        try:
            rep = json.loads(raw[p])
        except ValueError:
            if auto:
                left += 1
                continue
            raise MergeInputError(f"{p} is not JSON") from None
        if auto and not is_rank_report(rep, schema):
            left += 1
            continue
        reports.append(rep)
        paths.append(p)
    notes = [f"left out {left} file(s) that are no per-process report (other JSON, merged reports)"] if left else []
    if not reports:
        raise MergeInputError(f"no per-process reports in {' '.join(specs)}")
    return reports, paths, notes
