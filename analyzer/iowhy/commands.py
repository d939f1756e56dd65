"""The analysis subcommands: `iowhy report`, `iowhy hist` and `iowhy compare` (added to
cli.py's parser). The numpy-based analysis is imported inside the commands (names.py
says why).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from .errors import EXIT_FAIL, EXIT_USAGE, UserError, load
from .names import CLASS_NAMES, METRICS

UNITS = {"nsecs": 1, "usecs": 1_000, "msecs": 1_000_000}


def add_analysis_parsers(sub: Any) -> None:
    """Add `report`, `hist` and `compare` to the `iowhy` subparsers."""
    r = sub.add_parser(
        "report", help="where the elapsed time went: terminal report or JSON",
        description="Attribute the workload's elapsed time by what woke each wait (cpu, "
                    "runqueue, barrier, log, metadata, data, read, helper-cpu, "
                    "helper-runqueue, sleep, external, wait-other), the thread time of all "
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
                   help="draw the histogram to OUT (.png, .svg or .pdf) instead of printing "
                        "it: mode 0600, replacing an existing file atomically, never through "
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
    cout.add_argument("--html", metavar="OUT",
                      help="write a self-contained HTML comparison to OUT: mode 0600, "
                           "replacing an existing file atomically, never through a symlink")
    c.set_defaults(func=cmd_compare)

    add_lab_parser(sub)


def _user_error(message: str, hint: str = "", usage: bool = False) -> Exception:
    return UserError(message, hint, EXIT_USAGE if usage else EXIT_FAIL)


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


def cmd_report(args: argparse.Namespace) -> int:
    from .analysis import AnalysisConfig, analyze
    from .memory import tune_allocator
    t0 = time.monotonic()
    if args.merge_gap_ms < 0:
        raise _user_error("--merge-gap-ms must be >= 0", "", usage=True)
    if not 1 <= args.depth_buckets <= 10_000:
        raise _user_error("--depth-buckets must be between 1 and 10000", "", usage=True)
    if args.findings < 0:
        raise _user_error("--findings must be >= 0", "", usage=True)
    interval = getattr(args, "interval", None)
    if interval is not None and not (interval > 0 and interval * 1e9 >= 1):
        raise _user_error("--interval must be a positive number of seconds", "", usage=True)
    if args.html:
        _check_out(args.html, (".html", ".htm"))
    tr = load(args.trace)
    tune_allocator()
    cfg = AnalysisConfig(locality_gap_ns=int(args.merge_gap_ms * 1e6),
                         queue_depth_buckets=args.depth_buckets, max_findings=args.findings,
                         placement=not args.no_placement, locality=not args.no_placement,
                         figures=bool(args.html),
                         interval_ns=int(round(interval * 1e9)) if interval else 0)
    full = analyze(tr, cfg)
    result = _public(full)
    # --findings 0: no findings section at all in the text and the page (findings None);
    # the JSON keeps its empty list
    shown = dict(result, findings=None) if args.findings == 0 else result
    html = None
    if args.html:
        from .reports.html import render_html
        # the full result: the figures draw its "_figures"
        html = render_html(dict(full, findings=None) if args.findings == 0 else full)
    from .reports.terminal import render_intervals, render_report
    if interval:
        if "intervals" not in result:
            raise _user_error(f"{args.trace} has no wakeup links: no attribution per interval",
                              "record it again with this iowhy (format version 4)")
        return _emit(args, result, html, render_intervals, t0)
    return _emit(args, result, html, lambda r: render_report(shown), t0)


def cmd_hist(args: argparse.Namespace) -> int:
    from .analysis import metric_values
    from .outfile import write_output, write_stdout
    from .reports.hist import log2_counts, render_log2_hist, render_png
    t0 = time.monotonic()
    if args.png:
        _check_out(args.png, (".png", ".svg", ".pdf"))
    tr = load(args.trace)
    try:
        values, unit = metric_values(tr, args.metric, args.klass)
    except ValueError as e:
        raise _user_error(str(e), "see `iowhy hist --help`", usage=True) from None
    if tr.damage.damaged:  # first, as every command shows it
        from .reports.terminal import damage_first
        print("\n".join(damage_first(tr.damage.as_dict())),
              file=sys.stderr if args.png else sys.stdout)
    if unit == "ns":
        values = values // UNITS[args.unit]
        val_type = args.unit
    else:
        val_type = unit
    what = f"{args.metric}" + (f" of {args.klass}" if args.klass else "")
    if len(values) == 0:
        # nothing to draw is a failure, as grep without a match: scripts can tell
        raise _user_error(f"no values for {what} in {args.trace}",
                          "`iowhy info` lists what the trace holds; try another --class "
                          "or --metric")
    counts = log2_counts(values)
    if args.png:
        fmt = os.path.splitext(args.png)[1][1:].lower()
        write_output(args.png, render_png(counts, val_type, fmt,
                                          title=f"{what} (n={len(values):,})"))
        _wrote(args.png, t0)
        return 0
    write_stdout(f"{what}: {len(values):,} values\n\n{render_log2_hist(counts, val_type)}")
    return 0


def _analyze_for_compare(tr: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(analysis result, trace metadata) of one trace; a trace covering no time is refused."""
    from .analysis import AnalysisConfig, analyze
    result = _public(analyze(tr, AnalysisConfig()))
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
    tr_a = load(args.trace_a)
    try:
        same = os.path.samefile(args.trace_a, args.trace_b)
    except OSError:
        same = False
    tr_b = tr_a if same else load(args.trace_b)
    tune_allocator()
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
        html = render_compare_html(a, b, result)
    from .reports.compare_text import render_compare
    return _emit(args, result, html, render_compare, t0)


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


# -- iowhy lab ------------------------------------------------------------------------------

LAB_DISKS = ("hdd-7200", "ssd", "ram")
LAB_FILESYSTEMS = ("ext4", "xfs", "btrfs")


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
            except scenarios.LabError as e:
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
