"""Format version 5: zstd-compressed chunks (docs/trace-format.md, CHUNKS).

A compressed chunk reads as its plain twin; versions 3 and 4 still read; a compressed
payload that is damaged with its CRC still right (bits flipped in the frame, a frame cut
short, a declared size too small or too large, a frame without its size, a bomb) is
counted in `undecodable_chunks` and never crashes the reader or makes it allocate what the
header claims.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import zstandard

from damaged_traces import FHDR_BYTES, Chunk, join, split, write_base
from iowhy import abi, tracedecode, traceformat
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter


def _records(n: int) -> np.ndarray:
    r = np.zeros(n, dtype=abi.REQUEST_DTYPE)
    r["ts_ns"] = 1_000_000 + np.arange(n) * 1000
    r["issue_ns"] = r["ts_ns"] - 500
    r["done_ns"] = r["ts_ns"]
    r["start_sector"] = np.arange(n) * 8
    r["len_bytes"] = 4096
    r["dev_major"] = 7
    r["op"] = 1
    r["comm"] = b"tar"
    return r


def _write(path: Path, level: int, n: int = 3000) -> np.ndarray:
    r = _records(n)
    w = TraceWriter(str(path), zstd_level=level)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 1_000_000, "note": "x" * 2000})
    w.write_records(r, chunk_records=1000)
    w.close({"end_ns": 1_000_000 + n * 1000})
    return r


def _chunk(c: Chunk, payload: bytes, data_bytes: int | None = None, ctype: int | None = None
           ) -> Chunk:
    pad = (-len(payload)) % 8
    return Chunk(c.offset, c.magic, c.type if ctype is None else ctype, c.rec_size, c.count,
                 len(payload) + pad, c.data_bytes if data_bytes is None else data_bytes, 0,
                 c.seq, payload + b"\0" * pad)


def _frame(c: Chunk) -> bytes:
    """The zstd frame of a compressed chunk, without its padding."""
    d = zstandard.ZstdDecompressor().decompressobj()
    d.decompress(c.payload)
    return c.payload[:len(c.payload) - len(d.unused_data)]


def test_compressed_reads_as_plain(tmp_path):
    r = _write(tmp_path / "z.iowt", 3)
    _write(tmp_path / "p.iowt", 0)
    z, p = read_trace(str(tmp_path / "z.iowt")), read_trace(str(tmp_path / "p.iowt"))
    assert z.version == abi.BASE_VERSION == 5  # nothing in it needs version 6
    assert not z.damage.damaged and not p.damage.damaged
    assert z.file_bytes * 5 < p.file_bytes  # the compression is real
    assert (z.records("request") == p.records("request")).all()
    assert (z.records("request")["ts_ns"] == r["ts_ns"]).all()
    assert z.recorder == p.recorder and z.trailer == p.trailer
    _, chunks = split((tmp_path / "z.iowt").read_bytes())
    assert all(c.type & abi.CHUNK_ZSTD for c in chunks)
    assert all(c.payload_bytes % 8 == 0 and c.data_bytes > c.payload_bytes for c in chunks)
    # every frame declares its size and carries its checksum (a flipped bit is caught
    # even where the CRC was made right)
    for c in chunks:
        fp = zstandard.get_frame_parameters(c.payload)
        assert fp.content_size == c.data_bytes and fp.has_checksum


def test_plain_and_compressed_chunks_mix(tmp_path):
    """The writer keeps a chunk plain when compressing does not shrink it; a file holds
    both kinds."""
    p = tmp_path / "m.iowt"
    w = TraceWriter(str(p), zstd_level=3)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 1})  # too small to gain
    w.write_records(_records(500))
    w.close({"end_ns": 10**9})
    _, chunks = split(p.read_bytes())
    kinds = {bool(c.type & abi.CHUNK_ZSTD) for c in chunks}
    assert kinds == {True, False}
    tr = read_trace(str(p))
    assert not tr.damage.damaged and tr.count("request") == 500 and tr.start_ns == 1


@pytest.mark.parametrize("version", [3, 4])
def test_old_versions_still_read(tmp_path, version):
    p = tmp_path / f"v{version}.iowt"
    _write(p, 0, n=100)
    b = bytearray(p.read_bytes())
    b[8:12] = version.to_bytes(4, "little")
    p.write_bytes(bytes(b))
    tr = read_trace(str(p))
    assert tr.version == version and not tr.damage.damaged and tr.count("request") == 100


def test_old_version_takes_no_compressed_chunk(tmp_path):
    """Version 4 knew no compression: a flagged chunk there is of an unknown type."""
    p = tmp_path / "v4z.iowt"
    _write(p, 3, n=100)
    b = bytearray(p.read_bytes())
    b[8:12] = (4).to_bytes(4, "little")
    p.write_bytes(bytes(b))
    tr = read_trace(str(p))
    assert tr.count("request") == 0 and tr.unknown_chunks >= 1
    assert tr.damage.undecodable_chunks == 0


def _damaged(tmp_path: Path, make) -> traceformat.Trace:
    """The trace with its first record chunk replaced by make(chunk) (CRC made right)."""
    src = tmp_path / "z.iowt"
    _write(src, 3)
    head, chunks = split(src.read_bytes())
    i = next(k for k, c in enumerate(chunks) if c.type == abi.REC_REQUEST | abi.CHUNK_ZSTD)
    chunks[i] = make(chunks[i])
    out = tmp_path / "d.iowt"
    out.write_bytes(join(head, chunks))
    return read_trace(str(out))


def _flip(c: Chunk, pos: int, bit: int = 0x10) -> Chunk:
    f = bytearray(_frame(c))
    f[pos % len(f)] ^= bit
    return _chunk(c, bytes(f))


BAD = {
    # bits flipped inside the frame: its header, its block headers, its data
    "flip-magic": lambda c: _flip(c, 1),
    "flip-checksum-flag": lambda c: _flip(c, 4, 0x04),
    "flip-checksum": lambda c: _flip(c, -1),
    "flip-content-size": lambda c: _flip(c, 6),
    "flip-mid": lambda c: _flip(c, len(_frame(c)) // 2),
    "flip-end": lambda c: _flip(c, -2),
    "truncated-frame": lambda c: _chunk(c, _frame(c)[:len(_frame(c)) // 2]),
    "frame-cut-by-one": lambda c: _chunk(c, _frame(c)[:-1]),
    "declared-too-small": lambda c: _chunk(c, _frame(c), data_bytes=c.data_bytes - c.rec_size),
    "declared-too-large": lambda c: _chunk(c, _frame(c), data_bytes=c.data_bytes + c.rec_size),
    "declared-huge": lambda c: _chunk(c, _frame(c), data_bytes=0xFFFFFFF0),
    "no-content-size": lambda c: _chunk(c, zstandard.ZstdCompressor(
        write_content_size=False).compress(zstandard.ZstdDecompressor().decompress(c.payload))),
    "not-zstd": lambda c: _chunk(c, b"\x01" * 64),
    "empty": lambda c: _chunk(c, b""),
    "garbage-after-frame": lambda c: _chunk(c, _frame(c) + b"\0" * 7 + b"\x01" * 9),
    "two-frames": lambda c: _chunk(c, _frame(c) + _frame(c)),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_damaged_payload_is_counted(tmp_path, kind):
    tr = _damaged(tmp_path, BAD[kind])
    d = tr.damage
    assert d.undecodable_chunks == 1, kind
    assert d.damaged and "do not decompress" in d.summary()
    assert d.as_dict()["undecodable_chunks"] == 1
    # the other chunks are all read, the lost one is counted against the trailer
    assert tr.count("request") == 2000
    assert d.records_missing == {"request": 1000}


def test_bomb_is_refused_without_allocating(tmp_path):
    """A small frame that declares and holds far more than any chunk may hold."""
    big = zstandard.ZstdCompressor(level=1).compress(b"\0" * (tracedecode.ZSTD_CHUNK_MAX + 8))
    assert len(big) < 1 << 16

    def bomb(c: Chunk) -> Chunk:
        return _chunk(c, big, data_bytes=tracedecode.ZSTD_CHUNK_MAX + 8)

    tr = _damaged(tmp_path, bomb)
    assert tr.damage.undecodable_chunks == 1 and tr.count("request") == 2000


def test_file_budget_bounds_many_chunks(tmp_path, monkeypatch):
    """Chunks together may not decompress to more than the file's budget; past it, every
    further compressed chunk is skipped (counted apart from the undecodable ones, with the
    option that raises the budget), the rest of the file still read."""
    p = tmp_path / "z.iowt"
    _write(p, 3)
    size = p.stat().st_size
    monkeypatch.setattr(traceformat, "ZSTD_BUDGET_RATIO", 0)
    monkeypatch.setattr(traceformat, "ZSTD_BUDGET_BASE", 1500 * abi.REQUEST_DTYPE.itemsize)
    tr = read_trace(str(p))
    # the RECORDER chunk and the first request chunk fit; the two others do not
    assert tr.damage.over_budget_chunks == 2 and tr.count("request") == 1000
    assert tr.damage.undecodable_chunks == 0 and "--decode-ratio" in tr.damage.summary()
    assert size < 1500 * abi.REQUEST_DTYPE.itemsize


def test_compressed_json_chunk_is_validated(tmp_path):
    """A compressed JSON chunk goes through the same checks as a plain one."""
    p = tmp_path / "j.iowt"
    w = TraceWriter(str(p), zstd_level=3)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": -5, "pad": "y" * 500})
    w.close({"end_ns": 10})
    _, chunks = split(p.read_bytes())
    assert chunks[0].type == abi.CHUNK_RECORDER | abi.CHUNK_ZSTD
    tr = read_trace(str(p))
    assert "recorder.start_ns" in tr.damage.invalid_fields and tr.start_ns == 0


def test_resync_over_a_damaged_compressed_chunk(tmp_path):
    """A bad CRC in a compressed chunk is a damaged region, as for a plain one: the reader
    resynchronises on the next chunk."""
    p = tmp_path / "z.iowt"
    _write(p, 3)
    b = bytearray(p.read_bytes())
    head, chunks = split(bytes(b))
    c = chunks[2]
    b[c.offset + 32 + 5] ^= 0xFF
    p.write_bytes(bytes(b))
    tr = read_trace(str(p))
    assert tr.damage.bad_regions == 1 and tr.damage.undecodable_chunks == 0
    assert tr.count("request") == 2000


def test_cut_compressed_trace_reads_every_complete_chunk(tmp_path):
    p = tmp_path / "z.iowt"
    _write(p, 3)
    data = p.read_bytes()
    _, chunks = split(data)
    for k, c in enumerate(chunks[:-1]):
        end = c.offset + 32 + c.payload_bytes
        for cut in (end, end + 40):
            q = tmp_path / "cut.iowt"
            q.write_bytes(data[:cut])
            if k == 0 and cut == end:
                tr = read_trace(str(q))
                assert tr.count("request") == 0
                continue
            tr = read_trace(str(q))
            want = sum(x.count for x in chunks[:k + 1] if x.type & 0x7FFF == abi.REC_REQUEST)
            assert tr.truncated and tr.count("request") == want
            assert tr.damage.undecodable_chunks == 0


def test_fuzz_base_compresses(tmp_path):
    """The fuzz test's compressed base (test_fuzz_zstd.py) really holds compressed
    record and JSON chunks."""
    p = write_base(tmp_path / "b.iowt", zstd_level=3, chunk_records=64)
    _, chunks = split(Path(p).read_bytes())
    types = {c.type & ~abi.CHUNK_ZSTD for c in chunks if c.type & abi.CHUNK_ZSTD}
    assert abi.REC_REQUEST in types and abi.CHUNK_META in types
    assert not read_trace(p).damage.damaged
    assert FHDR_BYTES == 64 and struct.calcsize("<4sHHIIIIQ") == 32
    assert json and zlib  # (imports used by helpers above)


def test_trailer_chunk_zstd_is_validated(tmp_path):
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p), zstd_level=3)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 1})
    w.close({"end_ns": 10, "chunk_zstd": {"level": 3, "data_bytes": 100, "stored_bytes": -1,
                                          "cpu_ns": 5}})
    tr = read_trace(str(p))
    assert "trailer.chunk_zstd.stored_bytes" in tr.damage.invalid_fields
    assert tr.trailer["chunk_zstd"] == {"level": 3, "data_bytes": 100, "cpu_ns": 5}


def test_compressed_records_are_byte_transposed(tmp_path):
    """As documented: a compressed record chunk's data is its records byte-transposed
    (byte b of record i at b * count + i); a JSON chunk's is its text."""
    p = tmp_path / "t.iowt"
    _write(p, 3, n=700)
    r = read_trace(str(p)).records("request")  # equal to what was written (above)
    _, chunks = split(p.read_bytes())
    c = next(c for c in chunks if c.type == abi.REC_REQUEST | abi.CHUNK_ZSTD)
    data = zstandard.ZstdDecompressor().decompress(c.payload)
    size = abi.REQUEST_DTYPE.itemsize
    assert len(data) == c.count * size == c.data_bytes
    raw = r[:c.count].tobytes()
    for i in (0, 1, c.count - 1):
        for b in (0, 8, size - 1):
            assert data[b * c.count + i] == raw[i * size + b]
    j = next(c for c in chunks if c.type == abi.CHUNK_RECORDER | abi.CHUNK_ZSTD)
    assert json.loads(zstandard.ZstdDecompressor().decompress(j.payload))["start_ns"] == 1_000_000


