"""Synthetic traces and the ways to damage them, for the damage, hostile-input and fuzz
tests: a base trace written with the tests' builder (tracebuilder.py), its chunks taken
apart and put back
together (CRC recomputed, so that the damage is "clean"), and a runner of the CLI
in-process that reports exit status, stdout and stderr.
"""

from __future__ import annotations

import contextlib
import io
import signal
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

import tracebuilder as tb
from iowhy import abi, cli
from tracebuilder import LOG_RANGE, PART, records

START = 1_000_000
MOUNT = "/mnt/t"
CHDR = struct.Struct("<4sHHIIIIQ")  # struct iowhy_chunk_hdr
FHDR_BYTES = 64


def meta_obj(mountpoint: str = MOUNT) -> dict[str, Any]:
    """META as the recorder writes it: one disk with its partition, an ext4 on it."""
    return {
        "host": "h", "kernel": "6.18.0", "machine": "x86_64", "iowhy_version": "0",
        "command": ["fsync-loop", "-n", "40"], "created_realtime_ns": 1,
        "clock": {"realtime_minus_monotonic_ns": 5}, "page_size_bytes": 4096, "ncpus": 2,
        "devices": [tb.disk(logical_block_bytes=512, physical_block_bytes=4096,
                            scheduler="mq-deadline", backing_file=None, model="disk",
                            partitions=[{"name": "sdz1", "major": PART[0], "minor": PART[1],
                                         "start_sector": 2048, "size_bytes": 1 << 29}])],
        "filesystems": [tb.fs_entry("ext4", mountpoint=mountpoint, options="rw,relatime",
                                    uuid=None, btrfs_fsid=None, block_bytes=4096,
                                    log={"kind": "jbd2", "ranges": [list(LOG_RANGE)],
                                         "fc_ranges": [], "bytes": 10_000 * 512})],
    }


def recorder_obj(command: list[str] | None = None) -> dict[str, Any]:
    return {"iowhy_version": "0", "command": command or ["fsync-loop", "-n", "40"],
            "pid": 100, "mode": "run", "start_ns": START, "attach_mode": "tp_btf",
            "syscalls": "sync", "probes": {"block_rq_issue": "tp_btf",
                                           "ext4_fc_stop": "skipped: no such tracepoint"},
            "clock": {"realtime_minus_monotonic_ns": 5}}


def base_records(n: int = 40) -> dict[str, np.ndarray]:
    """A fsync loop: per call a data write, a journal write, a flush; off-CPU in the call;
    jbd2 commits; one task; a few syscall totals. Times in ns from START."""
    rq, fs, jr, off = [], [], [], []
    t = START + 1000
    jbd2 = b"jbd2/sdz1-8"
    for i in range(n):
        enter, data, log, flush, exit_ = t, t + 100, t + 400, t + 700, t + 1000
        rq.append(tb.req(data, data + 200, submit=data - 10, insert=data - 5,
                         sector=100_000 + 8 * i, flags=abi.RQ_TRACKED | abi.RQ_ORIGIN,
                         seq=3 * i, comm=b"fsync-loop", nr_bios=1))
        rq.append(tb.req(log, log + 200, submit=log - 10, insert=log - 5,
                         sector=LOG_RANGE[0] + 8 * i, nbytes=8192,
                         iflags=abi.F_SYNC | abi.F_PREFLUSH | abi.F_FUA, flags=abi.RQ_ORIGIN,
                         tid=50, seq=3 * i + 1, comm=jbd2, nr_bios=2))
        rq.append(tb.req(flush, flush + 200, submit=flush - 10, insert=flush - 5,
                         op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ, tid=50, seq=3 * i + 2,
                         comm=jbd2))
        fs.append(tb.fsync(100, enter, exit_, seq=10 + i, ino=12, comm=b"fsync-loop"))
        for ev, dt in ((abi.J_JBD2_START, 350), (abi.J_JBD2_LOCKING, 360),
                       (abi.J_JBD2_FLUSHING, 370), (abi.J_JBD2_LOGGING, 380),
                       (abi.J_JBD2_END, 950)):
            jr.append(tb.jev(ev, t + dt, 10 + i, comm=jbd2))
        jr.append(tb.jev(abi.J_JBD2_STATS, t + 951, 10 + i, aux0=2, aux1=3, aux2=2))
        off.append(tb.off(100, enter + 50, exit_ - 10, exit_ - 20, flags=abi.OFF_IOWAIT,
                          waker=50, comm="jbd2/sdz1-8"))
        t += 1200
    tasks = [tb.task(100, START, comm=b"fsync-loop", cgroup_id=CGROUP[0]),
             tb.task(100, t, abi.TASK_EXIT, comm=b"fsync-loop", cgroup_id=CGROUP[0])]
    sc = [{"ts_ns": t, "syscall_nr": 74, "count": n, "total_ns": 1000 * n},
          {"ts_ns": t, "syscall_nr": 1, "count": 3, "total_ns": 300}]
    return {"request": records(abi.REQUEST_DTYPE, rq), "fsync": records(abi.FSYNC_DTYPE, fs),
            "journal": records(abi.JOURNAL_DTYPE, jr),
            "offcpu": records(abi.OFFCPU_DTYPE, off), "task": records(abi.TASK_DTYPE, tasks),
            "syscall": records(abi.SYSCALL_DTYPE, sc)}


