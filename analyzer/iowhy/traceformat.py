"""Read and write iowhy trace files (docs/trace-format.md).

The reader scans the file once (linear time, whatever it holds), validates every chunk
(magic, bounds, CRC, sequence number, record headers) and every field it reads
(tracecheck.py), and exposes each record chunk as a numpy view. A damaged or cut file
yields every sound chunk; everything else is counted in `Trace.damage` and shown first
by every command.

The scanning and CRC arithmetic are in tracescan.py, the chunk decoding in tracedecode.py,
the writer (what tests use for synthetic traces) in tracewriter.py.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from . import abi, tracecheck
from .tracedecode import ZSTD_CHUNK_MAX, _json_chunk, _untranspose, _unzstd, uncompact
from .tracescan import CHDR_SIZE, HDR_SIZE, _payload_crc, _pread, _scan, _Source


class TraceError(Exception):
    """A trace file that cannot be read at all. str() is the one-line message."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


@dataclass
class Damage:
    """Everything the reader found wrong with a file, counted (docs/trace-format.md,
    RECOVERY). A sound trace has all zero; `damaged` is true otherwise."""

    truncated: bool = False  # no TRAILER chunk
    missing_bytes: int = 0  # bytes of the file that belong to no valid chunk
    bad_regions: int = 0  # damaged stretches (bad CRC, bad header) skipped by resynchronising
    unknown_chunks: int = 0  # valid chunks of an unknown type, record size or count, bad JSON
    # valid compressed chunks that do not decompress to data_bytes, or (compacted) decode
    undecodable_chunks: int = 0
    # sound compressed chunks not decoded: the file's decode budget was spent
    over_budget_chunks: int = 0
    chunks_missing: int = 0  # chunk seq numbers never seen (below the highest one seen)
    chunks_duplicated: int = 0  # chunks whose seq was already seen (ignored)
    chunks_out_of_order: int = 0  # chunks after one of a higher seq, or after the trailer
    records_missing: dict[str, int] = field(default_factory=dict)  # vs TRAILER (PROGRESS)
    records_unexpected: dict[str, int] = field(default_factory=dict)  # more than counted
    invalid_records: dict[str, int] = field(default_factory=dict)  # out-of-range, dropped
    invalid_fields: list[str] = field(default_factory=list)  # JSON fields dropped
    decode_ratio: int = 0  # the budget the file was read with (bytes per byte), for words

    @property
    def damaged(self) -> bool:
        return bool(self.truncated or self.missing_bytes or self.bad_regions
                    or self.unknown_chunks or self.undecodable_chunks
                    or self.over_budget_chunks or self.chunks_missing
                    or self.chunks_duplicated
                    or self.chunks_out_of_order or self.records_missing
                    or self.records_unexpected or self.invalid_records or self.invalid_fields)

    def summary(self) -> str:
        """One line in words ("" for a sound trace); it starts with "trace is"."""
        parts = []
        if self.records_missing:
            parts += [f"{n:,} {k} records missing" for k, n in self.records_missing.items()]
        if self.chunks_missing:
            parts.append(_plural(self.chunks_missing, "chunk") + " missing (gaps in the "
                         "chunk sequence)")
        if self.bad_regions:
            parts.append(f"{_plural(self.bad_regions, 'damaged region')} skipped "
                         f"({self.missing_bytes:,} bytes)")
        if self.unknown_chunks:
            parts.append(f"{_plural(self.unknown_chunks, 'chunk')} of an unknown type or size "
                         "ignored")
        if self.undecodable_chunks:
            parts.append(f"{_plural(self.undecodable_chunks, 'compressed chunk')} that do not "
                         "decompress or decode ignored")
        if self.over_budget_chunks:
            parts.append(f"{_plural(self.over_budget_chunks, 'compressed chunk')} not decoded "
                         f"(over the decode budget of {self.decode_ratio} bytes per byte of "
                         "the file: --decode-ratio raises it)")
        if self.chunks_duplicated:
            parts.append(f"{_plural(self.chunks_duplicated, 'duplicated chunk')} ignored")
        if self.chunks_out_of_order:
            parts.append(f"{_plural(self.chunks_out_of_order, 'chunk')} out of order")
        if self.records_unexpected:
            parts += [f"{n:,} more {k} records than the trailer counts"
                      for k, n in self.records_unexpected.items()]
        if self.invalid_records:
            parts += [f"{n:,} {k} records with out-of-range values dropped"
                      for k, n in self.invalid_records.items()]
        if self.invalid_fields:
            shown = ", ".join(f[:60] for f in self.invalid_fields[:3])
            more = ", ..." if len(self.invalid_fields) > 3 else ""
            parts.append(f"{_plural(len(self.invalid_fields), 'invalid field')} dropped "
                         f"({shown}{more})")
        if self.truncated:
            head = "trace is truncated (no trailer: the recorder was killed or the disk filled)"
            tail = self.missing_bytes if not self.bad_regions else 0
            if tail:
                head += f"; {tail:,} bytes at the end could not be read"
            return "; ".join([head] + parts)
        if not parts and self.missing_bytes:
            parts.append(f"{self.missing_bytes:,} bytes at the end could not be read")
        return "trace is damaged: " + "; ".join(parts) if parts else ""

    def as_dict(self) -> dict[str, Any]:
        """For JSON output (`damage` in `info --json`, `report --json`, `compare --json`)."""
        return {
            "damaged": self.damaged, "summary": self.summary() or None,
            "truncated": self.truncated, "missing_bytes": self.missing_bytes,
            "bad_regions": self.bad_regions, "unknown_chunks": self.unknown_chunks,
            "undecodable_chunks": self.undecodable_chunks,
            "over_budget_chunks": self.over_budget_chunks,
            "chunks_missing": self.chunks_missing, "chunks_duplicated": self.chunks_duplicated,
            "chunks_out_of_order": self.chunks_out_of_order,
            "records_missing": dict(self.records_missing),
            "records_unexpected": dict(self.records_unexpected),
            "invalid_records": dict(self.invalid_records),
            "invalid_fields": list(self.invalid_fields),
        }


