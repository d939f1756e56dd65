"""What the importers share: matching block events into requests, and writing the
imported trace.

Requests are matched the way blkparse and btt do, since neither blktrace nor the block
tracepoints' text carries a request's identity: by device, start sector and operation.
Per (device, sector, op) key, in time order, a queued bio (Q) becomes a request at
get-request (G) or insert (I); the request is issued (D) and completes (C). Several
requests in flight on one key are served first in, first out. A request starts at G (the
recorder's submit_ns) or, with `start_at_queue` (blktrace: btt's Q2C), at its bio's Q.
A write with PREFLUSH or FUA that goes through the flush machinery completes twice, as
the recorder sees it: its data stage (C with its bytes) and, after its post-flush, again
with no bytes. The second completion finishes the same request (data_done keeps the
first), as the recorder's data_done_ns and done_ns do. A bio merged into a
request (M back, F front) grows it (a front merge moves its start). What does not fit
is counted by kind (`ImportStats.unmatched`), never dropped silently: a completion of
no known request becomes a request flagged unmatched (issued before the capture), a
request still in flight at the end is flagged incomplete.
"""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable

import numpy as np

from .. import abi

# rwbs operation letters (blk_fill_rwbs) -> iowhy op
OPS = {"R": abi.OP_READ, "W": abi.OP_WRITE, "F": abi.OP_FLUSH, "D": abi.OP_DISCARD,
       "N": abi.OP_OTHER}


class ImportError_(Exception):
    """Bad input: one line for the user, with a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def check_comms(comms: set[str], seen: dict[int, tuple[int, str]],
                parent: dict[int, int], workload: set[int]) -> None:
    """Refuse a --comm NAME that names more than one process: `seen` is pid -> (first
    time, name) of the tasks seen with one of `comms`, `parent` a child's parent (fork
    events). A task forked (at any depth) from another with the name, or from a --pid
    thread, is that one's; the others are distinct processes, and which the user meant
    cannot be told."""
    for name in sorted(comms):
        pids = {p for p, (_, c) in seen.items() if c == name}
        roots = []
        for p in sorted(pids, key=lambda p: seen[p][0]):
            a, steps = parent.get(p), 0
            while a is not None and a not in pids and a not in workload and steps < 1 << 16:
                a, steps = parent.get(a), steps + 1
            if a is None or steps >= 1 << 16:
                roots.append(p)
        if len(roots) > 1:
            shown = ", ".join(f"pid {p} (first seen at {seen[p][0] / 1e9:.6f} s)"
                              for p in roots[:5])
            more = f" and {len(roots) - 5} more" if len(roots) > 5 else ""
            raise ImportError_(f"--comm {name} names {len(roots)} processes: {shown}{more}",
                               "give the workload's threads with --pid")


def open_input(path: str) -> BinaryIO:
    """Open a capture for reading: a regular file only (a FIFO such as trace_pipe, or a
    device, would block or never end), opened without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ImportError_(f"cannot read {path}: {e.strerror}", "check the path") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ImportError_(f"{path} is not a regular file",
                           "save the capture to a file first (cat trace_pipe > FILE)")
    return os.fdopen(fd, "rb")


def parse_rwbs(rwbs: str) -> tuple[int, int]:
    """(op, iflags) of an rwbs string: [F]OP[F][A][S][M] (PREFLUSH, op, FUA, RAHEAD,
    SYNC, META); "FF" is a flush request, "FWS" a PREFLUSH sync write."""
    s = rwbs
    iflags = 0
    if len(s) >= 2 and s[0] == "F" and s[1] in "FWRDN":
        iflags |= abi.F_PREFLUSH
        s = s[1:]
    op = OPS.get(s[:1], abi.OP_OTHER) if s else abi.OP_OTHER
    rest = s[1:]
    if rest.startswith("E"):  # DE: secure erase
        rest = rest[1:]
    for ch, bit in (("F", abi.F_FUA), ("A", abi.F_RAHEAD), ("S", abi.F_SYNC),
                    ("M", abi.F_META)):
        if ch in rest:
            iflags |= bit
    return op, iflags


@dataclass
class Req:
    dev: tuple[int, int]
    sector: int
    nbytes: int
    op: int
    iflags: int = 0
    submit: int = 0
    insert: int = 0
    issue: int = 0
    done: int = 0
    done_bytes: int = 0
    tid: int = 0
    comm: str = ""
    cpu: int = 0
    error: int = 0
    requeues: int = 0
    nr_bios: int = 0
    origin: bool = False
    unmatched: bool = False
    flush_seq: bool = False  # completed by the flush machinery (an empty PREFLUSH write)
    queued: int = 0  # time of the bio's queue event (Q)
    data_done: int = 0  # a flush-sequenced write's first (data stage) completion


