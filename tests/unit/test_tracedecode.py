"""iowhy.tracedecode on its own: the compacted form's layout and its edges (one record,
the largest count, the highest group number), what `uncompact` refuses, the zstd frame
rules of `_unzstd`, the byte transposition and the JSON chunk parser. (The round trip on
random records, the C encoder and whole damaged files are in test_compact_chunks.py and
test_zstd_chunks.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import zstandard

from iowhy import abi, tracedecode as td

COMPACTED = sorted(td.COMPACT_SPECS)
MAX = td.COMPACT_MAX_COUNT


def _recs(code: int, n: int, tids: np.ndarray | list[int]) -> np.ndarray:
    """n records of type `code`: ts_ns rising, every relative time 5 ns before it."""
    dt = abi.RECORD_TYPES[code][1]
    r = np.zeros(n, dt)
    r["type"], r["size_bytes"] = code, dt.itemsize
    r["ts_ns"] = 10**9 + 7 * np.arange(n, dtype=np.uint64)
    r["tid"] = tids
    w = r.view(np.uint8).reshape(n, -1).view("<u8")
    for off in td.COMPACT_SPECS[code].rel:
        w[:, off // 8] = r["ts_ns"] - np.uint64(5)
    return r


def _groups(packed: bytes, n: int) -> list[int]:
    """The group numbers at the head of compacted data (two byte planes, low first)."""
    b = np.frombuffer(packed[:2 * n], np.uint8).reshape(2, n).astype(np.int64)
    return (b[0] | b[1] << 8).tolist()


@pytest.mark.parametrize("code", COMPACTED)
def test_one_record_is_group_zero_and_stored_as_is_but_for_the_relative_times(code):
    r = _recs(code, 1, [4242])
    size = r.dtype.itemsize
    packed = td.compact(r.tobytes(), code, size, 1)
    assert packed is not None and len(packed) == size + 2
    assert _groups(packed, 1) == [0]
    spec = td.COMPACT_SPECS[code]
    stored = bytearray(packed[2:])  # with one record, the planes are the record's bytes
    cols, rows = td._layout(spec, size)
    rec = bytearray(size)
    at = 0
    for a, b in cols + rows:
        rec[a:b] = stored[at:at + b - a]
        at += b - a
    w = np.frombuffer(bytes(rec), "<u8")
    ts = int(r["ts_ns"][0])
    assert int(w[1]) == ts  # the first stored ts_ns is itself, not a difference
    for off in spec.rel:  # ts + 1 - x: 5 ns before ts is stored as 6
        assert int(w[off // 8]) == 6
    assert td.uncompact(packed, code, size, 1) == r.tobytes()


def test_groups_number_threads_in_order_of_first_appearance():
    code = abi.REC_FSYNC
    tids = [900, 7, 900, 55, 7, 900]
    r = _recs(code, len(tids), tids)
    packed = td.compact(r.tobytes(), code, r.dtype.itemsize, len(tids))
    assert packed is not None
    n = len(tids)
    assert _groups(packed, n) == [0, 1, 0, 2, 1, 0]  # each record's, in the order written
    # the records stored sorted by group, stably (900's, then 7's, then 55's), ts_ns as
    # differences from the previous stored record (byte b of ts_ns is plane 8 + b)
    planes = np.frombuffer(packed[2 * n:2 * n + 16 * n], np.uint8).reshape(16, n)
    stored = planes[8:16].T.copy().view("<u8")[:, 0]
    order = [0, 2, 5, 1, 4, 3]
    assert np.cumsum(stored, dtype=np.uint64).tolist() == r["ts_ns"][order].tolist()
    assert td.uncompact(packed, code, r.dtype.itemsize, n) == r.tobytes()


def test_the_largest_count_with_every_group_number_in_use():
    """COMPACT_MAX_COUNT records of as many threads: group numbers up to 0xFFFE, both
    bytes of each in use; one more record is not compacted and not uncompacted."""
    code = abi.REC_JOURNAL
    tids = np.arange(MAX, dtype=np.uint32)[::-1] + 1000
    r = _recs(code, MAX, tids)
    size = r.dtype.itemsize
    packed = td.compact(r.tobytes(), code, size, MAX)
    assert packed is not None and len(packed) == (size + 2) * MAX
    g = _groups(packed, MAX)
    assert g[0] == 0 and g[-1] == MAX - 1 == 0xFFFE
    assert td.uncompact(packed, code, size, MAX) == r.tobytes()
    more = np.concatenate([r, r[:1]])
    assert td.compact(more.tobytes(), code, size, MAX + 1) is None
    assert td.uncompact(packed + bytes(size + 2), code, size, MAX + 1) is None


def _packed(code: int = abi.REC_REQUEST, n: int = 4) -> tuple[bytes, int, int]:
    r = _recs(code, n, [1, 2, 1, 3][:n])
    p = td.compact(r.tobytes(), code, r.dtype.itemsize, n)
    assert p is not None
    return p, r.dtype.itemsize, n


def test_uncompact_refuses_what_cannot_be_compacted_data():
    p, size, n = _packed()
    assert td.uncompact(p, abi.REC_REQUEST, size, n) is not None
    assert td.uncompact(p[:-1], abi.REC_REQUEST, size, n) is None      # one byte short
    assert td.uncompact(p + b"\0", abi.REC_REQUEST, size, n) is None   # one byte long
    assert td.uncompact(p, abi.REC_REQUEST, size, n - 1) is None       # count disagrees
    assert td.uncompact(b"", abi.REC_REQUEST, size, 0) is None         # no record
    assert td.uncompact(p, abi.REC_REQUEST, size + 8, n) is None       # not the type's size
    assert td.uncompact(p, abi.REC_TASK, size, n) is None              # no compacted form
    assert td.uncompact(p, 0x77, size, n) is None                      # no such type


def test_a_group_number_equal_to_the_count_is_out_of_range():
    p, size, n = _packed()
    g = bytearray(p)
    g[0], g[n] = n - 1, 0  # record 0 in the last group: in range
    assert td.uncompact(bytes(g), abi.REC_REQUEST, size, n) is not None
    g[0] = n  # the first number past the last group
    assert td.uncompact(bytes(g), abi.REC_REQUEST, size, n) is None


def test_compact_refuses_what_it_has_no_form_for():
    r = _recs(abi.REC_REQUEST, 3, [1, 1, 1])
    size = r.dtype.itemsize
    data = r.tobytes()
    assert td.compact(data, abi.REC_REQUEST, size, 3) is not None
    assert td.compact(data[:-1], abi.REC_REQUEST, size, 3) is None      # length != size * n
    assert td.compact(b"", abi.REC_REQUEST, size, 0) is None            # no record
    assert td.compact(data, abi.REC_FSYNC, size, 3) is None             # another type's size
    assert td.compact(data, 0x77, size, 3) is None


def test_uncompact_fills_dest_when_it_fits():
    p, size, n = _packed()
    want = td.uncompact(p, abi.REC_REQUEST, size, n)
    dest = np.full(size * n, 0xAA, np.uint8)
    got = td.uncompact(p, abi.REC_REQUEST, size, n, dest=dest)
    assert got == want and dest.tobytes() == bytes(want)
    small = np.full(size * n - 1, 0xAA, np.uint8)  # does not fit: a new array, dest untouched
    assert td.uncompact(p, abi.REC_REQUEST, size, n, dest=small) == want
    assert (small == 0xAA).all()


def test_relative_time_is_its_own_inverse_and_keeps_zero_and_ts_plus_one():
    ts = np.array([100, 100, 100, 100, 2**64 - 1], np.uint64)
    x = np.array([0, 101, 95, 200, 3], np.uint64)
    y = td._rel(x.copy(), ts)
    assert y.tolist() == [0, 101, 6, (101 - 200) % 2**64, (2**64 - 3) % 2**64]
    assert td._rel(y.copy(), ts).tolist() == x.tolist()


def test_transpose_puts_byte_b_of_record_i_at_b_times_count_plus_i():
    data = bytes(range(12))  # 3 records of 4 bytes
    t = td._transpose(data, 4, 3)
    assert t == bytes([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
    assert td._untranspose(t, 4, 3) == data


# -- _unzstd --------------------------------------------------------------------------------

def _frame(data: bytes, **kw) -> bytes:
    opts = {"write_content_size": True, "write_checksum": True, **kw}
    return zstandard.ZstdCompressor(level=3, **opts).compress(data)


def test_unzstd_takes_one_sized_frame_and_fewer_than_8_bytes_of_zero_padding():
    data = b"iowhy" * 100
    f = _frame(data)
    assert td._unzstd(f, len(f), len(data)) == data
    assert td._unzstd(f + b"\0" * 7, len(f) + 7, len(data)) == data
    assert td._unzstd(f + b"\0" * 8, len(f) + 8, len(data)) is None   # padding too long
    assert td._unzstd(f + b"\0\1", len(f) + 2, len(data)) is None     # padding not zero
    assert td._unzstd(f + b"\0" * 9, len(f), len(data)) == data       # beyond plen: not read
    assert td._unzstd(f, len(f), len(data) - 1) is None               # declared size differs
    assert td._unzstd(f, 3, len(data)) is None                        # shorter than a magic
    assert td._unzstd(f, len(f) - 1, len(data)) is None               # frame cut
    nosize = _frame(data, write_content_size=False)
    assert td._unzstd(nosize, len(nosize), len(data)) is None


def test_unzstd_refuses_a_size_beyond_the_chunk_bound_before_decompressing():
    data = b"\0" * 64
    f = _frame(data)
    assert td._unzstd(f, len(f), td.ZSTD_CHUNK_MAX + 1) is None
    big = b"\0" * (td.ZSTD_CHUNK_MAX + 1)
    fb = _frame(big)  # honest about its size, but over the bound
    assert td._unzstd(fb, len(fb), len(big)) is None


# -- JSON chunks ----------------------------------------------------------------------------

def test_json_chunk_reads_an_object_of_the_first_n_bytes():
    text = b'{"a": 1, "b": [1.5, "x"]}'
    assert td._json_chunk(text + b"\0\0\0", len(text)) == {"a": 1, "b": [1.5, "x"]}
    assert td._json_chunk(text, len(text) - 1) is None   # cut: not JSON
    assert td._json_chunk(b"[1, 2]", 6) is None          # not an object
    assert td._json_chunk(b"\xff\xfe", 2) is None
    assert td._json_chunk(text, td.JSON_MAX + 1) is None  # larger than parsed


def test_json_chunk_keeps_bytes_that_are_not_utf8_as_surrogates():
    text = b'{"comm": "caf\xe9"}'
    assert td._json_chunk(text, len(text)) == {"comm": "caf\udce9"}


def test_json_values_the_file_should_not_hold_become_a_value_that_fails_every_check():
    text = b'{"nan": NaN, "inf": -Infinity, "big": 1e999, "ok": 2.5, "n": 7, "long": '
    text += b"9" * 5000 + b"}"
    obj = td._json_chunk(text, len(text))
    assert obj is not None
    for k in ("nan", "inf", "big", "long"):
        assert isinstance(obj[k], td._Bad), k
    assert obj["ok"] == 2.5 and obj["n"] == 7