@dataclass
class Trace:
    path: str
    version: int
    created_realtime_ns: int
    file_bytes: int
    meta: dict[str, Any] = field(default_factory=dict)
    recorder: dict[str, Any] = field(default_factory=dict)
    trailer: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    # version 9: cgroup id -> its path below the cgroup2 mount (None: removed before the
    # recorder looked it up), from every PROGRESS and the TRAILER `cgroups`
    cgroup_paths: dict[int, str | None] = field(default_factory=dict)
    damage: Damage = field(default_factory=Damage)
    chunk_count: int = 0
    _views: dict[str, list[np.ndarray]] = field(default_factory=dict, repr=False)
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    # Where each record type's sound chunks are (release, _decoded) and how many records
    # each gave; the file's bytes (_Source) for decoding a released type again.
    _where: dict[str, list[tuple[int, tuple]]] = field(default_factory=dict, repr=False)
    _counts: dict[str, int] = field(default_factory=dict, repr=False)
    _src: Any = field(default=None, repr=False)
    _old_dtypes: dict[int, np.dtype] = field(default_factory=dict, repr=False)
    _released: set[str] = field(default_factory=set, repr=False)
    # The times a record may have (_check_window), for the chunks decoded again.
    _window: tuple[int, int] | None = field(default=None, repr=False)

    # The damage counts under their former names.
    @property
    def truncated(self) -> bool:
        return self.damage.truncated

    @property
    def missing_bytes(self) -> int:
        return self.damage.missing_bytes

    @property
    def bad_regions(self) -> int:
        return self.damage.bad_regions

    @property
    def unknown_chunks(self) -> int:
        return self.damage.unknown_chunks

    # -- records -----------------------------------------------------------------
    def chunks(self, name: str) -> list[np.ndarray]:
        """Zero-copy views of every chunk of record type `name` ("request", ...); of a
        released type, its chunks decoded again (and not kept)."""
        if name in self._released:
            return [v for v in (_decoded(self, o, h) for o, h in self._where.get(name, []))
                    if len(v)]
        return self._views.get(name, [])

    def release(self, *names: str) -> None:
        """Drop the decoded records of these types (a compressed trace's records take
        more memory than anything the analysis keeps of them): a later chunks() decodes
        them again from the file's bytes, the counts stay as read."""
        for name in names:
            if name in self._views:
                self._released.add(name)
                del self._views[name]
            self._cache.pop(name, None)

    def records(self, name: str) -> np.ndarray:
        """All records of one type as one structured array (copied once, then cached)."""
        if name not in self._cache:
            dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
            if name in self._released:
                self._cache[name] = self._redecoded(name, dtype)
                return self._cache[name]
            views = self.chunks(name)
            if not views:
                self._cache[name] = np.zeros(0, dtype=dtype)
            elif len(views) == 1:
                self._cache[name] = views[0]
            else:
                self._cache[name] = np.concatenate(views)
        return self._cache[name]

    def iter_chunks(self, name: str) -> Iterator[np.ndarray]:
        """chunks(), a chunk at a time: a released type's chunks are decoded as they are
        taken, one alive at a time unless the caller keeps them."""
        if name not in self._released:
            yield from self._views.get(name, [])
            return
        first, read = -1, 0  # the file's bytes read since they were last dropped
        for o, h in self._where.get(name, []):
            v = _decoded(self, o, h)
            if len(v):
                yield v
            first = o if first < 0 else first
            read += h[4]
            if read >= FORGET_BYTES:
                _forget(self._src, first, o + CHDR_SIZE + h[4])
                first, read = -1, 0
        if first >= 0:
            _forget(self._src, first, len(self._src.mm) if self._src.mm else 0)

    def _redecoded(self, name: str, dtype: np.dtype) -> np.ndarray:
        """A released type's records decoded again into one array, a chunk at a time: one
        decoded chunk at most beside the array (chunks() decodes them all at once)."""
        out = np.empty(self._counts.get(name, 0), dtype=dtype)  # as many as when read
        at = 0
        rest: list[np.ndarray] = []  # past that count (none: decoding is deterministic)
        for v in self.iter_chunks(name):
            if rest or at + len(v) > len(out):
                rest.append(v)
            else:
                out[at:at + len(v)] = v
                at += len(v)
        return np.concatenate([out[:at], *rest]) if rest else out[:at]

    def column(self, name: str, fieldname: str) -> np.ndarray:
        """One field of one record type across all chunks, without copying whole records."""
        views = self.chunks(name)
        if not views:
            dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
            return np.zeros(0, dtype=dtype[fieldname])
        if len(views) == 1:
            return views[0][fieldname]
        return np.concatenate([v[fieldname] for v in views])

    def count(self, name: str) -> int:
        if name in self._released:
            return self._counts.get(name, 0)
        return int(sum(len(v) for v in self.chunks(name)))

    # -- summary -----------------------------------------------------------------
    @property
    def counters(self) -> dict[str, int]:
        """Loss and anomaly counters: the trailer's, else the last progress chunk's."""
        src = self.trailer if self.trailer is not None else self.progress
        return {k: int(v) for k, v in (src or {}).get("counters", {}).items()}

    @property
    def lost_events(self) -> int:
        c = self.counters
        return int(sum(v for k, v in c.items() if k.startswith("lost_")))

    @property
    def start_ns(self) -> int:
        return int(self.recorder.get("start_ns", 0))

    @property
    def end_ns(self) -> int:
        for src in (self.trailer, self.progress):
            if src and src.get("end_ns"):
                return int(src["end_ns"])
        # A trace without trailer or progress ends with its last record.
        last = 0
        for name in abi.RECORD_NAMES:
            for v in self.chunks(name):
                if len(v):
                    last = max(last, int(v["ts_ns"].max()))
        return last

    @property
    def duration_ns(self) -> int:
        start, end = self.start_ns, self.end_ns
        return max(0, end - start) if start else 0

    def flight_line(self) -> str | None:
        """A flight recorder's dump (TRAILER `flight`): the window it keeps, what fired
        and when, and the chunks of the window dropped to stay within the memory bound;
        None for any other trace."""
        f = (self.trailer or {}).get("flight")
        if not isinstance(f, dict):
            return None
        at = f["trigger_ns"] - self.start_ns if self.start_ns else None
        when = (f"{at / 1e9:.3f} s into the window" if at is not None
                else "at an unknown time in the window")
        dropped = int(f.get("dropped_chunks") or 0)
        why = (f"; it starts after them ({int(f.get('dropped_bytes') or 0):,} bytes, dropped "
               f"oldest first to stay within {int(f.get('bound_bytes') or 0) >> 20} MiB)"
               if dropped else "")
        if str(f["trigger"]).startswith("stop"):  # --dump-on-exit: the window up to the stop
            return (f"flight recorder dump {f.get('dump', '?')}, {dropped} chunks of its "
                    f"window dropped: written at {f['trigger']}, it holds up to "
                    f"{f['window_ns'] / 1e9:g} s before it{why}")
        return (f"flight recorder dump {f.get('dump', '?')}, {dropped} chunks of its window "
                f"dropped: {f['trigger']} fired {when}, which holds up to "
                f"{f['window_ns'] / 1e9:g} s before it and "
                f"{int(f.get('after_ns') or 0) / 1e9:g} s after{why}")

    def problems(self) -> list[str]:
        """Everything lost or suspicious, in words, for the top of every report: the
        damage first (one line), then what an imported capture's source lacks, then the
        kernel's losses and anomalies."""
        out: list[str] = []
        fl = self.flight_line()
        if fl:
            out.append(fl)
        if self.damage.damaged:
            out.append(self.damage.summary())
        imp = self.meta.get("import")  # an imported capture: what its source lacks
        if isinstance(imp, dict) and isinstance(imp.get("problems"), list):
            out.extend(str(p) for p in imp["problems"])
        c = self.counters
        lost = {k: v for k, v in c.items() if k.startswith("lost_") and v}
        if lost:
            parts = ", ".join(f"{v} {k[5:].replace('_', ' ')}" for k, v in sorted(lost.items()))
            out.append(f"{sum(lost.values())} events lost in the kernel ({parts})")
        if c.get("unmatched_completion"):
            out.append(f"{c['unmatched_completion']} completions of requests issued "
                       "before recording")
        if c.get("request_without_origin"):
            out.append(f"{c['request_without_origin']} requests whose submitting task is unknown")
        if c.get("unknown_record"):
            out.append(f"{c['unknown_record']} malformed records from the probes were dropped "
                       "(recorder and probes from different builds?)")
        if c.get("bio_walk_capped"):
            out.append(f"{c['bio_walk_capped']} requests with more bios than the probe follows")
        return out


