"""The emulated disk's model (lab/emudisk.c, "THE MODEL"), ported to Python for the
predictor: the same positioning, rotation, transfer, write-cache, destage and flush
rules, integer nanoseconds, the same rounding. tests/unit/test_whatif_disk.py checks it
against the C daemon's own ground truth (truth files of recorded lab runs: every request
it served, with what it charged) and against a direct transcription of the C code on
random request streams.

A ``Disk`` serves one request at a time and keeps the state the C daemon keeps: the
head (where the last media access ended) and the dirty extents of the volatile write
cache, oldest first. ``serve`` returns what the request costs (``Cost``), as the truth
record would say it.

Parameters (``DiskParams``) are the daemon's: rpm, track-to-track and full-stroke seek,
media and interface rates, cache size, fixed flush overhead, and the disk's size (the
seek curve is relative to it). The presets are emudisk's.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

NS = 1_000_000_000
SECTOR = 512
MERGE_CAP = 1 << 20  # a write extends the newest dirty extent up to this size

READ, WRITE, FLUSH, DISCARD = 1, 2, 3, 4  # the truth file's kinds
KIND_NAMES = {READ: "read", WRITE: "write", FLUSH: "flush", DISCARD: "discard"}


@dataclass(frozen=True)
class DiskParams:
    """A modelled disk (emudisk's parameters). Times in ns, rates in bytes/s."""

    name: str
    rpm: int
    t2t_ns: int
    full_stroke_ns: int
    media_rate: int
    iface_rate: int
    cache_bytes: int
    flush_ns: int
    size_bytes: int = 1 << 30
    cache_on: bool = True

    @property
    def rot_ns(self) -> int:
        """Rotational latency: half a revolution (deterministic mean)."""
        return 30 * NS // self.rpm if self.rpm else 0

    @property
    def span_sectors(self) -> int:
        return max(1, self.size_bytes // SECTOR)

    @property
    def positions(self) -> bool:
        """Whether an access away from the head pays a seek and a rotation."""
        return bool(self.t2t_ns or self.full_stroke_ns or self.rpm)

    @property
    def avg_seek_ns(self) -> int:
        """The implied average seek between two random points (E[sqrt] = 8/15)."""
        if not (self.t2t_ns or self.full_stroke_ns):
            return 0
        return self.t2t_ns + (self.full_stroke_ns - self.t2t_ns) * 8 // 15

    def with_cache(self, on: bool) -> "DiskParams":
        return replace(self, cache_on=on)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rpm": self.rpm, "t2t_ns": self.t2t_ns,
                "full_stroke_ns": self.full_stroke_ns, "rot_ns": self.rot_ns,
                "media_rate": self.media_rate, "iface_rate": self.iface_rate,
                "cache_bytes": self.cache_bytes, "flush_ns": self.flush_ns,
                "size_bytes": self.size_bytes,
                "write_cache": "on" if self.cache_on else "off"}


# emudisk's PRESETS (lab/emudisk.c), in the same order.
PRESETS: dict[str, DiskParams] = {
    "hdd-7200": DiskParams("hdd-7200", 7200, 1_000_000, 18_000_000, 120_000_000,
                           300_000_000, 16 << 20, 100_000),
    "ssd": DiskParams("ssd", 0, 0, 0, 500_000_000, 1_000_000_000, 16 << 20, 500_000),
    "ram": DiskParams("ram", 0, 0, 0, 4_000_000_000, 4_000_000_000, 16 << 20, 10_000),
}


def params_from_dict(d: Mapping[str, Any], name: str = "profile") -> DiskParams:
    """DiskParams from a profile's "disk" object (as_dict's keys; rot_ns is derived)."""
    def num(k: str, default: int | None = None) -> int:
        v = d.get(k, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"disk.{k} must be a non-negative number, not {v!r}")
        return int(v)
    wc = d.get("write_cache", "on")
    if wc not in ("on", "off"):
        raise ValueError(f"disk.write_cache must be \"on\" or \"off\", not {wc!r}")
    p = DiskParams(str(d.get("name") or name), num("rpm", 0), num("t2t_ns", 0),
                   num("full_stroke_ns", 0), num("media_rate"), num("iface_rate"),
                   num("cache_bytes", 16 << 20), num("flush_ns", 0),
                   num("size_bytes", 1 << 30), wc == "on")
    if not p.media_rate or not p.iface_rate:
        raise ValueError("disk.media_rate and disk.iface_rate must be positive")
    if p.full_stroke_ns < p.t2t_ns:
        raise ValueError("disk.full_stroke_ns must not be shorter than disk.t2t_ns")
    if p.size_bytes < SECTOR:
        raise ValueError("disk.size_bytes must be at least 512")
    return p


@dataclass
class Cost:
    """What one request cost, as emudisk's truth record says (ns, bytes)."""

    positioning_ns: int = 0
    transfer_ns: int = 0
    destage_ns: int = 0
    destage_positioning_ns: int = 0
    overhead_ns: int = 0
    destage_bytes: int = 0
    destage_extents: int = 0
    cached: bool = False  # absorbed by the cache, or a read served from it
    bypass: bool = False  # a write larger than the cache went to the media
    # For the fit: media accesses that paid positioning, the sum of sqrt(d / span)
    # over them, bytes moved on the media and over the interface.
    positioned: int = 0
    sqrt_dist: float = 0.0
    media_bytes: int = 0
    iface_bytes: int = 0

    @property
    def model_ns(self) -> int:
        return self.positioning_ns + self.transfer_ns + self.destage_ns + self.overhead_ns


class _Extent:
    """A dirty extent: a node of the age list (oldest first)."""

    __slots__ = ("off", "len", "prev", "next")

    def __init__(self, off: int, length: int) -> None:
        self.off = off
        self.len = length
        self.prev: _Extent | None = None
        self.next: _Extent | None = None


@dataclass
class Disk:
    """One modelled disk and its state: the head and the write cache's dirty extents.

    The extents are kept twice: in age order (a linked list, as the C array is ordered)
    and sorted by offset (they never overlap), so that a write finds what it overlaps
    by bisection instead of a scan."""

    p: DiskParams
    head: int = 0
    dirty_bytes: int = 0
    _oldest: _Extent | None = field(default=None, repr=False)
    _newest: _Extent | None = field(default=None, repr=False)
    _offs: list[int] = field(default_factory=list, repr=False)
    _nodes: list[_Extent] = field(default_factory=list, repr=False)

    # -- the model's arithmetic (emudisk.c: xfer_ns, seek_ns, positioning_ns) --

    @staticmethod
    def xfer(nbytes: int, rate: int) -> int:
        return nbytes * NS // rate if rate else 0

    def seek(self, sectors: int) -> int:
        p = self.p
        if not p.t2t_ns and not p.full_stroke_ns:
            return 0
        frac = min(1.0, math.sqrt(float(sectors) / float(p.span_sectors)))
        return p.t2t_ns + math.floor(float(p.full_stroke_ns - p.t2t_ns) * frac + 0.5)

    def positioning(self, frm: int, to: int, c: Cost | None = None) -> int:
        if frm == to:
            return 0
        d = abs(frm // SECTOR - to // SECTOR) or 1
        if c is not None:
            c.positioned += 1
            c.sqrt_dist += min(1.0, math.sqrt(float(d) / float(self.p.span_sectors)))
        return self.seek(d) + self.p.rot_ns

    def _media(self, off: int, length: int, c: Cost) -> tuple[int, int]:
        """A media access: moves the head; (positioning, transfer)."""
        pos = self.positioning(self.head, off, c)
        self.head = off + length
        c.media_bytes += length
        return pos, self.xfer(length, self.p.media_rate)

    # -- the dirty extents ----------------------------------------------------------

    def _link_after(self, e: _Extent, after: _Extent | None) -> None:
        """Put e in the age list right after `after` (None: as the newest)."""
        if after is None or after is self._newest:
            e.prev, e.next = self._newest, None
            if self._newest is not None:
                self._newest.next = e
            else:
                self._oldest = e
            self._newest = e
            return
        e.prev, e.next = after, after.next
        assert after.next is not None
        after.next.prev = e
        after.next = e

    def _index_add(self, e: _Extent) -> None:
        i = bisect.bisect_left(self._offs, e.off)
        self._offs.insert(i, e.off)
        self._nodes.insert(i, e)

    def _remove(self, e: _Extent, i: int) -> None:
        """Remove e (at index i of the offset index) from both orders."""
        del self._offs[i]
        del self._nodes[i]
        if e.prev is not None:
            e.prev.next = e.next
        else:
            self._oldest = e.next
        if e.next is not None:
            e.next.prev = e.prev
        else:
            self._newest = e.prev
        self.dirty_bytes -= e.len

    def _overlapping(self, off: int, end: int) -> tuple[int, int]:
        """Index range [i, j) of the extents that may overlap [off, end)."""
        i = max(0, bisect.bisect_left(self._offs, off) - 1)
        j = bisect.bisect_left(self._offs, end)
        return i, j

    def dirty_drop(self, off: int, length: int) -> None:
        """Forget dirty bytes in [off, off+len): newer data or a discard replaces them."""
        if not self._nodes:
            return
        end = off + length
        i, j = self._overlapping(off, end)
        k = i
        while k < j and k < len(self._nodes):
            e = self._nodes[k]
            eend = e.off + e.len
            if eend <= off or e.off >= end:
                k += 1
            elif e.off >= off and eend <= end:
                self._remove(e, k)
                j -= 1
            elif e.off < off and eend > end:
                # split: the tail keeps the same age, so it goes right after
                tail = _Extent(end, eend - end)
                e.len = off - e.off
                self.dirty_bytes -= length
                self._link_after(tail, e)
                self._offs.insert(k + 1, tail.off)
                self._nodes.insert(k + 1, tail)
                k += 2
                j += 1
            elif e.off < off:
                self.dirty_bytes -= eend - off
                e.len = off - e.off
                k += 1
            else:
                self.dirty_bytes -= end - e.off
                e.len = eend - end
                e.off = end
                self._offs[k] = end
                k += 1

    def dirty_add(self, off: int, length: int) -> None:
        last = self._newest
        if last is not None and last.off + last.len == off and last.len + length <= MERGE_CAP:
            last.len += length
        else:
            e = _Extent(off, length)
            self._link_after(e, None)
            self._index_add(e)
        self.dirty_bytes += length

    def dirty_covers(self, off: int, length: int) -> bool:
        end = off + length
        covered = 0
        i, j = self._overlapping(off, end)
        for e in self._nodes[i:j]:
            lo, hi = max(e.off, off), min(e.off + e.len, end)
            if hi > lo:
                covered += hi - lo
        return bool(length) and covered == length

    @property
    def dirty_extents(self) -> int:
        return len(self._nodes)

    def _destage(self, c: Cost, off: int, length: int) -> None:
        pos, x = self._media(off, length, c)
        c.destage_ns += pos + x
        c.destage_positioning_ns += pos
        c.destage_bytes += length
        c.destage_extents += 1

    def _destage_oldest(self, c: Cost) -> None:
        e = self._oldest
        assert e is not None
        self._destage(c, e.off, e.len)
        i = bisect.bisect_left(self._offs, e.off)
        while self._nodes[i] is not e:
            i += 1
        self._remove(e, i)

    def _destage_all(self, c: Cost) -> None:
        """Everything in C-SCAN order from the head, contiguous extents merged."""
        if not self._nodes:
            return
        merged: list[list[int]] = []
        for e in self._nodes:  # sorted by offset
            if merged and merged[-1][0] + merged[-1][1] == e.off:
                merged[-1][1] += e.len
            else:
                merged.append([e.off, e.len])
        start = 0
        while start < len(merged) and merged[start][0] < self.head:
            start += 1
        n = len(merged)
        for k in range(n):
            off, length = merged[(start + k) % n]
            self._destage(c, off, length)
        self._offs.clear()
        self._nodes.clear()
        self._oldest = self._newest = None
        self.dirty_bytes = 0

    # -- requests ---------------------------------------------------------------------

    def serve(self, kind: int, off: int = 0, length: int = 0) -> Cost:
        """Charge one request (READ, WRITE, FLUSH, DISCARD) and update the state."""
        p, c = self.p, Cost()
        if kind == READ:
            if p.cache_on and self.dirty_covers(off, length):
                c.cached = True
                c.iface_bytes = length
                c.transfer_ns = self.xfer(length, p.iface_rate)
            else:
                c.positioning_ns, c.transfer_ns = self._media(off, length, c)
        elif kind == WRITE:
            if not p.cache_on:
                c.positioning_ns, c.transfer_ns = self._media(off, length, c)
                return c
            self.dirty_drop(off, length)
            if length > p.cache_bytes:
                c.bypass = True
                c.positioning_ns, c.transfer_ns = self._media(off, length, c)
                return c
            while self._nodes and self.dirty_bytes + length > p.cache_bytes:
                self._destage_oldest(c)
            self.dirty_add(off, length)
            c.cached = True
            c.iface_bytes = length
            c.transfer_ns = self.xfer(length, p.iface_rate)
        elif kind == FLUSH:
            if p.cache_on:
                self._destage_all(c)
            c.overhead_ns = p.flush_ns
        elif kind == DISCARD:
            if p.cache_on:
                self.dirty_drop(off, length)
        else:
            raise ValueError(f"unknown request kind {kind}")
        return c
