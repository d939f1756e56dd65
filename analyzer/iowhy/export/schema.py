"""The Parquet tables' schema: one definition that gives the explicit Arrow schema of
every table (arrow_schema, what `iowhy export --format parquet` writes and `iowhy
query` reads) and docs/parquet-schema.md (schema_doc; a unit test checks that the
committed file is what this module writes).

Regenerate the page after a change: `python -m iowhy.export.schema -o
docs/parquet-schema.md` (or `make parquet-schema`). A change of a table's columns bumps
SCHEMA_VERSION and says what changed in CHANGES.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from ..categories import ATTRIBUTION_CATEGORIES, PART_NAMES
from ..filesystems import FILESYSTEMS

_FS = ", ".join(f"`{f.name}`" for f in FILESYSTEMS)  # the filesystems iowhy knows
SCHEMA_VERSION = 3
# What each version changed (the page lists them).
CHANGES = (
    (1, "the first tables: runs, requests, calls, offcpu, journal, tasks, attribution"),
    (2, "`requests`: `counted`, `background`, `carried_for`, `category`, `served_by` (the "
        "report's class tables and attribution per request), `bio` and a row per bio of a "
        "bio-based device (as the report counts them); device names as the report gives "
        "them (the devices below a stack too); `runs`: `argv` (a list: `command` joins it "
        "by spaces and loses its boundaries), `command_short`, `workload_devices`, "
        "`attribution`; an unknown name (comm, filesystem) is NULL, not an empty string; "
        "`calls.ino`, `calls.dev_major`/`dev_minor` and `tasks.exit_code` NULL where "
        "unknown; every file has the explicit schema below (never inferred: "
        "`source_limits` is a list of strings even when empty)"),
    (3, "`tasks`: `cgroup_id` and `cgroup`, the task's cgroup v2 at the event (trace "
        "format 9; NULL in older traces); `iowhy query` reads an older export's tables "
        "with the columns they lack as NULL"),
)

STRING, INT64, UINT64, BOOL, STRINGS = "string", "int64", "uint64", "bool", "list<string>"
TYPE_WORDS = {STRING: "string", INT64: "int64", UINT64: "uint64", BOOL: "bool",
              STRINGS: "list of string"}


@dataclass(frozen=True)
class Cols:
    """Columns sharing a type and a meaning (one line of the page)."""

    names: tuple[str, ...]
    type: str
    meaning: str


@dataclass(frozen=True)
class Table:
    name: str
    one_row_per: str
    columns: tuple[Cols, ...]
    intro: str = ""
    notes: str = ""


def c(names: str, type_: str, meaning: str) -> Cols:
    return Cols(tuple(n.strip() for n in names.split(",")), type_, meaning)


RUN_UUID = c("run_uuid", STRING, "the run's id (`runs.run_uuid`)")
CATEGORY_COLUMNS = tuple(f"{k.replace('-', '_')}_ns" for k in ATTRIBUTION_CATEGORIES)

TABLES: tuple[Table, ...] = (
    Table("runs", "recording (one row per export)", (
        c("run_uuid", STRING, "the run's id"),
        c("host, kernel, machine", STRING, "`uname -n`, `-r`, `-m` of the recording host "
          "(NULL if unknown, e.g. imported captures)"),
        c("iowhy_version", STRING, "iowhy that recorded or imported"),
        c("source", STRING, "`iowhy record`, or the import format (`blktrace`, `ftrace`)"),
        c("source_limits", STRINGS, "what the source could not provide (empty for iowhy "
          "recordings)"),
        c("argv", STRINGS, "the workload's command line, one element per argument, as "
          "recorded (NULL if unknown: an `attach` to a process, an import)"),
        c("command", STRING, "`argv` joined by single spaces, for display (an argument "
          "holding a space cannot be told apart: use `argv`); NULL if unknown"),
        c("command_short", STRING, "the command as the report's headings show it "
          "(`trace.command_short` of `report --json`); NULL if unknown"),
        c("pid", INT64, "the workload's PID (NULL if unknown)"),
        c("devices", STRINGS, "disks described by the trace, named as in the report"),
        c("workload_devices", STRINGS, "the workload's devices (`workload.devices` of "
          "`report --json`)"),
        c("filesystems", STRINGS, f"filesystem types mounted on them ({_FS})"),
        c("start_ns, end_ns", INT64, "the recording window"),
        c("elapsed_ns", INT64, "`end_ns - start_ns`, the time the attribution divides"),
        c("realtime_minus_monotonic_ns", INT64, "add to a monotonic time for wall-clock "
          "ns (NULL if unknown)"),
        c("created_realtime_ns", INT64, "wall-clock time the trace file was created"),
        c("lost_events", INT64, "events lost in the kernel while recording (`iowhy "
          "info`)"),
        c("truncated", BOOL, "the trace had no trailer"),
        c("attribution", STRING, "`causal` or `correlational` (`workload.attribution` "
          "of `report --json`); NULL when the source cannot attribute (the category "
          "columns are NULL then)"),
        Cols(CATEGORY_COLUMNS, INT64, "the attribution of the elapsed time, level one "
             "(docs/report-json.md, `attribution_ns`; `-` in a category's name is `_` "
             "here); they sum to `elapsed_ns`. A correlational attribution has no value "
             "for the causal-only ones: NULL. All NULL when the source saw no workload "
             "threads (blktrace imports)"),
    )),
    Table("requests", "block request, and bio of a bio-based device", (
        RUN_UUID,
        c("seq", INT64, "the recorder's request number (NULL for a bio)"),
        c("bio", BOOL, "a bio of a bio-based device (zram, device-mapper, md), which "
          "never becomes a request: the report counts it as one request of its device "
          "(docs/report-json.md, `bios`); only its end is known (`done_ns`)"),
        c("device", STRING, "the device's name as in the report (`MAJ:MIN` if the trace "
          "does not describe it)"),
        c("dev_major, dev_minor", INT64, "the device's number"),
        c("class", STRING, "`flush`, `log`, `metadata`, `data`, `read`, `readahead`, "
          "`discard` (docs/report-json.md, Classification)"),
        c("op", STRING, "`read`, `write`, `flush`, `discard`, `other`"),
        c("start_sector", INT64, "start sector on the device"),
        c("len_bytes", INT64, "size at insert (the report's `bytes`)"),
        c("done_bytes", INT64, "bytes completed (NULL for a bio)"),
        c("sync, meta, fua, preflush, readahead", BOOL, "REQ_SYNC, REQ_META, REQ_FUA, "
          "REQ_PREFLUSH, REQ_RAHEAD"),
        c("submit_ns, insert_ns, issue_ns, data_done_ns, done_ns", INT64,
          "stage times (NULL: not seen; a bio has `done_ns` only)"),
        c("queue_ns", INT64, "issue - insert (0 for a direct issue)"),
        c("device_ns", INT64, "final completion - issue (post-flush included)"),
        c("total_ns", INT64, "final completion - first known start"),
        c("seek_sectors", INT64, "signed distance from the end of the previous "
          "data-bearing request on the device, in issue order (NULL for the first, and "
          "for requests without data)"),
        c("submitter_tid, submitter_tgid", INT64, "the task that submitted the request's "
          "first bio (NULL if unknown)"),
        c("submitter_comm", STRING, "its name (NULL if unknown)"),
        c("workload", BOOL, "the submitter belongs to the workload"),
        c("counted", BOOL, "in the report's class tables (`requests` of `report "
          "--json`: counts and bytes): not `background`, not carried for a device "
          "above (`carried_for`) and not an empty PREFLUSH request (never issued: merged "
          "into the `FF` flush counted, the report's `flushes.empty_preflush`): I/O "
          "counted once per device stack, on the workload's devices, not other "
          "processes'. `count(*) ... WHERE counted GROUP BY class` is the report's "
          "`count` per class"),
        c("background", BOOL, "not the workload's I/O (the report's `background`): on "
          "a device the analysis set apart, or another process's request on a workload "
          "device (or on the disk below one that it did not serve). Left out of the "
          "class tables and of their percentiles"),
        c("carried_for", STRING, "the device above whose I/O this request carried (a "
          "loop device's backing disk writing its file, a slave of a dm/md device; the "
          "report's `stack_carried`): counted there, not here; still in the latency "
          "percentiles, the device view and the attribution. NULL for any other"),
        c("category", STRING, "the level one a workload wait on this request counts as "
          "(`barrier`, `log`, `metadata`, `data`, `read`: its class's category)"),
        c("served_by", STRING, "the level two its device stage is in the attribution "
          "(`flush`, `log`, `metadata`, `data`, `read`; the `attribution` table's "
          "`served_by`), a loop device's request too (a wait on it is named by its "
          "own service, whether or not the disk below is recorded; how that disk "
          "served it is the report's `stack_service`). NULL on a device the analysis "
          "set apart (no workload wait reached it: `background`)"),
        c("call_id", INT64, "`calls.call_id` of the fsync-family call the submitter was "
          "inside (same run), NULL if none"),
        c("error", INT64, "completion status (negative errno; NULL for a bio)"),
        c("requeues, nr_bios", INT64, "times requeued, bios merged into it (NULL for a "
          "bio)"),
        c("incomplete", BOOL, "still in flight when recording stopped: latencies NULL"),
        c("unmatched", BOOL, "first seen at completion (issued before recording)"),
        c("flush_seq", BOOL, "went through the flush state machine (PREFLUSH/FUA "
          "emulation)"),
        c("lost_completion, lost_issue", BOOL, "the kernel did not deliver that event"),
    ), notes=(
        "Latencies (`queue_ns`, `device_ns`, `total_ns`) are NULL for requests not fully "
        "observed (`incomplete`, `unmatched`, `lost_completion`, `lost_issue`, bios), as "
        "in the report's percentiles. The report's counts and percentiles of a class are "
        "over the same requests, `WHERE counted` (the percentiles: those with a latency), "
        "nearest-rank (docs/export.md gives the SQL).")),
    Table("calls", "fsync-family call (fsync, fdatasync, sync, syncfs, sync_file_range, "
          "msync, O_SYNC write)", (
              RUN_UUID,
              c("call_id", INT64, "index of the call in the trace, what "
                "`requests.call_id` refers to"),
              c("call", STRING, "`fsync`, `fdatasync`, `sync`, `syncfs`, "
                "`sync_file_range`, `msync`, `osync_write`"),
              c("fs", STRING, f"{_FS}; NULL if unknown"),
              c("dev_major, dev_minor", INT64, "the filesystem's device (NULL if "
                "unknown)"),
              c("tid, tgid", INT64, "the calling thread"),
              c("comm", STRING, "its name (NULL if unknown)"),
              c("enter_ns, exit_ns", INT64, "syscall entry and exit"),
              c("latency_ns", INT64, "exit - entry; NULL unless seen from entry to exit"),
              c("ret", INT64, "return value"),
              c("fd", INT64, "file descriptor"),
              c("ino", INT64, "inode number (NULL if unknown)"),
              c("commit_seq", INT64, "journal transaction (jbd2 tid, XFS LSN, btrfs "
                "transid) the call waited for; NULL if unknown"),
              c("datasync, incomplete, late_entry, exit_unseen", BOOL, "flags "
                "(docs/trace-format.md)"),
          )),
    Table("offcpu", "off-CPU interval of a workload thread", (
        RUN_UUID,
        c("tid, tgid", INT64, "the thread"),
        c("start_ns, waking_ns, end_ns", INT64, "switched out, woken (NULL for a "
          "preemption), back on CPU"),
        c("blocked_ns", INT64, "waking - start (end - start for a preemption)"),
        c("runnable_ns", INT64, "end - waking (0 for a preemption)"),
        c("preempted, iowait, uninterruptible", BOOL, "how it left the CPU"),
        c("syscall", STRING, "the syscall it was in (`none` outside one)"),
        c("waker_tid, waker_tgid", INT64, "who woke it (NULL if unknown)"),
        c("waker_comm", STRING, "its name (NULL if unknown)"),
    )),
    Table("journal", "journal/log event (jbd2, ext4 fast commit, XFS log, btrfs)", (
        RUN_UUID,
        c("ts_ns", INT64, "event time"),
        c("event", STRING, ", ".join(f"`{ev}`" for f in FILESYSTEMS
                                     for _, ev in f.journal_tracepoints)),
        c("fs", STRING, "filesystem type (NULL if unknown)"),
        c("dev_major, dev_minor", INT64, "the filesystem's device"),
        c("seq", INT64, "transaction id / LSN / transid"),
        c("aux0, aux1, aux2", INT64, "event-specific values (docs/trace-format.md, "
          "journal records)"),
        c("tid", INT64, "the thread that emitted the event"),
        c("comm", STRING, "its name (NULL if unknown)"),
    )),
    Table("tasks", "fork/exec/exit of a workload thread", (
        RUN_UUID,
        c("ts_ns", INT64, "event time"),
        c("event", STRING, "`root`, `fork`, `exec`, `exit`, `dead`, `join` (a process that "
          "joined the followed cgroup, `--cgroup`)"),
        c("tid, tgid", INT64, "the thread"),
        c("parent_tgid", INT64, "parent process (NULL if unknown)"),
        c("exit_code", INT64, "exit status, `wait(2)` encoding (`exit` events; NULL for "
          "the others)"),
        c("comm", STRING, "task name (NULL if unknown)"),
        c("cgroup_id", UINT64, "the task's cgroup v2 at the event: the kernel's cgroup id "
          "(the inode number of its directory). NULL if unknown: a trace of a format "
          "before 9 records none, and the recorder writes 0 for a task whose cgroup it "
          "could not read"),
        c("cgroup", STRING, "that cgroup's path below the cgroup2 mount, as `report --by "
          "cgroup` names it (the trace's TRAILER and PROGRESS `cgroups`); NULL when "
          "`cgroup_id` is, or the cgroup was removed before the recorder named it. The "
          "report puts a thread in the cgroup of its earliest row naming one"),
    )),
    Table("attribution", "(basis, level one, what served it) of the run's attribution", (
        RUN_UUID,
        c("basis", STRING, "`elapsed` (the critical path, as `runs`) or `thread_time` "
          "(every workload thread's life)"),
        c("category", STRING, "the level one: `barrier`, `log`, ..., as the `runs` "
          "columns (with `-`: `wait-other`)"),
        c("served_by", STRING, "the level two: " + ", ".join(f"`{k}`" for k in PART_NAMES)),
        c("ns", INT64, "time; a category's rows of one basis sum to its level one "
          "(`runs` for `elapsed`)"),
    ), intro=(
        "Level two of the attribution (docs/report-json.md, `attribution_detail_ns`), one "
        "row per (basis, level one, what served it) with time; no rows when the source "
        "cannot attribute. An export of an older iowhy has no `attribution.parquet`; "
        "`iowhy query` reads it as empty.")),
)

TABLE_NAMES = tuple(t.name for t in TABLES)
_BY_NAME = {t.name: t for t in TABLES}


def column_names(table: str) -> list[str]:
    return [n for cols in _BY_NAME[table].columns for n in cols.names]


def column_types(table: str) -> list[tuple[str, str]]:
    """(name, type) of every column of `table`, in order (type: STRING, INT64, ...)."""
    return [(n, cols.type) for cols in _BY_NAME[table].columns for n in cols.names]


def arrow_type(pa: Any, type_: str) -> Any:
    return {STRING: pa.string(), INT64: pa.int64(), UINT64: pa.uint64(), BOOL: pa.bool_(),
            STRINGS: pa.list_(pa.string())}[type_]


def arrow_schema(pa: Any, table: str) -> Any:
    """The explicit Arrow schema of `table` (pyarrow passed in: an optional package)."""
    return pa.schema([pa.field(n, arrow_type(pa, cols.type)) for cols in
                      _BY_NAME[table].columns for n in cols.names])


INTRO = """\
`iowhy export TRACE --format parquet -o DIR` writes one Parquet file per table into `DIR`
(created mode 0700 if missing; files mode 0600, zstd-compressed; a symlink or a
non-directory at `DIR`, or a symlink in place of one of the files, is refused).
`iowhy export TRACE --format parquet --dataset DIR` adds the run to a dataset of many
runs and hosts instead (docs/export.md, "A dataset of many hosts"). `iowhy query`
exposes the same tables as SQL views (docs/export.md).