def recording(trace: Any, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a trace says about its recording, read here once for every summary of a
    trace (`iowhy info`, the report's `trace`, the `runs` row of an export, the run's
    id): its path and format version, which iowhy wrote it, on which host, kernel and
    machine, the workload's command (RECORDER's, else an import's META's), label and
    pid, how the recording stopped, whether it was cut, the events lost in the kernel,
    and the devices and filesystems META describes. A value the trace lacks is None
    (the label also when empty; devices and filesystems: []).

    `trace` may be any object with a Trace's attributes, or None (columns analysed
    without a file); `meta` is its META (default: trace.meta). The window (start_ns,
    end_ns) is the Trace's own, and the analysis' (model/requests.trace_window)."""
    meta = meta if meta is not None else (getattr(trace, "meta", None) or {})
    rec = getattr(trace, "recorder", None) or {}
    trailer = getattr(trace, "trailer", None) or {}
    label = meta.get("label")
    return {
        "path": getattr(trace, "path", None),
        "format_version": getattr(trace, "version", None),
        "iowhy_version": meta.get("iowhy_version") or rec.get("iowhy_version"),
        "host": meta.get("host"),
        "kernel": meta.get("kernel"),
        "machine": meta.get("machine"),
        "command": rec.get("command") or meta.get("command"),
        "label": label if isinstance(label, str) and label else None,
        "pid": rec.get("pid"),
        "stop_reason": trailer.get("stop_reason"),
        "exit_status": trailer.get("exit_status"),
        "truncated": bool(getattr(trace, "truncated", False)),
        "lost_events": int(getattr(trace, "lost_events", 0)) if trace is not None else 0,
        "devices": list(meta.get("devices") or []),
        "filesystems": list(meta.get("filesystems") or []),
    }


_REC_SIZES = {code: dt.itemsize for code, (_, dt) in abi.RECORD_TYPES.items()}
# Compressed chunks (version 5): no chunk decompresses to more than ZSTD_CHUNK_MAX bytes
# (tracedecode.py; beyond it a chunk is undecodable, no decompression bomb), and a
# file's chunks together to no more than ZSTD_BUDGET_BASE + the decode ratio (by default
# ZSTD_BUDGET_RATIO; `--decode-ratio N`) times the file's size: the work and memory of
# reading a file are bounded by its size, not by what its headers claim. Recorded traces
# decode to 10-16 times their size; a sound chunk past the budget is skipped and counted
# (over_budget_chunks).
ZSTD_BUDGET_BASE = 1 << 20
ZSTD_BUDGET_RATIO = 64
DECODE_RATIO_MAX = 1 << 20  # the largest --decode-ratio
_ZSTD_MIN_VERSION = 5
_COMPACT_MIN_VERSION = 6


_PARTIAL = re.compile(r"\.partial-\d+(?:\.\d+)?")


def partial_of(path: str) -> str | None:
    """The PATH.partial-PID a recorder killed with -9 (or crashed) left, the newest if
    several, when PATH itself does not exist; None if there is none."""
    d, base = os.path.split(path)
    if not base:
        return None
    found: list[tuple[float, str]] = []
    try:
        with os.scandir(d or ".") as it:
            for e in it:
                if e.name.startswith(base) and _PARTIAL.fullmatch(e.name[len(base):]):
                    try:
                        found.append((e.stat(follow_symlinks=False).st_mtime, e.name))
                    except OSError:
                        continue
    except OSError:
        return None
    return os.path.join(d, max(found)[1]) if found else None


def _open(path: str) -> int:
    """The file opened for reading without blocking (a FIFO, a terminal), not followed
    into another terminal's control, refused unless it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError as e:
        partial = partial_of(path)
        if partial:
            raise TraceError(f"cannot open {path}: {e.strerror}; {partial} is a recording "
                             "to it that was killed or is still running",
                             "read that file: every chunk written to it reads") from None
        raise TraceError(f"cannot open {path}: {e.strerror}",
                         "check the path; traces are mode 0600, read them as root") from None
    except OSError as e:
        raise TraceError(f"cannot open {path}: {e.strerror}",
                         "check the path; traces are mode 0600, read them as root") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise TraceError(f"cannot read {path}: {e.strerror}", "check the path") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else
                "a FIFO" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise TraceError(f"{path} is {kind}, not a trace file",
                         "give the path of a trace file written by `iowhy record`")
    return fd


