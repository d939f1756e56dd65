"""The analysis subcommands: `iowhy report` and `iowhy hist` (added to cli.py's parser).

iowhy.cli imports this module while building its parser, so cli's names are imported
lazily inside functions (no import cycle).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .analysis import METRICS, AnalysisConfig, analyze, metric_values, tune_allocator
from .classify import CLASS_NAMES

UNITS = {"nsecs": 1, "usecs": 1_000, "msecs": 1_000_000}


def add_analysis_parsers(sub: Any) -> None:
    """Add `report` and `hist` to the `iowhy` subparsers."""
    r = sub.add_parser(
        "report", help="where the elapsed time went: terminal report or JSON",
        description="Attribute the workload's elapsed time (cpu, runqueue, barrier, log, "
                    "metadata, data, read, wait-other), per-class request latencies, fsync "
                    "and commit figures, device busy time, metadata placement and findings.")
    r.add_argument("trace", help="trace file (.iowt)")
    out = r.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print every figure as JSON on stdout (keys in docs/report-json.md; "
                          "times in integer ns)")
    out.add_argument("--html", metavar="OUT",
                     help="write a self-contained HTML report to OUT (needs the HTML renderer, "
                          "iowhy.reports.html)")
    an = r.add_argument_group("analysis")
    an.add_argument("--merge-gap-ms", type=float, default=10.0, metavar="MS",
                    help="write pairs adjacent on disk but issued more than MS milliseconds "
                         "apart count as 'could have merged' (default: %(default)s ms)")
    an.add_argument("--depth-buckets", type=int, default=60, metavar="N",
                    help="time buckets of the queue-depth series per device "
                         "(default: %(default)s)")
    an.add_argument("--findings", type=int, default=6, metavar="N",
                    help="at most N findings (default: %(default)s)")
    an.add_argument("--no-placement", action="store_true",
                    help="skip seek histograms, positioning cost and time locality (faster)")
    r.set_defaults(func=cmd_report)

    h = sub.add_parser(
        "hist", help="log2 histogram of one latency or seek metric (text or PNG)",
        description="Print a log2 histogram in biolatency's shape, or draw it to a PNG.")
    h.add_argument("trace", help="trace file (.iowt)")
    sel = h.add_argument_group("selection")
    sel.add_argument("--metric", choices=METRICS, default="device",
                     help="device: issue to final completion; queue: insert to issue; total: "
                          "submission to completion; fsync: syscall latency; commit: journal "
                          "commit / iclog duration; seek: |seek distance| in sectors "
                          "(default: %(default)s)")
    sel.add_argument("--class", dest="klass", metavar="C",
                     help="request class for device/queue/total/seek (one of "
                          f"{', '.join(CLASS_NAMES)}); call type for fsync (fsync, fdatasync, "
                          "...); jbd2, xfs or fc for commit (default: all)")
    o = h.add_argument_group("output")
    o.add_argument("--unit", choices=tuple(UNITS), default="usecs",
                   help="time unit of the slots (default: %(default)s; seek is in sectors)")
    o.add_argument("--png", metavar="OUT",
                   help="draw the histogram to OUT (.png, .svg or .pdf) instead of printing it")
    h.set_defaults(func=cmd_hist)


def _user_error(message: str, hint: str = "", usage: bool = False) -> Exception:
    from .cli import EXIT_FAIL, EXIT_USAGE, UserError
    return UserError(message, hint, EXIT_USAGE if usage else EXIT_FAIL)


def _check_out(path: str, suffixes: tuple[str, ...]) -> None:
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(d):
        raise _user_error(f"cannot write {path}: directory {d} does not exist",
                          "choose an output path in an existing directory")
    if os.path.isdir(path):
        raise _user_error(f"cannot write {path}: it is a directory", "give a file name")
    if not path.lower().endswith(suffixes):
        raise _user_error(f"cannot write {path}: unsupported file type",
                          f"use one of {', '.join(suffixes)}", usage=True)


def _public(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if not k.startswith("_")}


def cmd_report(args: argparse.Namespace) -> int:
    from .cli import load
    if args.merge_gap_ms < 0:
        raise _user_error("--merge-gap-ms must be >= 0", "", usage=True)
    if not 1 <= args.depth_buckets <= 10_000:
        raise _user_error("--depth-buckets must be between 1 and 10000", "", usage=True)
    if args.findings < 0:
        raise _user_error("--findings must be >= 0", "", usage=True)
    render_html = None
    if args.html:
        try:
            from .reports import html as html_mod
        except ImportError:
            raise _user_error("--html is not available: this iowhy has no HTML renderer "
                              "(iowhy.reports.html)",
                              "use the terminal report or --json") from None
        render_html = getattr(html_mod, "render_html", None)
        if render_html is None:
            raise _user_error("--html is not available: iowhy.reports.html has no render_html()",
                              "use the terminal report or --json")
        _check_out(args.html, (".html", ".htm"))
    tr = load(args.trace)
    tune_allocator()
    cfg = AnalysisConfig(locality_gap_ns=int(args.merge_gap_ms * 1e6),
                         queue_depth_buckets=args.depth_buckets, max_findings=args.findings,
                         placement=not args.no_placement, locality=not args.no_placement)
    result = _public(analyze(tr, cfg))
    if render_html is not None:
        text = render_html(result)
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    elif render_html is None:
        from .reports.terminal import render_report
        print(render_report(result))
    return 0


def cmd_hist(args: argparse.Namespace) -> int:
    from .cli import load
    from .reports.hist import log2_counts, render_log2_hist, write_png
    if args.png:
        _check_out(args.png, (".png", ".svg", ".pdf"))
    tr = load(args.trace)
    try:
        values, unit = metric_values(tr, args.metric, args.klass)
    except ValueError as e:
        raise _user_error(str(e), "see `iowhy hist --help`", usage=True) from None
    if unit == "ns":
        values = values // UNITS[args.unit]
        val_type = args.unit
    else:
        val_type = unit
    what = f"{args.metric}" + (f" of {args.klass}" if args.klass else "")
    if len(values) == 0:
        print(f"iowhy: no values for {what} in {args.trace}", file=sys.stderr)
        return 0
    counts = log2_counts(values)
    if args.png:
        write_png(counts, val_type, args.png, title=f"{what} (n={len(values):,})")
        return 0
    print(f"{what}: {len(values):,} values")
    print()
    print(render_log2_hist(counts, val_type))
    return 0
