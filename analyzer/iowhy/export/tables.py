"""A run as Arrow tables: `runs`, `requests`, `calls`, `offcpu`, `journal`, `tasks`,
`attribution`.

The schema (schema.py, docs/parquet-schema.md) is what `iowhy export --format parquet`
writes and what `iowhy query` queries: every table is built to its explicit Arrow
schema, never inferred. Every table has `run_uuid`; units are in the column names
(`_ns`, `_bytes`, `_sectors`); times are CLOCK_MONOTONIC ns of the recording host, as in
the trace, and unknown values are NULL (never 0, -1 or '').
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import abi
from ..names import comm_text, utf8_text
from ..views.cgroups import cgroup_path
from ..views.cgroups import recorded as cgroups_recorded
from . import arrow_on_heap, need
from .schema import SCHEMA_VERSION, TABLE_NAMES, arrow_schema
from .source import (CATEGORIES, FS_NAMES, OP_NAMES, Names, RunModel, load_run, no_requests,
                     syscall_name)

TABLES = TABLE_NAMES
# The fields of the requests table (a request record's and a bio record's).
REQUEST_FIELDS = ("seq", "flags_u16", "iflags", "tid", "tgid", "comm", "done_ns", "dev_major",
                  "dev_minor", "op", "start_sector", "len_bytes", "done_bytes", "submit_ns",
                  "insert_ns", "issue_ns", "data_done_ns", "error", "requeues", "nr_bios")
BIO_FIELDS = ("iflags", "tid", "tgid", "comm", "ts_ns", "dev_major", "dev_minor", "op",
              "sector", "len_bytes")
OFFCPU_FIELDS = ("tid", "tgid", "start_ns", "waking_ns", "end_ns", "flags_u16", "syscall_nr",
                 "waker_tid", "waker_tgid", "waker_comm")
# The record types each table reads (Trace.records), released once it is built.
RECORDS = {"requests": ("request", "bio"), "calls": ("fsync",), "offcpu": ("offcpu",),
           "journal": ("journal",), "tasks": ("task",)}
I64 = np.int64
__all__ = ["SCHEMA_VERSION", "TABLES", "iter_tables", "run_tables"]


def _strings(pa: Any, values: np.ndarray, name: Callable[[Any], str | None]) -> Any:
    """A string column from values with few distinct ones: each distinct value is named
    once (name(value) -> str, or None for NULL), dictionary-encoded with the narrowest
    indices (_table decodes it, or keeps it for a table held in memory)."""
    u, inv = np.unique(np.asarray(values), return_inverse=True)
    names = [name(x) for x in u.tolist()]
    d = pa.array([x or "" for x in names], pa.string())
    inv = inv.reshape(-1).astype(np.min_scalar_type(-max(len(u), 1)))
    null = np.array([x is None for x in names] + [False], bool)[inv] if len(inv) else None
    return pa.DictionaryArray.from_arrays(pa.array(inv, mask=null), d)


def _coded(pa: Any, names: Names) -> Any:
    """A string column of the model's coded names (-1: NULL)."""
    return _strings(pa, names.codes, lambda c: None if c < 0 else names.table[c])


def _text_or_null(name: str | None) -> str | None:
    """A name given as text (bytes that are not UTF-8 as surrogates) as every writer
    writes it (names.utf8_text)."""
    return None if name is None else utf8_text(name)


def _comm_or_null(raw: Any) -> str | None:
    return comm_text(raw) or None


def _comm(pa: Any, a: np.ndarray) -> Any:
    return _strings(pa, a, _comm_or_null)


def _names(pa: Any, codes: np.ndarray, table: dict[int, str], unknown: str = "unknown") -> Any:
    return _strings(pa, codes, lambda c: table.get(int(c), f"{unknown}_{int(c)}"))


def _fs_names(pa: Any, codes: np.ndarray) -> Any:
    """A filesystem type; FS_NONE (not known) is NULL."""
    return _strings(pa, codes, lambda c: FS_NAMES.get(int(c), f"fs_{int(c)}") or None)


def _time(pa: Any, x: np.ndarray) -> Any:
    """A time column: 0 means unknown in the trace, NULL here."""
    x = np.asarray(x).astype(I64, copy=False)
    return pa.array(x, type=pa.int64(), mask=(x == 0))


