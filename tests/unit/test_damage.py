"""Damage the CRCs cannot see (a chunk removed, duplicated, swapped or re-typed with its
CRC right) is found from the chunk `seq` numbers, the records' own headers and the
trailer's record counts, counted in Trace.damage, and shown on the first line of every
command's output (a `damage` field in JSON)."""

from __future__ import annotations

import json

import pytest

from damaged_traces import (Chunk, commands, join, run_cli, split, with_json, write_base)
from iowhy import abi
from iowhy.summary import short_summary
from iowhy.traceformat import read_trace


@pytest.fixture
def sound(tmp_path):
    return write_base(tmp_path / "sound.iowt")


def _variant(tmp_path, sound, edit) -> str:
    head, chunks = split(open(sound, "rb").read())
    out = tmp_path / "damaged.iowt"
    out.write_bytes(join(head, edit(chunks)))
    return str(out)


def _request_chunk(chunks: list[Chunk]) -> int:
    return next(i for i, c in enumerate(chunks) if c.type == abi.REC_REQUEST)


def test_sound_trace_has_no_damage(sound):
    tr = read_trace(sound)
    assert not tr.damage.damaged and tr.damage.summary() == ""
    assert tr.problems() == []
    for argv in commands(sound, sound):
        r = run_cli(argv)
        assert r.rc == 0, (argv, r.err)
        if "--json" in argv:
            assert "damage" not in json.loads(r.out), argv  # a sound trace's JSON as before
        else:
            assert not r.out.startswith("WARNING"), argv


def test_request_chunk_removed_is_shown_first_everywhere(tmp_path, sound):
    path = _variant(tmp_path, sound, lambda c: c[:_request_chunk(c)] + c[_request_chunk(c) + 1:])
    tr = read_trace(path)
    d = tr.damage
    assert d.chunks_missing == 1 and d.records_missing == {"request": 16}
    assert not d.truncated and d.bad_regions == 0 and d.missing_bytes == 0
    line = d.summary()
    assert line.startswith("trace is damaged: 16 request records missing")
    assert "1 chunk missing" in line
    for argv in commands(path, sound):
        r = run_cli(argv)
        assert r.rc == 0, (argv, r.err)
        if "--json" in argv:
            obj = json.loads(r.out)
            dmg = obj["damage"]["b"] if argv[0] == "compare" else obj["damage"]
            assert dmg["damaged"] and dmg["records_missing"] == {"request": 16}
            assert dmg["summary"] == line
        else:
            first = r.out.splitlines()[0]
            who = "B: " if argv[0] == "compare" else ""
            assert first.startswith(f"WARNING: {who}trace is damaged: 16 request records"), \
                (argv, first)
            # shown once, not repeated among the other problems
            assert r.out.count("16 request records missing") == 1, argv
    assert short_summary(path).splitlines()[0].startswith("trace is damaged: 16 request")


def test_duplicated_chunk_is_ignored_and_counted(tmp_path, sound):
    i = None

    def dup(c):
        nonlocal i
        i = _request_chunk(c)
        return c[:i + 1] + c[i:]
    path = _variant(tmp_path, sound, dup)
    tr = read_trace(path)
    sound_tr = read_trace(sound)
    assert tr.count("request") == sound_tr.count("request")  # not counted twice
    assert tr.damage.chunks_duplicated == 1 and tr.damage.records_unexpected == {}
    assert tr.damage.summary() == "trace is damaged: 1 duplicated chunk ignored"


def test_swapped_chunks_are_out_of_order(tmp_path, sound):
    def swap(c):
        i = _request_chunk(c)
        return c[:i] + [c[i + 1], c[i]] + c[i + 2:]
    tr = read_trace(_variant(tmp_path, sound, swap))
    assert tr.damage.chunks_out_of_order == 1 and tr.damage.chunks_missing == 0
    assert tr.count("request") == read_trace(sound).count("request")


