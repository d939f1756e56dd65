"""The analysis subcommands: `iowhy report`, `iowhy hist` and `iowhy compare` (added to
cli.py's parser). The numpy-based analysis is imported inside the commands (names.py
says why).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from .categories import ATTRIBUTION_CATEGORIES
from .errors import EXIT_FAIL, EXIT_USAGE, UserError, load
from .filesystems import NAMES as FS_NAMES
from .names import CLASS_NAMES, METRICS
from .progress import progress
from .reports.units import DEFAULT_TIME_UNIT, TIME_UNITS

UNITS = {"nsecs": 1, "usecs": 1_000, "msecs": 1_000_000}
# hist also takes the other commands' unit names (ns, us, ms)
HIST_ALIASES = {"ns": "nsecs", "us": "usecs", "ms": "msecs"}


def _filled(text: str) -> str:
    """A description filled to 72 columns (the man page indents it), for the parsers
    whose epilog keeps its lines (RawDescriptionHelpFormatter prints the description
    as it is)."""
    import textwrap
    return textwrap.fill(text, 72)


def add_analysis_parsers(sub: Any) -> None:
    """Add `report`, `hist` and `compare` to the `iowhy` subparsers."""
    r = sub.add_parser(
        "report", help="where the elapsed time went: terminal report or JSON",
        description="Attribute the workload's elapsed time by what woke each wait ("
                    + ", ".join(ATTRIBUTION_CATEGORIES) + "), the thread time of all "
                    "its threads, per-class request latencies, fsync and commit figures, "
                    "device busy time, metadata placement and findings.")
    r.add_argument("trace", help="trace file (.iowt)")
    out = r.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print every figure as JSON on stdout (keys in docs/report-json.md; "
                          "times in integer ns)")
    out.add_argument("--html", metavar="OUT",
                     help="write a self-contained HTML report to OUT: mode 0600, replacing "
                          "an existing file atomically, never through a symlink")
    out.add_argument("--unit", choices=tuple(TIME_UNITS), default=DEFAULT_TIME_UNIT,
                     help="unit of the time columns of the text tables (default: "
                          "%(default)s); JSON keeps integer ns")
    out.add_argument("--interval", type=float, metavar="SEC",
                     help="print the attribution per interval of SEC seconds, one row each "
                          "(with --json: the key `intervals`)")
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
    an.add_argument("--by", choices=("cgroup",),
                    help="also group the workload's threads: `cgroup`, per cgroup v2 (as each "
                         "task was first seen; traces of format 9 on), with their time, the "
                         "syscalls they were blocked in and their fsync-family calls (with "
                         "--json: the key `cgroups`)")
    r.set_defaults(func=cmd_report)

    h = sub.add_parser(
        "hist", help="log2 histogram of one latency or seek metric (text or PNG)",
        description=_filled("Print a log2 histogram in biolatency's shape, or draw it to a PNG."),
        epilog="examples:\n"
               "  iowhy hist t.iowt -D                       # device time per disk\n"
               "  iowhy hist t.iowt --flags --class data     # per flag combination\n"
               "  iowhy hist t.iowt --metric fsync --unit msecs\n"
               "  iowhy hist t.iowt --png lat.png --log-y    # for a slide",
        formatter_class=argparse.RawDescriptionHelpFormatter)
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
    sp = sel.add_mutually_exclusive_group()
    sp.add_argument("-D", "--per-disk", action="store_true",
                    help="one histogram per disk, as biolatency -D (device, queue, total "
                         "and seek only)")
    sp.add_argument("-F", "--flags", action="store_true",
                    help="one histogram per combination of request flags and operation "
                         "(Sync-Write, Metadata-Read, ...), as biolatency -F (device, queue, "
                         "total and seek only)")
    o = h.add_argument_group("output")
    o.add_argument("--unit", choices=(*UNITS, *HIST_ALIASES), default="usecs",
                   help="time unit of the slots: nsecs, usecs or msecs (or ns, us, ms; "
                        "default: %(default)s, as biolatency; seek is in sectors)")
    o.add_argument("--json", action="store_true",
                   help="print the histogram(s) as JSON: slots in --unit, count, p50, p99 "
                        "and max in integer ns (sectors for seek); keys in docs/hist-json.md")
    o.add_argument("--log-y", action="store_true",
                   help="with --png: a logarithmic count axis (default: linear)")
    o.add_argument("--png", metavar="OUT",
                   help="draw the histogram to OUT (.png, .svg or .pdf) instead of printing "
                        "it, titled with the trace, metric and class, with its p50 and p99 "
                        "marked: mode 0600, replacing an existing file atomically, never through "
                        "a symlink")
    h.set_defaults(func=cmd_hist)

    c = sub.add_parser(
        "compare", help="two runs side by side: which is slower, and why",
        description="Analyze two traces and explain their difference: the speed ratio, each "
                    "time category's share of the elapsed difference with its evidence, and "
                    "the configuration differences (filesystem, write cache, FUA, mount "
                    "options, command). A is the baseline: deltas are B - A.")
    c.add_argument("trace_a", metavar="A", help="baseline trace file (.iowt)")
    c.add_argument("trace_b", metavar="B", help="trace file to compare with A (.iowt)")
    cout = c.add_argument_group("output")
    cout.add_argument("--json", action="store_true",
                      help="print the comparison as JSON on stdout (keys in "
                           "docs/compare-json.md; times in integer ns)")
    cout.add_argument("--unit", choices=tuple(TIME_UNITS), default=DEFAULT_TIME_UNIT,
                      help="unit of the time rows of the side-by-side table (default: "
                           "%(default)s); JSON keeps integer ns")
    cout.add_argument("--html", metavar="OUT",
                      help="write a self-contained HTML comparison to OUT: mode 0600, "
                           "replacing an existing file atomically, never through a symlink")
    c.set_defaults(func=cmd_compare)

    add_requests_parser(sub)
    add_lab_parser(sub)


def _user_error(message: str, hint: str = "", usage: bool = False) -> Exception:
    return UserError(message, hint, EXIT_USAGE if usage else EXIT_FAIL)


MAX_MS = 86_400_000.0 * 365  # a year: the largest time an option takes (ns fit in int64)


def _check_number(option: str, v: float, lo: float, hi: float, unit: str) -> None:
    """A number option is a finite number in [lo, hi] (argparse's float() takes nan and
    inf), else a usage error in one line."""
    if not (math.isfinite(v) and lo <= v <= hi):
        raise _user_error(f"{option} {v} is not a number of {unit} from {lo:g} to {hi:g}",
                          f"e.g. {option} 10", usage=True)


def _check_out(path: str, suffixes: tuple[str, ...]) -> None:
    """Refuse an output path before the analysis starts: a wrong suffix, a missing,
    unwritable, read-only or full directory, a symlink or a non-regular file (outfile)."""
    from .outfile import check_target
    if not path.lower().endswith(suffixes):
        raise _user_error(f"cannot write {path}: unsupported file type",
                          f"use one of {', '.join(suffixes)}", usage=True)
    check_target(path)


def _wrote(path: str, t0: float) -> None:
    """`wrote PATH (5.4 s)` on stderr: the slow steps say what they made and what it took
    (from the command's start: loading, analysis, rendering and writing)."""
    print(f"wrote {path} ({time.monotonic() - t0:.1f} s)", file=sys.stderr)


def _public(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if not k.startswith("_")}


def print_problems_first(tr: Any, out: Any) -> None:
    """What was lost, first, as the report shows it (reports/terminal.py problems_first)."""
    from .reports.terminal import problems_first
    lines = problems_first(tr)
    if lines:
        print("\n".join(lines), file=out)


def cmd_report(args: argparse.Namespace) -> int:
    from .analysis import AnalysisConfig, analyze
    from .memory import tune_allocator
    t0 = time.monotonic()
    _check_number("--merge-gap-ms", args.merge_gap_ms, 0, MAX_MS, "milliseconds")
    if not 1 <= args.depth_buckets <= 10_000:
        raise _user_error("--depth-buckets must be between 1 and 10000", "", usage=True)
    if args.findings < 0:
        raise _user_error("--findings must be >= 0", "", usage=True)
    interval = getattr(args, "interval", None)
    if interval is not None and not (math.isfinite(interval) and interval * 1e9 >= 1
                                     and interval <= MAX_MS / 1000):
        raise _user_error(f"--interval {interval} is not a number of seconds from 1e-9 to "
                          f"{MAX_MS / 1000:.0f}", "e.g. --interval 1", usage=True)
    if args.html:
        _check_out(args.html, (".html", ".htm"))
    cfg = AnalysisConfig(locality_gap_ns=int(args.merge_gap_ms * 1e6),
                         queue_depth_buckets=args.depth_buckets, max_findings=args.findings,
                         placement=not args.no_placement, locality=not args.no_placement,
                         figures=bool(args.html), keep_causal=bool(args.html),
                         interval_ns=int(round(interval * 1e9)) if interval else 0,
                         by_cgroup=getattr(args, "by", None) == "cgroup")
    # Before the trace is read: its decoded records are the first large allocations,
    # and freed memory must stay in the heap for the analysis (and before the reader's
    # decoding threads start).
    tune_allocator()
    with progress(f"analyzing {args.trace}") as step:
        step("read trace")
        tr = load(args.trace)
        cfg.progress = step
        full = analyze(tr, cfg)
        if args.html:
            # the page's "what if": the recording replayed without barriers, with the
            # write cache off, on the emulated ssd (iowhy whatif)
            from .whatif.predict import for_report
            step("what if")
            full["_whatif"] = for_report(tr, full)
            full.pop("_causal", None)
    result = _public(full)
    # --findings 0: no findings section at all in the text and the page (findings None);
    # the JSON keeps its empty list
    shown = dict(result, findings=None) if args.findings == 0 else result
    html = None
    if args.html:
        from .reports.html import render_html
        # the full result: the figures draw its "_figures"
        with progress(f"drawing {args.html}"):
            html = render_html(dict(full, findings=None) if args.findings == 0 else full)
    from .reports.terminal import render_intervals, render_report
    if interval:
        if result.get("attribution_unavailable"):
            raise _user_error(f"{args.trace}: no attribution per interval: "
                              f"{result['attribution_unavailable']}",
                              "`iowhy report` without --interval shows what the trace holds")
        if "intervals" not in result:
            raise _user_error(f"{args.trace} has no wakeup links: no attribution per interval",
                              "record it again with this iowhy (format version 4)")
        return _emit(args, result, html, lambda r: render_intervals(r, args.unit), t0)
    return _emit(args, result, html, lambda r: render_report(shown, args.unit), t0)


METRIC_NAMES = {"device": "device time", "queue": "queue time", "total": "total time",
                "fsync": "fsync-family call latency", "commit": "commit duration",
                "seek": "seek distance"}


PNG_PANELS = 6  # histograms on one `hist --png` with -D or --flags


def _scaled(v: int | None, div: int) -> float | None:
    return None if v is None else v / div


def cmd_hist(args: argparse.Namespace) -> int:
    from .analysis import metric_split, metric_values
    from .kernels import log2_hist, percentiles
    from .outfile import write_output, write_stdout
    from .reports.hist import figure_bytes, hist_figure, render_hist_json, render_log2_hist
    t0 = time.monotonic()
    if args.png:
        _check_out(args.png, (".png", ".svg", ".pdf"))
    if args.json and args.png:
        raise _user_error("--json and --png are two outputs", "choose one", usage=True)
    split = "disk" if args.per_disk else "flags" if args.flags else None
    from .memory import tune_allocator
    tune_allocator()  # before the trace is read (cmd_report says why)
    try:
        with progress(f"analyzing {args.trace}") as step:
            step("read trace")
            tr = load(args.trace)
            if split:
                groups, unit = metric_split(tr, args.metric, split, args.klass, step)
            else:
                values, unit = metric_values(tr, args.metric, args.klass, step)
                groups = {"": values}
    except ValueError as e:
        raise _user_error(str(e), "see `iowhy hist --help`", usage=True) from None
    print_problems_first(tr, sys.stderr if (args.png or args.json) else sys.stdout)
    hunit = HIST_ALIASES.get(args.unit, args.unit)
    slot_unit = unit if unit != "ns" else hunit
    div = UNITS[hunit] if unit == "ns" else 1
    what = f"{args.metric}" + (f" of {args.klass}" if args.klass else "")
    total = sum(len(v) for v in groups.values())
    if total == 0:
        # nothing to draw is a failure, as grep without a match: scripts can tell
        raise _user_error(f"no values for {what} in {args.trace}",
                          "`iowhy info` lists what the trace holds; try another --class "
                          "or --metric")
    head = {"disk": "disk", "flags": "flags"}.get(split or "", "")
    rows = []
    for name, v in groups.items():
        if not len(v):
            continue
        pct = percentiles(v.copy(), (50, 99))
        rows.append((name, v, log2_hist(v // div), pct))
    if args.json:
        doc = {"schema": "iowhy-hist/1", "trace": args.trace, "metric": args.metric,
               "class": args.klass, "split": split, "unit": unit, "slot_unit": slot_unit,
               "groups": [{"name": name or None, "count": int(len(v)),
                           "p50": pct["p50"], "p99": pct["p99"], "max": pct["max"],
                           "slots": [{"low": 0 if i == 0 else 1 << i,
                                      "high": (1 << (i + 1)) - 1, "count": int(c)}
                                     for i, c in enumerate(counts)]}
                          for name, v, counts, pct in rows]}
        write_stdout(render_hist_json(doc))
        return 0
    if args.png:
        from .reports.units import HIST_UNITS
        shown_unit = HIST_UNITS.get(slot_unit, slot_unit)
        cls = f" of {args.klass} requests" if args.klass and args.metric in (
            "device", "queue", "total", "seek") else f" ({args.klass})" if args.klass else (
            " of all requests" if args.metric in ("device", "queue", "total", "seek") else "")
        title = (f"{os.path.basename(args.trace)}: {METRIC_NAMES[args.metric]}{cls}, "
                 f"n={total:,}")
        # A slide holds a few panels: the PNG_PANELS groups with the most values.
        drawn = sorted(rows, key=lambda x: -len(x[1]))[:PNG_PANELS]
        if len(drawn) < len(rows):
            many = {"disk": "disks", "flags": "flag combinations"}[head]
            title += f" ({len(drawn)} of {len(rows)} {many} with the most values)"
        panels = [((f"{head} = {name}: n={len(v):,}" if head else ""), counts,
                   {q: _scaled(pct[q], div) for q in ("p50", "p99")})
                  for name, v, counts, pct in rows if any(v is d[1] for d in drawn)]
        fig = hist_figure(panels, f"{METRIC_NAMES[args.metric]} ({shown_unit})", title,
                          log_y=args.log_y, value_unit=shown_unit)
        fmt = os.path.splitext(args.png)[1][1:].lower()
        write_output(args.png, figure_bytes(fig, fmt))
        _wrote(args.png, t0)
        return 0
    if not split:
        _, v, counts, _ = rows[0]
        write_stdout(f"{what}: {len(v):,} values\n\n{render_log2_hist(counts, slot_unit)}")
        return 0
    parts = [f"{what} by {head}: {total:,} values"]
    for name, v, counts, _ in rows:
        parts.append(f"\n{head} = {name}: {len(v):,} values\n"
                     f"{render_log2_hist(counts, slot_unit)}")
    write_stdout("\n".join(parts))
    return 0


def _analyze_for_compare(tr: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(analysis result, trace metadata) of one trace; a trace covering no time is refused."""
    from . import abi
    from .analysis import AnalysisConfig, analyze
    with progress(f"analyzing {tr.path}") as step:
        step.add(sum(tr.count(name) for name in abi.RECORD_NAMES))  # read already
        result = _public(analyze(tr, AnalysisConfig(progress=step)))
    if result["elapsed_ns"] <= 0:
        raise _user_error(f"{tr.path} covers no time (its recording window is empty)",
                          "the recording was cut before it started; record again")
    return result, dict(tr.meta or {})


def cmd_compare(args: argparse.Namespace) -> int:
    from .memory import tune_allocator
    from .compare import compare
    t0 = time.monotonic()
    if args.html:
        _check_out(args.html, (".html", ".htm"))
    # Open both before analyzing either, so that a bad B fails at once.
    try:
        same = os.path.samefile(args.trace_a, args.trace_b)
    except OSError:
        same = False
    tune_allocator()  # before the traces are read (cmd_report says why)
    with progress(f"reading {args.trace_a}" + ("" if same else f" and {args.trace_b}")) as step:
        step("read trace")
        tr_a = load(args.trace_a)
        tr_b = tr_a if same else load(args.trace_b)
    a, meta_a = _analyze_for_compare(tr_a)
    # A trace compared with itself is analyzed once (the analysis is deterministic).
    b, meta_b = (a, meta_a) if same else _analyze_for_compare(tr_b)
    result = compare(a, b, meta_a, meta_b)
    if tr_a.damage.damaged or tr_b.damage.damaged:  # only then, as in the report
        result["damage"] = {"a": tr_a.damage.as_dict() if tr_a.damage.damaged else None,
                            "b": tr_b.damage.as_dict() if tr_b.damage.damaged else None}
    html = None
    if args.html:
        from .reports.html import render_compare_html
        with progress(f"drawing {args.html}"):
            html = render_compare_html(a, b, result)
    from .reports.compare_text import render_compare
    return _emit(args, result, html, lambda r: render_compare(r, args.unit), t0)


def _emit(args: argparse.Namespace, result: dict[str, Any], html: str | None,
          render_text: Any, t0: float) -> int:
    """Write the HTML page if one was made (outfile's rules; `wrote PATH (N s)` on
    stderr); print JSON, or the text when no page was asked. A full or failing stdout
    ends in one line (outfile.OutputError); a closed pipe reaches main() as
    BrokenPipeError, which exits quietly."""
    from .outfile import write_output, write_stdout
    if html is not None:
        write_output(args.html, html)
        _wrote(args.html, t0)
    if args.json:
        write_stdout(json.dumps(result, indent=2, allow_nan=False))
    elif html is None:
        write_stdout(render_text(result))
    return 0


# -- iowhy requests ------------------------------------------------------------------------

def add_requests_parser(sub: Any) -> None:
    """Add `requests`: the per-request listing (views.requests)."""
    q = sub.add_parser(
        "requests", help="every block request, one line each, in biosnoop's shape",
        description=_filled(
            "List the block requests of a trace in completion order: completion time in "
            "seconds from the trace start, the submitting command and process, disk, "
            "operation and flags (blktrace RWBS: W write, R read, F flush or a leading "
            "preflush, S sync, M metadata, A readahead; a F after the operation is FUA), "
            "start sector, size in bytes, queue (insert to issue) and device (issue to "
            "completion) time, request class and the fsync-family call it was submitted "
            "in. A time that was not observed is shown as -. Exits 1 when no request "
            "matches."),
        epilog="examples:\n"
               "  iowhy requests t.iowt --class log          # the journal writes\n"
               "  iowhy requests t.iowt --slower 10 --dev sda  # over 10 ms on sda\n"
               "  iowhy requests t.iowt --csv > requests.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("trace", help="trace file (.iowt)")
    sel = q.add_argument_group("selection")
    sel.add_argument("--class", dest="klass", metavar="C",
                     help=f"only requests of this class (one of {', '.join(CLASS_NAMES)}; "
                          "default: all)")
    sel.add_argument("--dev", metavar="D",
                     help="only requests of this disk: its name (sda, /dev/sda) or MAJ:MIN "
                          "(default: all)")
    sel.add_argument("--pid", type=int, metavar="P",
                     help="only requests submitted by process P (default: all)")
    sel.add_argument("--comm", metavar="C",
                     help="only requests submitted by a task named C (its first 15 "
                          "characters, as the kernel keeps them; default: all)")
    sel.add_argument("--slower", type=float, metavar="MS",
                     help="only requests whose total time (submission to completion) "
                          "exceeds MS milliseconds (default: all)")
    o = q.add_argument_group("output")
    fmt = o.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help="print JSON: times in integer ns, sizes in bytes "
                          "(keys in docs/requests-json.md)")
    fmt.add_argument("--csv", action="store_true",
                     help="print CSV with a header line: times in integer ns, sizes in bytes")
    o.add_argument("--unit", choices=tuple(TIME_UNITS), default=DEFAULT_TIME_UNIT,
                   help="unit of the queue and device columns of the text table "
                        "(default: %(default)s)")
    q.set_defaults(func=cmd_requests)


def cmd_requests(args: argparse.Namespace) -> int:
    from .outfile import flush_stdout, write_stdout
    from .reports.requests import render_text, write_csv, write_json
    from .reports.units import output_width
    from .views.requests import Filters, request_rows
    if args.slower is not None:
        _check_number("--slower", args.slower, 0, MAX_MS, "milliseconds")
    flt = Filters(klass=args.klass, dev=args.dev, pid=args.pid, comm=args.comm,
                  slower_ns=None if args.slower is None else int(args.slower * 1e6))
    from .memory import tune_allocator
    tune_allocator()  # before the trace is read (cmd_report says why)
    try:
        with progress(f"listing the requests of {args.trace}") as step:
            step("read trace")
            tr = load(args.trace)
            step("requests")
            rows = request_rows(tr, flt)
            # the table formatted under the progress line, written after it is erased
            step("formatting")
            text = (None if args.json or args.csv
                    else render_text(rows, args.unit, output_width()))
    except ValueError as e:
        raise _user_error(str(e), "see `iowhy requests --help`", usage=True) from None
    print_problems_first(tr, sys.stderr if (args.json or args.csv) else sys.stdout)
    if text is not None:
        write_stdout(text)
    else:  # JSON and CSV are written a batch of rows at a time
        (write_json if args.json else write_csv)(sys.stdout, rows)
        flush_stdout()
    # no request listed is a failure, as grep without a match (and hist without a value)
    return 0 if len(rows) else EXIT_FAIL


# -- iowhy lab ------------------------------------------------------------------------------

LAB_DISKS = ("hdd-7200", "ssd", "ram")
LAB_FILESYSTEMS = FS_NAMES


def add_lab_parser(sub: Any) -> None:
    """Add `lab list` and `lab run` (the scenarios of iowhy.lab.scenarios)."""
    lab = sub.add_parser(
        "lab", help="seed scenarios on an emulated disk, checked against its ground truth",
        description="Run a workload on an emulated disk (a FUSE-backed loop device with an "
                    "HDD/SSD/RAM model that logs what it served), record it with `iowhy "
                    "record`, and compare iowhy's figures with the disk's ground truth.")
    lsub = lab.add_subparsers(dest="lab_cmd", metavar="ACTION")
    ls = lsub.add_parser("list", help="the scenarios, one per line, name first")
    ls.set_defaults(func=cmd_lab_list)
    rn = lsub.add_parser(
        "run", help="run a scenario (or `all`) and validate iowhy against the ground truth",
        description="Create the emulated disk and the filesystem, set the cache mode, run the "
                    "setup, record the workload, then write the trace, the report (text, "
                    "JSON, HTML when available), the ground truth and the run's figures side "
                    "by side in --out, named <scenario>-<fs>-<disk>. Needs root. Exit status: "
                    "0 all validated, 3 a figure out of tolerance, 1 a run failed.")
    rn.add_argument("scenario", help="a name from `iowhy lab list`, or `all` (every scenario "
                                     "on each of its filesystems)")
    rn.add_argument("--disk", choices=LAB_DISKS, default="hdd-7200",
                    help="disk model (default: %(default)s)")
    rn.add_argument("--fs", choices=LAB_FILESYSTEMS,
                    help="filesystem (default: the scenario's first; with `all`: only the "
                         "scenarios that list it)")
    rn.add_argument("--json", action="store_true",
                    help="print the run's figures and its `validation` list as JSON (a list "
                         "for `all`)")
    rn.add_argument("--out", default="out/lab", metavar="DIR",
                    help="output directory (default: %(default)s)")
    rn.add_argument("--workdir", default="/var/tmp/iowhy-lab", metavar="DIR",
                    help="where the emulated disk's backing file lives while it runs "
                         "(default: %(default)s)")
    rn.set_defaults(func=cmd_lab_run)
    lab.set_defaults(func=lambda a: (lab.print_help(sys.stderr), 2)[1])


def cmd_lab_list(args: argparse.Namespace) -> int:
    import shutil

    from .lab.scenarios import list_lines
    width = 100
    if sys.stdout.isatty():
        width = max(60, min(width, shutil.get_terminal_size((width, 24)).columns))
    print("\n".join(list_lines(width)))
    return 0


def cmd_lab_run(args: argparse.Namespace) -> int:
    import signal

    from .lab import scenarios
    if args.scenario == "all":
        runs = scenarios.all_runs(args.fs)
    elif args.scenario in scenarios.SCENARIOS:
        runs = [(args.scenario, args.fs or scenarios.SCENARIOS[args.scenario].default_fs())]
    else:
        raise _user_error(f"unknown scenario {args.scenario!r}",
                          "see `iowhy lab list`", usage=True)
    from .lab import emudisk
    try:
        emudisk.find_binary()
    except emudisk.EmulatedDiskError:
        raise _user_error("the emulated disk (lab/emudisk) is not built",
                          "run `make emudisk` in the iowhy checkout, which installs "
                          "libfuse3-dev, or `make install`; IOWHY_EMUDISK may name the "
                          "binary") from None
    if os.geteuid() != 0:
        raise _user_error("the lab needs root (emulated disk, mounts, BPF)", "run it with sudo")

    def stop(signum: int, frame: Any) -> None:
        # unwind through the runs' cleanup (unmount, loop device, daemon) before exiting
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    results: list[dict[str, Any]] = []
    failed = False
    try:
        for name, fs in runs:
            try:
                r = scenarios.run(name, fs, args.disk, out_dir=args.out, workdir=args.workdir,
                                  progress=lambda m: print(f"iowhy lab: {m}", file=sys.stderr))
            except (scenarios.LabError, emudisk.EmulatedDiskError) as e:
                failed = True
                print(f"iowhy lab: {scenarios.run_id(name, fs, args.disk)} failed: {e}",
                      file=sys.stderr)
                continue
            results.append(r)
            if not args.json:
                print(scenarios.render_run(r))
                print()
    finally:
        signal.signal(signal.SIGTERM, old)
    if results:
        # the seeds' comparisons whose two runs are now in the output directory
        made = {scenarios.run_id(r["scenario"], r["fs"], r["disk"]) for r in results}
        for page in scenarios.gallery(args.out, args.disk, only=made):
            print(f"iowhy lab: comparison {page}", file=sys.stderr)
    if args.json:
        json.dump(results[0] if len(runs) == 1 and results else results, sys.stdout, indent=2)
        print()
    if failed:
        if len(runs) == 1:
            raise _user_error("the lab run failed (see above)", "")
        return 1
    return 0 if all(r["ok"] for r in results) else 3