def _maybe(pa: Any, x: np.ndarray, valid: np.ndarray) -> Any:
    return pa.array(np.asarray(x).astype(I64, copy=False), type=pa.int64(),
                    mask=~np.asarray(valid, bool))


def _int(pa: Any, x: np.ndarray) -> Any:
    return pa.array(np.asarray(x).astype(I64, copy=False), pa.int64())


def _bit(x: np.ndarray, b: int) -> np.ndarray:
    return (np.asarray(x) & b) != 0


def _table(pa: Any, name: str, cols: dict[str, Any]) -> Any:
    """The table `name` with its explicit schema: every column of it, in its order and
    type (a column missing here, or one the schema lacks, is a bug), but that a string
    column built dictionary-encoded (_strings) stays so: iter_tables decodes it unless
    the table is held in memory."""
    schema = arrow_schema(pa, name)
    if set(cols) != set(schema.names):
        raise RuntimeError(f"table {name}: columns {sorted(set(cols) ^ set(schema.names))} "
                           "do not match its schema")
    arrays, fields = [], []
    for f in schema:
        c = cols[f.name]
        if not isinstance(c, (pa.Array, pa.ChunkedArray)):
            c = pa.array(c, f.type)
        elif not (f.type == pa.string() and pa.types.is_dictionary(c.type)):
            c = c.cast(f.type)
        arrays.append(c)
        fields.append(f.with_type(c.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=schema.metadata))


def _concat(a: Any, b: Any, dtype: Any = I64) -> np.ndarray:
    if not len(b):  # no bio: a itself when it has the type already
        return np.asarray(a).astype(dtype, copy=False)
    return np.concatenate((np.asarray(a).astype(dtype), np.asarray(b).astype(dtype)))


def _fields(trace: Any, name: str, fields: Sequence[str]) -> dict[str, np.ndarray]:
    """Some fields of every record of one type (in file order), gathered a chunk at a
    time: never the whole records (144 bytes a request) at once. Numbers come as int64
    (the tables' type: not copied again), the other fields in their records' type."""
    dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
    if not hasattr(trace, "iter_chunks"):
        recs = trace.records(name)
        return {f: recs[f] for f in fields}
    n = trace.count(name)
    out = {f: np.empty(n, dtype=I64 if dtype[f].kind in "iu" else dtype[f]) for f in fields}
    at = 0
    for v in trace.iter_chunks(name):
        if at + len(v) > n:
            raise RuntimeError(f"{name} records: more than the {n} counted")
        for f in fields:
            out[f][at:at + len(v)] = v[f]
        at += len(v)
    if at != n:
        raise RuntimeError(f"{name} records: {at}, not the {n} counted")
    return out


def run_tables(trace: Any, model: RunModel | None = None, in_memory: bool = False
               ) -> dict[str, Any]:
    """The seven tables of one trace (pyarrow.Table each, its schema.py schema; see
    iter_tables for in_memory)."""
    return dict(iter_tables(trace, model, in_memory))


def iter_tables(trace: Any, model: RunModel | None = None, in_memory: bool = False
                ) -> Iterator[tuple[str, Any]]:
    """(name, table) of the seven tables of one trace in TABLES' order, each built when
    it is asked for: a writer that drops a table before asking for the next holds one
    at a time. in_memory: for tables held while they are read (a query of a trace),
    whose string columns of few distinct values (the run's id, class, device...) are
    then left dictionary-encoded: a byte or two a row instead of the string's, read as
    strings (DuckDB's VARCHAR) all the same."""
    from ..progress import phase
    m = model or load_run(trace)  # before pyarrow is imported (export.available)
    arrow_on_heap()
    pa = need("pyarrow")
    u = m.uuid

    def uuids(n: int) -> Any:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), pa.array([u]))

    def requests() -> Any:
        t = _requests(pa, trace, m, uuids)
        if model is None:  # the model is ours: no other table reads its requests
            m.requests = no_requests()
        return t

    build: dict[str, Callable[[], Any]] = {
        "runs": lambda: _runs(pa, m),
        "attribution": lambda: _attribution(pa, m, uuids),
        "requests": requests,
        "calls": lambda: _calls(pa, trace, uuids),
        "offcpu": lambda: _offcpu(pa, trace, uuids),
        "journal": lambda: _journal(pa, trace, uuids),
        "tasks": lambda: _tasks(pa, trace, uuids),
    }
    meta = {b"iowhy.schema": str(SCHEMA_VERSION).encode(), b"iowhy.run_uuid": u.encode()}

    def finish(name: str, t: Any) -> Any:
        return (t if in_memory else t.cast(arrow_schema(pa, name))).replace_schema_metadata(meta)
    for name in TABLES:
        phase(f"{name} table")
        # no reference kept here: the caller's is the table's last
        yield name, finish(name, build.pop(name)())
        if hasattr(trace, "release"):  # decoded again by a later reader
            trace.release(*RECORDS.get(name, ()))


