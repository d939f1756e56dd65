"""A run as Arrow tables: `runs`, `requests`, `calls`, `offcpu`, `journal`, `tasks`,
`attribution`.

The schema (docs/parquet-schema.md) is what `iowhy export --format parquet` writes and
what `iowhy query` queries. Every table has `run_uuid`; units are in the column names
(`_ns`, `_bytes`, `_sectors`); times are CLOCK_MONOTONIC ns of the recording host, as in
the trace, and unknown values are NULL (never 0 or -1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import abi
from ..names import comm_text
from . import need
from .source import (CATEGORIES, FS_NAMES, OP_NAMES, RunModel, device_names, load_run,
                     syscall_name)

SCHEMA_VERSION = 1
TABLES = ("runs", "requests", "calls", "offcpu", "journal", "tasks", "attribution")
I64 = np.int64


def _strings(pa: Any, values: np.ndarray, name: Any) -> Any:
    """A string column from values with few distinct ones: each distinct value is named
    once (name(value) -> str), the column is built by Arrow."""
    u, inv = np.unique(np.asarray(values), return_inverse=True)
    d = pa.array([name(x) for x in u.tolist()], pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(inv.reshape(-1).astype(np.int32)),
                                          d).cast(pa.string())


def _comm(pa: Any, a: np.ndarray) -> Any:
    return _strings(pa, a, comm_text)


def _names(pa: Any, codes: np.ndarray, table: dict[int, str], unknown: str = "unknown") -> Any:
    return _strings(pa, codes, lambda c: table.get(int(c), f"{unknown}_{int(c)}"))


def _time(pa: Any, x: np.ndarray) -> Any:
    """A time column: 0 means unknown in the trace, NULL here."""
    x = np.asarray(x).astype(I64)
    return pa.array(x, type=pa.int64(), mask=(x == 0))


def _maybe(pa: Any, x: np.ndarray, valid: np.ndarray) -> Any:
    return pa.array(np.asarray(x).astype(I64), type=pa.int64(), mask=~np.asarray(valid, bool))


def _bit(x: np.ndarray, b: int) -> np.ndarray:
    return (np.asarray(x) & b) != 0


def run_tables(trace: Any, model: RunModel | None = None) -> dict[str, Any]:
    """The seven tables of one trace (pyarrow.Table each)."""
    from ..progress import phase
    pa = need("pyarrow")
    m = model or load_run(trace)
    phase("tables")
    u = m.uuid

    def uuids(n: int) -> Any:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                              pa.array([u])).cast(pa.string())

    out: dict[str, Any] = {}
    info = m.info
    run: dict[str, Any] = {
        "run_uuid": [u],
        "host": [info["host"]], "kernel": [info["kernel"]], "machine": [info["machine"]],
        "iowhy_version": [info["iowhy_version"]], "source": [info["source"]],
        "source_limits": [m.source_limits],
        "command": [info["command"]], "pid": pa.array([info["pid"]], pa.int64()),
        "devices": [info["devices"]], "filesystems": [info["filesystems"]],
        "start_ns": pa.array([info["start_ns"]], pa.int64()),
        "end_ns": pa.array([info["end_ns"]], pa.int64()),
        "elapsed_ns": pa.array([info["elapsed_ns"]], pa.int64()),
        "realtime_minus_monotonic_ns": pa.array([info["realtime_minus_monotonic_ns"]],
                                                pa.int64()),
        "created_realtime_ns": pa.array([info["created_realtime_ns"] or None], pa.int64()),
        "lost_events": pa.array([info["lost_events"]], pa.int64()),
        "truncated": [info["truncated"]],
    }
    for cat in CATEGORIES:
        v = None if m.attribution_ns is None else m.attribution_ns.get(cat)
        run[f"{cat.replace('-', '_')}_ns"] = pa.array([v], pa.int64())
    out["runs"] = pa.table(run)
    # Level two, long: one row per (basis, level one, what served it).
    rows = [(basis, cat, part, int(ns)) for basis, d in m.detail.items()
            for cat, parts in d.items() for part, ns in parts.items() if ns]
    out["attribution"] = pa.table({
        "run_uuid": uuids(len(rows)),
        "basis": pa.array([r[0] for r in rows], pa.string()),
        "category": pa.array([r[1] for r in rows], pa.string()),
        "served_by": pa.array([r[2] for r in rows], pa.string()),
        "ns": pa.array([r[3] for r in rows], pa.int64())})

    rq = trace.records("request")
    rm = m.requests
    n = len(rq)
    devname = device_names(trace.meta)
    maj, mnr = rq["dev_major"].astype(I64), rq["dev_minor"].astype(I64)
    ok = (rm.device_ns >= 0)
    fl = rq["flags_u16"]
    ifl = rq["iflags"]
    out["requests"] = pa.table({
        "run_uuid": uuids(n),
        "seq": pa.array(rq["seq"].astype(I64), pa.int64()),
        "device": _strings(pa, (maj << 32) | mnr,
                           lambda k: devname.get((k >> 32, k & 0xFFFFFFFF),
                                                 f"{k >> 32}:{k & 0xFFFFFFFF}")),
        "dev_major": pa.array(maj, pa.int64()), "dev_minor": pa.array(mnr, pa.int64()),
        "class": _strings(pa, rm.cls, lambda c: m.class_names[int(c)]),
        "op": _names(pa, rq["op"], OP_NAMES, "op"),
        "start_sector": pa.array(rq["start_sector"].astype(I64), pa.int64()),
        "len_bytes": pa.array(rq["len_bytes"].astype(I64), pa.int64()),
        "done_bytes": pa.array(rq["done_bytes"].astype(I64), pa.int64()),
        "sync": _bit(ifl, abi.F_SYNC), "meta": _bit(ifl, abi.F_META),
        "fua": _bit(ifl, abi.F_FUA), "preflush": _bit(ifl, abi.F_PREFLUSH),
        "readahead": _bit(ifl, abi.F_RAHEAD),
        "submit_ns": _time(pa, rq["submit_ns"]), "insert_ns": _time(pa, rq["insert_ns"]),
        "issue_ns": _time(pa, rq["issue_ns"]), "data_done_ns": _time(pa, rq["data_done_ns"]),
        "done_ns": _time(pa, rq["done_ns"]),
        "queue_ns": _maybe(pa, rm.queue_ns, rm.queue_ns >= 0),
        "device_ns": _maybe(pa, rm.device_ns, ok),
        "total_ns": _maybe(pa, rm.total_ns, rm.total_ns >= 0),
        "seek_sectors": _maybe(pa, rm.seek_sectors, rm.has_seek),
        "submitter_tid": _maybe(pa, rq["tid"], rq["tid"] != 0),
        "submitter_tgid": _maybe(pa, rq["tgid"], rq["tgid"] != 0),
        "submitter_comm": _comm(pa, rq["comm"]),
        "workload": _bit(fl, abi.RQ_TRACKED),
        "call_id": _maybe(pa, rm.call_index, rm.call_index >= 0),
        "error": pa.array(rq["error"].astype(I64), pa.int64()),
        "requeues": pa.array(rq["requeues"].astype(I64), pa.int64()),
        "nr_bios": pa.array(rq["nr_bios"].astype(I64), pa.int64()),
        "incomplete": _bit(fl, abi.RQ_INCOMPLETE),
        "unmatched": _bit(fl, abi.RQ_UNMATCHED),
        "flush_seq": _bit(fl, abi.RQ_FLUSH_SEQ),
        "lost_completion": _bit(fl, abi.RQ_LOST_DONE),
        "lost_issue": _bit(fl, abi.RQ_LOST_ISSUE),
    })

    fs = trace.records("fsync")
    n = len(fs)
    ffl = fs["flags_u16"]
    enter, exit_ = fs["enter_ns"].astype(I64), fs["exit_ns"].astype(I64)
    partial = abi.FS_F_INCOMPLETE | abi.FS_F_LATE_ENTER | abi.FS_F_EXIT_UNSEEN
    seen = (exit_ > 0) & ((ffl & partial) == 0)
    out["calls"] = pa.table({
        "run_uuid": uuids(n),
        "call_id": pa.array(np.arange(n, dtype=I64), pa.int64()),
        "call": _names(pa, fs["call_u16"], abi.CALL_NAMES, "call"),
        "fs": _names(pa, fs["fs_u16"], FS_NAMES, "fs"),
        "dev_major": pa.array(fs["dev_major"].astype(I64), pa.int64()),
        "dev_minor": pa.array(fs["dev_minor"].astype(I64), pa.int64()),
        "tid": pa.array(fs["tid"].astype(I64), pa.int64()),
        "tgid": pa.array(fs["tgid"].astype(I64), pa.int64()),
        "comm": _comm(pa, fs["comm"]),
        "enter_ns": _time(pa, enter), "exit_ns": _time(pa, exit_),
        "latency_ns": _maybe(pa, exit_ - enter, seen),
        "ret": pa.array(fs["ret"].astype(I64), pa.int64()),
        "fd": pa.array(fs["fd"].astype(I64), pa.int64()),
        "ino": pa.array(fs["ino"].astype(I64), pa.int64()),
        "commit_seq": _maybe(pa, fs["commit_seq"], _bit(ffl, abi.FS_F_SEQ)),
        "datasync": _bit(ffl, abi.FS_F_DATASYNC),
        "incomplete": _bit(ffl, abi.FS_F_INCOMPLETE),
        "late_entry": _bit(ffl, abi.FS_F_LATE_ENTER),
        "exit_unseen": _bit(ffl, abi.FS_F_EXIT_UNSEEN),
    })

    off = trace.records("offcpu")
    n = len(off)
    s, w, e = (off[k].astype(I64) for k in ("start_ns", "waking_ns", "end_ns"))
    woke = w > 0
    out["offcpu"] = pa.table({
        "run_uuid": uuids(n),
        "tid": pa.array(off["tid"].astype(I64), pa.int64()),
        "tgid": pa.array(off["tgid"].astype(I64), pa.int64()),
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

    jr = trace.records("journal")
    n = len(jr)
    out["journal"] = pa.table({
        "run_uuid": uuids(n),
        "ts_ns": _time(pa, jr["ts_ns"]),
        "event": _names(pa, jr["event_u16"], abi.JOURNAL_EVENT_NAMES, "event"),
        "fs": _names(pa, jr["fs_u16"], FS_NAMES, "fs"),
        "dev_major": pa.array(jr["dev_major"].astype(I64), pa.int64()),
        "dev_minor": pa.array(jr["dev_minor"].astype(I64), pa.int64()),
        "seq": pa.array(jr["seq"].astype(I64), pa.int64()),
        "aux0": pa.array(jr["aux0"].astype(I64), pa.int64()),
        "aux1": pa.array(jr["aux1"].astype(I64), pa.int64()),
        "aux2": pa.array(jr["aux2"].astype(I64), pa.int64()),
        "tid": pa.array(jr["tid"].astype(I64), pa.int64()),
        "comm": _comm(pa, jr["comm"]),
    })

    tk = trace.records("task")
    n = len(tk)
    events = {abi.TASK_ROOT: "root", abi.TASK_FORK: "fork", abi.TASK_EXEC: "exec",
              abi.TASK_EXIT: "exit", abi.TASK_DEAD: "dead", abi.TASK_JOIN: "join"}
    out["tasks"] = pa.table({
        "run_uuid": uuids(n),
        "ts_ns": _time(pa, tk["ts_ns"]),
        "event": _names(pa, tk["event_u16"], events, "event"),
        "tid": pa.array(tk["tid"].astype(I64), pa.int64()),
        "tgid": pa.array(tk["tgid"].astype(I64), pa.int64()),
        "parent_tgid": _maybe(pa, tk["parent_tgid"], tk["parent_tgid"] != 0),
        "exit_code": pa.array(tk["exit_code"].astype(I64), pa.int64()),
        "comm": _comm(pa, tk["comm"]),
    })
    meta = {b"iowhy.schema": str(SCHEMA_VERSION).encode(), b"iowhy.run_uuid": u.encode()}
    return {k: t.replace_schema_metadata(meta) for k, t in out.items()}
