"""The tests' synthetic-trace builder: a small DSL over the analyzer's own writer
(iowhy.tracewriter.TraceWriter), used by every tier (setup.cfg puts tests/ on the path).

* Records, one dict a call: `req`, `bio`, `off`, `helper`, `task`, `fsync`, `jev`,
  `thread`; keywords they do not name set a field of the record as is (`comm=b"x"`).
  `records(dtype, rows)` makes the array, every field not given zero.
* Metadata: `disk`, `fs_entry`, `meta` (one disk DEV with its partition PART, a
  filesystem on it whose journal is LOG_RANGE, whole-disk sectors), `loop_disk`,
  `loop_stack_meta` (loop1 over a file of that filesystem); keywords they do not name
  are added as is.
* Files: `Trace(path, meta, recorder, **writer options)` writes META and RECORDER, then
  `.add(name, rows or array)` a record chunk per call, `.json(type, obj)` any other
  chunk, `.close(trailer(end, ...))`. `write_trace(path, requests=..., offcpu=...)` is
  the short form for hand-worked traces: a trace window [1000, 1100) ns by default.
* Analysis: `run(path, **config)`, `assert_sums(result)`.

The generators of larger traces write through it: synthtrace.py (seeded numpy traces,
also for bench/), unit/golden_traces.py, unit/damaged_traces.py, unit/synth_runs.py.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from iowhy import abi
from iowhy.categories import ATTRIBUTION_CATEGORIES, CORRELATIONAL
from iowhy.analysis import AnalysisConfig, analyze
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter

DEV = (8, 0)  # whole disk
PART = (8, 1)  # its partition
LOG_RANGE = (10_000, 20_000)  # journal, whole-disk sectors
UPPER = (7, 1)  # loop1 of loop_stack_meta, over a file of PART's filesystem
UPPER_LOG = (500_000, 600_000)  # the journal of loop1's own ext4, loop1 sectors
CATS = CORRELATIONAL  # the correlational attribution's categories
CAUSAL_CATS = ATTRIBUTION_CATEGORIES  # the causal attribution's
DTYPES = {name: dt for _, (name, dt) in abi.RECORD_TYPES.items()}  # record name -> dtype

Row = dict[str, Any]


# -- records ------------------------------------------------------------------------------

def records(dtype: np.dtype, rows: list[Row]) -> np.ndarray:
    arr = np.zeros(len(rows), dtype=dtype)
    for i, row in enumerate(rows):
        for k, v in row.items():
            arr[k][i] = v
    return arr


def columns(name: str, rows: list[Row]) -> dict[str, np.ndarray]:
    """Records of type `name` (abi.RECORD_NAMES) as the analysis takes them: a dict of
    columns, one per field."""
    arr = records(DTYPES[name], rows)
    return {f: arr[f] for f in arr.dtype.names}


def req(issue: int, done: int, *, op: int = abi.OP_WRITE, sector: int = 1000,
        nbytes: int = 4096, dev: tuple[int, int] = DEV, submit: int | None = None,
        insert: int = 0, data_done: int | None = None, iflags: int = 0,
        flags: int = abi.RQ_TRACKED, tid: int = 100, seq: int = 0, **more: Any) -> Row:
    """A block request issued at `issue`, done at `done` (0: never, with RQ_LOST_DONE or
    RQ_INCOMPLETE in flags); a flush has no sector and no bytes."""
    if op == abi.OP_FLUSH:
        sector, nbytes = 0, 0
    return {"seq": seq, "issue_ns": issue, "done_ns": done, "op": op, "start_sector": sector,
            "len_bytes": nbytes, "done_bytes": nbytes, "dev_major": dev[0], "dev_minor": dev[1],
            "submit_ns": issue if submit is None else submit, "insert_ns": insert,
            "data_done_ns": done if data_done is None else data_done, "iflags": iflags,
            "flags_u16": flags, "tid": tid, "tgid": tid, "ts_ns": done or 0, **more}


def bio(ts: int, *, op: int = abi.OP_WRITE, sector: int = 1000, nbytes: int = 4096,
        dev: tuple[int, int] = DEV, iflags: int = 0, tid: int = 100,
        comm: bytes = b"", **more: Any) -> Row:
    """A bio of a bio-based device, ended at ts in the context of task `tid`."""
    return {"ts_ns": ts, "sector": sector, "len_bytes": nbytes, "dev_major": dev[0],
            "dev_minor": dev[1], "op": op, "iflags": iflags, "tgid": tid, "tid": tid,
            "comm": comm, **more}


def off(tid: int, start: int, end: int, waking: int = 0, syscall: int = 74,
        preempt: bool = False, *, waker: int = 0, ctx: int = 0, comm: str = "",
        rq_seq: int = 0, flags: int = 0, **more: Any) -> Row:
    """An off-CPU interval, blocked (OFF_D) unless `preempt`; woken at `waking` (default
    `end`); waker/ctx/comm: who woke it, rq_seq: the request whose completion did (sets
    WAKER_RQ); flags: more IOWHY_OFF_* bits."""
    f = (abi.OFF_PREEMPT if preempt else abi.OFF_D) | flags
    if rq_seq:
        f |= abi.OFF_WAKER_RQ
    return {"tid": tid, "tgid": tid, "start_ns": start, "end_ns": end,
            "waking_ns": 0 if preempt else (waking or end), "syscall_nr": syscall,
            "flags_u16": f, "ts_ns": end, "waker_tid": waker, "waker_tgid": waker,
            "waker_ctx_u16": ctx, "waker_comm": comm.encode(), "waker_rq_seq": rq_seq,
            "waker_rq_depth": 1 if rq_seq else 0, **more}


def helper(tid: int, start: int, end: int, waking: int = 0, **kw: Any) -> Row:
    """An interval of a helper thread (a helper record): off() with OFF_HELPER and no
    syscall."""
    kw.setdefault("syscall", -1)
    kw["flags"] = kw.get("flags", 0) | abi.OFF_HELPER
    return off(tid, start, end, waking, **kw)


def task(tid: int, ts: int, event: int = abi.TASK_ROOT, **more: Any) -> Row:
    return {"tid": tid, "tgid": tid, "ts_ns": ts, "event_u16": event, **more}


def thread(tid: int, ts: int, *, state: str = "S", syscall: int = -1, tgid: int | None = None,
           **more: Any) -> Row:
    """A thread as the recorder found it at `ts` (state letter, the syscall it is in)."""
    return {"tid": tid, "tgid": tid if tgid is None else tgid, "ts_ns": ts,
            "state_u8": ord(state), "syscall_nr": syscall, **more}


def fsync(tid: int, enter: int, exit_: int, *, call: int = abi.CALL_FSYNC, fs: int = abi.FS_EXT4,
          seq: int | None = None, dev: tuple[int, int] = PART, **more: Any) -> Row:
    """An fsync-family call; `seq`: the commit it waited for (sets FS_F_SEQ)."""
    flags = abi.FS_F_FSEVENT | (abi.FS_F_SEQ if seq is not None else 0)
    return {"tid": tid, "tgid": tid, "enter_ns": enter, "exit_ns": exit_, "call_u16": call,
            "fs_u16": fs, "flags_u16": flags, "commit_seq": seq or 0, "dev_major": dev[0],
            "dev_minor": dev[1], "ts_ns": exit_, "fd": 3, "syscall_nr": 74, **more}


def jev(event: int, ts: int, seq: int = 0, *, tid: int = 50, dev: tuple[int, int] = PART,
        aux0: int = 0, aux1: int = 0, aux2: int = 0, fs: int = abi.FS_EXT4,
        **more: Any) -> Row:
    """A journal event (abi.J_*) of commit `seq`."""
    return {"event_u16": event, "ts_ns": ts, "seq": seq, "tid": tid, "tgid": tid,
            "dev_major": dev[0], "dev_minor": dev[1], "aux0": aux0, "aux1": aux1, "aux2": aux2,
            "fs_u16": fs, **more}


# -- metadata -------------------------------------------------------------------------------

def disk(name: str = "sdz", dev: tuple[int, int] = DEV, *, size_bytes: int = 1 << 30,
         rotational: int = 1, write_cache: str = "write back", fua: int = 0,
         **more: Any) -> Row:
    """A block device of META's `devices`."""
    return {"name": name, "major": dev[0], "minor": dev[1], "size_bytes": size_bytes,
            "rotational": rotational, "write_cache": write_cache, "fua": fua, **more}


