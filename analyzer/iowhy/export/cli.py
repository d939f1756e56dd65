"""`iowhy export`, `iowhy query` and `iowhy import` (added to cli.py's parser by
add_export_parsers). numpy, pyarrow, duckdb and perfetto are imported where used."""

from __future__ import annotations

import argparse
import sys
from typing import Any

FORMATS = ("parquet", "perfetto", "chrome-json")
TERMINAL_LIMIT = 1000  # rows `iowhy query` shows on a terminal unless --limit says otherwise
IMPORT_FORMATS = ("blktrace", "ftrace")


def add_export_parsers(sub: Any) -> None:
    e = sub.add_parser(
        "export", help="convert a trace for other tools: Parquet, Perfetto, Trace Event JSON",
        description="Write a trace as Parquet tables (a directory: runs, requests, calls, "
                    "offcpu, journal, tasks; docs/parquet-schema.md), as a Perfetto trace "
                    "(open it in ui.perfetto.dev) or as Trace Event JSON (chrome://tracing). "
                    "Needs the optional packages: pip install 'iowhy[export]'.")
    e.add_argument("trace", help="trace file (.iowt)")
    e.add_argument("--format", choices=FORMATS, required=True,
                   help="parquet: a directory of .parquet files; perfetto: a .pftrace file; "
                        "chrome-json: a .json file")
    out = e.add_mutually_exclusive_group(required=True)
    out.add_argument("-o", "--output", metavar="OUT",
                     help="directory (parquet) or file to write; files are mode 0600 and "
                          "never written through a symlink")
    out.add_argument("--dataset", metavar="DIR",
                     help="parquet: add the run to the dataset DIR of many runs and hosts "
                          "(TABLE/host=HOST/date=YYYY-MM-DD/RUN_UUID.parquet, a new file per "
                          "table; other runs' files are left as they are; docs/export.md)")
    e.set_defaults(func=cmd_export)

    q = sub.add_parser(
        "query", help="SQL over many runs (DuckDB): runs, requests, calls, offcpu, journal",
        description="Run one SQL query over the views runs, requests, calls, offcpu, journal "
                    "and tasks of every given run (docs/parquet-schema.md; examples in "
                    "docs/export.md). The query reads nothing but those runs.")
    q.add_argument("sql", metavar="SQL", help="the query (DuckDB SQL)")
    q.add_argument("runs", nargs="+", metavar="RUN",
                   help="trace files (.iowt), directories from `iowhy export --format "
                        "parquet -o DIR`, or datasets from `--dataset DIR` (every run in it)")
    fmt = q.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    fmt.add_argument("--json", action="store_true", help="print a JSON array of objects")
    q.add_argument("--limit", type=int, metavar="N",
                   help="at most N rows, and say on stderr when more were left; 0: every "
                        f"row (default: {TERMINAL_LIMIT:,} on a terminal, every row "
                        "otherwise). Rows are written as they are fetched: memory does "
                        "not grow with the result")
    q.add_argument("-o", "--output", metavar="FILE",
                   help="write the result to FILE instead of stdout (mode 0600, complete "
                        "or not at all, never through a symlink)")
    q.set_defaults(func=cmd_query)

    im = sub.add_parser(
        "import", help="turn a blktrace or ftrace capture into an iowhy trace",
        description="Read blktrace binary files (DEV.blktrace.N, or a `blkparse -d` dump) or "
                    "ftrace text (tracefs trace/trace_pipe, `trace-cmd report`, `perf "
                    "script`) and write an iowhy trace that every other command reads. The "
                    "trace says on its first line what the source could not provide.")
    im.add_argument("format", choices=IMPORT_FORMATS, help="what INPUT is")
    im.add_argument("inputs", nargs="+", metavar="INPUT", help="capture file(s)")
    im.add_argument("-o", "--output", required=True, metavar="OUT.iowt",
                    help="trace to write (mode 0600; a symlink there is replaced, not "
                         "followed)")
    im.add_argument("--pid", type=int, action="append", metavar="TID",
                    help="a thread of the workload (repeatable): its requests count as the "
                         "workload's and, with ftrace sched events, its off-CPU time is "
                         "attributed")
    im.add_argument("--comm", action="append", metavar="NAME",
                    help="threads of this name are the workload's (repeatable); a name "
                         "borne by more than one process (other than the children its "
                         "fork events show) is refused, listing them: give --pid instead")
    im.set_defaults(func=cmd_import)


def _user_error(e: Exception) -> Exception:
    from ..errors import UserError
    return UserError(str(e), getattr(e, "hint", ""))