@dataclass
class ImportStats:
    events: Counter = field(default_factory=Counter)  # by kind, every event read
    unmatched: Counter = field(default_factory=Counter)  # events that fit no request
    ignored: Counter = field(default_factory=Counter)  # events iowhy has no use for


Key = tuple[tuple[int, int], int, int]


class RequestMatcher:
    def __init__(self, stats: ImportStats, start_at_queue: bool = False) -> None:
        self.stats = stats
        self.start_at_queue = start_at_queue
        # Writes with PREFLUSH/FUA whose data stage completed: a later completion of
        # no bytes on their key, with no request in flight there, is their final one.
        self.flush_wait: dict[Key, Req] = {}
        self.queued: dict[Key, deque[tuple[int, int, str, int]]] = {}  # t, tid, comm, iflags
        self.pending: dict[Key, deque[Req]] = {}  # allocated or inserted, not issued
        self.issued: dict[Key, deque[Req]] = {}
        self.out: list[Req] = []

    @staticmethod
    def _sector(sector: int, op: int) -> int:
        """A request's start sector as the records hold it: 0 for a flush (the block
        layer's tracepoints show a flush's sector as (sector_t)-1)."""
        return int(sector) if op != abi.OP_FLUSH else 0

    @staticmethod
    def _key(dev: tuple[int, int], sector: int, op: int) -> Key:
        return (dev, int(sector) if op != abi.OP_FLUSH else 0, op)

    def queue(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
              iflags: int, tid: int, comm: str) -> None:
        self.queued.setdefault(self._key(dev, sector, op), deque()).append(
            (t, tid, comm, iflags))

    def _new(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
             iflags: int, tid: int, comm: str) -> Req:
        k = self._key(dev, sector, op)
        q = self.queued.get(k)
        r = Req(dev, self._sector(sector, op), int(nbytes), op, iflags, submit=t, tid=tid,
                comm=comm,
                nr_bios=1)
        if q:
            qt, qtid, qcomm, qfl = q.popleft()
            r.tid, r.comm, r.origin = qtid, qcomm or comm, True
            r.iflags |= qfl
            r.queued = qt
            if self.start_at_queue:
                r.submit = qt
        else:
            self.stats.unmatched["request without its queued bio (submitter unknown)"] += 1
            r.tid, r.comm = tid, comm
            r.origin = False
        self.pending.setdefault(k, deque()).append(r)
        return r

    def getrq(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
              iflags: int, tid: int, comm: str) -> None:
        self._new(t, dev, sector, nbytes, op, iflags, tid, comm)

    def insert(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
               iflags: int, tid: int, comm: str) -> None:
        k = self._key(dev, sector, op)
        for r in self.pending.get(k, ()):
            if not r.insert:
                r.insert = t
                r.iflags |= iflags
                if nbytes:
                    r.nbytes = int(nbytes)
                return
        # No get-request event: the submission is the bio's queueing, if seen.
        r = self._new(t, dev, sector, nbytes, op, iflags, tid, comm)
        r.submit = r.queued
        r.insert = t

    def merge(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
              front: bool) -> None:
        """A queued bio merged into a pending request (back: at its end; front: just
        before its start)."""
        k = self._key(dev, sector, op)
        q = self.queued.get(k)
        if q:
            q.popleft()
        nsec = int(nbytes) // 512
        for pk, rs in list(self.pending.items()):
            if pk[0] != dev or pk[2] != op:
                continue
            for r in rs:
                if front and r.sector == sector + nsec:
                    rs.remove(r)
                    r.sector = int(sector)
                    r.nbytes += int(nbytes)
                    r.nr_bios += 1
                    self.pending.setdefault(k, deque()).appendleft(r)
                    return
                if not front and r.sector + r.nbytes // 512 == sector:
                    r.nbytes += int(nbytes)
                    r.nr_bios += 1
                    return
        self.stats.unmatched["bio merge into no pending request"] += 1

    def issue(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
              iflags: int, cpu: int, tid: int = 0, comm: str = "") -> None:
        k = self._key(dev, sector, op)
        p = self.pending.get(k)
        if p:
            r = p.popleft()
        else:
            r = Req(dev, self._sector(sector, op), int(nbytes), op, iflags, tid=tid, comm=comm,
                    nr_bios=1)
            if op != abi.OP_FLUSH:  # flush requests of the flush machinery start at issue
                self.stats.unmatched["issue without insert"] += 1
        r.issue = t
        r.cpu = cpu
        if nbytes:
            r.nbytes = int(nbytes)
        r.iflags |= iflags
        self.issued.setdefault(k, deque()).append(r)

    def requeue(self, t: int, dev: tuple[int, int], sector: int, op: int) -> None:
        k = self._key(dev, sector, op)
        q = self.issued.get(k)
        if not q:
            self.stats.unmatched["requeue of no issued request"] += 1
            return
        r = q.popleft()
        r.requeues += 1
        self.pending.setdefault(k, deque()).appendleft(r)

    def complete(self, t: int, dev: tuple[int, int], sector: int, nbytes: int, op: int,
                 error: int, cpu: int) -> None:
        k = self._key(dev, sector, op)
        for src in (self.issued, self.pending):
            q = src.get(k)
            if q:
                r = q.popleft()
                # Never issued: an empty PREFLUSH write, ended by the flush machinery
                # once its flush completed (its completion event has no F).
                r.flush_seq = src is self.pending and bool(r.iflags & abi.F_PREFLUSH)
                break
        else:
            w = self.flush_wait.get(k)
            if w is not None and not nbytes and w.done <= t:
                # The final completion of a flush-sequenced write (after its
                # post-flush): the same request, now done.
                del self.flush_wait[k]
                w.data_done = w.data_done or w.done
                w.done = t
                w.error = int(error)
                w.cpu = cpu
                w.flush_seq = True
                return
            self.stats.unmatched["completion of a request issued before the capture"] += 1
            r = Req(dev, self._sector(sector, op), int(nbytes), op, 0, unmatched=True)
        r.done = t
        r.done_bytes = int(nbytes) if nbytes else r.nbytes
        r.error = int(error)
        r.cpu = cpu
        self.out.append(r)
        if nbytes and op != abi.OP_FLUSH and r.iflags & (abi.F_PREFLUSH | abi.F_FUA):
            self.flush_wait[k] = r

    def finish(self) -> list[Req]:
        """Every request; the ones still in flight flagged incomplete (done = 0)."""
        left = [r for d in (self.pending, self.issued) for q in d.values() for r in q]
        if left:
            self.stats.unmatched["request in flight at the end"] += len(left)
        nq = sum(len(q) for q in self.queued.values())
        if nq:
            self.stats.unmatched["queued bio never seen in a request"] += nq
        out = self.out + left
        out.sort(key=lambda r: (r.submit or r.insert or r.issue or r.done))
        return out


