"""`iowhy import blktrace`: blktrace's binary per-CPU files (`DEV.blktrace.N`) or the
merged dump of `blkparse -d FILE`, as an iowhy trace.

Each record is a `struct blk_io_trace` (include/uapi/linux/blktrace_api.h): a 48-byte
header in the recording host's byte order (magic, sequence, time ns, sector, bytes,
action, pid, device, cpu, error, pdu_len) followed by pdu_len bytes of payload. The
action's low 16 bits are the event (queue, merge, get request, insert, issue,
complete, requeue, remap, ...; bit 8: a cgroup id leads the payload), its high 16
bits the categories (read, write, flush, sync, fua, meta, readahead, discard, notify).
Notify records carry a process name (payload: the comm of `pid`), the wall-clock time
(two u32: seconds and nanoseconds), or a message. A remap's payload is
`struct blk_io_trace_remap` (big-endian: device from, device to, sector from).

blktrace sees block requests only: the imported trace has no task, off-CPU, fsync or
journal records, so it has no workload attribution; the device view, classes,
latencies, seeks, histograms and compare work as for a recording.
"""

from __future__ import annotations

import os
import re
import struct
from typing import Any

from .. import abi
from ..progress import count, phase
from .common import (ImportError_, ImportStats, RequestMatcher, check_comms, open_input,
                     request_devices, request_records, write_imported)

MAGIC = 0x65617400
VERSION = 0x07
HDR = 48
# categories (high 16 bits of action)
TC_READ, TC_WRITE, TC_FLUSH, TC_SYNC = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TC_NOTIFY, TC_AHEAD, TC_META, TC_DISCARD, TC_FUA = 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 15
# events (low 8 bits)
(TA_QUEUE, TA_BACKMERGE, TA_FRONTMERGE, TA_GETRQ, TA_SLEEPRQ, TA_REQUEUE, TA_ISSUE,
 TA_COMPLETE, TA_PLUG, TA_UNPLUG_IO, TA_UNPLUG_TIMER, TA_INSERT, TA_SPLIT, TA_BOUNCE,
 TA_REMAP, TA_ABORT, TA_DRV_DATA) = range(1, 18)
TA_CGROUP = 1 << 8
TN_PROCESS, TN_TIMESTAMP, TN_MESSAGE = 0, 1, 2
EVENT_NAMES = {TA_QUEUE: "queue", TA_BACKMERGE: "backmerge", TA_FRONTMERGE: "frontmerge",
               TA_GETRQ: "getrq", TA_SLEEPRQ: "sleeprq", TA_REQUEUE: "requeue",
               TA_ISSUE: "issue", TA_COMPLETE: "complete", TA_PLUG: "plug",
               TA_UNPLUG_IO: "unplug_io", TA_UNPLUG_TIMER: "unplug_timer",
               TA_INSERT: "insert", TA_SPLIT: "split", TA_BOUNCE: "bounce",
               TA_REMAP: "remap", TA_ABORT: "abort", TA_DRV_DATA: "drv_data"}

# (time, cpu, sequence, file order, action, sector, bytes, pid, device, error, payload)
Event = tuple[int, int, int, int, int, int, int, int, int, int, bytes]


def dev_split(dev: int) -> tuple[int, int]:
    """The kernel's dev_t (MAJOR = dev >> 20, MINOR = low 20 bits)."""
    return dev >> 20, dev & 0xFFFFF


