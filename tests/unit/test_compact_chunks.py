"""Format version 6: compacted record chunks (docs/trace-format.md, COMPACTED RECORD
CHUNKS).

A compacted chunk reads back as the very records written, in the order written (ties of
ts_ns, several threads, times of 0 and of ts_ns + 1, counters wrapping around 2^64); the
recorder's C encoder (probes/rec_compact.c, compiled here alone) gives the same bytes as
the Python one; the golden traces written compacted give the golden outputs unchanged;
files of versions 3 to 5 still read; and a compacted chunk that lies (a group number out
of range, a wrong length, the flag where it does not belong) is counted as damage with
one line, never a traceback.
"""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zstandard

import golden_traces as gt
import test_golden
import tracebuilder as tb
from conftest import REPO, need
from damaged_traces import Chunk, join, run_cli, split, write_base
from iowhy import abi, tracecheck, tracedecode
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter

COMPACTED = sorted(tracedecode.COMPACT_SPECS)


def _random_records(code: int, n: int, seed: int, threads: int = 7) -> np.ndarray:
    """Records of type `code` with every byte random, then times that look like a
    recording's (close to ts_ns, some 0, some ts_ns + 1), a few threads, ties of ts_ns."""
    rng = np.random.default_rng(seed)
    dt = abi.RECORD_TYPES[code][1]
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).tobytes()
    r = np.frombuffer(raw, dt).copy()
    r["type"] = code
    r["size_bytes"] = dt.itemsize
    ts = np.sort(rng.integers(10**12, 10**12 + 10**9, n)).astype(np.uint64)
    ts[1::5] = ts[0::5][:len(ts[1::5])]  # ties
    r["ts_ns"] = ts
    r["tid"] = rng.integers(100, 100 + threads, n)
    spec = tracedecode.COMPACT_SPECS[code]
    w = r.view(np.uint8).reshape(n, -1).view("<u8")
    for off in spec.rel:
        x = ts - rng.integers(0, 10**6, n).astype(np.uint64)
        x[rng.random(n) < 0.2] = 0
        pick = rng.random(n) < 0.1
        x[pick] = ts[pick] + np.uint64(1)  # the one value kept as it is
        w[:, off // 8] = x
    if n > 2:
        r["ts_ns"][2] = np.uint64(2**64 - 1)  # ts_ns + 1 wraps to 0
    return r


def test_python_round_trip_is_exact():
    for code in COMPACTED:
        for n in (1, 2, 3, 100, 2000):
            for threads in (1, 7, n):
                r = _random_records(code, n, seed=n + threads + code, threads=threads)
                data = r.tobytes()
                packed = tracedecode.compact(data, code, r.dtype.itemsize, n)
                assert packed is not None and len(packed) == n * (r.dtype.itemsize + 2)
                assert tracedecode.uncompact(packed, code, r.dtype.itemsize, n) == data


def test_not_compacted():
    """Types without a compacted form, a wrong size, too many records: None."""
    r = np.zeros(3, abi.TASK_DTYPE)
    assert tracedecode.compact(r.tobytes(), abi.REC_TASK, r.dtype.itemsize, 3) is None
    q = np.zeros(3, abi.REQUEST_DTYPE)
    assert tracedecode.compact(q.tobytes(), abi.REC_REQUEST, 144, 2) is None
    big = np.zeros(tracedecode.COMPACT_MAX_COUNT + 1, abi.JOURNAL_DTYPE)
    assert tracedecode.compact(big.tobytes(), abi.REC_JOURNAL, 88, len(big)) is None


def _records_of(code: int, n: int = 3000) -> np.ndarray:
    """Random records whose values the reader keeps (in range, times in the window)."""
    r = _random_records(code, n, seed=code, threads=40)
    r["ts_ns"][2] = r["ts_ns"][1]
    name = abi.RECORD_TYPES[code][0]
    for f, hi in tracecheck.RECORD_LIMITS[name]:
        if f not in tracecheck.TIMES[name]:
            r[f] = r[f] % (min(int(hi), 2**62) + 1)
    return r


def _write_all(path: Path, compact: bool, chunk_records: int = 700) -> dict[str, np.ndarray]:
    w = TraceWriter(str(path), zstd_level=3 if compact else 0, compact=compact)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 10**12 - 10**7})
    recs = {abi.RECORD_TYPES[c][0]: _records_of(c) for c in COMPACTED}
    for r in recs.values():
        w.write_records(r, chunk_records=chunk_records)
    w.close({"end_ns": 10**12 + 2 * 10**9})
    return recs


