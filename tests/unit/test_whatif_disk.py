"""The predictor's disk model (analyzer/iowhy/whatif/disk.py) is the emulated disk's
(lab/emudisk.c): the same presets, and the same charge for every request of a stream,
checked against a line-by-line transcription of the C model on random streams and
against the daemon's own ground truth of a recorded lab run (tests/unit/data: every
request the daemon served, with what it charged). tests/lab/test_whatif.py checks every
lab run of the session the same way."""

from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import numpy as np
import pytest

from iowhy.whatif import disk
from iowhy.whatif.disk import DISCARD, FLUSH, READ, WRITE, Disk, DiskParams

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
MiB = 1 << 20


def test_presets_are_emudisks():
    """disk.PRESETS is emudisk.c's PRESETS table, field by field."""
    src = (REPO / "lab" / "emudisk.c").read_text()
    table = src[src.index("PRESETS[] = {"):]
    table = table[:table.index("};")]
    rows = re.findall(r'\{\s*"([^"]+)",([^}]*)\}', table)
    assert [r[0] for r in rows] == list(disk.PRESETS)

    def num(tok: str) -> int:
        tok = tok.strip().replace("ULL", "")
        return int(eval(tok, {}))  # "16 << 20" and plain integers only

    for name, rest in rows:
        vals = [num(t) for t in rest.split(",") if t.strip()]
        p = disk.PRESETS[name]
        assert vals == [p.rpm, p.t2t_ns, p.full_stroke_ns, p.media_rate, p.iface_rate,
                        p.cache_bytes, p.flush_ns], name