CGROUP = (4242, "/system.slice/db.service")  # the task's cgroup id and path


def end_ns(n: int = 40) -> int:
    return START + 1000 + 1200 * n + 100


def write_base(path: Path | str, *, n: int = 40, chunk_records: int = 16,
               meta: dict[str, Any] | None = None, recorder: dict[str, Any] | None = None,
               trailer: bool = True, zstd_level: int = 0, compact: bool = False) -> str:
    """The base trace: META, RECORDER, record chunks of `chunk_records`, a PROGRESS
    halfway, TRAILER (chunks compressed at zstd_level, plain if 0; compacted first with
    `compact`); this format version (its task records name their cgroup)."""
    t = tb.Trace(path, meta or meta_obj(), recorder or recorder_obj(), zstd_level=zstd_level,
                 compact=compact, version=abi.FORMAT_VERSION)
    for i, (name, arr) in enumerate(base_records(n).items()):
        t.add(name, arr, chunk_records=chunk_records)
        if i == 1:
            t.json(abi.CHUNK_PROGRESS, {
                "end_ns": START + 500, "counters": {c: 0 for c in abi.COUNTER_NAMES},
                "records": {k: t.counts.get(k, 0) for k in abi.RECORD_NAMES},
                "cgroups": [{"id": CGROUP[0], "path": CGROUP[1]}]})
    return t.close(tb.trailer(end_ns(n), stop_reason="workload-exit",
                              recorder_cpu_ns={"user": 1000, "system": 2000},
                              cgroups=[{"id": CGROUP[0], "path": CGROUP[1]}])
                   if trailer else None)


# -- taking a trace apart ------------------------------------------------------------------------

@dataclass
class Chunk:
    offset: int
    magic: bytes
    type: int
    rec_size: int
    count: int
    payload_bytes: int
    data_bytes: int
    crc: int
    seq: int
    payload: bytes

    @property
    def data(self) -> bytes:
        return self.payload[:self.data_bytes]

    def pack(self, fix_crc: bool = True) -> bytes:
        crc = zlib.crc32(self.payload) & 0xFFFFFFFF if fix_crc else self.crc
        return CHDR.pack(self.magic, self.type, self.rec_size, self.count,
                         self.payload_bytes, self.data_bytes, crc, self.seq) + self.payload


def split(data: bytes) -> tuple[bytes, list[Chunk]]:
    """(file header, chunks) of a sound trace."""
    off = FHDR_BYTES
    out = []
    while off < len(data):
        magic, ctype, rsz, cnt, plen, dlen, crc, seq = CHDR.unpack_from(data, off)
        pstart = off + CHDR.size
        out.append(Chunk(off, magic, ctype, rsz, cnt, plen, dlen, crc, seq,
                         data[pstart:pstart + plen]))
        off = pstart + plen
    return data[:FHDR_BYTES], out


