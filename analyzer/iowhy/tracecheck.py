"""What a trace's JSON chunks and records may hold (docs/trace-format.md, VALIDATION).

The reader never trusts a file: every JSON field it or the analysis reads is checked here
for type, range and length, and every record field the analysis indexes or subtracts
with. A field that fails is dropped (and an object of a list that lacks a field it cannot
do without), a record that fails is dropped; each is counted as damage, named, and the
rest of the trace is analyzed. Nothing here raises on bad input.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import abi, cmdline
from .names import clip_command

I64_MAX = (1 << 63) - 1
MAJOR_MAX = (1 << 12) - 1  # Linux dev_t: 12-bit major, 20-bit minor
MINOR_MAX = (1 << 20) - 1
SECTOR_MAX = I64_MAX >> 9
STR_MAX = 1 << 16  # characters of one string
LIST_MAX = 1 << 16  # entries of one list or object

# A check returns (ok, cleaned value).
Check = Callable[[Any, str, list[str]], tuple[bool, Any]]


def _int(lo: int, hi: int) -> Check:
    def check(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
        return (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi), v
    return check


def _flag(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
    """0/1, also written as false/true."""
    return isinstance(v, (bool, int)) and v in (0, 1), v


def _str(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
    return isinstance(v, str) and len(v) <= STR_MAX, v


def nullable(inner: Check) -> Check:
    def check(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
        return (True, None) if v is None else inner(v, path, bad)
    return check


def list_of(inner: Check, drop_bad: bool = False) -> Check:
    """A list; with drop_bad, an entry that fails is dropped (and named), else the list
    fails as a whole."""
    def check(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
        if not isinstance(v, list) or len(v) > LIST_MAX:
            return False, v
        out = []
        for i, e in enumerate(v):
            ok, e2 = inner(e, f"{path}[{i}]", bad)
            if ok:
                out.append(e2)
            elif drop_bad:
                bad.append(f"{path}[{i}]")
            else:
                return False, v
        return True, out
    return check


def map_of(inner: Check) -> Check:
    """An object of any string keys whose values all pass `inner` (bad ones dropped)."""
    def check(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
        if not isinstance(v, dict) or len(v) > LIST_MAX:
            return False, v
        out = {}
        for k, e in v.items():
            ok, e2 = inner(e, f"{path}.{k}", bad)
            if ok and len(k) <= STR_MAX:
                out[k] = e2
            else:
                bad.append(f"{path}.{k}")
        return True, out
    return check


def obj(fields: dict[str, Check], required: tuple[str, ...] = (),
        pairs: tuple[tuple[str, str], ...] = ()) -> Check:
    """An object: each known key checked (a bad one dropped and named); other keys kept
    when they are plain JSON (safe_json). An object missing a required key after the
    check fails as a whole. `pairs` (a device number's major and minor) are kept both or
    neither: one without the other (dropped, or absent) is dropped and named too, so
    that whatever reads one may read the other."""
    def check(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
        if not isinstance(v, dict):
            return False, v
        out = {}
        for k, e in v.items():
            c = fields.get(k)
            ok, e2 = c(e, f"{path}.{k}", bad) if c is not None else (safe_json(e), e)
            if ok:
                out[k] = e2
            else:
                bad.append(f"{path}.{k}")
        for a, b in pairs:
            if (out.get(a) is None) != (out.get(b) is None):
                lone = a if out.get(a) is not None else b
                del out[lone]
                bad.append(f"{path}.{lone}")
        if any(k not in out or out[k] is None for k in required):
            return False, v
        return True, out
    return check


def safe_json(v: Any, depth: int = 0) -> bool:
    """Plain JSON: strings and lists within the limits, integers within int64, finite
    numbers, at most 32 levels deep."""
    if v is None or isinstance(v, (bool, str)):
        return not isinstance(v, str) or len(v) <= STR_MAX
    if isinstance(v, int):
        return -I64_MAX - 1 <= v <= I64_MAX
    if isinstance(v, float):
        return v == v and abs(v) != float("inf")
    if depth >= 32 or not isinstance(v, (list, dict)) or len(v) > LIST_MAX:
        return False
    if isinstance(v, dict):
        return all(len(k) <= STR_MAX and safe_json(e, depth + 1) for k, e in v.items())
    return all(safe_json(e, depth + 1) for e in v)


def _range(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
    """A [start, end) sector range."""
    ok = (isinstance(v, list) and len(v) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= SECTOR_MAX
                  for x in v))
    return ok, v


def _command(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
    """A command line: a list of strings. One longer than the limits (a trace written
    before the writers cut it: the kernel takes 128 KiB arguments) is cut as the writers
    cut it (names.clip_command), never dropped: a long command line is no damage."""
    if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
        return False, v
    return True, clip_command(v)[0]


U64 = _int(0, I64_MAX)  # "unsigned" values are kept below 2**63: the analysis uses int64
S64 = _int(-I64_MAX - 1, I64_MAX)
COUNT = U64
NS = U64
MAJOR = _int(0, MAJOR_MAX)
MINOR = _int(0, MINOR_MAX)
SECTOR = _int(0, SECTOR_MAX)
SMALL = _int(0, 1 << 31)
STR = _str
NSTR = nullable(_str)

DEVICE = obj({
    "name": NSTR, "major": MAJOR, "minor": MINOR, "size_bytes": nullable(U64),
    "rotational": nullable(_flag), "write_cache": NSTR, "fua": nullable(_flag),
    "logical_block_bytes": nullable(SMALL), "physical_block_bytes": nullable(SMALL),
    "scheduler": NSTR, "backing_file": NSTR, "model": NSTR,
    "partitions": list_of(obj({"name": NSTR, "major": MAJOR, "minor": MINOR,
                               "start_sector": nullable(SECTOR),
                               "size_bytes": nullable(U64)}, ("major", "minor")),
                          drop_bad=True),
    # version 4: what the device is and what it is built on
    "kind": NSTR, "bio_based": nullable(_flag), "slaves": list_of(_str),
    "holders": list_of(_str),
    "loop": nullable(obj({
        "backing_file": NSTR, "offset_bytes": nullable(U64),
        "sizelimit_bytes": nullable(U64), "dio": nullable(_flag),
        "backing_dev_major": nullable(MAJOR), "backing_dev_minor": nullable(MINOR),
        "backing_ino": nullable(U64), "backing_disk": NSTR,
        "backing_part_start_sector": nullable(SECTOR)},
        pairs=(("backing_dev_major", "backing_dev_minor"),))),
    "dm": nullable(obj({"name": NSTR, "uuid": NSTR})),
    "md": nullable(obj({"level": NSTR})),
}, required=("major", "minor"))

LOG = obj({"kind": NSTR, "ranges": list_of(_range, drop_bad=True),
           "fc_ranges": list_of(_range, drop_bad=True), "bytes": nullable(U64),
           "device": nullable(obj({"source": NSTR, "dev_major": nullable(MAJOR),
                                   "dev_minor": nullable(MINOR), "disk": NSTR,
                                   "disk_major": nullable(MAJOR),
                                   "disk_minor": nullable(MINOR),
                                   "ranges": list_of(_range, drop_bad=True)},
                                  pairs=(("dev_major", "dev_minor"),
                                         ("disk_major", "disk_minor"))))})

# An edge of the device stack (META `stack`): both ends named, or the edge is dropped.
STACK_EDGE = obj({"upper": STR, "lower": STR, "via": NSTR,
                  "lower_dev_major": nullable(MAJOR), "lower_dev_minor": nullable(MINOR)},
                 required=("upper", "lower"), pairs=(("lower_dev_major", "lower_dev_minor"),))

FILESYSTEM = obj({
    "source": NSTR, "mountpoint": NSTR, "fstype": NSTR, "options": NSTR,
    "dev_major": nullable(MAJOR), "dev_minor": nullable(MINOR),
    "st_dev_major": nullable(MAJOR), "st_dev_minor": nullable(MINOR), "disk": NSTR,
    "disk_major": nullable(MAJOR), "disk_minor": nullable(MINOR),
    "part_start_sector": nullable(SECTOR), "uuid": NSTR, "btrfs_fsid": NSTR,
    "block_bytes": nullable(SMALL), "log": nullable(LOG),
}, pairs=(("dev_major", "dev_minor"), ("st_dev_major", "st_dev_minor"),
          ("disk_major", "disk_minor")))

CLOCK = obj({"realtime_minus_monotonic_ns": S64, "boottime_minus_monotonic_ns": S64})


def _label(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
    """`--label`: what the recorder accepts (cmdline.check_label), nothing longer."""
    return isinstance(v, str) and cmdline.check_label(v) is None, v


META = obj({
    "host": NSTR, "kernel": NSTR, "machine": NSTR, "iowhy_version": NSTR,
    "label": nullable(_label), "command": nullable(_command),
    "created_realtime_ns": nullable(U64), "clock": CLOCK,
    "page_size_bytes": nullable(SMALL), "ncpus": nullable(SMALL),
    "devices": list_of(DEVICE, drop_bad=True),
    "filesystems": list_of(FILESYSTEM, drop_bad=True),
    "lower_devices": list_of(DEVICE, drop_bad=True),
    "stack": list_of(STACK_EDGE, drop_bad=True),
    "bio_based_devices": list_of(_str),
    "cgroup": obj({"path": STR, "id": U64}, required=("path", "id")),
})

RECORDER = obj({
    "iowhy_version": NSTR, "command": nullable(_command), "pid": nullable(_int(0, 1 << 31)),
    "recorder_pid": nullable(_int(0, 1 << 31)), "mode": NSTR, "kernel": NSTR,
    "start_ns": NS, "startup_ns": nullable(NS), "attach_mode": NSTR, "task_state": NSTR,
    "syscalls": NSTR, "write_probes": NSTR, "ringbuf_bytes": nullable(U64),
    "devices_filter": list_of(_str), "clock": CLOCK, "probes": map_of(_str),
})

COUNTERS = map_of(COUNT)
RECORDS = map_of(COUNT)

# version 9: the cgroups the task records name, id -> path below the cgroup2 mount (null:
# removed before the recorder looked it up); an entry without its id is dropped
CGROUPS = list_of(obj({"id": U64, "path": NSTR}, required=("id",)), drop_bad=True)


def _tid_cgroup(v: Any, path: str, bad: list[str]) -> tuple[bool, Any]:
    """[tid, cgroup id] (TRAILER `thread_cgroups.threads`)."""
    ok = (isinstance(v, list) and len(v) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
          and 0 < v[0] < 1 << 31 and 0 < v[1] <= I64_MAX)
    return ok, v


# a flight dump: the cgroup of each live thread when first seen
THREAD_CGROUPS = obj({"threads": list_of(_tid_cgroup, drop_bad=True), "not_kept": COUNT})

PROGRESS = obj({"end_ns": NS, "counters": COUNTERS, "records": RECORDS, "cgroups": CGROUPS})

TRAILER = obj({
    "end_ns": NS, "records": RECORDS, "counters": COUNTERS, "stop_reason": NSTR,
    "exit_status": nullable(_int(-(1 << 31), 1 << 31)), "write_probes_ns": nullable(NS),
    "rq_seq_stride": nullable(SMALL), "in_flight_at_stop": nullable(COUNT),
    "calls_open_at_stop": nullable(COUNT), "sleeps_open_at_stop": nullable(COUNT),
    "recursion_misses": map_of(COUNT),
    "recorder_cpu_ns": obj({"user": NS, "system": NS}),
    "chunk_zstd": obj({"level": SMALL, "data_bytes": COUNT, "stored_bytes": COUNT,
                       "cpu_ns": NS}),
    "probe_stats": map_of(obj({"runs": COUNT, "run_ns": NS}, ("runs", "run_ns"))),
    "flight": obj({"window_ns": NS, "after_ns": NS, "trigger": STR, "trigger_ns": NS,
                   "dump": SMALL, "bound_bytes": U64, "dropped_chunks": COUNT,
                   "dropped_bytes": U64, "aged_chunks": COUNT, "triggers_during": COUNT},
                  required=("window_ns", "trigger", "trigger_ns")),
    "cgroups": CGROUPS, "thread_cgroups": THREAD_CGROUPS,
})

SCHEMAS = {"meta": META, "recorder": RECORDER, "progress": PROGRESS, "trailer": TRAILER}

# The keys that tell the JSON chunk types apart (docs/trace-format.md, JSON CHUNKS): each
# type's own, which no other type holds. The chunk header (and its type) is outside the
# CRC, and the types are a bit apart (META 0x100, RECORDER 0x101, PROGRESS 0x102): a
# flipped bit would have a META read as a RECORDER, its devices and filesystems lost
# without a word. PROGRESS's keys are all the TRAILER's too.
OWN_KEYS: dict[str, frozenset[str]] = {
    "meta": frozenset({"host", "machine", "created_realtime_ns", "page_size_bytes", "ncpus",
                       "devices", "lower_devices", "stack", "bio_based_devices",
                       "filesystems", "import", "label", "cgroup"}),
    "recorder": frozenset({"pid", "recorder_pid", "mode", "start_ns", "startup_ns",
                           "attach_mode", "task_state", "syscalls", "write_probes",
                           "ringbuf_bytes", "devices_filter", "probes", "imported"}),
    "progress": frozenset({"end_ns", "counters", "records", "cgroups"}),
    "trailer": frozenset({"end_ns", "counters", "records", "stop_reason", "exit_status",
                          "write_probes_ns", "rq_seq_stride", "in_flight_at_stop",
                          "calls_open_at_stop", "sleeps_open_at_stop", "recursion_misses",
                          "recorder_cpu_ns",
                          "chunk_zstd", "probe_stats", "flight", "cgroups",
                          "thread_cgroups"}),
}


def mistyped(kind: str, value: dict[str, Any]) -> str | None:
    """The JSON chunk type whose keys `value` holds when the chunk says it is `kind`, if
    it holds another type's own keys and none of its own (a re-typed chunk: damage);
    None when its keys do not say otherwise."""
    if any(k in OWN_KEYS[kind] for k in value):
        return None
    for other, keys in OWN_KEYS.items():
        if other != kind and any(k in keys and k not in OWN_KEYS[kind] for k in value):
            return other
    return None


def check_json(kind: str, value: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the JSON chunk with every bad field dropped, the dropped fields' paths).

    Keys the schema does not name are kept when they are plain JSON (obj()); whatever
    reads them checks their types itself."""
    bad: list[str] = []
    ok, out = SCHEMAS[kind](value, kind, bad)
    if not ok:  # not an object: the reader has already refused it
        return {}, [kind]
    return out, bad


# -- records ------------------------------------------------------------------------------

# Per record type: (field, largest valid value). Times are kept below 2**63 (the analysis
# subtracts them as int64), device numbers within Linux's 12/20 bits (the analysis packs
# them into one key), ops within the 4-bit range the analysis indexes with.
TIMES = {
    "request": ("ts_ns", "submit_ns", "insert_ns", "issue_ns", "data_done_ns", "done_ns"),
    "fsync": ("ts_ns", "enter_ns", "exit_ns"),
    "journal": ("ts_ns",),
    "offcpu": ("ts_ns", "start_ns", "waking_ns", "end_ns"),
    "task": ("ts_ns",),
    "syscall": ("ts_ns",),
    "thread": ("ts_ns",),
    "bio": ("ts_ns",),
    "helper": ("ts_ns", "start_ns", "waking_ns", "end_ns"),
}
_COUNTS = {"syscall": ("count", "total_ns")}
# How far a record's times may lie outside the recording window [start_ns, end_ns]: a
# request issued before recording started completes inside it, the last records are
# drained after end_ns; a day either side is far more than either takes.
WINDOW_SLACK_NS = 86_400 * 10**9
RECORD_LIMITS: dict[str, tuple[tuple[str, int], ...]] = {
    name: tuple((f, I64_MAX) for f in times + _COUNTS.get(name, ()))
    + ((("dev_major", MAJOR_MAX), ("dev_minor", MINOR_MAX))
       if name in ("request", "fsync", "journal", "bio") else ())
    for name, times in TIMES.items()
}
RECORD_LIMITS["request"] += (("op", abi.OP_OTHER), ("start_sector", SECTOR_MAX))


def valid_records(name: str, view: np.ndarray) -> np.ndarray | None:
    """Mask of the records of `view` whose checked fields are in range, or None when all
    are (the common case: no copy)."""
    bad: np.ndarray | None = None
    for f, hi in RECORD_LIMITS[name]:
        col = view[f]
        if col.dtype.itemsize == 8 and col.dtype.kind == "u" and hi == I64_MAX:
            # unsigned 64-bit: above 2**63 - 1 is negative as int64
            over = col.view(np.int64) < 0
        else:
            over = col > hi
        if over.any():
            bad = over if bad is None else (bad | over)
    return None if bad is None else ~bad


def time_bounds(name: str, view: np.ndarray) -> tuple[int, int] | None:
    """(the smallest non-zero time, the largest time) of the records of `view` (2**64
    and 0 without any), or None for times not held as u64: in_window(name, view, lo, hi)
    is None whenever lo <= the first and the second <= hi."""
    least, most = 1 << 64, 0
    one = np.uint64(1)
    for f in TIMES[name]:
        col = view[f]
        if col.dtype != np.dtype("<u8"):
            return None
        if len(col):
            most = max(most, int(col.max()))
            least = min(least, int((col - one).min()) + 1)  # a zero wraps to the largest
    return least, most


def checks(name: str, view: np.ndarray
           ) -> tuple[np.ndarray | None, tuple[int, int] | None]:
    """(valid_records(name, view), time_bounds(name, view)), reading each u64 time once
    for both: a time field whose maximum is at most 2**63 - 1 holds no value out of
    range, and its range check is then that maximum's."""
    least, most = 1 << 64, 0
    one = np.uint64(1)
    known = True  # every time field held as u64 (time_bounds: None otherwise)
    top: dict[str, int] = {}  # the maximum of each u64 time field read
    for f in TIMES[name]:
        col = view[f]
        if col.dtype != np.dtype("<u8"):
            known = False
            continue
        if len(col):
            top[f] = int(col.max())
            most = max(most, top[f])
            least = min(least, int((col - one).min()) + 1)  # a zero wraps to the largest
    bad: np.ndarray | None = None
    for f, hi in RECORD_LIMITS[name]:
        if hi == I64_MAX and top.get(f, I64_MAX + 1) <= I64_MAX:
            continue  # its maximum is in range: every value is
        col = view[f]
        if col.dtype.itemsize == 8 and col.dtype.kind == "u" and hi == I64_MAX:
            over = col.view(np.int64) < 0
        else:
            over = col > hi
        if over.any():
            bad = over if bad is None else (bad | over)
    return None if bad is None else ~bad, (least, most) if known else None


def in_window(name: str, view: np.ndarray, lo: int, hi: int) -> np.ndarray | None:
    """Mask of the records of `view` whose non-zero times lie in [lo, hi], or None when
    all do. A time far outside the recording is damage; kept, it would stretch every
    time span the analysis keys on."""
    bad: np.ndarray | None = None
    for f in TIMES[name]:
        col = view[f]
        out = (col != 0) & ((col < lo) | (col > hi))
        if out.any():
            bad = out if bad is None else (bad | out)
    return None if bad is None else ~bad