def fs_entry(fstype: str = "ext4", dev: tuple[int, int] = DEV, part: tuple[int, int] = PART,
             name: str = "sdz", mountpoint: str = "/mnt/t", **more: Any) -> Row:
    """A mounted filesystem of META's `filesystems`, on partition `part` (from sector
    2048) of disk `name` (`dev`); its log is LOG_RANGE (jbd2's for ext4, xlog's for
    xfs, none for btrfs) unless `log=` says otherwise."""
    log = None
    if fstype != "btrfs":
        log = {"kind": "jbd2" if fstype == "ext4" else "xlog", "ranges": [list(LOG_RANGE)],
               "fc_ranges": []}
    return {"fstype": fstype, "source": f"/dev/{name}1", "mountpoint": mountpoint,
            "dev_major": part[0], "dev_minor": part[1], "st_dev_major": part[0],
            "st_dev_minor": part[1], "disk": name, "disk_major": dev[0],
            "disk_minor": dev[1], "part_start_sector": 2048, "log": log, **more}


def meta(fstype: str = "ext4", write_cache: str = "write back", fua: int = 0,
         **more: Any) -> Row:
    """META of one disk (DEV, "sdz") with a `fstype` mounted on its partition PART."""
    return {"devices": [disk(write_cache=write_cache, fua=fua)],
            "filesystems": [fs_entry(fstype)], **more}


