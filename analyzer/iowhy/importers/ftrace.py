"""`iowhy import ftrace`: the text of tracefs `trace` / `trace_pipe`, `trace-cmd report`
and `perf script`, as an iowhy trace.

Lines look like (tracefs, trace-cmd; perf script):

    dd-1234     [001] d..1.  1234.567890: block_rq_issue: 7,0 WS 4096 () 2048 + 8 be,0,4 [dd]
    dd  1234 [001]  1234.567890:  block:block_rq_issue: 7,0 WS 4096 () 2048 + 8 be,0,4 [dd]

Read: block_bio_queue, block_getrq, block_bio_backmerge/frontmerge, block_rq_insert,
block_rq_issue, block_rq_requeue, block_rq_complete (requests, matched as blktrace's
are: common.py); jbd2 commits and their phases, xfs_log_force and the XLOG iclog
events; ext4/xfs/btrfs fsync events and the syscalls:sys_enter/exit_ events of the
fsync family (calls); sched_switch, sched_wakeup/waking and process fork/exit (off-CPU
intervals and tasks of the workload threads: --pid / --comm). Every other event is
counted, not used. Times are the capture's clock (`trace_clock`; choose `mono` to
compare with iowhy recordings) at the precision it printed.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import abi
from ..filesystems import FILESYSTEMS
from ..progress import count, phase
from .common import (ImportError_, ImportStats, RequestMatcher, check_comms, open_input,
                     parse_rwbs, request_devices, request_records, write_imported)
from .textscan import CHILD_PID_AFTER, PID_AFTER, Scanner, number

BIO = re.compile(r"(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+(?P<sector>\d+)\s+\+\s+"
                 r"(?P<nr>\d+)")
RQ = re.compile(r"(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+(?:(?P<bytes>\d+)\s+)?"
                r"(?:\((?P<cmd>[^)]*)\)\s+)?(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)"
                r"(?:\s+[^\[\s]+)?\s+\[(?P<tail>[^\]]*)\]")
DEV_SEQ = re.compile(r"dev (?P<maj>\d+)[,:](?P<min>\d+) transaction (?P<seq>\d+)")
XFS_DEV = re.compile(r"dev (?P<maj>\d+):(?P<min>\d+)")
XFS_LSN = re.compile(r"lsn 0x(?P<lsn>[0-9a-fA-F]+)")
FSYNC_EV = re.compile(r"dev (?P<maj>\d+)[,:](?P<min>\d+) ino (?P<ino>(?:0x)?[0-9a-fA-F]+)")
FD = re.compile(r"fd: (0x[0-9a-fA-F]+|\d+)")
RET = re.compile(r"ret (-?\d+)")
# Values a field of an event may take: what the records hold (times below 2**63 ns,
# device numbers within Linux's 12/20 bits, sectors below 2**54, a request's bytes in
# 32 bits); an event with another is a line not understood.
MAX_SEC = ((1 << 63) - 1) // 1_000_000_000
MAJOR_MAX, MINOR_MAX = (1 << 12) - 1, (1 << 20) - 1
PID_MAX = (1 << 31) - 1
CALLS = {v: k for k, v in abi.CALL_NAMES.items() if k != abi.CALL_OSYNC_WRITE}
JBD2 = {"jbd2_start_commit": abi.J_JBD2_START, "jbd2_commit_locking": abi.J_JBD2_LOCKING,
        "jbd2_commit_flushing": abi.J_JBD2_FLUSHING, "jbd2_commit_logging": abi.J_JBD2_LOGGING,
        "jbd2_end_commit": abi.J_JBD2_END}
XLOG = {"xfs_log_force": abi.J_XFS_FORCE, "xlog_iclog_sync": abi.J_XLOG_SYNC,
        "xlog_iclog_write": abi.J_XLOG_WRITE, "xlog_iclog_sync_done": abi.J_XLOG_DONE}
# The filesystem (abi.FS_*) of each journal tracepoint and of each fsync's entry event
# (iowhy.filesystems).
FS_OF_EVENT = {tp: abi.FS_CODES[f.name] for f in FILESYSTEMS
               for tp in (f.fsync_entry, *(t for t, _ in f.journal_tracepoints))}
FSYNC_ENTRY = frozenset(f.fsync_entry for f in FILESYSTEMS)
USED_ELSEWHERE = {"block_rq_merge", "block_split", "block_plug", "block_unplug",
                  "block_bio_remap", "block_rq_remap", "block_bio_complete",
                  "block_dirty_buffer", "block_touch_buffer", "block_bio_bounce",
                  "block_io_start", "block_io_done"}


def _syscall_numbers() -> dict[str, int]:
    from ..syscall_table import TABLES
    return {v: k for k, v in TABLES["x86_64"].items()}


@dataclass
class _State:
    stats: ImportStats
    matcher: RequestMatcher
    workload: set[int]
    comms: set[str]
    names: dict[int, str] = field(default_factory=dict)
    first_seen: dict[int, int] = field(default_factory=dict)
    calls_open: dict[int, dict[str, Any]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    syscall_of: dict[int, str] = field(default_factory=dict)
    journal: list[dict[str, Any]] = field(default_factory=list)
    off_open: dict[int, dict[str, Any]] = field(default_factory=dict)
    offcpu: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    scan: Scanner = field(default_factory=Scanner)
    nr_names: dict[int, str] = field(default_factory=dict)  # syscall number -> name
    sched_seen: bool = False
    calls_seen: bool = False
    journal_seen: bool = False
    precision: int = 9

    def is_workload(self, pid: int, comm: str, t: int) -> bool:
        if pid in self.workload:
            return True
        if comm and comm in self.comms and pid:
            self.workload.add(pid)
            self.tasks.append({"tid": pid, "tgid": pid, "ts_ns": t,
                               "event_u16": abi.TASK_ROOT, "comm": _name(comm)})
            return True
        return False


def _ns(sec: str, frac: str) -> int:
    return int(sec) * 1_000_000_000 + int((frac[:9] + "000000000")[:9])


def _name(comm: str) -> bytes:
    """A task name as the records hold it: its bytes (the text was read with
    surrogateescape), at most 16."""
    return comm.encode("utf-8", "surrogateescape")[:16]


def _dev(g: re.Match) -> tuple[int, int] | None:
    maj, mn = number(g["maj"]), number(g["min"])
    if maj is None or mn is None or maj > MAJOR_MAX or mn > MINOR_MAX:
        return None
    return maj, mn


def _sector_bytes(g: re.Match) -> tuple[int, int] | None:
    sector, nr = number(g["sector"]), number(g["nr"])
    # (a sector is a u64: a flush shows (sector_t)-1; the records keep 0 for a flush)
    if sector is None or nr is None or sector >> 64 or nr * 512 >= 1 << 32:
        return None
    return sector, nr * 512


def _block(st: _State, ev: str, rest: str, t: int, pid: int, comm: str, cpu: int) -> None:
    m = st.matcher
    if ev in ("block_bio_queue", "block_getrq", "block_bio_backmerge", "block_bio_frontmerge"):
        b = st.scan.match(BIO, rest)
        dev = _dev(b) if b else None
        sb = _sector_bytes(b) if b else None
        if not b or dev is None or sb is None:
            st.stats.unmatched[f"{ev} lines not understood"] += 1
            return
        op, ifl = parse_rwbs(b["rwbs"])
        sector, nbytes = sb
        if ev == "block_bio_queue":
            m.queue(t, dev, sector, nbytes, op, ifl, pid, comm)
        elif ev == "block_getrq":
            m.getrq(t, dev, sector, nbytes, op, ifl, pid, comm)
        else:
            m.merge(t, dev, sector, nbytes, op, front=ev == "block_bio_frontmerge")
        return
    r = st.scan.match(RQ, rest)
    dev = _dev(r) if r else None
    sb = _sector_bytes(r) if r else None
    given = number(r["bytes"]) if r and r["bytes"] is not None else None
    if not r or dev is None or sb is None or (r["bytes"] is not None and (
            given is None or given >= 1 << 32)):
        st.stats.unmatched[f"{ev} lines not understood"] += 1
        return
    op, ifl = parse_rwbs(r["rwbs"])
    sector = sb[0]
    nbytes = given if given is not None else sb[1]
    if ev == "block_rq_insert":
        m.insert(t, dev, sector, nbytes, op, ifl, pid, comm)
    elif ev == "block_rq_issue":
        m.issue(t, dev, sector, nbytes, op, ifl, cpu, pid, comm)
    elif ev == "block_rq_requeue":
        m.requeue(t, dev, sector, op)
    else:
        err = number(r["tail"].strip().lstrip("-")) or 0
        if r["tail"].strip().startswith("-"):
            err = -err
        m.complete(t, dev, sector, sb[1], op, err if -(1 << 31) <= err < 1 << 31 else 0, cpu)


def _call_open(st: _State, pid: int, t: int, call: int, **kw: Any) -> dict[str, Any]:
    c = {"tid": pid, "tgid": pid, "enter_ns": t, "exit_ns": 0, "call_u16": call,
         "fs_u16": abi.FS_NONE, "flags_u16": 0, "fd": -1, "ret": 0, "ino": 0,
         "dev_major": 0, "dev_minor": 0, "syscall_nr": 0, "comm": st.names.get(pid, "")}
    c.update(kw)
    st.calls_open[pid] = c
    return c


def _call_close(st: _State, pid: int, t: int, ret: int) -> None:
    c = st.calls_open.pop(pid)
    c["exit_ns"] = t
    c["ts_ns"] = t
    c["ret"] = ret
    st.calls.append(c)


RAW_SYS = re.compile(r"NR (?P<nr>-?\d+)(?: \((?P<args>[^)]*)\)| = (?P<ret>-?\d+))?")


def _line(st: _State, ev: str, rest: str, t: int, pid: int, comm: str, cpu: int,
          nrs: dict[str, int]) -> None:
    """One event line to the records it feeds, by event name; any other is counted as
    ignored, any line of a known event not understood as unmatched."""
    if ev in ("sys_enter", "sys_exit"):  # raw_syscalls: x86-64 numbers
        named = _raw_syscall(st, ev, rest)
        if named is None:
            return
        ev, rest = named
    if ev.startswith("block_") and ev not in USED_ELSEWHERE:
        _block(st, ev, rest, t, pid, comm, cpu)
    elif ev in JBD2 or ev in XLOG:
        _journal_line(st, ev, rest, t, pid, comm)
    elif ev.startswith("sys_enter_") or ev.startswith("sys_exit_"):
        _syscall(st, ev, rest, t, pid, comm, nrs)
    elif ev in FSYNC_ENTRY:
        _fsync_event(st, ev, rest, t, pid, comm)
    elif ev == "ext4_sync_file_exit":
        _ext4_sync_file_exit(st, rest, t, pid)
    elif ev == "sched_switch":
        _sched_switch(st, rest, t, cpu, nrs)
    elif ev in ("sched_wakeup", "sched_waking", "sched_wakeup_new"):
        _wakeup(st, rest, t, pid, comm)
    elif ev == "sched_process_fork":
        _fork(st, rest, t)
    elif ev == "sched_process_exit":
        _process_exit(st, rest, t)
    else:
        st.stats.ignored[ev] += 1


def _raw_syscall(st: _State, ev: str, rest: str) -> tuple[str, str] | None:
    """A raw_syscalls line as the named syscall event's (event, text); None (counted as
    ignored) when its number is not a known x86-64 syscall."""
    g = st.scan.match(RAW_SYS, rest)
    names = st.nr_names
    nr = number(g["nr"]) if g else None
    if g is None or nr is None or nr not in names:
        st.stats.ignored[ev] += 1
        return None
    name = names[nr]
    if ev == "sys_enter":
        first = (g["args"] or "")[:64].split(",")[0].strip()
        fd = number(first or "0", 16)
        return f"sys_enter_{name}", f"fd: 0x{fd if fd is not None else 0:x}"
    return f"sys_exit_{name}", g["ret"] or "0"


def _journal_line(st: _State, ev: str, rest: str, t: int, pid: int, comm: str) -> None:
    """A jbd2 or xlog event to a journal record: its device and sequence (the jbd2
    transaction, the xfs lsn) must both parse, the sequence below 2^63."""
    st.journal_seen = True
    seq: int | None = None
    if ev in JBD2:
        g = st.scan.search(DEV_SEQ, rest)
        fs, code = FS_OF_EVENT[ev], JBD2[ev]
        seq = number(g["seq"]) if g else None
    else:
        g = st.scan.search(XFS_DEV, rest)
        fs, code = FS_OF_EVENT[ev], XLOG[ev]
        lsn = st.scan.search(XFS_LSN, rest[g.end():]) if g else None
        seq = number(lsn["lsn"], 16) if lsn else None
    dev = _dev(g) if g else None
    if dev is None or seq is None or seq >> 63:
        st.stats.unmatched[f"{ev} lines not understood"] += 1
        return
    st.journal.append({"event_u16": code, "ts_ns": t, "seq": seq, "tid": pid, "tgid": pid,
                       "dev_major": dev[0], "dev_minor": dev[1],
                       "fs_u16": fs, "comm": _name(comm)})


def _syscall(st: _State, ev: str, rest: str, t: int, pid: int, comm: str,
             nrs: dict[str, int]) -> None:
    """A syscall entry or exit: opens or closes a workload thread's fsync-family call
    (one open per thread), and tracks the syscall each thread is in (off-CPU records)."""
    stats = st.stats
    enter = ev.startswith("sys_enter_")
    name = ev[10:] if enter else ev[9:]
    if name in CALLS and st.is_workload(pid, comm, t):
        st.calls_seen = True
        if enter:
            if pid in st.calls_open:
                stats.unmatched["fsync-family entry with no exit"] += 1
                st.calls_open.pop(pid)
            g = st.scan.search(FD, rest)
            fd = number(g.group(1), 0) if g else None
            _call_open(st, pid, t, CALLS[name],
                       fd=fd if fd is not None and fd < 1 << 31 else -1,
                       syscall_nr=nrs.get(name, 0))
        elif pid in st.calls_open:
            text = rest.strip()
            ret = number(text.lstrip("-"), 0) or 0
            if text.startswith("-"):
                ret = -ret
            ret %= 1 << 64  # the kernel's unsigned long: -errno as 2**64 - errno
            _call_close(st, pid, t, ret - (1 << 64) if ret >= 1 << 63 else ret)
        else:
            stats.unmatched["fsync-family exit with no entry"] += 1
    if enter:
        st.syscall_of[pid] = name
    else:
        st.syscall_of.pop(pid, None)
    if name not in CALLS:
        stats.ignored[ev] += 1


def _fsync_event(st: _State, ev: str, rest: str, t: int, pid: int, comm: str) -> None:
    """A filesystem's fsync entry event of a workload thread: its filesystem, file
    (device, inode) and datasync flag onto the open call (opened here if none is)."""
    if not st.is_workload(pid, comm, t):
        return
    st.calls_seen = True
    g = st.scan.search(FSYNC_EV, rest)
    fs = FS_OF_EVENT[ev]
    c = st.calls_open.get(pid)
    if c is None:  # no syscall events: the call is the filesystem's fsync
        c = _call_open(st, pid, t, abi.CALL_FSYNC, opened_by_fs=True)
    c["fs_u16"] = fs
    c["flags_u16"] |= abi.FS_F_FSEVENT
    dev = _dev(g) if g else None
    ino = (number(g["ino"], 0) if g["ino"].startswith("0x") else number(g["ino"])) \
        if g else None
    if dev is not None and ino is not None and not ino >> 64:
        c["dev_major"], c["dev_minor"] = dev
        c["ino"] = ino
    st.scan.work += 2 * len(rest)
    if "datasync 1" in rest or "datasync=1" in rest:
        c["flags_u16"] |= abi.FS_F_DATASYNC


def _ext4_sync_file_exit(st: _State, rest: str, t: int, pid: int) -> None:
    """ext4_sync_file_exit: closes the call only if the fsync entry event opened it (no
    syscall events), with its return value (0 if unreadable)."""
    c = st.calls_open.get(pid)
    if c is not None and c.get("opened_by_fs"):
        m = st.scan.search(RET, rest)
        v = number(m.group(1).lstrip("-")) if m else None
        ret = 0 if m is None or v is None or v >> 62 else (
            -v if m.group(1)[0] == "-" else v)
        _call_close(st, pid, t, ret)


def _sched_switch(st: _State, rest: str, t: int, cpu: int, nrs: dict[str, int]) -> None:
    """sched_switch: a workload thread switched out opens an off-CPU record (or, dead,
    gets its exit task record, once); the thread switched in closes its open one."""
    st.sched_seen = True
    sw = st.scan.sched_switch(rest)
    if not sw or sw[1] > PID_MAX or sw[4] > PID_MAX:
        st.stats.unmatched["sched_switch lines not understood"] += 1
        return
    pc, prev, ps, _, nxt = sw
    if st.is_workload(prev, pc, t) and ps.rstrip("+") in ("X", "Z", "X|Z", "Z|X"):
        # the thread's last switch-out: it exited (no sched_process_exit needed)
        if not any(x["tid"] == prev and x["event_u16"] == abi.TASK_EXIT for x in st.tasks):
            st.tasks.append({"tid": prev, "tgid": prev, "ts_ns": t,
                             "event_u16": abi.TASK_EXIT, "comm": _name(pc)})
    elif st.is_workload(prev, pc, t):
        state = ps
        flags = abi.OFF_PREEMPT if state.startswith("R") else 0
        if "D" in state:
            flags |= abi.OFF_D
        sysname = st.syscall_of.get(prev)
        st.off_open[prev] = {"tid": prev, "tgid": prev, "start_ns": t, "waking_ns": 0,
                             "end_ns": 0, "flags_u16": flags,
                             "syscall_nr": nrs.get(sysname, -1) if sysname else -1}
    if nxt in st.off_open:
        o = st.off_open.pop(nxt)
        o["end_ns"] = o["ts_ns"] = t
        o["cpu"] = cpu  # as a recording's: the CPU it is switched in on
        if o["flags_u16"] & abi.OFF_PREEMPT:
            o["waking_ns"] = 0
        elif not o["waking_ns"]:
            o["waking_ns"] = t
        st.offcpu.append(o)


def _wakeup(st: _State, rest: str, t: int, pid: int, comm: str) -> None:
    """A wakeup of a thread with an open off-CPU record not preempted: its first one
    sets the waking time and the waker (the line's task)."""
    w = st.scan.name_then_number(rest, "comm=", PID_AFTER)
    if w and w[1] in st.off_open:
        o = st.off_open[w[1]]
        if not o["waking_ns"] and not o["flags_u16"] & abi.OFF_PREEMPT:
            o["waking_ns"] = t
            o["waker_tid"] = o["waker_tgid"] = pid
            o["waker_comm"] = _name(comm)


def _fork(st: _State, rest: str, t: int) -> None:
    """sched_process_fork: a workload parent's child joins the workload (a fork task
    record); both names and pids must parse."""
    parent = st.scan.name_then_number(rest, "comm=", PID_AFTER)
    child = None
    if parent and rest.startswith(" child_comm=", parent[2]):
        child = st.scan.name_then_number(rest, " child_comm=", CHILD_PID_AFTER, parent[2])
    if parent and child and parent[1] in st.workload and child[1] <= PID_MAX:
        st.workload.add(child[1])
        st.tasks.append({"tid": child[1], "tgid": child[1], "parent_tgid": parent[1],
                         "ts_ns": t, "event_u16": abi.TASK_FORK,
                         "comm": _name(child[0])})


def _process_exit(st: _State, rest: str, t: int) -> None:
    """sched_process_exit of a workload thread: its exit task record."""
    w = st.scan.name_then_number(rest, "comm=", PID_AFTER)
    if w and w[1] in st.workload:
        st.tasks.append({"tid": w[1], "tgid": w[1], "ts_ns": t,
                         "event_u16": abi.TASK_EXIT, "comm": _name(w[0])})


def _records(dtype: np.dtype, rows: list[dict[str, Any]]) -> np.ndarray:
    a = np.zeros(len(rows), dtype=dtype)
    names = set(dtype.names or ())
    for i, row in enumerate(rows):
        for k, v in row.items():
            if k in names:
                a[k][i] = _name(v) if isinstance(v, str) else v
    return a


def _comm_candidates(st: _State, parsed: list[tuple[int, int, str, str, int, str, int]]
                     ) -> tuple[dict[int, tuple[int, str]], dict[int, int]]:
    """The tasks seen with one of the --comm names, as is_workload meets them (a line's
    task, a switched-out task), with their first time; and each forked child's parent."""
    seen: dict[int, tuple[int, str]] = {}
    parent: dict[int, int] = {}
    for t, _, ev, rest, pid, comm, _cpu in parsed:
        if comm in st.comms and pid and pid not in seen:
            seen[pid] = (t, comm)
        if ev == "sched_switch":
            sw = st.scan.sched_switch(rest)
            if sw and sw[0] in st.comms and sw[1] and sw[1] not in seen:
                seen[sw[1]] = (t, sw[0])
        elif ev == "sched_process_fork":
            par = st.scan.name_then_number(rest, "comm=", PID_AFTER)
            if par and rest.startswith(" child_comm=", par[2]):
                ch = st.scan.name_then_number(rest, " child_comm=", CHILD_PID_AFTER, par[2])
                if ch:
                    parent.setdefault(ch[1], par[1])
    return seen, parent


def import_ftrace(inputs: list[str], out: str, workload: set[int] | None = None,
                  comms: set[str] | None = None) -> dict[str, Any]:
    stats = ImportStats()
    st = _State(stats, RequestMatcher(stats), set(workload or ()), set(comms or ()))
    st.scan = Scanner()
    for tid in sorted(st.workload):
        st.tasks.append({"tid": tid, "tgid": tid, "ts_ns": 0, "event_u16": abi.TASK_ROOT})
    nrs = _syscall_numbers()
    st.nr_names = {v: k for k, v in nrs.items()}
    lines = 0
    first = last = None
    parsed: list[tuple[int, int, str, str, int, str, int]] = []
    phase("reading")
    for p in inputs:
        # names are bytes: kept as they are (surrogateescape), written back as bytes
        with io.TextIOWrapper(open_input(p), encoding="utf-8", errors="surrogateescape") as f:
            for raw in f:
                line = raw.rstrip("\n")
                if not line.strip() or line.lstrip().startswith("#") or line.startswith(
                        ("cpus=", "version =", "CPU ")):
                    continue
                lines += 1
                if not lines & 0xFFFF:
                    count(0x10000)  # lines read, on the progress line
                h = st.scan.split(line)
                if h is None:
                    stats.unmatched["lines not in a known ftrace format"] += 1
                    continue
                sec = number(h.sec)
                if sec is None or sec > MAX_SEC or h.pid > PID_MAX or h.cpu > PID_MAX:
                    stats.unmatched["lines with a time, PID or CPU out of range"] += 1
                    continue
                t = _ns(h.sec, h.frac)
                st.precision = min(st.precision, len(h.frac))
                parsed.append((t, len(parsed), h.event, h.rest, h.pid, h.comm, h.cpu))
    if not parsed:
        raise ImportError_("no ftrace events in " + ", ".join(inputs),
                           "give the text of tracefs trace/trace_pipe, `trace-cmd report` or "
                           "`perf script`")
    phase("matching events")
    parsed.sort()
    if st.comms:
        check_comms(st.comms, *_comm_candidates(st, parsed), st.workload)
    for t, _, ev, rest, pid, comm, cpu in parsed:
        stats.events[ev] += 1
        if comm and comm != "<...>":
            st.names.setdefault(pid, comm)
        first = t if first is None else first
        last = t
        _line(st, ev, rest, t, pid, comm, cpu, nrs)
    assert first is not None and last is not None
    for row in st.tasks:
        if not row["ts_ns"]:
            row["ts_ns"] = first
    reqs = st.matcher.finish()
    # Calls and off-CPU intervals still open at the end are kept, flagged incomplete.
    for pid, c in list(st.calls_open.items()):
        c["flags_u16"] |= abi.FS_F_INCOMPLETE
        c["ts_ns"] = last
        st.calls.append(c)
        stats.unmatched["fsync-family call still running at the end"] += 1
    for pid, o in st.off_open.items():
        o["end_ns"] = o["ts_ns"] = last
        o["flags_u16"] |= abi.OFF_OPEN_END
        st.offcpu.append(o)
    arr = request_records(reqs, st.workload, stats)
    devs = request_devices(arr)
    devices: list[dict[str, Any]] = [
        {"name": f"{a}:{b}", "major": a, "minor": b, "size_bytes": None, "rotational": None,
         "write_cache": None, "fua": None, "partitions": []} for a, b in devs]
    missing = []
    attribution = bool(st.workload) and st.sched_seen
    if not st.workload:
        missing.append("no workload threads given (--pid/--comm), so no off-CPU data and no "
                       "workload attribution")
    elif not st.sched_seen:
        missing.append("no sched_switch events, so no off-CPU data and no workload "
                       "attribution")
    if not st.calls_seen:
        missing.append("no fsync-family calls")
    else:
        missing.append("fsync-family calls not linked to the journal commit they waited for "
                       "(their commit time counts as other)")
    if not st.journal_seen:
        missing.append("no journal events")
    if st.precision < 9:
        missing.append(f"times to 10^-{st.precision} s (the capture's precision)")
    missing.append("no filesystem layout, so journal writes are classed metadata or data")
    counts: Counter = Counter(stats.events)
    if not any(k.startswith("block_rq") for k in counts):
        missing.append("no block request events")
    records = {"request": arr,
               "fsync": _records(abi.FSYNC_DTYPE, st.calls),
               "journal": _records(abi.JOURNAL_DTYPE, st.journal),
               "offcpu": _records(abi.OFFCPU_DTYPE, st.offcpu if attribution else []),
               "task": _records(abi.TASK_DTYPE, st.tasks if attribution else [])}
    root = min(st.workload) if st.workload else 0
    phase("writing")
    write_imported(out, "ftrace", inputs, first, last, records, devices, missing, stats,
                   attribution=attribution, command=[os.path.basename(inputs[0])], pid=root)
    return {"requests": len(arr), "calls": len(st.calls), "off-CPU intervals":
            len(st.offcpu) if attribution else 0, "journal events": len(st.journal),
            "unmatched": sum(stats.unmatched.values()), "lines": lines}