def cmd_export(args: argparse.Namespace) -> int:
    from ..errors import load
    from ..memory import tune_allocator
    from ..progress import progress
    from .files import OutputError
    from ..outfile import check_target
    from .files import check_dir
    from ..errors import EXIT_USAGE, UserError
    if args.dataset is not None and args.format != "parquet":
        raise UserError(f"--dataset is for --format parquet, not {args.format}",
                        "give -o FILE for a Perfetto or JSON trace", EXIT_USAGE)
    # the output path is refused before the trace is read and analyzed
    if args.dataset is not None:
        check_dir(args.dataset)
    elif args.format == "parquet":
        check_dir(args.output)
    else:
        check_target(args.output)
    if args.format == "parquet":
        from . import available
        available("pyarrow")  # imported once the analysis is done (export.available)
    tune_allocator()  # before the trace is read: the analysis reuses its freed memory
    try:
        with progress(f"exporting {args.trace}") as step:
            step("read trace")
            tr = load(args.trace)
            where = args.output
            if args.dataset is not None:
                from .parquet import write_dataset
                rows, part = write_dataset(tr, args.dataset)
                where = f"{args.dataset} ({part})"
                said = ", ".join(f"{k} {v} rows" for k, v in rows.items())
            elif args.format == "parquet":
                from .parquet import write_parquet
                rows = write_parquet(tr, args.output)
                said = ", ".join(f"{k} {v} rows" for k, v in rows.items())
            else:
                from .perfetto import write_chrome_json, write_perfetto
                fn = write_perfetto if args.format == "perfetto" else write_chrome_json
                counts = fn(tr, args.output)
                said = ", ".join(f"{v} {k}" for k, v in counts.items())
    except OutputError as err:
        raise _user_error(err) from None
    from ..commands import print_problems_first
    print_problems_first(tr, sys.stderr)  # after the progress line: first, before what was written
    print(f"wrote {where}: {said}", file=sys.stderr)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    import contextlib

    from ..errors import EXIT_USAGE, UserError
    from ..memory import tune_allocator
    from ..outfile import check_target, open_output
    from ..progress import progress
    from .query import QueryError, open_query, write_result
    if args.limit is not None and args.limit < 0:
        raise UserError(f"--limit {args.limit} is not a number of rows",
                        "give N >= 0 (0: every row)", EXIT_USAGE)
    if args.output:
        check_target(args.output)  # before any run is read
    limit = args.limit or None
    if args.limit is None and not args.output and sys.stdout.isatty():
        limit = TERMINAL_LIMIT
    fmt = "csv" if args.csv else "json" if args.json else "table"
    runs = args.runs[0] if len(args.runs) == 1 else f"{len(args.runs)} runs"
    tune_allocator()  # before any trace is read and analyzed
    from ..reports.terminal import problems_first
    problems: list[str] = []  # each trace's losses, said before the result

    def on_trace(path: str, tr: Any) -> None:
        problems.extend(problems_first(tr, f"{path}: "))
    try:
        with contextlib.ExitStack() as stack:
            with progress(f"querying {runs}"):
                cols, batches = stack.enter_context(open_query(args.sql, args.runs,
                                                               on_trace))
                first = next(batches, None)  # the query runs under the progress line
            for line in problems:  # each trace's losses, before the result
                print(line, file=sys.stderr)
            rows = _chain(first, batches)
            out = stack.enter_context(open_output(args.output, binary=False)) \
                if args.output else sys.stdout
            n, cut = write_result(out, fmt, cols, rows, limit)
    except QueryError as err:
        raise _user_error(err) from None
    except BrokenPipeError:
        raise  # `| head`: main() exits quietly
    except OSError as e:  # writing -o FILE (stdout's errors are outfile's already)
        from ..outfile import _os_error
        raise _os_error(args.output or "standard output", e) from None
    if cut:
        print(f"iowhy: showing the first {n:,} rows; more were left (--limit N for more, "
              "--limit 0 for every row)", file=sys.stderr)
    if args.output:
        print(f"wrote {args.output}: {n:,} rows", file=sys.stderr)
    return 0


def _chain(first: Any, rest: Any) -> Any:
    if first is not None:
        yield first
        yield from rest


def cmd_import(args: argparse.Namespace) -> int:
    import os

    from ..importers.common import ImportError_
    from ..outfile import check_target
    from ..progress import progress
    what = args.inputs[0] if len(args.inputs) == 1 else f"{len(args.inputs)} files"
    if not os.path.islink(args.output):  # a symlink there is replaced, not followed
        check_target(args.output)  # before the inputs are read
    try:
        workload, comms = set(args.pid or ()), set(args.comm or ())
        with progress(f"importing {what}"):
            if args.format == "blktrace":
                from ..importers.blktrace import import_blktrace
                res = import_blktrace(args.inputs, args.output, workload, comms)
            else:
                from ..importers.ftrace import import_ftrace
                res = import_ftrace(args.inputs, args.output, workload, comms)
    except ImportError_ as err:
        raise _user_error(err) from None
    print(f"wrote {args.output}: " + ", ".join(f"{v} {k}" for k, v in res.items()),
          file=sys.stderr)
    return 0