def test_compacted_trace_reads_as_written(tmp_path):
    recs = _write_all(tmp_path / "c.iowt", compact=True)
    _write_all(tmp_path / "p.iowt", compact=False)
    c, p = read_trace(str(tmp_path / "c.iowt")), read_trace(str(tmp_path / "p.iowt"))
    assert c.version == abi.FORMAT_VERSION == 10 and p.version == abi.BASE_VERSION
    assert not c.damage.damaged and not p.damage.damaged
    _, chunks = split((tmp_path / "c.iowt").read_bytes())
    flagged = [ch for ch in chunks if ch.type & abi.CHUNK_COMPACT]
    assert len(flagged) == 5 * 5  # every record chunk (3000 records in chunks of 700)
    assert all(ch.type & abi.CHUNK_ZSTD and ch.data_bytes == ch.count * (ch.rec_size + 2)
               for ch in flagged)
    for name, r in recs.items():
        assert c.records(name).tobytes() == p.records(name).tobytes() == r.tobytes(), name
    assert (tmp_path / "c.iowt").stat().st_size < (tmp_path / "p.iowt").stat().st_size


def test_writer_keeps_the_chunk_plain_when_compacting_does_not_pay(tmp_path):
    """Two random records do not compress: the chunk is stored plain, data_bytes its size."""
    dt = abi.REQUEST_DTYPE
    rng = np.random.default_rng(5)
    r = np.frombuffer(rng.integers(0, 256, 2 * dt.itemsize, dtype=np.uint8).tobytes(),
                      dt).copy()
    r["type"], r["size_bytes"] = abi.REC_REQUEST, dt.itemsize  # as write_records sets them
    w = TraceWriter(str(tmp_path / "r.iowt"), zstd_level=3, compact=True)
    w.write_records(r)
    w.close({"end_ns": 1})
    _, chunks = split((tmp_path / "r.iowt").read_bytes())
    assert chunks[0].type == abi.REC_REQUEST and chunks[0].data_bytes == 2 * dt.itemsize
    assert chunks[0].data == r.tobytes()