This page is generated from the schema the export writes
(analyzer/iowhy/export/schema.py: `python -m iowhy.export.schema -o
docs/parquet-schema.md`); a unit test checks that it is up to date.
"""

CONVENTIONS = """\
Conventions:

* Every row carries `run_uuid` (string): join any table to `runs` on it. The id is the
  trace's own (imported traces carry one) or derived from what identifies the recording
  (host, file creation time, start, command, pid): exporting one trace twice gives the
  same id, two recordings different ones.
* Units are in the column names: `_ns` integer nanoseconds, `_bytes` bytes, `_sector`
  / `_sectors` 512-byte sectors. Columns ending `_ns` that are points in time
  (`submit_ns`, `enter_ns`, `ts_ns`, ...) are `CLOCK_MONOTONIC` of the recording host, as
  in the trace; `runs.realtime_minus_monotonic_ns` converts them to wall-clock time.
  Durations (`device_ns`, `latency_ns`, ...) are differences of those.
* An unknown value is NULL, never 0, -1 or an empty string (the trace's 0 = "unknown"
  becomes NULL; a task whose name was not seen has a NULL `comm`).
* Every file has the explicit schema below, whatever it holds (an empty list column is
  still a list of strings): files of any runs, recorded or imported, make one dataset.
  Each file's schema metadata has `iowhy.schema` (the version below) and
  `iowhy.run_uuid`. A file holds one run in one row group.