def test_info_shows_what_compression_cost(tmp_path, capsys):
    from iowhy.cli import main
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p), zstd_level=3)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 1})
    w.write_records(_records(100))
    w.close({"end_ns": 10**9, "recorder_cpu_ns": {"user": 1000, "system": 2000},
             "chunk_zstd": {"level": 3, "data_bytes": 6000, "stored_bytes": 1000,
                            "cpu_ns": 2_500_000}})
    assert main(["info", str(p)]) == 0
    out = capsys.readouterr().out
    assert "zstd 3: 6,000 -> 1,000 bytes, 6.00x, 2.5 ms cpu" in out
    assert main(["info", "--json", str(p)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["chunk_zstd"]["cpu_ns"] == 2_500_000 and d["format_version"] == 5


def test_a_small_file_decodes_in_proportion_to_its_size(tmp_path):
    """6 KB of sound chunks claiming 58,240 requests (the 256 MiB allowance this budget
    replaced let a 15 KB file become 1.86 M requests, and `requests --json` then took
    47 s and 6.5 GB): at most 1 MiB + 64 bytes per byte of the file are decoded, the rest
    is counted on the first line with the option that raises the budget, which does."""
    from damaged_traces import decode_bomb, run_cli
    p = decode_bomb(tmp_path / "bomb.iowt")
    size = os.path.getsize(p)
    tr = read_trace(p)
    decoded = tr.count("request") * abi.REQUEST_DTYPE.itemsize
    assert size < 8192 and 0 < decoded <= traceformat.ZSTD_BUDGET_BASE + 64 * size
    assert tr.damage.over_budget_chunks >= 10 and tr.damage.undecodable_chunks == 0
    r = run_cli(["requests", "--json", p])
    assert r.rc == 0 and r.err.startswith("WARNING: trace is damaged")
    assert "--decode-ratio raises it" in r.err.replace("\n        ", "")
    assert json.loads(r.out)["count"] == tr.count("request")
    r = run_cli(["export", p, "--format", "chrome-json", "-o", str(tmp_path / "b.json")])
    assert r.rc == 0 and r.err.startswith("WARNING: trace is damaged"), r.err
    r = run_cli(["info", "--json", "--decode-ratio", "100000", p])
    assert json.loads(r.out)["records"]["request"] == 16 * 3640 and "damage" not in r.out
    r = run_cli(["info", "--decode-ratio", "0", p])
    assert r.rc == 2 and r.err.startswith("iowhy: --decode-ratio 0 is out of range")


@pytest.mark.parametrize("threads", [1, 2])
def test_records_are_counted_as_they_are_decoded(tmp_path, monkeypatch, threads):
    """Progress (read_trace's on_records) counts a compressed chunk's records as it is
    decoded, where a read spends its time, not all at the end; and each record once."""
    p = tmp_path / "t.iowt"
    _write(p, 3, n=12_000)  # twelve compressed record chunks of 1000
    monkeypatch.setattr(traceformat, "DECODE_THREADS", threads)
    told: list[int] = []
    seen_at_decode: list[int] = []  # records told when each record chunk was decoded
    unpack = traceformat._unpack

    def counting_unpack(payload, h, dest=None):
        if h[1] & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT) in abi.RECORD_TYPES:
            seen_at_decode.append(sum(told))
        return unpack(payload, h, dest)
    monkeypatch.setattr(traceformat, "_unpack", counting_unpack)
    tr = read_trace(str(p), on_records=told.append)
    assert tr.count("request") == 12_000 and sum(told) == 12_000
    assert told == [1000] * 12
    if threads == 1:  # one at a time: each chunk's records told before the next decodes
        assert seen_at_decode == [1000 * k for k in range(12)]
    else:  # the pool decodes at most DECODE_AHEAD chunks ahead of the telling
        ahead = traceformat.DECODE_AHEAD
        assert len(seen_at_decode) == 12
        floor = [1000 * max(0, k - ahead + 1) for k in range(12)]
        assert all(s >= f for s, f in zip(sorted(seen_at_decode), floor)), seen_at_decode
        assert max(seen_at_decode) > 0
