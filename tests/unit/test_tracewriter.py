"""iowhy.tracewriter.TraceWriter on its own: the versions it writes and refuses, how it
frames records into chunks (split, numbered, counted into the trailer), when it
compresses, transposes or compacts a chunk, and what it leaves to the caller. (Round trips
through the reader, the on-disk header sizes and CRCs are in test_traceformat.py.)"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import zstandard

from damaged_traces import split
from iowhy import abi
from iowhy.tracewriter import TraceWriter


def _file_version(path) -> int:
    return int(np.frombuffer(path.read_bytes(), abi.FILE_HDR_DTYPE, count=1)["version"][0])


def _requests(n: int) -> np.ndarray:
    r = np.zeros(n, abi.REQUEST_DTYPE)
    r["ts_ns"] = 1000 + np.arange(n)
    r["seq"] = np.arange(n)
    r["tid"] = 7
    return r


@pytest.mark.parametrize("kw, version", [
    ({}, abi.BASE_VERSION),
    ({"zstd_level": 3}, abi.BASE_VERSION),
    ({"compact": True}, abi.BASE_VERSION),  # compacting needs zstd: asked alone, it is not
    ({"zstd_level": 3, "compact": True}, abi.FORMAT_VERSION),
    ({"version": 6}, 6),
    ({"version": abi.FORMAT_VERSION}, abi.FORMAT_VERSION),
    ({"zstd_level": 3, "compact": True, "version": 6}, 6),
])
def test_the_version_written(tmp_path, kw, version):
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p), **kw)
    assert w.version == version
    w.close({})
    assert _file_version(p) == version


@pytest.mark.parametrize("kw", [
    {"version": abi.BASE_VERSION - 1},           # readable, but below what this writer writes
    {"version": max(abi.READ_VERSIONS) + 1},     # no reader reads it
    {"version": 0},
    {"zstd_level": 3, "compact": True, "version": 5},  # compacted chunks arrived in 6
])
def test_versions_it_cannot_write_are_refused_before_the_file_is_touched(tmp_path, kw):
    p = tmp_path / "t.iowt"
    buf = io.BytesIO()
    with pytest.raises(ValueError, match="cannot write format version"):
        TraceWriter(str(p), fileobj=buf, **kw)
    assert buf.getvalue() == b""
    p.write_bytes(b"keep")  # a file of that name is neither truncated nor left open
    with pytest.raises(ValueError, match="cannot write format version"):
        TraceWriter(str(p), **kw)
    assert p.read_bytes() == b"keep"
    (tmp_path / "t.iowt").unlink()
    with pytest.raises(ValueError, match="cannot write format version"):
        TraceWriter(str(p), **kw)
    assert not p.exists()


def test_records_are_split_numbered_and_counted(tmp_path):
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p))
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 1})
    w.write_records(_requests(5), chunk_records=2)
    w.write_records(_requests(3))
    w.write_records(np.zeros(0, abi.FSYNC_DTYPE))  # no chunk, but counted as none
    w.close({"end_ns": 9})
    _, chunks = split(p.read_bytes())
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert [(c.type, c.count) for c in chunks[1:-1]] == [(abi.REC_REQUEST, n)
                                                         for n in (2, 2, 1, 3)]
    assert all(c.rec_size == abi.REQUEST_DTYPE.itemsize for c in chunks[1:-1])
    assert chunks[-1].type == abi.CHUNK_TRAILER
    t = json.loads(chunks[-1].data)
    assert t["records"] == {"request": 8, "fsync": 0}
    assert t["counters"] == {n: 0 for n in abi.COUNTER_NAMES}
    assert t["end_ns"] == 9


def test_the_trailer_keeps_what_the_caller_gave(tmp_path):
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p))
    w.write_records(_requests(2))
    w.close({"records": {"request": 99}, "counters": {"lost_events": 3}})
    t = json.loads(split(p.read_bytes())[1][-1].data)
    assert t == {"records": {"request": 99}, "counters": {"lost_events": 3}}


def test_type_and_size_are_set_in_a_copy_of_the_callers_records(tmp_path):
    p = tmp_path / "t.iowt"
    r = _requests(3)
    r["type"], r["size_bytes"] = 0x55, 1
    mine = r.copy()
    w = TraceWriter(str(p))
    w.write_records(r[::-1][::2])  # a strided view: written contiguous
    w.close(None)
    assert r.tobytes() == mine.tobytes()
    [c] = split(p.read_bytes())[1]
    got = np.frombuffer(c.data, abi.REQUEST_DTYPE)
    assert got["seq"].tolist() == [2, 0]
    assert (got["type"] == abi.REC_REQUEST).all()
    assert (got["size_bytes"] == abi.REQUEST_DTYPE.itemsize).all()


def test_a_record_type_is_chosen_by_its_dtype_object_first(tmp_path):
    """helper and offcpu records share one layout: the dtype object says which."""
    assert abi.HELPER_DTYPE == abi.OFFCPU_DTYPE and abi.HELPER_DTYPE is not abi.OFFCPU_DTYPE
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p))
    w.write_records(np.zeros(1, abi.HELPER_DTYPE))
    w.write_records(np.zeros(1, abi.OFFCPU_DTYPE))
    w.close({})
    chunks = split(p.read_bytes())[1]
    assert [c.type for c in chunks[:2]] == [abi.REC_HELPER, abi.REC_OFFCPU]
    assert json.loads(chunks[-1].data)["records"] == {"helper": 1, "offcpu": 1}


def test_an_array_that_is_no_record_type_is_refused(tmp_path):
    w = TraceWriter(str(tmp_path / "t.iowt"))
    with pytest.raises(ValueError, match="not a record dtype"):
        w.write_records(np.zeros(3, np.uint64))
    w.close(None)


def test_close_without_a_trailer_and_a_callers_file(tmp_path):
    buf = io.BytesIO()
    w = TraceWriter("unused", fileobj=buf)
    w.write_records(_requests(1))
    w.close(None)
    assert not buf.closed  # the caller's to close
    head, chunks = split(buf.getvalue())
    assert len(head) == 64 and [c.type for c in chunks] == [abi.REC_REQUEST]
    assert not (tmp_path / "unused").exists()


def test_an_existing_file_is_replaced(tmp_path):
    p = tmp_path / "t.iowt"
    p.write_bytes(b"x" * 100_000)
    TraceWriter(str(p)).close(None)
    assert p.stat().st_size == 64


def test_data_bytes_may_be_overridden_for_damaged_files(tmp_path):
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p))
    w._chunk(abi.CHUNK_META, 0, 1, b'{"a": 1}', data_bytes=3)
    w.close(None)
    [c] = split(p.read_bytes())[1]
    assert c.data_bytes == 3 and c.payload == b'{"a": 1}'


def _unzstd(payload: bytes) -> bytes:
    """The data of a compressed chunk's frame (its zero padding left out)."""
    return zstandard.ZstdDecompressor().decompressobj().decompress(payload)