def _runs(pa: Any, m: RunModel) -> Any:
    u = m.uuid
    info = m.info
    argv = info["argv"]
    run: dict[str, Any] = {
        "run_uuid": [u],
        "host": [info["host"]], "kernel": [info["kernel"]], "machine": [info["machine"]],
        "iowhy_version": [info["iowhy_version"]], "source": [info["source"]],
        "source_limits": [m.source_limits],
        "argv": [argv], "command": [" ".join(argv) if argv else None],
        "command_short": [info["command_short"]], "pid": [info["pid"]],
        "devices": [info["devices"]], "workload_devices": [info["workload_devices"]],
        "filesystems": [info["filesystems"]],
        "start_ns": [info["start_ns"]], "end_ns": [info["end_ns"]],
        "elapsed_ns": [info["elapsed_ns"]],
        "realtime_minus_monotonic_ns": [info["realtime_minus_monotonic_ns"]],
        "created_realtime_ns": [info["created_realtime_ns"] or None],
        "lost_events": [info["lost_events"]], "truncated": [info["truncated"]],
        "attribution": [m.attribution if m.attribution_ns is not None else None],
    }
    for cat in CATEGORIES:
        v = None if m.attribution_ns is None else m.attribution_ns.get(cat)
        run[f"{cat.replace('-', '_')}_ns"] = [v]
    return _table(pa, "runs", run)


def _attribution(pa: Any, m: RunModel, uuids: Callable[[int], Any]) -> Any:
    """Level two, long: one row per (basis, level one, what served it)."""
    rows = [(basis, cat, part, int(ns)) for basis, d in m.detail.items()
            for cat, parts in d.items() for part, ns in parts.items() if ns]
    return _table(pa, "attribution", {
        "run_uuid": uuids(len(rows)),
        "basis": [r[0] for r in rows], "category": [r[1] for r in rows],
        "served_by": [r[2] for r in rows], "ns": [r[3] for r in rows]})


def _calls(pa: Any, trace: Any, uuids: Callable[[int], Any]) -> Any:
    fs = trace.records("fsync")
    n = len(fs)
    ffl = fs["flags_u16"]
    enter, exit_ = fs["enter_ns"].astype(I64), fs["exit_ns"].astype(I64)
    partial = abi.FS_F_INCOMPLETE | abi.FS_F_LATE_ENTER | abi.FS_F_EXIT_UNSEEN
    seen = (exit_ > 0) & ((ffl & partial) == 0)
    fdev = (fs["dev_major"] != 0) | (fs["dev_minor"] != 0)
    return _table(pa, "calls", {
        "run_uuid": uuids(n),
        "call_id": np.arange(n, dtype=I64),
        "call": _names(pa, fs["call_u16"], abi.CALL_NAMES, "call"),
        "fs": _fs_names(pa, fs["fs_u16"]),
        "dev_major": _maybe(pa, fs["dev_major"], fdev),
        "dev_minor": _maybe(pa, fs["dev_minor"], fdev),
        "tid": _int(pa, fs["tid"]), "tgid": _int(pa, fs["tgid"]),
        "comm": _comm(pa, fs["comm"]),
        "enter_ns": _time(pa, enter), "exit_ns": _time(pa, exit_),
        "latency_ns": _maybe(pa, exit_ - enter, seen),
        "ret": _int(pa, fs["ret"]), "fd": _int(pa, fs["fd"]),
        "ino": _maybe(pa, fs["ino"], fs["ino"] != 0),
        "commit_seq": _maybe(pa, fs["commit_seq"], _bit(ffl, abi.FS_F_SEQ)),
        "datasync": _bit(ffl, abi.FS_F_DATASYNC),
        "incomplete": _bit(ffl, abi.FS_F_INCOMPLETE),
        "late_entry": _bit(ffl, abi.FS_F_LATE_ENTER),
        "exit_unseen": _bit(ffl, abi.FS_F_EXIT_UNSEEN),
    })