def read_records(path: str, stats: ImportStats, order0: int = 0) -> tuple[list[Event], str]:
    """Every record of one file, and its byte order ('<' or '>'). Where no record starts
    (damage: a bad magic or version, a payload past the end of the file), the reader
    resynchronises on the next record magic, as the trace reader does on chunks; each
    stretch skipped and its bytes are counted (stats.unmatched), never dropped unsaid.
    One pass: the work is linear in the file."""
    with open_input(path) as f:
        data = f.read()
    if not data:
        return [], "<"
    if len(data) < HDR:
        raise ImportError_(f"{path} is not a blktrace file (too short)",
                           "give DEV.blktrace.N files or a `blkparse -d` dump")
    for bo in ("<", ">"):
        (magic,) = struct.unpack_from(bo + "I", data, 0)
        if magic & 0xFFFFFF00 == MAGIC:
            break
    else:
        raise ImportError_(f"{path} is not a blktrace file (bad magic)",
                           "give DEV.blktrace.N files or a `blkparse -d` dump")
    if magic & 0xFF != VERSION:
        raise ImportError_(f"{path} is blktrace version {magic & 0xFF}, not {VERSION}",
                           "record with a current blktrace")
    hdr = struct.Struct(bo + "IIQQIIIIIHH")
    sync = struct.pack(bo + "I", MAGIC | VERSION)  # what starts every record
    out: list[Event] = []
    off = 0
    n = len(data)
    base = os.path.basename(path)
    stretches = skipped = 0
    while off + HDR <= n:
        (magic, seq, t, sector, nbytes, action, pid, dev, cpu, error,
         pdu_len) = hdr.unpack_from(data, off)
        if magic != MAGIC | VERSION or off + HDR + pdu_len > n:
            # damage: on to the next place a record could start
            nxt = data.find(sync, off + 1)
            end = n if nxt < 0 or nxt + HDR > n else nxt
            stretches += 1
            skipped += end - off
            off = end
            continue
        pdu = data[off + HDR:off + HDR + pdu_len]
        if error & 0x8000:
            error -= 0x10000
        out.append((t, cpu, seq, order0 + len(out), action, sector, nbytes, pid, dev, error,
                    pdu))
        off += HDR + pdu_len
    if off < n:  # a record cut at the end
        skipped += n - off
        stretches += 1
    if stretches:
        stats.unmatched[f"damaged or cut stretches of {base} skipped"] += stretches
        stats.unmatched[f"bytes of {base} that are no complete record"] += skipped
    return out, bo


def _op(cats: int) -> tuple[int, int]:
    if cats & TC_DISCARD:
        op = abi.OP_DISCARD
    elif cats & TC_WRITE:
        op = abi.OP_WRITE
    elif cats & TC_FLUSH:
        op = abi.OP_FLUSH
    else:
        op = abi.OP_READ
    iflags = 0
    if cats & TC_FLUSH and op != abi.OP_FLUSH:
        iflags |= abi.F_PREFLUSH
    for bit, fl in ((TC_SYNC, abi.F_SYNC), (TC_META, abi.F_META), (TC_AHEAD, abi.F_RAHEAD),
                    (TC_FUA, abi.F_FUA)):
        if cats & bit:
            iflags |= fl
    return op, iflags