def test_what_a_compressing_writer_stores(tmp_path):
    """One record: compressed as it is (nothing to transpose or compact); several:
    compacted when asked, else byte-transposed; data_bytes what the frame holds."""
    p = tmp_path / "t.iowt"
    w = TraceWriter(str(p), zstd_level=3, compact=True)
    one, many = _requests(1), _requests(64)
    w.write_records(one)
    w.write_records(many)
    w.close(None)
    c1, c2 = split(p.read_bytes())[1]
    size = abi.REQUEST_DTYPE.itemsize
    assert c1.type == abi.REC_REQUEST | abi.CHUNK_ZSTD and c1.count == 1
    one["type"], one["size_bytes"] = abi.REC_REQUEST, size
    assert c1.data_bytes == size and _unzstd(c1.payload) == one.tobytes()
    assert c2.type == abi.REC_REQUEST | abi.CHUNK_ZSTD | abi.CHUNK_COMPACT
    assert c2.data_bytes == 64 * (size + 2)
    q = tmp_path / "q.iowt"
    w = TraceWriter(str(q), zstd_level=3)
    w.write_records(many)
    w.close(None)
    [c] = split(q.read_bytes())[1]
    many["type"], many["size_bytes"] = abi.REC_REQUEST, size
    assert c.type == abi.REC_REQUEST | abi.CHUNK_ZSTD and c.data_bytes == 64 * size
    plain = np.frombuffer(many.tobytes(), np.uint8).reshape(64, size)
    assert _unzstd(c.payload) == plain.T.tobytes()