class CModel:
    """emudisk.c's model transcribed line by line (arrays, linear scans), as the oracle
    of the port's faster bookkeeping."""

    def __init__(self, p: DiskParams) -> None:
        self.p = p
        self.span = p.size_bytes // 512
        self.rot = 30 * 10**9 // p.rpm if p.rpm else 0
        self.head = 0
        self.dirty: list[list[int]] = []
        self.dirty_bytes = 0

    def xfer(self, b, rate):
        return b * 10**9 // rate if rate else 0

    def seek(self, sectors):
        if not self.p.t2t_ns and not self.p.full_stroke_ns:
            return 0
        frac = min(1.0, math.sqrt(sectors / self.span))
        return self.p.t2t_ns + math.floor((self.p.full_stroke_ns - self.p.t2t_ns) * frac + 0.5)

    def positioning(self, frm, to):
        if frm == to:
            return 0
        d = abs(frm // 512 - to // 512) or 1
        return self.seek(d) + self.rot

    def media(self, off, ln):
        pos = self.positioning(self.head, off)
        self.head = off + ln
        return pos, self.xfer(ln, self.p.media_rate)

    def drop(self, off, ln):
        end = off + ln
        i = 0
        while i < len(self.dirty):
            eo, el = self.dirty[i]
            ee = eo + el
            if ee <= off or eo >= end:
                i += 1
            elif eo >= off and ee <= end:
                self.dirty_bytes -= el
                del self.dirty[i]
            elif eo < off and ee > end:
                self.dirty.insert(i + 1, [end, ee - end])
                self.dirty[i][1] = off - eo
                self.dirty_bytes -= ln
                i += 2
            elif eo < off:
                self.dirty_bytes -= ee - off
                self.dirty[i][1] = off - eo
                i += 1
            else:
                self.dirty_bytes -= end - eo
                self.dirty[i] = [end, ee - end]
                i += 1

    def add(self, off, ln):
        if self.dirty and sum(self.dirty[-1]) == off and self.dirty[-1][1] + ln <= 1 << 20:
            self.dirty[-1][1] += ln
        else:
            self.dirty.append([off, ln])
        self.dirty_bytes += ln

    def covers(self, off, ln):
        end, cov = off + ln, 0
        for eo, el in self.dirty:
            lo, hi = max(eo, off), min(eo + el, end)
            if hi > lo:
                cov += hi - lo
        return ln and cov == ln

    def serve(self, kind, off, ln):
        """(positioning, transfer, destage, destage positioning, overhead, head after)"""
        pos = tr = ds = dsp = ovh = 0

        def destage(o, n):
            nonlocal ds, dsp
            a, b = self.media(o, n)
            ds += a + b
            dsp += a
        p = self.p
        if kind == READ:
            if p.cache_on and self.covers(off, ln):
                tr = self.xfer(ln, p.iface_rate)
            else:
                pos, tr = self.media(off, ln)
        elif kind == WRITE:
            if not p.cache_on:
                pos, tr = self.media(off, ln)
            else:
                self.drop(off, ln)
                if ln > p.cache_bytes:
                    pos, tr = self.media(off, ln)
                else:
                    while self.dirty and self.dirty_bytes + ln > p.cache_bytes:
                        o, n = self.dirty.pop(0)
                        self.dirty_bytes -= n
                        destage(o, n)
                    self.add(off, ln)
                    tr = self.xfer(ln, p.iface_rate)
        elif kind == FLUSH:
            if p.cache_on and self.dirty:
                ext = sorted(self.dirty)
                merged: list[list[int]] = []
                for o, n in ext:
                    if merged and sum(merged[-1]) == o:
                        merged[-1][1] += n
                    else:
                        merged.append([o, n])
                start = 0
                while start < len(merged) and merged[start][0] < self.head:
                    start += 1
                for k in range(len(merged)):
                    destage(*merged[(start + k) % len(merged)])
                self.dirty, self.dirty_bytes = [], 0
            ovh = p.flush_ns
        elif kind == DISCARD and p.cache_on:
            self.drop(off, ln)
        return pos, tr, ds, dsp, ovh, self.head


def _charges(c: disk.Cost, d: Disk) -> tuple[int, ...]:
    return (c.positioning_ns, c.transfer_ns, c.destage_ns, c.destage_positioning_ns,
            c.overhead_ns, d.head)


def random_stream(rng: np.random.Generator, n: int, size: int) -> list[tuple[int, int, int]]:
    """Reads, writes (overlapping, contiguous runs, larger than a small cache), discards
    and flushes, 4 KiB aligned as a filesystem's."""
    out = []
    cursor = 0
    for _ in range(n):
        k = rng.choice([READ, WRITE, WRITE, WRITE, FLUSH, DISCARD], p=[.2, .25, .2, .2, .1, .05])
        ln = int(rng.choice([4096, 8192, 65536, 262144, 1 << 20, 3 << 20]))
        if rng.random() < 0.4:
            off = cursor  # contiguous with the last one
        elif rng.random() < 0.5:
            off = int(rng.integers(0, 64)) * 4096  # a small hot region: overlaps
        else:
            off = int(rng.integers(0, (size - ln) // 4096)) * 4096
        cursor = off + ln
        out.append((int(k), off, ln if k != FLUSH else 0))
    return out


@pytest.mark.parametrize("preset", list(disk.PRESETS))
@pytest.mark.parametrize("cache_bytes", [256 << 10, 2 * MiB, 16 * MiB])
@pytest.mark.parametrize("cache_on", [True, False])
def test_port_matches_the_c_model_on_random_streams(preset, cache_bytes, cache_on):
    p = disk.PRESETS[preset]
    p = DiskParams(p.name, p.rpm, p.t2t_ns, p.full_stroke_ns, p.media_rate, p.iface_rate,
                   cache_bytes, p.flush_ns, 256 * MiB, cache_on)
    rng = np.random.default_rng(cache_bytes + cache_on)
    port, ref = Disk(p), CModel(p)
    for i, (k, off, ln) in enumerate(random_stream(rng, 3000, p.size_bytes)):
        c = port.serve(k, off, ln)
        assert _charges(c, port) == ref.serve(k, off, ln), (i, k, off, ln)
        assert port.dirty_bytes == ref.dirty_bytes
        assert port.dirty_extents == len(ref.dirty)


def test_a_write_absorbed_a_flush_destages_in_elevator_order():
    """Worked example on hdd-7200: two cached writes cost the interface transfer; the
    flush destages both from the head in ascending order (C-SCAN), each paying a seek
    and half a revolution."""
    p = disk.PRESETS["hdd-7200"]
    d = Disk(p)
    a = d.serve(WRITE, 512 * MiB, 4096)
    b = d.serve(WRITE, 1 * MiB, 4096)
    assert a.cached and a.transfer_ns == 4096 * 10**9 // p.iface_rate
    assert a.model_ns == a.transfer_ns
    assert b.positioning_ns == 0
    f = d.serve(FLUSH)
    # head at 0: first the extent at 1 MiB, then the one at 512 MiB
    s1 = p.t2t_ns + round((p.full_stroke_ns - p.t2t_ns) * math.sqrt(2048 / p.span_sectors))
    gap = (512 * MiB - (1 * MiB + 4096)) // 512
    s2 = p.t2t_ns + round((p.full_stroke_ns - p.t2t_ns) * math.sqrt(gap / p.span_sectors))
    x = 4096 * 10**9 // p.media_rate
    assert f.destage_extents == 2 and f.destage_bytes == 8192
    assert f.destage_ns == s1 + p.rot_ns + x + s2 + p.rot_ns + x
    assert f.model_ns == f.destage_ns + p.flush_ns
    assert d.head == 512 * MiB + 4096 and d.dirty_bytes == 0


def test_port_matches_a_recorded_truth_file():
    """The daemon's ground truth of a recorded lab run (wc-barrier on XFS, hdd-7200: the
    filesystem made, a tree extracted and removed), request by request."""
    from iowhy.lab import emudisk
    path = DATA / "wc-barrier-xfs-hdd-7200.truth.bin.gz"
    raw = gzip.decompress(path.read_bytes())
    h = np.frombuffer(raw[:emudisk.HEADER_DTYPE.itemsize], emudisk.HEADER_DTYPE)[0]
    recs = np.frombuffer(raw[emudisk.HEADER_SIZE:], emudisk.TRUTH_DTYPE)
    p = DiskParams(h["preset"].decode().rstrip("\0"), int(h["rpm"]), int(h["t2t_ns"]),
                   int(h["full_stroke_ns"]), int(h["media_rate"]), int(h["iface_rate"]),
                   int(h["cache_bytes"]), int(h["flush_ns"]), int(h["size_bytes"]),
                   bool(h["cache_on"]))
    d = Disk(p)
    served = 0
    for r in recs:
        if int(r["kind"]) == emudisk.KIND_MARK:
            continue
        c = d.serve(int(r["kind"]), int(r["offset_bytes"]), int(r["len_bytes"]))
        fields = ("positioning_ns", "transfer_ns", "destage_ns", "destage_positioning_ns",
                  "overhead_ns")
        want = tuple(int(r[f]) for f in fields)
        assert _charges(c, d) == (*want, int(r["head_after"])), int(r["seq"])
        assert c.model_ns == int(r["model_ns"])
        served += 1
    assert served > 200 and (recs["destage_ns"] > 0).any()
