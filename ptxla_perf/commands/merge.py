"""`merge REPORT|GLOB|DIR|URL... [--report OUT]`: per-process reports of one run (REPORT.rankN.json from each process or host)
-> one report with a per-rank `processes` section, aggregate throughput and cross-rank findings (straggler,
rank_divergence). docs/multiprocess.md."""
from __future__ import annotations

import argparse
import os
import sys

from .._meta import SCHEMA_ID
from ..pods import merge, inputs as merge_inputs
from ..report import render, assemble as report_mod
from ..cli import COMMANDS, UsageError, describe
from ..pods.merge import rank_of


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("merge", help=COMMANDS["merge"],
                       description=describe(__doc__))
    p.add_argument("reports", nargs="+", metavar="REPORT", help="per-process reports: files, globs, directories, or fsspec URLs (gs://, s3://, http://; needs fsspec and that filesystem)")
    p.add_argument("--report", default="ptxla_perf_merged.json", help="merged report path (default: %(default)s)")
    p.add_argument("--force", action="store_true",
                   help="merge reports that look like different runs (other run ids, command lines that differ "
                        "beyond rank arguments, times that do not overlap); the merged report notes how they differ")
    return p


def single_note(report: dict) -> str:
    """What a merge of one report is: that one process, not the whole run."""
    count = (report.get("environment") or {}).get("process_count")
    of = f" of {count} processes" if isinstance(count, int) and count > 1 else ""
    return (f"one report merged (rank {rank_of(report)}{of}): the merged report is that one process, not the "
            "whole run; pass every rank's report to merge the run")


def run(args) -> int:
    try:
        reports, paths, notes = merge_inputs.load_all(list(args.reports), SCHEMA_ID,
                                                      skip={os.path.abspath(args.report)})
        out = merge.merge(reports, paths, force=args.force)
    except (merge.MergeError, merge_inputs.MergeInputError) as exc:
        raise UsageError(str(exc)) from None
    if notes:
        out["aggregate"].setdefault("notes", []).extend(notes)
    if len(reports) == 1:
        out["aggregate"].setdefault("notes", []).append(single_note(reports[0]))
    path = report_mod.write(out, args.report)
    print("\n".join(render.summary_lines(out, path)), file=sys.stderr)
    for note in out["aggregate"].get("notes", []):
        print(f"ptxla_perf: note: {note}", file=sys.stderr)
    return 0
