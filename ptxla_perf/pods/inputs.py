"""Where `merge` finds a pod's reports: files, globs (`out/report.rank*.json`), a directory (every rank report in
it), and fsspec URLs (`gs://bucket/run/`, `s3://...`, `http://...`, `file://...`) - a bucket when the user has that
filesystem (gcsfs, s3fs) installed. fsspec itself is optional: only URLs need it. Bad input is one MergeInputError
line for the user.

A rank's report is read only as far as a merge needs it: up to its `rank_digest` (rank_digest.py), which the writer
puts after every key a merge reads of a rank and before `steps[]` (report.assemble) - a few tens of KB of a long
run's 3 MB. Such a report is a PartialReport; `full_report()` reads all of it (the merge does, for rank 0, whose
steps the merged report keeps). A report without a digest (older, or its keys reordered) is read whole, as
before."""
from __future__ import annotations

import codecs
import glob
import json
import os
import re
from json.decoder import scanstring
from typing import Any, Callable

from ..model.rank_digest import KEY as DIGEST, usable

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
            data[p] = _read_local(p)
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


def _read_local(path: str, limit: int = -1) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError as exc:
        raise MergeInputError(f"cannot read {path}: {exc.strerror}") from None


# what a merge reads of every rank's report (merge.py, rules/ranks.py: run, environment, summary, findings, memory;
# `processes` tells a merged report); the rest of a rank's report - steps[] above all - only for rank 0
MERGE_READS = frozenset({"schema", "tool_version", "backend", "run", "environment", "summary", "findings", "memory",
                         "processes", DIGEST})
_FIRST_READ = 1 << 17  # bytes of a local report read first (a long run's digest and what comes before: ~120 KB)
_AFTER_DIGEST = frozenset({"steps", "step_buckets"})  # keys report.assemble writes after the digest
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class PartialReport(dict):
    """A rank's report read up to its `rank_digest`: every key of MERGE_READS it has, not steps[]."""

    def __init__(self, items: dict[str, Any], reread: Callable[[], Any]):
        super().__init__(items)
        self._reread = reread

    def full_report(self) -> Any:
        """The whole report, read again."""
        return self._reread()


class _Short(Exception):
    """The text ends before what is being read."""


def _head(text: str, complete: bool) -> tuple[dict[str, Any], bool] | None:
    """The report's top-level keys in order, up to its digest once every key of MERGE_READS the digest lists is
    read: (keys read, whether that is all of it). None where the text is not one JSON object read this way (the
    caller parses it whole, with json's own errors); _Short where `text` (not `complete`) ends first."""
    try:
        out: dict[str, Any] = {}
        pos = _WS.match(text, 0).end()
        if text[pos] != "{":
            return None
        pos = _WS.match(text, pos + 1).end()
        if text[pos] == "}":
            return (out, True) if _WS.match(text, pos + 1).end() == len(text) else None
        while True:
            if text[pos] != '"':
                return None
            key, pos = scanstring(text, pos + 1)
            if key in _AFTER_DIGEST and DIGEST not in out:  # no digest before steps[]: parsed whole
                return None
            pos = _WS.match(text, pos).end()
            if text[pos] != ":":
                return None
            value, pos = _DECODER.raw_decode(text, _WS.match(text, pos + 1).end())
            pos = _WS.match(text, pos).end()
            out[key] = value
            if text[pos] == "}":  # all of it
                return (out, True) if _WS.match(text, pos + 1).end() == len(text) else None
            if text[pos] != ",":
                return None
            pos = _WS.match(text, pos + 1).end()
            digest = out.get(DIGEST)
            if usable(out) and isinstance(digest.get("keys"), list) and \
                    all(k in out for k in digest["keys"] if k in MERGE_READS):
                return out, False
    except (IndexError, ValueError):  # json.JSONDecodeError is a ValueError
        if complete:
            return None
        raise _Short from None


def _parsed(data: bytes, complete: bool) -> tuple[dict[str, Any], bool] | None:
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return None
    return _head(text, complete)


def read_report(path: str, data: bytes | None = None) -> Any:
    """The report at `path` (local, or a URL whose bytes are `data`) as far as a merge needs it: a PartialReport
    when it has a digest, else all of it (json.loads: any JSON, its errors). A local file is read from its start,
    _FIRST_READ bytes first, then as much again as read so far, until its digest is in."""
    if data is not None:
        got = _parsed(data, True)
        reread = (lambda: json.loads(_read_many([path])[path]))
    else:
        try:
            with open(path, "rb") as f:
                data = f.read(_FIRST_READ)
                complete = len(data) < _FIRST_READ
                while True:
                    try:
                        got = _parsed(data, complete)
                        break
                    except _Short:  # (only where the file goes on)
                        want = len(data)
                        chunk = f.read(want)
                        data += chunk
                        complete = len(chunk) < want
                if got is None and not complete:
                    data += f.read()
        except OSError as exc:
            raise MergeInputError(f"cannot read {path}: {exc.strerror}") from None
        reread = (lambda: json.loads(_read_local(path)))
    if got is None:
        return json.loads(data)
    head, whole = got
    return head if whole else PartialReport(head, reread)


def is_rank_report(report: Any, schema: str) -> bool:
    """A per-process report (not a merged one, not another JSON file)."""
    return isinstance(report, dict) and report.get("schema") == schema and not report.get("processes")


def load_all(specs: list[str], schema: str, skip: set[str] = frozenset(),
             digest: bool = True) -> tuple[list[dict], list[str], list[str]]:
    """(reports, their paths, notes): every report the specs name. Files named one by one must be JSON (merge
    checks their schema); files picked from a directory or glob that are no rank report (another JSON, a merged
    report, `skip` - the merge's own output) are left out, and a note counts them. Each is read up to its
    `rank_digest` (read_report); `digest=False` reads every report whole."""
    picked = [(p, auto) for p, auto in expand(specs) if os.path.abspath(p) not in skip]
    raw = _read_many([p for p, _ in picked if is_url(p) or not digest])
    reports, paths, left = [], [], 0
    for p, auto in picked:
        try:
            rep = read_report(p, raw.pop(p, None)) if digest else json.loads(raw.pop(p))
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