* Enumerations are strings (`class`, `op`, `call`, `fs`, `event`, `syscall`).
* Names (`argv`, `host`, `device`, `comm`, `submitter_comm`, `waker_comm`, `cgroup`,
  ...) are valid UTF-8: a byte of the recorded name that is not is written as `\\xNN`
  (docs/export.md, "Names are bytes").
"""


def _row(cols: Cols) -> str:
    names = ", ".join(f"`{n}`" for n in cols.names)
    return f"| {names} | {TYPE_WORDS[cols.type]} | {cols.meaning} |"


def schema_doc() -> str:
    """docs/parquet-schema.md."""
    out = [f"# iowhy Parquet schema (version {SCHEMA_VERSION})", "", INTRO,
           "| file | one row per |", "|------|-------------|"]
    out += [f"| `{t.name}.parquet` | {t.one_row_per} |" for t in TABLES]
    out += ["", CONVENTIONS]
    for t in TABLES:
        out += [f"## {t.name}", ""]
        if t.intro:
            out += [t.intro, ""]
        out += ["| column | type | meaning |", "|--------|------|---------|"]
        out += [_row(cols) for cols in t.columns]
        out.append("")
        if t.notes:
            out += [t.notes, ""]
    out += ["## Versions", "", "| version | change |", "|---------|--------|"]
    out += [f"| {v} | {what} |" for v, what in CHANGES]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write docs/parquet-schema.md")
    ap.add_argument("-o", "--output", help="file to write (default: stdout)")
    args = ap.parse_args(argv)
    text = schema_doc()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