def read_trace(path: str, on_records: Callable[[int], None] | None = None,
               decode_ratio: int | None = None) -> Trace:
    """Open and validate a trace. Raises TraceError for a file that is not one at all.
    on_records: told the number of records of each record chunk as it is read
    (progress on a terminal): a compressed chunk's as it is decoded (all its records,
    before they are checked), any other's once checked (the valid ones). decode_ratio:
    the compressed chunks may decode to ZSTD_BUDGET_BASE plus this many bytes per byte
    of the file (default ZSTD_BUDGET_RATIO)."""
    fd = _open(path)
    try:
        return _read(fd, path, on_records, decode_ratio or ZSTD_BUDGET_RATIO)
    except MemoryError:
        raise TraceError(f"not enough memory to read {path}",
                         "analyze it on a machine with more memory, or raise the "
                         "address-space limit (ulimit -v)") from None
    finally:
        os.close(fd)


def _read(fd: int, path: str, on_records: Callable[[int], None] | None = None,
          decode_ratio: int = ZSTD_BUDGET_RATIO) -> Trace:
    size = os.fstat(fd).st_size
    if size == 0:
        raise TraceError(f"{path} is empty",
                         "the recorder never wrote to it; record again with `iowhy record`")
    head = _pread(fd, HDR_SIZE, 0)
    if len(head) < HDR_SIZE or head[:8] != abi.FILE_MAGIC:
        raise TraceError(f"{path} is not an iowhy trace (bad magic)",
                         "iowhy reads .iowt files written by `iowhy record`")
    hdr = np.frombuffer(head, dtype=abi.FILE_HDR_DTYPE, count=1)[0]
    version = int(hdr["version"])
    if version not in abi.READ_VERSIONS:
        older = ", ".join(str(v) for v in abi.READ_VERSIONS if v != abi.FORMAT_VERSION)
        raise TraceError(f"{path} is trace format version {version}; this iowhy reads version "
                         f"{abi.FORMAT_VERSION}" + (f" (and {older})" if older else ""),
                         "use the iowhy release that recorded it")
    if int(hdr["endian_tag"]) != 0x01020304:
        raise TraceError(f"{path} was written on a big-endian host",
                         "analyze it on a host of the recorder's byte order")
    created = int(hdr["created_realtime_ns"])
    tr = Trace(path=path, version=version, created_realtime_ns=created if created >> 63 == 0
               else 0, file_bytes=size)
    dmg = tr.damage
    dmg.decode_ratio = decode_ratio
    # Both sizes are fixed by this version; other values are damage, read past.
    if int(hdr["hdr_bytes"]) != HDR_SIZE:
        dmg.invalid_fields.append("header.hdr_bytes")
    if int(hdr["chunk_hdr_bytes"]) != CHDR_SIZE:
        dmg.invalid_fields.append("header.chunk_hdr_bytes")
    cands, prefix = _scan(fd, size, HDR_SIZE)
    positions = sorted(cands)
    valid: list[tuple[int, tuple]] = []
    off = HDR_SIZE
    in_damage = False  # skipping: the stretch is one damaged region when a chunk ends it
    while off < size:
        h = cands.get(off)
        if h is not None:
            pstart = off + CHDR_SIZE
            if _payload_crc(prefix, pstart, pstart + h[4]) == h[6]:
                valid.append((off, h))
                off = pstart + h[4]
                dmg.bad_regions += in_damage
                in_damage = False
                continue
        # Damage: resynchronise on the next chunk header, count what was skipped.
        j = bisect.bisect_right(positions, off)
        if j == len(positions):
            dmg.missing_bytes += size - off
            break
        in_damage = True
        dmg.missing_bytes += positions[j] - off
        off = positions[j]
    del cands, prefix, positions
    end = valid[-1][0] + CHDR_SIZE + valid[-1][1][4] if valid else 0
    src = _Source(fd, end, [(o + CHDR_SIZE, h[4]) for o, h in valid])
    tr._src, tr._old_dtypes = src, abi.OLD_RECORD_DTYPES.get(version, {})
    _take_chunks(tr, valid, src, size, tr._old_dtypes, on_records)
    if src.mm is not None:
        # The file's pages are read again only for a released record type or a plain
        # chunk: out of the resident set until then (a file mapping: read back as they
        # were).
        try:
            src.mm.madvise(mmap.MADV_DONTNEED)
        except (OSError, AttributeError, ValueError):
            pass
    if tr.chunk_count == 0 and not tr.recorder and not tr.meta:
        raise TraceError(f"{path} holds no readable chunk",
                         "the recording was cut before its first chunk; record again")
    return tr