# -- the recorder's encoder ---------------------------------------------------------------

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "rec_compact.h"
/* stdin: type, rec_size, count (u32 each), the records; stdout: the compacted data. */
int main(void)
{
    unsigned int h[3];
    struct compact_work cw;
    unsigned char *in, *out;
    size_t n, len;

    if (fread(h, 4, 3, stdin) != 3)
        return 2;
    len = (size_t)h[1] * h[2];
    in = malloc(len + 1);
    n = compact_bytes(h[0], h[1], h[2]);
    out = malloc(n + 1);
    if (!in || !out || fread(in, 1, len, stdin) != len || compact_init(&cw, 256 * 1024))
        return 2;
    if (!n || compact_records(&cw, h[0], in, h[1], h[2], out))
        return 3;
    fwrite(out, 1, n, stdout);
    compact_free(&cw);
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_encoder(tmp_path_factory) -> Path:
    cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    need(cc is not None, "no C compiler to build probes/rec_compact.c")
    assert cc is not None
    d = tmp_path_factory.mktemp("compact")
    (d / "driver.c").write_text(DRIVER)
    exe = d / "driver"
    p = subprocess.run([cc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-I",
                        str(REPO / "probes"), "-o", str(exe), str(d / "driver.c"),
                        str(REPO / "probes" / "rec_compact.c")], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    return exe


def _c_compact(exe: Path, code: int, r: np.ndarray) -> bytes | None:
    head = np.array([code, r.dtype.itemsize, len(r)], "<u4").tobytes()
    p = subprocess.run([str(exe)], input=head + r.tobytes(), capture_output=True)
    assert p.returncode in (0, 3), p.stderr
    return p.stdout if p.returncode == 0 else None


def test_c_encoder_matches_python(c_encoder):
    for code in COMPACTED:
        for n, threads in ((1, 1), (2, 2), (3, 1), (8, 3), (17, 2), (500, 9), (1820, 300)):
            r = _random_records(code, n, seed=10 * n + code, threads=threads)
            if n * r.dtype.itemsize > 256 * 1024:
                continue
            want = tracedecode.compact(r.tobytes(), code, r.dtype.itemsize, n)
            got = _c_compact(c_encoder, code, r)
            assert got == want, (abi.RECORD_TYPES[code][0], n, threads)
            assert tracedecode.uncompact(got, code, r.dtype.itemsize, n) == r.tobytes()


def test_c_encoder_declines_what_is_not_compacted(c_encoder):
    for code, dt in ((abi.REC_TASK, abi.TASK_DTYPE), (abi.REC_SYSCALL, abi.SYSCALL_DTYPE),
                     (abi.REC_BIO, abi.BIO_DTYPE), (abi.REC_THREAD, abi.THREAD_DTYPE)):
        assert _c_compact(c_encoder, code, np.zeros(4, dt)) is None
    assert _c_compact(c_encoder, 0x77, np.zeros(4, abi.REQUEST_DTYPE)) is None


# -- the analysis sees the same records ---------------------------------------------------

@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in test_golden.COMPRESSED else n for n in gt.TRACES])
def test_golden_outputs_unchanged_when_compacted(tmp_path, monkeypatch, name):
    """Every golden trace written compacted gives the golden outputs (the file's version
    aside): the reader puts the records back in the order written. The two large traces
    (200k requests each) are slow: `--slow` runs them."""
    monkeypatch.setattr(tb, "TraceWriter",
                        functools.partial(TraceWriter, zstd_level=3, compact=True))
    gt.build(tmp_path, [name])
    monkeypatch.chdir(tmp_path)
    got = test_golden.outputs(name)
    raw = test_golden.golden_path(name).read_bytes()
    want = json.loads(gzip.decompress(raw) if name in test_golden.COMPRESSED else raw)
    assert set(got) == set(want), name
    for key in want:
        if key == "info_json":  # the same, but for the version of the file
            g, w = (json.loads(x.pop("stdout")) for x in (got[key], want[key]))
            assert g.pop("format_version") == 10 and w.pop("format_version") == 5
            assert g == w, name
        assert got[key] == want[key], f"{name}: {key}"


def test_golden_traces_written_compacted_hold_compacted_chunks(tmp_path, monkeypatch):
    """What the test above reads is compacted: the small golden traces hold 20 compacted
    chunks or more between them."""
    monkeypatch.setattr(tb, "TraceWriter",
                        functools.partial(TraceWriter, zstd_level=3, compact=True))
    small = [n for n in gt.TRACES if n not in test_golden.COMPRESSED]
    compacted = sum(sum(bool(c.type & abi.CHUNK_COMPACT) for c in split(p.read_bytes())[1])
                    for p in gt.build(tmp_path, small).values())
    assert compacted >= 20


# -- hostile chunks -----------------------------------------------------------------------

def _frame_data(c: Chunk) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(c.payload)


def _repacked(c: Chunk, data: bytes, *, ctype: int | None = None, count: int | None = None,
              data_bytes: int | None = None) -> Chunk:
    z = zstandard.ZstdCompressor(level=3, write_content_size=True,
                                 write_checksum=True).compress(data)
    pad = (-len(z)) % 8
    return Chunk(c.offset, c.magic, c.type if ctype is None else ctype, c.rec_size,
                 c.count if count is None else count, len(z) + pad,
                 len(data) if data_bytes is None else data_bytes, 0, c.seq, z + b"\0" * pad)