def _offcpu(pa: Any, trace: Any, uuids: Callable[[int], Any]) -> Any:
    off = _fields(trace, "offcpu", OFFCPU_FIELDS)
    n = len(off["tid"])
    s, w, e = (off[k].astype(I64, copy=False) for k in ("start_ns", "waking_ns", "end_ns"))
    woke = w > 0
    return _table(pa, "offcpu", {
        "run_uuid": uuids(n),
        "tid": _int(pa, off["tid"]), "tgid": _int(pa, off["tgid"]),
        "start_ns": _time(pa, s), "waking_ns": _time(pa, w), "end_ns": _time(pa, e),
        "blocked_ns": _maybe(pa, np.where(woke, w - s, e - s), (e > 0) & (s > 0)),
        "runnable_ns": _maybe(pa, np.where(woke, e - w, 0), (e > 0) & (s > 0)),
        "preempted": _bit(off["flags_u16"], abi.OFF_PREEMPT),
        "iowait": _bit(off["flags_u16"], abi.OFF_IOWAIT),
        "uninterruptible": _bit(off["flags_u16"], abi.OFF_D),
        "syscall": _strings(pa, off["syscall_nr"], syscall_name),
        "waker_tid": _maybe(pa, off["waker_tid"], off["waker_tid"] != 0),
        "waker_tgid": _maybe(pa, off["waker_tgid"], off["waker_tgid"] != 0),
        "waker_comm": _comm(pa, off["waker_comm"]),
    })


def _journal(pa: Any, trace: Any, uuids: Callable[[int], Any]) -> Any:
    jr = trace.records("journal")
    n = len(jr)
    return _table(pa, "journal", {
        "run_uuid": uuids(n),
        "ts_ns": _time(pa, jr["ts_ns"]),
        "event": _names(pa, jr["event_u16"], abi.JOURNAL_EVENT_NAMES, "event"),
        "fs": _fs_names(pa, jr["fs_u16"]),
        **{k: _int(pa, jr[k]) for k in ("dev_major", "dev_minor", "seq", "aux0", "aux1",
                                        "aux2", "tid")},
        "comm": _comm(pa, jr["comm"]),
    })


def _tasks(pa: Any, trace: Any, uuids: Callable[[int], Any]) -> Any:
    tk = trace.records("task")
    n = len(tk)
    # The task's cgroup at the event, named as `report --by cgroup` names it; NULL
    # where the format records none (before 9) or the recorder could not tell (id 0).
    if cgroups_recorded(int(getattr(trace, "version", abi.FORMAT_VERSION)), tk):
        cg = np.asarray(tk["cgroup_id"]).astype(np.uint64)
    else:
        cg = np.zeros(n, np.uint64)
    paths = getattr(trace, "cgroup_paths", None) or {}
    events = {abi.TASK_ROOT: "root", abi.TASK_FORK: "fork", abi.TASK_EXEC: "exec",
              abi.TASK_EXIT: "exit", abi.TASK_DEAD: "dead", abi.TASK_JOIN: "join"}
    return _table(pa, "tasks", {
        "run_uuid": uuids(n),
        "ts_ns": _time(pa, tk["ts_ns"]),
        "event": _names(pa, tk["event_u16"], events, "event"),
        "tid": _int(pa, tk["tid"]), "tgid": _int(pa, tk["tgid"]),
        "parent_tgid": _maybe(pa, tk["parent_tgid"], tk["parent_tgid"] != 0),
        "exit_code": _maybe(pa, tk["exit_code"], tk["event_u16"] == abi.TASK_EXIT),
        "comm": _comm(pa, tk["comm"]),
        "cgroup_id": pa.array(cg, type=pa.uint64(), mask=(cg == 0)),
        "cgroup": _strings(pa, cg, lambda i: _text_or_null(cgroup_path(paths, int(i)))),
    })