def test_retyped_chunk_of_the_same_record_size_is_caught(tmp_path, sound):
    """offcpu and helper records share a layout: only the records' own headers tell."""
    assert abi.OFFCPU_DTYPE.itemsize == abi.HELPER_DTYPE.itemsize
    n_off = read_trace(sound).count("offcpu")
    assert n_off
    lost = []

    def retype(c):
        i = next(k for k, x in enumerate(c) if x.type == abi.REC_OFFCPU)
        x = c[i]
        lost.append(x.count)
        c[i] = Chunk(x.offset, x.magic, abi.REC_HELPER, x.rec_size, x.count, x.payload_bytes,
                     x.data_bytes, x.crc, x.seq, x.payload)
        return c
    path = _variant(tmp_path, sound, retype)
    tr = read_trace(path)
    assert tr.count("helper") == 0
    assert tr.damage.unknown_chunks == 1
    assert tr.count("offcpu") == n_off - lost[0]
    assert tr.damage.records_missing == {"offcpu": lost[0]}


@pytest.mark.parametrize("zstd", [0, 3])
@pytest.mark.parametrize("bit", [0x1, 0x2])
def test_json_chunk_retyped_by_one_bit_is_told_by_its_content(tmp_path, zstd, bit):
    """META (0x100), RECORDER (0x101) and PROGRESS (0x102) are a bit apart, and the
    type is outside the CRC: a META whose type lost or gained a bit (0x8100 -> 0x8101
    compressed) read as a RECORDER with no word, and the devices, filesystems, host and
    kernel vanished from the report. Its keys are META's: the chunk is damage, counted
    and shown on the first line of every command."""
    sound = write_base(tmp_path / "z.iowt", zstd_level=zstd)

    def retype(c):
        i = next(k for k, x in enumerate(c) if x.type & 0x3FFF == abi.CHUNK_META)
        x = c[i]
        c[i] = Chunk(x.offset, x.magic, x.type ^ bit, x.rec_size, x.count, x.payload_bytes,
                     x.data_bytes, x.crc, x.seq, x.payload)
        return c
    path = _variant(tmp_path, sound, retype)
    tr = read_trace(path)
    assert tr.damage.unknown_chunks == 1 and tr.damage.damaged
    assert "host" not in tr.recorder and tr.progress is not None and \
        "devices" not in tr.progress
    for argv in commands(path, sound):
        r = run_cli(argv)
        assert r.rc == 0, (argv, r.err)
        if "--json" in argv:
            obj = json.loads(r.out)
            dmg = obj["damage"]["b"] if argv[0] == "compare" else obj["damage"]
            assert dmg["unknown_chunks"] == 1, argv
        else:
            assert r.out.startswith("WARNING: ") and "unknown type" in r.out, argv


def test_progress_retyped_as_trailer_and_trailer_removed(tmp_path, sound):
    def edit(c):
        i = next(k for k, x in enumerate(c) if x.type == abi.CHUNK_PROGRESS)
        x = c[i]
        c[i] = Chunk(x.offset, x.magic, abi.CHUNK_TRAILER, 0, 1, x.payload_bytes,
                     x.data_bytes, x.crc, x.seq, x.payload)
        return c[:-1]
    tr = read_trace(_variant(tmp_path, sound, edit))
    d = tr.damage
    assert d.chunks_out_of_order > 0 and d.records_unexpected  # not the last chunk


def test_truncated_counts_records_before_the_last_progress(tmp_path, sound):
    """Without a trailer the progress chunk's counts cover the chunks written before it:
    a record chunk missing before it is found."""
    def edit(c):
        p = next(k for k, x in enumerate(c) if x.type == abi.CHUNK_PROGRESS)
        del c[p - 1]  # the last fsync chunk before it
        return c[:-1]  # and no trailer
    tr = read_trace(_variant(tmp_path, sound, edit))
    assert tr.damage.truncated
    assert tr.damage.records_missing == {"fsync": 8}
    assert tr.problems()[0].startswith("trace is truncated (no trailer")


def test_trailer_records_disagreeing_are_damage(tmp_path, sound):
    def edit(c):
        t = json.loads(c[-1].data)
        t["records"]["fsync"] += 5
        c[-1] = with_json(c[-1], json.dumps(t).encode())
        return c
    tr = read_trace(_variant(tmp_path, sound, edit))
    assert tr.damage.records_missing == {"fsync": 5}