def _lies(base: bytes) -> list[tuple[str, bytes]]:
    head, chunks = split(base)
    i = next(k for k, c in enumerate(chunks) if c.type & abi.CHUNK_COMPACT
             and c.count > 2)
    c = chunks[i]
    d = bytearray(_frame_data(c))
    out = []

    def put(name: str, new: Chunk, h: bytes = head) -> None:
        out.append((name, join(h, chunks[:i] + [new] + chunks[i + 1:])))

    g = bytearray(d)
    g[c.count] = 0xFF  # high byte of record 0's group number: beyond the count
    put("group number out of range", _repacked(c, bytes(g)))
    put("data one record short", _repacked(c, bytes(d[:-(c.rec_size + 2)])))
    put("data one byte long", _repacked(c, bytes(d) + b"\0"))
    put("count one more", _repacked(c, bytes(d), count=c.count + 1))
    put("count one less", _repacked(c, bytes(d), count=c.count - 1))
    put("count 0", _repacked(c, bytes(d), count=0))
    put("a type without a compacted form",
        _repacked(c, bytes(d), ctype=abi.REC_TASK | abi.CHUNK_ZSTD | abi.CHUNK_COMPACT))
    put("the flag on a JSON chunk",
        _repacked(c, bytes(d), ctype=abi.CHUNK_PROGRESS | abi.CHUNK_ZSTD | abi.CHUNK_COMPACT))
    plain = Chunk(c.offset, c.magic, c.type & ~abi.CHUNK_ZSTD, c.rec_size, c.count,
                  c.payload_bytes, c.data_bytes, 0, c.seq, c.payload)
    put("the flag without zstd", plain)
    old = bytearray(head)
    old[8:12] = (5).to_bytes(4, "little")
    out.append(("the flag in a version-5 file", join(bytes(old), chunks)))
    return out


def test_lying_compacted_chunks_are_damage(tmp_path):
    base = Path(write_base(tmp_path / "base.iowt", zstd_level=3, compact=True,
                           chunk_records=8))
    other = write_base(tmp_path / "other.iowt")
    t = tmp_path / "t.iowt"
    for name, blob in _lies(base.read_bytes()):
        t.write_bytes(blob)
        tr = read_trace(str(t))
        d = tr.damage
        assert d.damaged and d.undecodable_chunks + d.unknown_chunks + d.bad_regions, name
        assert len(d.summary().splitlines()) == 1, name
        for argv in (["info", str(t)], ["report", str(t)], ["report", "--json", str(t)],
                     ["compare", other, str(t)]):
            r = run_cli(argv)
            assert "Traceback" not in r.err + r.out, (name, argv)
            if argv[1] == "--json":
                assert json.loads(r.out)["damage"]["damaged"], (name, argv)
            elif r.rc == 0:
                assert r.out.startswith("WARNING: "), (name, argv, r.out[:200])


def test_reordered_groups_read_as_a_permutation(tmp_path):
    """Group numbers that are in range but not the writer's are no damage the reader can
    see: the records come back in another order, every one of them."""
    base = Path(write_base(tmp_path / "base.iowt", zstd_level=3, compact=True,
                           chunk_records=8))
    head, chunks = split(base.read_bytes())
    i = next(k for k, c in enumerate(chunks) if c.type & abi.CHUNK_COMPACT and c.count > 2)
    c = chunks[i]
    d = bytearray(_frame_data(c))
    d[0], d[1] = d[1], d[0]
    t = tmp_path / "t.iowt"
    t.write_bytes(join(head, chunks[:i] + [_repacked(c, bytes(d))] + chunks[i + 1:]))
    a, b = read_trace(str(base)), read_trace(str(t))
    name = abi.RECORD_TYPES[c.type & 0x3FFF][0]
    assert len(a.records(name)) == len(b.records(name))

    def rows(tr):
        return sorted(bytes(x) for x in tr.records(name).view(np.uint8).reshape(
            len(tr.records(name)), -1))
    assert rows(a) == rows(b)