def _take_chunks(tr: Trace, valid: list[tuple[int, tuple]], src: _Source, size: int,
                 old_dtypes: dict[int, np.dtype],
                 on_records: Callable[[int], None] | None = None) -> None:
    """old_dtypes: the record layouts of an older format version that differ from this
    one's (abi.OLD_RECORD_DTYPES); such records are widened to this version's layout,
    the new fields zero."""
    dmg = tr.damage
    sizes = dict(_REC_SIZES)
    sizes.update({code: dt.itemsize for code, dt in old_dtypes.items()})
    seen: set[int] = set()
    top = -1  # highest seq so far
    trailer_seq: int | None = None
    progress_seq = -1
    # records read per type, with the seq of their chunk (to compare with a PROGRESS)
    per_chunk: list[tuple[int, str, int]] = []
    seq_max = size // CHDR_SIZE  # no file of this size holds more chunks
    # bytes the compressed chunks may become, in all
    budget = ZSTD_BUDGET_BASE + (dmg.decode_ratio or ZSTD_BUDGET_RATIO) * size
    dest = _Dest(valid, sizes)
    decoded = _decode_ahead(tr, valid, src, dest, seq_max, budget, sizes, on_records)
    # Per record type, per view kept: the (non-zero minimum, maximum) of its times, when
    # known (_check_window).
    bounds: dict[str, list[tuple[int, int] | None]] = {}
    for off, h in valid:
        ctype, count, plen, dlen, seq = h[1], h[3], h[4], h[5], h[7]
        packed = bool(ctype & abi.CHUNK_ZSTD)
        compacted = packed and bool(ctype & abi.CHUNK_COMPACT)
        ctype &= ~abi.CHUNK_ZSTD
        if compacted:
            ctype &= ~abi.CHUNK_COMPACT
        tr.chunk_count += 1
        if seq in seen:
            dmg.chunks_duplicated += 1
            continue
        if seq > seq_max:  # a damaged header: the number cannot be
            dmg.chunks_out_of_order += 1
        else:
            seen.add(seq)
            if seq < top or (trailer_seq is not None and seq > trailer_seq):
                dmg.chunks_out_of_order += 1
            top = max(top, seq)
        payload = src.payload(off + CHDR_SIZE, plen)
        pre = None  # the record checks of a chunk decoded ahead (_record_checks)
        told = False  # its records counted (on_records) as it was decoded ahead
        if packed:
            if tr.version < (_COMPACT_MIN_VERSION if compacted else _ZSTD_MIN_VERSION):
                dmg.unknown_chunks += 1
                continue
            if dlen > ZSTD_CHUNK_MAX:  # more than any chunk may hold: damage
                dmg.undecodable_chunks += 1
                continue
            if dlen > budget:
                dmg.over_budget_chunks += 1
                continue
            if off in decoded:
                data, pre = decoded.pop(off)
                told = data is not None and ctype in abi.RECORD_TYPES
            else:
                data = _unpack(payload, h, dest.take(h))
            if data is None:
                dmg.undecodable_chunks += 1
                continue
            budget -= dlen
            payload = data
            dlen = len(data)
        if ctype in abi.JSON_CHUNKS:
            obj = _json_chunk(payload, dlen)
            if obj is None:
                dmg.unknown_chunks += 1
                continue
            kind = abi.JSON_CHUNKS[ctype]
            if tracecheck.mistyped(kind, obj) is not None:
                # another type's content (a flipped bit of the type): damage, not read
                dmg.unknown_chunks += 1
                continue
            obj, bad = tracecheck.check_json(kind, obj)
            dmg.invalid_fields += bad
            if kind == "meta":
                tr.meta.update(obj)
            elif kind == "recorder":
                tr.recorder.update(obj)
            elif kind == "progress":
                tr.progress = obj
                progress_seq = seq
            else:
                if tr.trailer is not None:
                    dmg.chunks_duplicated += 1  # a second trailer: the first one stands
                    continue
                tr.trailer = obj
                trailer_seq = seq
            for c in obj.get("cgroups") or ():  # PROGRESS: the new ones; TRAILER: all
                if c.get("path") is not None or c["id"] not in tr.cgroup_paths:
                    tr.cgroup_paths[int(c["id"])] = c.get("path")
            continue
        if ctype not in sizes or h[2] != sizes[ctype]:
            dmg.unknown_chunks += 1
            continue
        name, dtype = abi.RECORD_TYPES[ctype]
        rdt = old_dtypes.get(ctype, dtype)
        if count * rdt.itemsize != dlen:
            dmg.unknown_chunks += 1
            continue
        view = np.frombuffer(payload, dtype=rdt, count=count)
        if pre is None or rdt is not dtype:
            pre = _record_checks(name, ctype, view)
        # The chunk header is outside the CRC: records of another type (a re-typed
        # chunk of the same record size) are caught by their own headers.
        if pre[0]:
            dmg.unknown_chunks += 1
            continue
        if rdt is not dtype:
            view = _widen(view, dtype)
            pre = (False, tracecheck.valid_records(name, view), None)
        per_chunk.append((seq, name, count))
        ok = pre[1]
        if ok is not None:
            nbad = int(count - ok.sum())
            dmg.invalid_records[name] = dmg.invalid_records.get(name, 0) + nbad
            view = view[ok]
        if len(view):
            tr._views.setdefault(name, []).append(view)
            bounds.setdefault(name, []).append(pre[2])
            tr._where.setdefault(name, []).append((off, h))
            tr._counts[name] = tr._counts.get(name, 0) + len(view)
            if on_records is not None and not told:
                on_records(len(view))
    dmg.truncated = tr.trailer is None
    _check_window(tr, bounds)
    if seen:
        dmg.chunks_missing = max(seen) + 1 - len(seen)
    # Records against the counts the recorder wrote: the trailer's (all records), else the
    # last progress chunk's (the records of the chunks written before it).
    ref = tr.trailer if tr.trailer is not None else tr.progress
    counts = (ref or {}).get("records")
    if isinstance(counts, dict):
        upto = None if tr.trailer is not None else progress_seq
        got: dict[str, int] = {}
        for seq, name, n in per_chunk:
            if upto is None or seq < upto:
                got[name] = got.get(name, 0) + n
        for name in abi.RECORD_NAMES:
            want, have = counts.get(name), got.get(name, 0)
            if not isinstance(want, int):
                continue
            if have < want:
                dmg.records_missing[name] = want - have
            elif have > want and upto is None:
                dmg.records_unexpected[name] = have - want