def import_blktrace(inputs: list[str], out: str, workload: set[int] | None = None,
                    comms: set[str] | None = None) -> dict[str, Any]:
    stats = ImportStats()
    events: list[Event] = []
    bo = "<"
    phase("reading")
    for p in inputs:
        ev, bo = read_records(p, stats, len(events))
        events.extend(ev)
        count(len(ev))
    if not events:
        raise ImportError_("no blktrace records in " + ", ".join(inputs),
                           "the capture is empty: was blktrace stopped before any I/O?")
    phase("matching requests")
    events.sort(key=lambda e: (e[0], e[3]))
    m = RequestMatcher(stats, start_at_queue=True)  # btt's Q2C: a request starts at Q
    names: dict[int, str] = {}
    clock: int | None = None
    remaps = 0
    maps: dict[tuple[tuple[int, int], tuple[int, int]], set[int]] = {}
    for (t, cpu, _seq, _o, action, sector, nbytes, pid, dev, error, pdu) in events:
        act = action & 0xFFFF
        code = act & 0xFF
        cats = action >> 16
        if act & TA_CGROUP:
            pdu = pdu[8:]  # the cgroup id leads the payload
        if cats & TC_NOTIFY:
            if code == TN_PROCESS:
                names[pid] = pdu[:16].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                stats.events["process name"] += 1
            elif code == TN_TIMESTAMP and len(pdu) >= 8:
                sec, nsec = struct.unpack_from(bo + "II", pdu, 0)
                clock = sec * 1_000_000_000 + nsec - t
                stats.events["wall-clock time"] += 1
            else:
                stats.ignored["message"] += 1
            continue
        name = EVENT_NAMES.get(code, f"action {code}")
        stats.events[name] += 1
        d = dev_split(dev)
        op, iflags = _op(cats)
        comm = names.get(pid, "")
        if code == TA_QUEUE:
            m.queue(t, d, sector, nbytes, op, iflags, pid, comm)
        elif code in (TA_BACKMERGE, TA_FRONTMERGE):
            m.merge(t, d, sector, nbytes, op, front=code == TA_FRONTMERGE)
        elif code == TA_GETRQ:
            m.getrq(t, d, sector, nbytes, op, iflags, pid, comm)
        elif code == TA_INSERT:
            m.insert(t, d, sector, nbytes, op, iflags, pid, comm)
        elif code == TA_ISSUE:
            m.issue(t, d, sector, nbytes, op, iflags, cpu, pid, comm)
        elif code == TA_REQUEUE:
            m.requeue(t, d, sector, op)
        elif code == TA_COMPLETE:
            m.complete(t, d, sector, nbytes, op, error, cpu)
        elif code == TA_REMAP:
            # The bio moved from (device_from, sector_from) to this record's device and
            # sector: a partition's start on its disk, or a stacked device's mapping.
            remaps += 1
            if len(pdu) >= 16:
                dfrom, _dto, sfrom = struct.unpack_from(">IIQ", pdu, 0)
                maps.setdefault((dev_split(dfrom), d), set()).add(int(sector) - sfrom)
            else:
                stats.unmatched["remap records without their payload"] += 1
        else:
            stats.ignored[name] += 1
    reqs = m.finish()
    for r in reqs:
        if not r.comm and r.tid in names:
            r.comm = names[r.tid]
    tracked = set(workload or ())
    if comms:
        # blktrace has no fork events: every task of the name is a candidate
        first: dict[int, int] = {}
        for e in events:
            if e[7] in names and names[e[7]] in comms:
                first.setdefault(e[7], e[0])
        check_comms(comms, {p: (t, names[p]) for p, t in first.items()}, {}, tracked)
        tracked |= {pid for pid, c in names.items() if c in comms}
    arr = request_records(reqs, tracked, stats)
    devs = request_devices(arr)
    # DEV.blktrace.N names the device when the capture holds one.
    base = {re.sub(r"\.blktrace\.\d+$", "", os.path.basename(p)) for p in inputs
            if re.search(r"\.blktrace\.\d+$", p)}
    one_name = base.pop() if len(base) == 1 and len(devs) == 1 else None
    devices: list[dict[str, Any]] = [
        {"name": one_name or f"{a}:{b}", "major": a, "minor": b, "size_bytes": None,
         "rotational": None, "write_cache": None, "fua": None, "partitions": []}
        for a, b in devs]
    # A device remapped onto a disk at one constant offset is a partition of it.
    for (src, dst), offs in sorted(maps.items()):
        for dv in devices:
            if (dv["major"], dv["minor"]) == dst and len(offs) == 1:
                dv["partitions"].append({"name": f"{src[0]}:{src[1]}", "major": src[0],
                                         "minor": src[1], "start_sector": offs.pop(),
                                         "size_bytes": None})
    start = min(e[0] for e in events)
    end = max(e[0] for e in events)
    missing = ["no task, off-CPU, fsync or journal data, so no workload attribution (the "
               "device view, classes, latencies, seeks, histograms and compare still work)",
               "no filesystem layout, so journal writes are classed metadata or data"]
    extra: dict[str, Any] = {"import_remaps": remaps}  # partitions found: devices[]
    if clock is not None:
        extra["clock"] = {"realtime_minus_monotonic_ns": clock}
    phase("writing")
    write_imported(out, "blktrace", inputs, start, end, {"request": arr}, devices, missing,
                   stats, attribution=False, extra_meta=extra)
    return {"requests": len(arr), "unmatched": sum(stats.unmatched.values()),
            "devices": len(devices)}