def loop_disk(name: str = "loop1", dev: tuple[int, int] = UPPER, *,
              backing_file: str = "/mnt/t/img", **more: Any) -> Row:
    """A loop device whose backing file lives on the filesystem of PART (disk sdz)."""
    return disk(name, dev, size_bytes=1 << 28, rotational=0, kind="loop",
                loop={"backing_file": backing_file, "offset_bytes": 0, "sizelimit_bytes": 0,
                      "dio": 0, "backing_dev_major": PART[0], "backing_dev_minor": PART[1],
                      "backing_ino": 12, "backing_disk": "sdz",
                      "backing_part_start_sector": 2048}, **more)


def loop_stack_meta(stack: bool = True) -> Row:
    """meta(), and loop1 (UPPER, loop_disk) with an ext4 of its own whose journal is
    UPPER_LOG; `stack`: META's stack says loop1 lies over sdz."""
    m = meta()
    m["devices"].append(loop_disk())
    m["filesystems"].append(fs_entry("ext4", UPPER, UPPER, "loop1", "/mnt/up",
                                     source="/dev/loop1", part_start_sector=0,
                                     log={"kind": "jbd2", "ranges": [list(UPPER_LOG)],
                                          "fc_ranges": []}))
    m["stack"] = [{"upper": "loop1", "lower": "sdz", "via": "loop",
                   "lower_dev_major": PART[0], "lower_dev_minor": PART[1]}] if stack else []
    return m


# -- files ----------------------------------------------------------------------------------

class Trace:
    """A trace file being written: META and RECORDER first (no RECORDER chunk when
    `recorder` is None), then the chunks added, then the trailer. `writer`: TraceWriter's
    options (zstd_level, compact, version, created_realtime_ns)."""

    def __init__(self, path: Any, meta_obj: Row | None = None, recorder: Row | None = None,
                 **writer: Any) -> None:
        self.path = str(path)
        self.w = TraceWriter(self.path, **writer)
        self.w.write_json(abi.CHUNK_META, meta() if meta_obj is None else meta_obj)
        if recorder is not None:
            self.w.write_json(abi.CHUNK_RECORDER, recorder)

    def add(self, name: str, rows: Iterable[Row] | np.ndarray,
            chunk_records: int = 65536) -> "Trace":
        """Records of type `name` (abi.RECORD_NAMES): an array, or rows (dicts) made into
        one; nothing when there are none."""
        arr = rows if isinstance(rows, np.ndarray) else records(DTYPES[name], list(rows))
        if len(arr):
            self.w.write_records(arr, chunk_records=chunk_records)
        return self

    def json(self, ctype: int, obj: Row) -> "Trace":
        self.w.write_json(ctype, obj)
        return self

    @property
    def counts(self) -> dict[str, int]:
        """Records written so far, per type."""
        return self.w.counts

    def close(self, trailer_obj: Row | None = None) -> str:
        """The trailer (none: a file cut short, as a recorder killed) ends the file."""
        self.w.close(trailer_obj)
        return self.path


def trailer(end: int, counters: dict[str, int] | None = None, *,
            stop_reason: str = "workload exited", exit_status: int | None = 0,
            **more: Any) -> Row:
    """A TRAILER ending the window at `end`; counters: the ones given, the others 0 (no
    counters at all without)."""
    tr: Row = {"end_ns": end, "stop_reason": stop_reason}
    if exit_status is not None:
        tr["exit_status"] = exit_status
    tr.update(more)
    if counters:
        tr["counters"] = {**{c: 0 for c in abi.COUNTER_NAMES}, **counters}
    return tr


