"""iowhy.tracescan: the one pass that finds every plausible chunk header and the running
CRC from which any payload's CRC follows (docs/trace-format.md RECOVERY), and the
source of the valid chunks' bytes. Checked against zlib.crc32 of each payload and the
CRC its header holds, on tiny traces written by the real writer."""

from __future__ import annotations

import os
import random
import zlib

import pytest

from iowhy import abi, tracescan as ts
from tracebuilder import req, write_trace


def trace_bytes(tmp_path) -> bytes:
    p = write_trace(tmp_path / "t.iowt", requests=[req(1010 + i, 1050 + i) for i in range(3)])
    with open(p, "rb") as f:
        return f.read()


def chunks_of(data: bytes) -> list[tuple[int, bytes, int]]:
    """(offset, payload, header CRC) of every chunk, walked header to header."""
    out, off = [], ts.HDR_SIZE
    while off < len(data):
        h = ts._CHDR.unpack_from(data, off)
        assert h[0] == abi.CHUNK_MAGIC
        out.append((off, data[off + ts.CHDR_SIZE:off + ts.CHDR_SIZE + h[4]], h[6]))
        off += ts.CHDR_SIZE + h[4]
    return out


def scan(path) -> tuple[dict, dict]:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        return ts._scan(fd, os.fstat(fd).st_size, ts.HDR_SIZE)
    finally:
        os.close(fd)


@pytest.mark.parametrize("n", [0, 1, 7, 4096, 100_003])
def test_crc_shift_is_zlibs_combine(n):
    rnd = random.Random(n)
    a = bytes(rnd.getrandbits(8) for _ in range(50))
    b = bytes(rnd.getrandbits(8) for _ in range(min(n, 300))) + bytes(max(0, n - 300))
    whole = zlib.crc32(a + b)
    assert ts._crc32_shift_py(zlib.crc32(a), n) ^ zlib.crc32(b) == whole
    assert ts._crc32_shift(zlib.crc32(a), n) ^ zlib.crc32(b) == whole


@pytest.mark.parametrize("window", [ts.SCAN_WINDOW, 64, 7])
def test_scan_finds_every_chunk_and_its_crc(tmp_path, monkeypatch, window):
    # a small window: headers and payloads straddle the reads
    monkeypatch.setattr(ts, "SCAN_WINDOW", window)
    data = trace_bytes(tmp_path)
    p = tmp_path / "copy.iowt"
    p.write_bytes(data)
    cands, prefix = scan(p)
    want = chunks_of(data)
    assert len(want) >= 4  # META, RECORDER, requests, tasks, TRAILER
    assert {o for o, _, _ in want} <= set(cands)
    for off, payload, crc in want:
        a = off + ts.CHDR_SIZE
        got = ts._payload_crc(prefix, a, a + len(payload))
        assert got == zlib.crc32(payload) == crc


def test_scan_across_a_hole(tmp_path):
    data = trace_bytes(tmp_path)
    p = tmp_path / "holed.iowt"
    with open(p, "wb") as f:
        f.write(data)
        f.seek(len(data) + (1 << 20))  # a hole of a sparse file, then the chunks again
        f.write(data[ts.HDR_SIZE:])
    cands, prefix = scan(p)
    shift = len(data) + (1 << 20) - ts.HDR_SIZE
    for off, payload, crc in chunks_of(data):
        for at in (off, off + shift):
            a = at + ts.CHDR_SIZE
            assert at in cands
            assert ts._payload_crc(prefix, a, a + len(payload)) == crc


def test_a_header_whose_payload_passes_the_end_is_no_candidate(tmp_path):
    data = trace_bytes(tmp_path)
    last = chunks_of(data)[-1][0]
    p = tmp_path / "cut.iowt"
    p.write_bytes(data[:-1])  # the last chunk's payload one byte short
    cands, _ = scan(p)
    assert last not in cands and len(cands) == len(chunks_of(data)) - 1


def test_plausible():
    size = 1000
    h = (abi.CHUNK_MAGIC, 1, 0, 0, 100, 100, 0, 0)
    assert ts._plausible(h, size - ts.CHDR_SIZE - 100, size)
    assert not ts._plausible(h, size - ts.CHDR_SIZE - 99, size)
    more = (abi.CHUNK_MAGIC, 1, 0, 0, 100, 101, 0, 0)  # decodes to more than it holds
    assert not ts._plausible(more, 0, size)
    assert ts._plausible((abi.CHUNK_MAGIC, 1 | abi.CHUNK_ZSTD, 0, 0, 100, 10**6, 0, 0), 0, size)


def test_payload_crc_of_an_unscanned_point_is_none():
    assert ts._payload_crc({10: 1}, 10, 20) is None
    assert ts._payload_crc({20: 1}, 10, 20) is None


@pytest.mark.parametrize("mapped", [True, False])
def test_source_gives_each_payload(tmp_path, monkeypatch, mapped):
    data = trace_bytes(tmp_path)
    p = tmp_path / "copy.iowt"
    p.write_bytes(data)
    if not mapped:
        def refuse(*a, **k):
            raise OSError("no address space")
        monkeypatch.setattr(ts.mmap, "mmap", refuse)
    spans = [(o + ts.CHDR_SIZE, len(pl)) for o, pl, _ in chunks_of(data)]
    fd = os.open(str(p), os.O_RDONLY)
    try:
        src = ts._Source(fd, len(data), spans)
        assert (src.mm is not None) is mapped
        for (a, n), (_, payload, _) in zip(spans, chunks_of(data)):
            assert bytes(src.payload(a, n)) == payload
        empty = ts._Source(fd, 0, spans)
        assert empty.mm is None and not empty.copies
    finally:
        os.close(fd)
