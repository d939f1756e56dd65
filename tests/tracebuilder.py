"""Synthetic traces for the tests: record builders (`req`, `bio`, `off`, `task`, `fsync`,
`jev`),
metadata (`meta`), a trace writer (`write_trace`) and a busy trace of every record kind
(`busy_trace`), all written with TraceWriter. Importable from every test tier (setup.cfg
puts tests/ on the path).

The defaults describe one disk DEV with its partition PART, whose journal is LOG_RANGE
(whole-disk sectors), and a trace window [1000, 1100) in ns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iowhy import abi
from iowhy.categories import ATTRIBUTION_CATEGORIES, CORRELATIONAL
from iowhy.analysis import AnalysisConfig, analyze
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter

DEV = (8, 0)  # whole disk
PART = (8, 1)  # its partition
LOG_RANGE = (10_000, 20_000)  # journal, whole-disk sectors
CATS = CORRELATIONAL  # the correlational attribution's categories
CAUSAL_CATS = ATTRIBUTION_CATEGORIES  # the causal attribution's


def records(dtype: np.dtype, rows: list[dict[str, Any]]) -> np.ndarray:
    arr = np.zeros(len(rows), dtype=dtype)
    for i, row in enumerate(rows):
        for k, v in row.items():
            arr[k][i] = v
    return arr


def req(issue: int, done: int, *, op: int = abi.OP_WRITE, sector: int = 1000,
        nbytes: int = 4096, dev: tuple[int, int] = DEV, submit: int | None = None,
        insert: int = 0, data_done: int | None = None, iflags: int = 0,
        flags: int = abi.RQ_TRACKED, tid: int = 100, seq: int = 0) -> dict[str, Any]:
    if op == abi.OP_FLUSH:
        sector, nbytes = 0, 0
    return {"seq": seq, "issue_ns": issue, "done_ns": done, "op": op, "start_sector": sector,
            "len_bytes": nbytes, "done_bytes": nbytes, "dev_major": dev[0], "dev_minor": dev[1],
            "submit_ns": issue if submit is None else submit, "insert_ns": insert,
            "data_done_ns": done if data_done is None else data_done, "iflags": iflags,
            "flags_u16": flags, "tid": tid, "tgid": tid, "ts_ns": done or 0}


def bio(ts: int, *, op: int = abi.OP_WRITE, sector: int = 1000, nbytes: int = 4096,
        dev: tuple[int, int] = DEV, iflags: int = 0, tid: int = 100,
        comm: bytes = b"") -> dict[str, Any]:
    """A bio of a bio-based device, ended at ts in the context of task `tid`."""
    return {"ts_ns": ts, "sector": sector, "len_bytes": nbytes, "dev_major": dev[0],
            "dev_minor": dev[1], "op": op, "iflags": iflags, "tgid": tid, "tid": tid,
            "comm": comm}


def off(tid: int, start: int, end: int, waking: int = 0, syscall: int = 74,
        preempt: bool = False, *, waker: int = 0, ctx: int = 0, comm: str = "",
        rq_seq: int = 0, flags: int = 0) -> dict[str, Any]:
    """An off-CPU interval; waker/ctx/comm: who woke it, rq_seq: the request whose
    completion did (sets WAKER_RQ); flags: more IOWHY_OFF_* bits."""
    f = (abi.OFF_PREEMPT if preempt else abi.OFF_D) | flags
    if rq_seq:
        f |= abi.OFF_WAKER_RQ
    return {"tid": tid, "tgid": tid, "start_ns": start, "end_ns": end,
            "waking_ns": 0 if preempt else (waking or end), "syscall_nr": syscall,
            "flags_u16": f, "ts_ns": end, "waker_tid": waker, "waker_tgid": waker,
            "waker_ctx_u16": ctx, "waker_comm": comm.encode(), "waker_rq_seq": rq_seq,
            "waker_rq_depth": 1 if rq_seq else 0}


def task(tid: int, ts: int, event: int = abi.TASK_ROOT) -> dict[str, Any]:
    return {"tid": tid, "tgid": tid, "ts_ns": ts, "event_u16": event}


def fsync(tid: int, enter: int, exit_: int, *, call: int = abi.CALL_FSYNC, fs: int = abi.FS_EXT4,
          seq: int | None = None, dev: tuple[int, int] = PART) -> dict[str, Any]:
    flags = abi.FS_F_FSEVENT | (abi.FS_F_SEQ if seq is not None else 0)
    return {"tid": tid, "tgid": tid, "enter_ns": enter, "exit_ns": exit_, "call_u16": call,
            "fs_u16": fs, "flags_u16": flags, "commit_seq": seq or 0, "dev_major": dev[0],
            "dev_minor": dev[1], "ts_ns": exit_, "fd": 3, "syscall_nr": 74}


def jev(event: int, ts: int, seq: int = 0, *, tid: int = 50, dev: tuple[int, int] = PART,
        aux0: int = 0, aux1: int = 0, aux2: int = 0, fs: int = abi.FS_EXT4) -> dict[str, Any]:
    return {"event_u16": event, "ts_ns": ts, "seq": seq, "tid": tid, "tgid": tid,
            "dev_major": dev[0], "dev_minor": dev[1], "aux0": aux0, "aux1": aux1, "aux2": aux2,
            "fs_u16": fs}


def meta(fstype: str = "ext4", write_cache: str = "write back", fua: int = 0) -> dict[str, Any]:
    log = {"kind": "jbd2" if fstype == "ext4" else "xlog", "ranges": [list(LOG_RANGE)],
           "fc_ranges": []}
    return {
        "devices": [{"name": "sdz", "major": DEV[0], "minor": DEV[1], "size_bytes": 1 << 30,
                     "rotational": 1, "write_cache": write_cache, "fua": fua}],
        "filesystems": [{"fstype": fstype, "source": "/dev/sdz1", "mountpoint": "/mnt/t",
                         "dev_major": PART[0], "dev_minor": PART[1], "st_dev_major": PART[0],
                         "st_dev_minor": PART[1], "disk": "sdz", "disk_major": DEV[0],
                         "disk_minor": DEV[1], "part_start_sector": 2048,
                         "log": log if fstype != "btrfs" else None}],
    }


def write_trace(path, *, start: int = 1000, end: int = 1100, requests=(), fsyncs=(), journal=(),
                offcpu=(), tasks=None, meta_obj=None, counters=None, trailer: bool = True,
                command=("star", "-x"), pid: int = 100, helpers=(), threads=(),
                recorder=None, bios=(), version: int | None = None,
                trailer_extra: dict[str, Any] | None = None) -> str:
    """version: the file's format version (TraceWriter's default: 5); trailer_extra:
    more TRAILER keys."""
    w = TraceWriter(str(path), version=version)
    w.write_json(abi.CHUNK_META, meta() if meta_obj is None else meta_obj)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": start, "command": list(command), "pid": pid,
                                      **(recorder or {})})
    if tasks is None:
        tasks = [task(pid, start)]
    for dtype, rows in ((abi.REQUEST_DTYPE, requests), (abi.FSYNC_DTYPE, fsyncs),
                        (abi.JOURNAL_DTYPE, journal), (abi.OFFCPU_DTYPE, offcpu),
                        (abi.TASK_DTYPE, tasks), (abi.HELPER_DTYPE, helpers),
                        (abi.THREAD_DTYPE, threads), (abi.BIO_DTYPE, bios)):
        if rows:
            w.write_records(records(dtype, list(rows)))
    tr: dict[str, Any] | None = None
    if trailer:
        tr = {"end_ns": end, "stop_reason": "workload exited", "exit_status": 0,
              **(trailer_extra or {})}
        if counters:
            c = {n: 0 for n in abi.COUNTER_NAMES}
            c.update(counters)
            tr["counters"] = c
    w.close(tr)
    return str(path)


def run(path, **cfg) -> dict[str, Any]:
    return analyze(read_trace(str(path)), AnalysisConfig(**cfg))


def assert_sums(r: dict[str, Any]) -> None:
    att = r["attribution_ns"]
    assert set(att) in (set(CATS), set(CAUSAL_CATS))
    assert sum(att.values()) == r["elapsed_ns"]
    assert all(v >= 0 for v in att.values())


def busy_trace(tmp_path, n: int = 4000, trailer: bool = True, counters=None) -> str:
    """A few thousand requests of every kind, fsyncs and commits, for output tests."""
    import synthtrace
    d = synthtrace.synth(n, seed=3)
    path = str(tmp_path / "busy.iowt")
    w = TraceWriter(path)
    w.write_json(abi.CHUNK_META, meta())
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": int(d["start_ns"]),
                                      "command": ["star", "-x", "-f", "linux-6.1.tar"],
                                      "pid": 1000})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        w.write_records(d[name])
    tr: dict[str, Any] | None = None
    if trailer:
        tr = {"end_ns": int(d["end_ns"]), "stop_reason": "workload exited"}
        if counters:
            tr["counters"] = {**{c: 0 for c in abi.COUNTER_NAMES}, **counters}
    w.close(tr)
    return path