class _Dest:
    """One buffer per record type for the records of its compressed chunks, each
    chunk's slice taken in file order: once the type's records are released (analyze()
    releases them all once read), their memory is one free stretch that the analysis'
    large arrays fit in, not hundreds of chunk-sized holes."""

    def __init__(self, valid: list[tuple[int, tuple]], sizes: dict[int, int]) -> None:
        total: dict[int, int] = {}
        for _, h in valid:
            ctype = h[1] & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT)
            if h[1] & abi.CHUNK_ZSTD and sizes.get(ctype) == h[2] and h[2] and h[3]:
                total[ctype] = total.get(ctype, 0) + h[2] * h[3]
        self.buf = {c: np.empty(n, np.uint8) for c, n in total.items()}
        self.at = dict.fromkeys(total, 0)

    def take(self, h: tuple) -> np.ndarray | None:
        """The slice for a compressed record chunk's records (None: no buffer)."""
        ctype = h[1] & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT)
        buf = self.buf.get(ctype)
        if buf is None or h[2] == 0:
            return None
        n = h[2] * h[3]
        a = self.at[ctype]
        if a + n > len(buf):
            return None
        self.at[ctype] = a + n
        return buf[a:a + n]


DECODE_THREADS = 2  # threads decoding compressed chunks (zstd and numpy release the GIL)
DECODE_AHEAD = 2 * DECODE_THREADS  # chunks decoded ahead of the one being told