def join(head: bytes, chunks: list[Chunk], fix_crc: bool = True) -> bytes:
    return head + b"".join(c.pack(fix_crc) for c in chunks)


def with_json(c: Chunk, text: bytes) -> Chunk:
    """The chunk with its JSON text replaced (payload padded, sizes and CRC right)."""
    pad = (-len(text)) % 8
    return Chunk(c.offset, c.magic, c.type, 0, 1, len(text) + pad, len(text), 0, c.seq,
                 text + b"\0" * pad)


def with_payload(c: Chunk, payload: bytes) -> Chunk:
    return Chunk(c.offset, c.magic, c.type, c.rec_size, c.count, c.payload_bytes,
                 c.data_bytes, 0, c.seq, payload)


# -- running the CLI in-process ----------------------------------------------------------------

class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


@dataclass
class Run:
    argv: list[str]
    rc: int
    out: str
    err: str


def run_cli(argv: list[str], timeout_s: int = 30) -> Run:
    """cli.main(argv) with stdout and stderr captured; Hang if it takes longer than
    timeout_s. Exceptions (tracebacks) propagate to the test."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Run(argv, rc, out.getvalue(), err.getvalue())


class Sample:
    """The variants a fuzz test runs: every `every`-th of `variants` (1: all of them), and
    besides each first one whose name holds a word of `kinds` no variant run so far held.
    The whole generator runs either way (the same seed makes the same variants), so a
    sample is a subset of the full run that still has every kind in it. Iterating gives
    (kind, name, bytes); then `total` is the number of variants made, `ran` of those
    given."""

    def __init__(self, variants: Iterator[tuple[str, str, bytes]], every: int,
                 kinds: tuple[str, ...]) -> None:
        self.variants, self.every, self.kinds = variants, every, kinds
        self.total = self.ran = 0

    def __iter__(self) -> Iterator[tuple[str, str, bytes]]:
        seen: set[str] = set()
        for i, (kind, name, blob) in enumerate(self.variants):
            self.total = i + 1
            words = {w for w in self.kinds if w in name}
            if i % self.every and words <= seen:
                continue
            seen |= words
            self.ran += 1
            yield kind, name, blob


def commands(path: str, other: str) -> Iterator[list[str]]:
    """Every reading command on `path` (compare: against a sound trace `other`)."""
    yield ["info", path]
    yield ["info", "--json", path]
    yield ["report", path]
    yield ["report", "--json", path]
    yield ["report", "--by", "cgroup", path]
    yield ["hist", path]
    yield ["hist", "--metric", "fsync", path]
    yield ["compare", other, path]
    yield ["compare", "--json", other, path]


# -- hostile files that are sound: small on disk, large once decoded --------------------------

def decode_bomb(path: Path | str, chunks: int = 16, per_chunk: int = 3640,
                overlap: bool = True) -> str:
    """A few KB of valid compressed chunks (CRCs, headers, frames and records all right)
    of identical requests: `chunks` x `per_chunk` requests (512 KiB each chunk) once
    decoded. With `overlap`, every request is in flight for the whole window (one queue
    depth per request: a lane each in a timeline)."""
    one = records(abi.REQUEST_DTYPE, [
        tb.req(START + 10, START + 900, submit=START + 5, insert=START + 6, sector=1 << 20,
               flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, comm=b"bomb", nr_bios=1)])
    if not overlap:
        one["issue_ns"] = one["done_ns"] = one["ts_ns"]
    arr = np.repeat(one, per_chunk)
    t = tb.Trace(path, meta_obj(), recorder_obj(), zstd_level=19)
    for _ in range(chunks):
        t.add("request", arr)
    return t.close(tb.trailer(START + 1000, stop_reason="workload-exit"))


# -- the reproducers of hostile input, each a sound or a damaged file ---------------------------

COMM = b"bad\xff\xfe\x1b"  # a task name: not UTF-8, with an ESC
ARG = "bad\udcff\udcfe"  # a command-line argument as Python holds undecodable bytes
DEVICE = "sd\udcffz"
SOURCE = "/dev/\udc80\ud800"  # a lone surrogate that is no byte, too
HOST = "h\udcfe"


def hostile_names_trace(path: Path | str) -> str:
    """A trace whose command line, task names, device, mount point and host are not
    UTF-8 (and hold a lone surrogate and an ESC)."""
    m = meta_obj(mountpoint="/mnt/\udcff")
    m["host"] = HOST
    m["devices"][0]["name"] = DEVICE
    m["filesystems"][0]["source"] = SOURCE
    recs = base_records(8)
    for name, field in (("request", "comm"), ("fsync", "comm"), ("journal", "comm"),
                        ("offcpu", "waker_comm"), ("task", "comm")):
        recs[name][field] = COMM
    recs["request"]["flags_u16"] |= abi.RQ_ORIGIN  # each names its submitter
    t = tb.Trace(path, m, recorder_obj(["/bin/echo", ARG]), version=abi.FORMAT_VERSION)
    for name, arr in recs.items():
        t.add(name, arr)
    # a cgroup's path is a name too: bytes, here with an ESC sequence and a non-UTF-8 byte
    return t.close(tb.trailer(end_ns(8), stop_reason="workload-exit",
                              cgroups=[{"id": CGROUP[0], "path": "/x\x1b]0;pwned\x07/\udcff"}]))


def _meta_with(**kw: Any) -> dict[str, Any]:
    m = meta_obj()
    m.update(kw)
    return m


def hostile_files(d: Path) -> Iterator[tuple[str, str, bool]]:
    """(name, path, whether the reader must find it damaged): files a user can meet, each
    of which once ended in a traceback or unbounded work (issue 30). Every reading
    command must take each in one line or show its damage first (test_fuzz)."""
    def base(name: str, **kw: Any) -> str:
        return write_base(d / f"{name}.iowt", n=8, **kw)
    yield "non-UTF-8 names", hostile_names_trace(d / "names.iowt"), False
    yield "decode bomb", decode_bomb(d / "bomb.iowt"), True
    wrong: list[tuple[str, Any]] = [
        ("stack", 5), ("stack", [{"upper": "sdz", "lower": ["a"]}]), ("lower_devices", 5),
        ("lower_devices", [{"major": 8, "minor": 5, "partitions": 3}]),
        ("bio_based_devices", 5)]
    for key, value in wrong:
        yield f"META {key} = {value!r}", base(f"meta-{key}-{len(repr(value))}",
                                              meta=_meta_with(**{key: value})), True
    m = meta_obj()
    m["devices"][0].update(slaves=5, loop="x", kind=[])
    yield "META devices[0] slaves, loop, kind of the wrong type", base("dev", meta=m), True
    m = meta_obj()
    m["filesystems"][0]["dev_minor"] = "x"
    yield "META filesystem dev_minor dropped", base("fs-dropped", meta=m), True
    m = meta_obj()
    del m["filesystems"][0]["dev_minor"], m["filesystems"][0]["st_dev_minor"]
    yield "META filesystem without dev_minor", base("fs-absent", meta=m), True
    for level in (0, 3):
        p = base(f"retyped-{level}", zstd_level=level)
        head, chunks = split(open(p, "rb").read())
        c = next(c for c in chunks if c.type & 0x3FFF == abi.CHUNK_META)
        c.type ^= 1
        with open(p, "wb") as f:
            f.write(join(head, chunks))
        yield f"META re-typed RECORDER (zstd {level})", p, True
    m = meta_obj()
    m["command"] = ["run", "a" * 131_071]
    yield "an argument of 131,071 characters, 65,600 arguments", \
        base("cmdline", meta=m, recorder=recorder_obj(["x"] * 65_600)), False