_trailer = trailer  # for write_trace, whose `trailer` flag hides it


def write_trace(path: Any, *, start: int = 1000, end: int = 1100, requests=(), fsyncs=(),
                journal=(), offcpu=(), tasks=None, meta_obj=None, counters=None,
                trailer: bool = True, command=("star", "-x"), pid: int = 100, helpers=(),
                threads=(), recorder=None, bios=(), version: int | None = None,
                trailer_extra: Row | None = None, **writer: Any) -> str:
    """A trace of the rows given, window [start, end); tasks default to the root `pid`
    started at `start`; recorder: more RECORDER keys; trailer_extra: more TRAILER keys;
    version: the file's format version (TraceWriter's default: 5); writer: more of
    TraceWriter's options."""
    t = Trace(path, meta_obj, {"start_ns": start, "command": list(command), "pid": pid,
                               **(recorder or {})}, version=version, **writer)
    if tasks is None:
        tasks = [task(pid, start)]
    for name, rows in (("request", requests), ("fsync", fsyncs), ("journal", journal),
                       ("offcpu", offcpu), ("task", tasks), ("helper", helpers),
                       ("thread", threads), ("bio", bios)):
        t.add(name, rows)
    return t.close(_trailer(end, counters, **(trailer_extra or {})) if trailer else None)


def run(path: Any, **cfg: Any) -> dict[str, Any]:
    return analyze(read_trace(str(path)), AnalysisConfig(**cfg))


def att(r: dict[str, Any]) -> dict[str, int]:
    """The categories of an attribution (r: any view with `attribution_ns`) that have
    time."""
    return {k: v for k, v in r["attribution_ns"].items() if v}


def assert_sums(r: dict[str, Any]) -> None:
    att = r["attribution_ns"]
    assert set(att) in (set(CATS), set(CAUSAL_CATS))
    assert sum(att.values()) == r["elapsed_ns"]
    assert all(v >= 0 for v in att.values())


def busy_trace(tmp_path: Any, n: int = 4000, trailer: bool = True, counters=None) -> str:
    """A few thousand requests of every kind, fsyncs and commits, for output tests."""
    import synthtrace
    d = synthtrace.synth(n, seed=3)
    t = Trace(tmp_path / "busy.iowt", meta(),
              {"start_ns": int(d["start_ns"]), "pid": 1000,
               "command": ["star", "-x", "-f", "linux-6.1.tar"]})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        t.add(name, d[name])
    return t.close(_trailer(int(d["end_ns"]), counters, exit_status=None) if trailer else None)


def fsync_through_flushes(path: Any, *, t: int = 1_000_000, meta_obj: Row | None = None,
                          sectors: tuple[int, int] = (8, 16)) -> str:
    """The what-if tests' recording (times from t): thread 100 on CPU [0, 110), submits
    data write 1 at 100 and waits [110, 300) for it (device [100, 300)); on CPU
    [300, 410), submits write 2 with PREFLUSH|FUA at 400 and waits in fsync [410, 2600)
    for it: pre-flush FF [400, 1400), its data [1400, 1600), post-flush FF
    [1600, 2600); on CPU [2600, 3100), exits."""
    fl = abi.RQ_TRACKED | abi.RQ_ORIGIN
    reqs = [req(t + 100, t + 300, submit=t + 100, sector=sectors[0], seq=1, flags=fl),
            req(t + 400, t + 1400, op=abi.OP_FLUSH, seq=2, flags=abi.RQ_FLUSH_SEQ, tid=0),
            req(t + 1400, t + 2600, submit=t + 400, data_done=t + 1600, sector=sectors[1],
                seq=3, iflags=abi.F_PREFLUSH | abi.F_FUA | abi.F_SYNC,
                flags=fl | abi.RQ_FLUSH_SEQ),
            req(t + 1600, t + 2600, op=abi.OP_FLUSH, seq=4, flags=abi.RQ_FLUSH_SEQ, tid=0)]
    h = abi.WCTX_HARDIRQ
    offs = [off(100, t + 110, t + 300, waker=0, ctx=h, rq_seq=1, syscall=1),
            off(100, t + 410, t + 2600, waker=0, ctx=h, rq_seq=3, syscall=74)]
    return write_trace(path, start=t, end=t + 3100, requests=reqs, offcpu=offs,
                       tasks=[task(100, t), task(100, t + 3100, abi.TASK_EXIT)],
                       meta_obj=meta_obj)