def _requests(pa: Any, trace: Any, m: RunModel, uuids: Callable[[int], Any]) -> Any:
    """The requests table: a row per request record, then a row per bio of a bio-based
    device (the requests the analysis counts, in its order: source.model_requests)."""
    rq = _fields(trace, "request", REQUEST_FIELDS)
    bo = _fields(trace, "bio", BIO_FIELDS)
    rm = m.requests
    nr, nb = len(rq["seq"]), len(bo["tid"])
    n = nr + nb
    if len(rm.cls) != n:  # the model has other requests than the records: a bug
        raise RuntimeError(f"the model has {len(rm.cls)} requests, the trace {n}")
    isbio = np.zeros(n, bool)
    isbio[nr:] = True
    rqv = np.ones(n, bool)  # what only a request record has: NULL for a bio
    rqv[nr:] = False
    zero = np.zeros(nb, I64)
    fl = _concat(rq["flags_u16"], zero)
    ifl = _concat(rq["iflags"], bo["iflags"])
    tid, tgid = _concat(rq["tid"], bo["tid"]), _concat(rq["tgid"], bo["tgid"])
    # A record's task is its submitter only where it says so (RQ_ORIGIN): a recorded
    # request always does when it names one; an imported one whose queued bio was not
    # seen names the task met at its insert, and a bio its device's ending task.
    origin = (rm.flags[:n] & abi.RQ_ORIGIN) != 0
    tracked = np.concatenate(((np.asarray(rq["flags_u16"]) & abi.RQ_TRACKED) != 0,
                              (rm.flags[nr:] & abi.RQ_TRACKED) != 0))
    comm = np.concatenate((np.asarray(rq["comm"]), np.asarray(bo["comm"])))
    comm[~origin] = b""
    end = _concat(rq["done_ns"], bo["ts_ns"])
    return _table(pa, "requests", {
        "run_uuid": uuids(n),
        "seq": _maybe(pa, _concat(rq["seq"], zero), rqv),
        "bio": isbio,
        "device": _coded(pa, rm.device),
        "dev_major": _int(pa, _concat(rq["dev_major"], bo["dev_major"])),
        "dev_minor": _int(pa, _concat(rq["dev_minor"], bo["dev_minor"])),
        "class": _strings(pa, rm.cls, lambda c: m.class_names[int(c)]),
        "op": _names(pa, _concat(rq["op"], bo["op"]), OP_NAMES, "op"),
        "start_sector": _int(pa, _concat(rq["start_sector"], bo["sector"])),
        "len_bytes": _int(pa, _concat(rq["len_bytes"], bo["len_bytes"])),
        "done_bytes": _maybe(pa, _concat(rq["done_bytes"], zero), rqv),
        "sync": _bit(ifl, abi.F_SYNC), "meta": _bit(ifl, abi.F_META),
        "fua": _bit(ifl, abi.F_FUA), "preflush": _bit(ifl, abi.F_PREFLUSH),
        "readahead": _bit(ifl, abi.F_RAHEAD),
        **{k: _time(pa, _concat(rq[k], zero))
           for k in ("submit_ns", "insert_ns", "issue_ns", "data_done_ns")},
        "done_ns": _time(pa, end),
        "queue_ns": _maybe(pa, rm.queue_ns, rm.queue_ns >= 0),
        "device_ns": _maybe(pa, rm.device_ns, rm.device_ns >= 0),
        "total_ns": _maybe(pa, rm.total_ns, rm.total_ns >= 0),
        "seek_sectors": _maybe(pa, rm.seek_sectors, rm.has_seek),
        "submitter_tid": _maybe(pa, tid, (tid != 0) & origin),
        "submitter_tgid": _maybe(pa, tgid, (tgid != 0) & origin),
        "submitter_comm": _comm(pa, comm),
        "workload": tracked,
        "counted": rm.counted, "background": rm.background,
        "carried_for": _coded(pa, rm.carried_for), "category": _coded(pa, rm.category),
        "served_by": _coded(pa, rm.served_by),
        "call_id": _maybe(pa, rm.call_index, rm.call_index >= 0),
        "error": _maybe(pa, _concat(rq["error"], zero), rqv),
        "requeues": _maybe(pa, _concat(rq["requeues"], zero), rqv),
        "nr_bios": _maybe(pa, _concat(rq["nr_bios"], zero), rqv),
        "incomplete": _bit(fl, abi.RQ_INCOMPLETE),
        "unmatched": _bit(fl, abi.RQ_UNMATCHED),
        "flush_seq": _bit(fl, abi.RQ_FLUSH_SEQ),
        "lost_completion": _bit(fl, abi.RQ_LOST_DONE),
        "lost_issue": _bit(fl, abi.RQ_LOST_ISSUE),
    })