def _decode_ahead(tr: Trace, valid: list[tuple[int, tuple]], src: _Source, dest: _Dest,
                  seq_max: int, budget: int, sizes: dict[int, int],
                  on_records: Callable[[int], None] | None = None
                  ) -> dict[int, tuple[bytes | memoryview | None, Any]]:
    """The compressed chunks _take_chunks will decode, decoded on DECODE_THREADS threads:
    {chunk offset: (_unpack's result, its _record_checks or None)}. The same chunks in
    the same order as it takes them (duplicates skipped, the version's, within the
    budget as if every one before decoded: never more work than the budget allows; a
    chunk the budget admits only because one before failed is decoded by _take_chunks
    itself). A record chunk of this version's layout is checked as it is decoded, while
    its records are in the cache (each check of a field reads every record's line).
    on_records is told, in the calling thread and in file order, the records of each
    record chunk decoded (most of a read's time goes here: a progress line counts them
    as they come, not at the end); _take_chunks does not tell them again."""
    seen: set[int] = set()
    jobs = []
    for off, h in valid:
        seq, ctype = h[7], h[1]
        if seq in seen:
            continue
        if seq <= seq_max:
            seen.add(seq)
        if not ctype & abi.CHUNK_ZSTD:
            continue
        compacted = bool(ctype & abi.CHUNK_COMPACT)
        if tr.version < (_COMPACT_MIN_VERSION if compacted else _ZSTD_MIN_VERSION):
            continue
        if h[5] > budget or h[5] > ZSTD_CHUNK_MAX:
            continue
        budget -= h[5]
        jobs.append((off, h, dest.take(h)))

    def one(job: tuple[int, tuple, np.ndarray | None]
            ) -> tuple[bytes | memoryview | None, Any]:
        off, h, d = job
        data = _unpack(src.payload(off + CHDR_SIZE, h[4]), h, d)
        ctype = h[1] & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT)
        if (data is None or ctype in abi.JSON_CHUNKS or sizes.get(ctype) != h[2]
                or ctype in tr._old_dtypes or ctype not in abi.RECORD_TYPES):
            return data, None
        name, dtype = abi.RECORD_TYPES[ctype]
        if h[3] * dtype.itemsize != len(data):
            return data, None
        return data, _record_checks(name, ctype, np.frombuffer(data, dtype=dtype, count=h[3]))
    out: dict[int, tuple[bytes | memoryview | None, Any]] = {}

    def keep(job: tuple[int, tuple, np.ndarray | None],
             res: tuple[bytes | memoryview | None, Any]) -> None:
        out[job[0]] = res
        h = job[1]
        if (on_records is not None and res[0] is not None
                and h[1] & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT) in abi.RECORD_TYPES):
            on_records(h[3])
    if len(jobs) < 8 or DECODE_THREADS < 2:
        for job in jobs:
            keep(job, one(job))
        return out
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor
    # At most DECODE_AHEAD chunks are submitted beyond the last one told: job k is
    # submitted only after job k - DECODE_AHEAD was kept, so the progress count trails
    # the decoding by a bounded number of chunks whatever the scheduler does.
    with ThreadPoolExecutor(max_workers=DECODE_THREADS) as pool:
        pending: deque[tuple[tuple[int, tuple, np.ndarray | None],
                             Future[tuple[bytes | memoryview | None, Any]]]] = deque()
        for job in jobs:
            if len(pending) >= DECODE_AHEAD:
                done, fut = pending.popleft()
                keep(done, fut.result())
            pending.append((job, pool.submit(one, job)))
        while pending:
            done, fut = pending.popleft()
            keep(done, fut.result())
    return out