T63 = (1 << 63) - 1


def _fits(r: Req) -> bool:
    """Every value of the request fits its record field, within what the reader accepts
    (times below 2**63, sectors below 2**54, device numbers within 12/20 bits)."""
    return (all(0 <= v <= T63 for v in (r.submit, r.insert, r.issue, r.done))
            and 0 <= r.sector < 1 << 54 and 0 <= r.nbytes < 1 << 32
            and 0 <= r.done_bytes < 1 << 32 and 0 <= r.dev[0] < 1 << 12
            and 0 <= r.dev[1] < 1 << 20 and 0 <= r.tid < 1 << 32 and 0 <= r.cpu < 1 << 32
            and -(1 << 31) <= r.error < 1 << 31 and 0 <= r.requeues < 1 << 16
            and 0 <= r.nr_bios < 1 << 32)


def request_records(reqs: list[Req], tracked: set[int] | None = None,
                    stats: ImportStats | None = None) -> np.ndarray:
    """The requests as records; one with a value its field cannot hold (a hostile
    capture: a 64-bit time, bytes grown past 32 bits by merges) is left out and counted
    in stats.unmatched."""
    ok = [r for r in reqs if _fits(r)]
    if len(ok) < len(reqs) and stats is not None:
        stats.unmatched["requests with a value out of range, left out"] += len(reqs) - len(ok)
    reqs = ok
    a = np.zeros(len(reqs), dtype=abi.REQUEST_DTYPE)
    for i, r in enumerate(reqs):
        flags = 0
        if r.origin:
            flags |= abi.RQ_ORIGIN
        if tracked and r.tid in tracked:
            flags |= abi.RQ_TRACKED
        if not r.done:
            flags |= abi.RQ_INCOMPLETE
        if r.unmatched:
            flags |= abi.RQ_UNMATCHED
        if r.done and not r.issue and not r.unmatched:
            flags |= abi.RQ_NO_ISSUE
        if r.flush_seq:
            flags |= abi.RQ_FLUSH_SEQ
        x = a[i]
        x["ts_ns"] = r.done or r.issue or r.insert or r.submit
        x["cpu"] = r.cpu
        x["start_sector"] = r.sector
        x["submit_ns"], x["insert_ns"], x["issue_ns"] = r.submit, r.insert, r.issue
        x["data_done_ns"] = r.data_done or r.done
        x["done_ns"] = r.done
        x["len_bytes"] = r.nbytes
        x["done_bytes"] = r.done_bytes
        x["dev_major"], x["dev_minor"] = r.dev
        x["tid"] = x["tgid"] = r.tid
        x["error"] = r.error
        x["seq"] = i + 1
        x["op"] = r.op
        x["iflags"] = r.iflags
        x["flags_u16"] = flags
        x["requeues"] = r.requeues
        x["nr_bios"] = r.nr_bios
        x["comm"] = r.comm.encode("utf-8", "surrogateescape")[:16]
    return a