def _unpack(payload: Any, h: tuple, dest: np.ndarray | None = None
            ) -> bytes | memoryview | None:
    """A compressed chunk's data as written (decompressed, then its records put back
    from their compacted or byte-transposed form), in dest (uint8, the records' size)
    when given; None if it does not decode."""
    ctype, rsz, count, plen, dlen = h[1], h[2], h[3], h[4], h[5]
    data: bytes | memoryview | None = _unzstd(payload, plen, dlen)
    if data is None:
        return None
    if ctype & abi.CHUNK_COMPACT:  # records compacted: back to the records as written
        return uncompact(data, ctype & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT), rsz, count,
                         dest)
    fits = dest is not None and len(dest) == dlen
    if rsz and count > 1 and rsz * count == dlen:  # records byte-transposed
        if not fits:
            return _untranspose(data, rsz, count)
        assert dest is not None
        np.copyto(dest.reshape(count, rsz), np.frombuffer(data, np.uint8).reshape(rsz, count).T)
        return dest.data
    if fits:
        assert dest is not None
        dest[:] = np.frombuffer(data, np.uint8)
        return dest.data
    return data


def _record_checks(name: str, ctype: int, view: np.ndarray
                   ) -> tuple[bool, np.ndarray | None, tuple[int, int] | None]:
    """A record chunk's checks: (whether a record's header names another type or size,
    tracecheck.valid_records' mask, the (non-zero minimum, maximum) of its times for
    _check_window)."""
    if len(view) and ((view["type"] != ctype).any()
                      or (view["size_bytes"] != view.dtype.itemsize).any()):
        return True, None, None
    return (False, *tracecheck.checks(name, view))


# Bytes of the file read again (a released type) before their pages are dropped.
FORGET_BYTES = 16 << 20


def _forget(src: Any, lo: int, hi: int) -> None:
    """Drop the pages of the file's bytes [lo, hi) from the resident set, as read_trace
    does once the trace is read: a file mapping, read back when touched again."""
    if src is None or src.mm is None or hi <= lo:
        return
    a = lo - lo % mmap.PAGESIZE
    try:
        src.mm.madvise(mmap.MADV_DONTNEED, a, hi - a)
    except (OSError, AttributeError, ValueError):
        pass


def _decoded(tr: Trace, off: int, h: tuple) -> np.ndarray:
    """The valid records of a record chunk read before (Trace._where), decoded again."""
    payload = tr._src.payload(off + CHDR_SIZE, h[4])
    if h[1] & abi.CHUNK_ZSTD:
        payload = _unpack(payload, h)
    ctype = h[1] & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT)
    name, dtype = abi.RECORD_TYPES[ctype]
    rdt = tr._old_dtypes.get(ctype, dtype)
    view = np.frombuffer(payload, dtype=rdt, count=h[3])
    if rdt is not dtype:
        view = _widen(view, dtype)
    ok = tracecheck.valid_records(name, view)
    if ok is not None:
        view = view[ok]
    if tr._window is not None:  # as the window check dropped them when read
        ok = tracecheck.in_window(name, view, *tr._window)
        if ok is not None:
            view = view[ok]
    return view


def _widen(old: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Records of an older layout in this version's dtype: shared fields copied, new ones
    zero, size_bytes this version's."""
    view = np.zeros(len(old), dtype=dtype)
    for f in old.dtype.names or ():
        if f in (dtype.names or ()) and not f.startswith("pad"):
            view[f] = old[f]
    view["size_bytes"] = dtype.itemsize
    return view


def _check_window(tr: Trace, bounds: dict[str, list[tuple[int, int] | None]]) -> None:
    """Drop the records with a time far outside the recording window (when the trace
    gives one), counted in invalid_records. bounds: per type, per view, the (non-zero
    minimum, maximum) of its records' times when known: a view inside the window is
    not read again."""
    start = tr.start_ns
    end = max((int(src["end_ns"]) for src in (tr.trailer, tr.progress)
               if src and src.get("end_ns")), default=0)
    if not start or end < start:
        return
    lo = max(0, start - tracecheck.WINDOW_SLACK_NS)
    hi = end + tracecheck.WINDOW_SLACK_NS
    tr._window = (lo, hi)
    for name, views in tr._views.items():
        known = bounds.get(name, [])
        for i, v in enumerate(views):
            b = known[i] if i < len(known) else None
            if b is not None and b[0] >= lo and b[1] <= hi:
                continue
            ok = tracecheck.in_window(name, v, lo, hi)
            if ok is not None:
                dropped = int(len(v) - ok.sum())
                tr.damage.invalid_records[name] = (tr.damage.invalid_records.get(name, 0)
                                                   + dropped)
                tr._counts[name] -= dropped  # what a released type's count() says
                views[i] = v[ok]