def request_devices(arr: np.ndarray) -> list[tuple[int, int]]:
    """The (major, minor) of the records' devices, sorted."""
    key = np.unique((arr["dev_major"].astype(np.int64) << 32) | arr["dev_minor"])
    return [(int(k) >> 32, int(k) & 0xFFFFFFFF) for k in key.tolist()]


def content_uuid(paths: Iterable[str]) -> str:
    """A run id from the inputs' contents: importing the same capture twice gives the
    same run."""
    h = hashlib.sha256()
    for p in paths:
        with open_input(p) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return str(uuid.UUID(bytes=h.digest()[:16], version=5))


def describe_unmatched(stats: ImportStats) -> str | None:
    if not stats.unmatched:
        return None
    parts = ", ".join(f"{v} {k}" for k, v in sorted(stats.unmatched.items()))
    return f"{sum(stats.unmatched.values())} imported events matched no request as usual ({parts})"


def write_imported(out: str, fmt: str, inputs: list[str], start_ns: int, end_ns: int,
                   records: dict[str, np.ndarray], devices: list[dict[str, Any]],
                   missing: list[str], stats: ImportStats, attribution: bool,
                   extra_meta: dict[str, Any] | None = None,
                   command: list[str] | None = None, pid: int = 0) -> None:
    """Write the imported trace to `out` (mode 0600) through a new file in the same
    directory renamed over it: a symlink at `out` is replaced, never followed."""
    from ..tracewriter import TraceWriter
    d = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out) and not os.path.islink(out):
        raise ImportError_(f"cannot write {out}: it is a directory", "give a file name with -o")
    if not os.path.isdir(d):
        raise ImportError_(f"cannot write {out}: directory {d} does not exist",
                           "choose an output path in an existing directory with -o")
    problems = [f"imported from {fmt}: " + "; ".join(missing)] if missing else \
        [f"imported from {fmt}"]
    um = describe_unmatched(stats)
    if um:
        problems.append(um)
    imp = {"format": fmt, "inputs": [os.path.basename(p) for p in inputs],
           "missing": missing, "attribution": attribution, "problems": problems,
           "events": dict(stats.events), "unmatched": dict(stats.unmatched),
           "ignored": dict(stats.ignored)}
    meta: dict[str, Any] = {"host": None, "kernel": None, "machine": None,
                            "iowhy_version": None, "command": command,
                            "devices": devices, "filesystems": [], "import": imp,
                            "run_uuid": content_uuid(inputs)}
    meta.update(extra_meta or {})
    from .. import __version__
    from ..outfile import _os_error, open_output
    meta["iowhy_version"] = __version__
    # A new file in the output's directory, renamed over it once complete (outfile's
    # rules: mode 0600, never written through a symlink, a symlink at OUT replaced;
    # given to the sudo user); a write that fails (a full disk) is one line and leaves
    # nothing behind.
    try:
        with open_output(out, replace_symlink=True) as f:
            w = TraceWriter(out, fileobj=f)
            w.write_json(abi.CHUNK_META, meta)
            w.write_json(abi.CHUNK_RECORDER, {"start_ns": int(start_ns),
                                              "command": command or [], "pid": int(pid),
                                              "imported": fmt})
            for name in ("request", "fsync", "journal", "offcpu", "task"):
                arr = records.get(name)
                if arr is not None and len(arr):
                    w.write_records(arr)
            counters = {n: 0 for n in abi.COUNTER_NAMES}
            counters["unmatched_completion"] = int(stats.unmatched.get(
                "completion of a request issued before the capture", 0))
            counters["request_without_origin"] = int(stats.unmatched.get(
                "request without its queued bio (submitter unknown)", 0))
            w.close({"end_ns": int(end_ns), "stop_reason": f"imported from {fmt}",
                     "exit_status": None, "counters": counters})
    except OSError as e:
        raise _os_error(out, e) from None
