"""The trace format without a kernel: TraceWriter -> read_trace round trips, damaged and
cut files, files that are not traces, and `iowhy info` on all of them."""

from __future__ import annotations

import json
import os
import stat
import sys

import numpy as np
import pytest

from iowhy import abi, cli
from iowhy.reports.info import render_info
from iowhy.tracecheck import RECORD_LIMITS, TIMES
from iowhy.traceformat import CHDR_SIZE, HDR_SIZE, TraceError, read_trace
from iowhy.tracewriter import TraceWriter

START_NS = 1_000_000_000
END_NS = 3_500_000_000
REALTIME = 1_700_000_000_000_000_000

RECORDER = {
    "iowhy_version": "0.1.0", "command": ["fio", "--name=x", "--fsync=1"], "pid": 4242,
    "mode": "run", "start_ns": START_NS,
    "probes": {"block_rq_issue": "tp_btf", "block_rq_complete": "tp_btf",
               "sched_switch": "raw_tp", "xfs_log_force": "skipped: xfs not loaded"},
    "attach_mode": "tp_btf", "ringbuf_bytes": 64 << 20,
    "clock": {"realtime_minus_monotonic_ns": REALTIME - START_NS},
}
META = {
    "host": "lab1", "kernel": "6.1.0-18-amd64", "machine": "x86_64", "iowhy_version": "0.1.0",
    "command": ["fio", "--name=x", "--fsync=1"], "created_realtime_ns": REALTIME,
    "clock": {"realtime_minus_monotonic_ns": REALTIME - START_NS}, "page_size_bytes": 4096,
    "ncpus": 4,
    "devices": [{"name": "loop0", "major": 7, "minor": 0, "size_bytes": 512 << 20,
                 "rotational": False, "write_cache": "write back", "fua": False,
                 "logical_block_bytes": 512, "physical_block_bytes": 512,
                 "scheduler": "none", "backing_file": "/tmp/disk0.img", "model": None,
                 "partitions": []}],
    "filesystems": [{"source": "/dev/loop0", "mountpoint": "/mnt/x", "fstype": "ext4",
                     "options": "rw,relatime", "dev_major": 7, "dev_minor": 0,
                     "st_dev_major": 7, "st_dev_minor": 0, "disk": "loop0", "disk_major": 7,
                     "disk_minor": 0, "part_start_sector": 0, "uuid": "u", "btrfs_fsid": None,
                     "block_bytes": 4096,
                     "log": {"kind": "jbd2", "ranges": [[2048, 34816]], "fc_ranges": [],
                             "bytes": 16 << 20}}],
}
ZERO_COUNTERS = {n: 0 for n in abi.COUNTER_NAMES}


def random_records(name: str, n: int, seed: int = 1) -> np.ndarray:
    """n records of type `name` with every byte random (pads included), the fields the
    reader checks (tracecheck.RECORD_LIMITS, all 2**k - 1) masked into range and the
    times brought into the recording window [START_NS, END_NS)."""
    dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8)
    arr = np.frombuffer(raw.tobytes(), dtype=dtype).copy()
    for f, hi in RECORD_LIMITS[name]:
        arr[f] &= hi
    for f in TIMES[name]:
        arr[f] = START_NS + arr[f] % (END_NS - START_NS)
    return arr


def with_header(arr: np.ndarray) -> np.ndarray:
    """What the writer stores: type and size_bytes filled in."""
    code = next(c for c, (_, dt) in abi.RECORD_TYPES.items() if dt is arr.dtype)
    out = arr.copy()
    out["type"] = code
    out["size_bytes"] = arr.dtype.itemsize
    return out


def requests(n: int, start: int = 0) -> np.ndarray:
    a = np.zeros(n, dtype=abi.REQUEST_DTYPE)
    a["ts_ns"] = START_NS + 1000 * np.arange(start, start + n)
    a["seq"] = np.arange(start, start + n)
    a["len_bytes"] = 4096
    a["comm"] = b"fio"
    return a


class Layout:
    """A trace written chunk by chunk, remembering where each chunk ends."""

    def __init__(self, path):
        self.path = str(path)
        self.w = TraceWriter(self.path, created_realtime_ns=REALTIME)
        self.ends: list[int] = []
        self.names: list[str] = []

    def _mark(self, name: str) -> None:
        self.w.f.flush()
        self.ends.append(self.w.f.tell())
        self.names.append(name)

    def json(self, ctype: int, obj: dict) -> None:
        self.w.write_json(ctype, obj)
        self._mark(abi.JSON_CHUNKS[ctype])

    def records(self, arr: np.ndarray) -> None:
        self.w.write_records(arr)
        self._mark(abi.RECORD_TYPES[int(with_header(arr[:1])["type"][0])][0])

    def close(self, trailer: dict | None) -> None:
        self.w.close(trailer)
        if trailer is not None:
            self.ends.append(os.path.getsize(self.path))
            self.names.append("trailer")

    def start(self, i: int) -> int:
        return self.ends[i - 1] if i else HDR_SIZE


def standard(path, trailer: dict | None = None, progress_counters: dict | None = None) -> Layout:
    """recorder, meta, request(3), fsync(2), progress, journal(4), trailer."""
    lay = Layout(path)
    lay.json(abi.CHUNK_RECORDER, RECORDER)
    lay.json(abi.CHUNK_META, META)
    lay.records(requests(3))
    lay.records(random_records("fsync", 2))
    lay.json(abi.CHUNK_PROGRESS, {"end_ns": START_NS + 2_000_000_000,
                                  "counters": progress_counters or ZERO_COUNTERS,
                                  "records": {"request": 3, "fsync": 2}})
    lay.records(random_records("journal", 4))
    lay.close({"end_ns": END_NS, "stop_reason": "workload-exit", "exit_status": 0,
               "in_flight_at_stop": 0} if trailer is None else trailer)
    return lay


def cut_copy(src: str, dst, nbytes: int) -> str:
    with open(src, "rb") as f:
        data = f.read(nbytes)
    if os.path.exists(dst):
        os.unlink(dst)  # a fresh inode: earlier Trace objects keep their own mapping
    with open(dst, "wb") as f:
        f.write(data)
    return str(dst)


def patch(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


# -- round trips ------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(abi.RECORD_NAMES))
def test_round_trip_every_record_type(tmp_path, name):
    arr = random_records(name, 50, seed=abi.RECORD_NAMES[name])
    p = str(tmp_path / "t.iowt")
    # task records carry a cgroup id (random here) from version 9 on
    version = abi.FORMAT_VERSION if name == "task" else None
    w = TraceWriter(p, created_realtime_ns=REALTIME, version=version)
    w.write_json(abi.CHUNK_RECORDER, RECORDER)
    w.write_records(arr)
    w.close({"end_ns": END_NS, "stop_reason": "workload-exit", "exit_status": 0})
    tr = read_trace(p)
    got = tr.records(name)
    assert got.dtype == arr.dtype
    assert got.tobytes() == with_header(arr).tobytes()
    for f in arr.dtype.names:
        if f not in ("type", "size_bytes"):
            assert np.array_equal(got[f], arr[f]), f
    assert (got["type"] == abi.RECORD_NAMES[name]).all()
    assert (got["size_bytes"] == arr.dtype.itemsize).all()
    assert tr.count(name) == 50
    for other in abi.RECORD_NAMES:
        if other != name:
            assert tr.count(other) == 0 and len(tr.records(other)) == 0
            assert len(tr.column(other, "ts_ns")) == 0
    assert tr.trailer["records"] == {name: 50}
    assert tr.trailer["counters"] == ZERO_COUNTERS
    assert tr.version == (version or abi.BASE_VERSION) and tr.created_realtime_ns == REALTIME
    assert not tr.truncated and tr.missing_bytes == 0 and tr.bad_regions == 0
    assert tr.unknown_chunks == 0 and tr.chunk_count == 3
    assert tr.problems() == []


def test_round_trip_named_values(tmp_path):
    rq = requests(2)
    rq["dev_major"], rq["dev_minor"] = 259, 3
    rq["error"] = [-5, 0]
    rq["start_sector"] = [2**40 + 7, 0]
    rq["op"] = [abi.OP_WRITE, abi.OP_FLUSH]
    rq["flags_u16"] = abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ
    off = np.zeros(1, dtype=abi.OFFCPU_DTYPE)
    off["syscall_nr"] = -1
    off["waker_comm"] = b"kworker/u8:2"
    p = str(tmp_path / "t.iowt")
    w = TraceWriter(p)
    w.write_records(rq)
    w.write_records(off)
    w.close({})
    tr = read_trace(p)
    r = tr.records("request")
    assert r["error"].tolist() == [-5, 0]
    assert r["start_sector"].tolist() == [2**40 + 7, 0]
    assert r["comm"].tolist() == [b"fio", b"fio"]
    assert r["op"].tolist() == [abi.OP_WRITE, abi.OP_FLUSH]
    assert tr.records("offcpu")["waker_comm"][0] == b"kworker/u8:2"
    assert tr.records("offcpu")["syscall_nr"][0] == -1


def test_multi_chunk_concatenation_and_column(tmp_path):
    p = str(tmp_path / "t.iowt")
    w = TraceWriter(p)
    w.write_json(abi.CHUNK_RECORDER, RECORDER)
    w.write_records(requests(10), chunk_records=3)  # 3 + 3 + 3 + 1
    w.write_records(random_records("fsync", 5))
    w.write_records(requests(4, start=10), chunk_records=3)  # 3 + 1
    w.close({"end_ns": END_NS})
    tr = read_trace(p)
    assert [len(v) for v in tr.chunks("request")] == [3, 3, 3, 1, 3, 1]
    assert tr.count("request") == 14
    assert tr.chunk_count == 1 + 4 + 1 + 2 + 1
    assert tr.records("request")["seq"].tolist() == list(range(14))
    assert tr.column("request", "seq").tolist() == list(range(14))
    assert tr.column("request", "ts_ns").dtype == np.dtype("<u8")
    assert np.array_equal(tr.column("request", "ts_ns"), tr.records("request")["ts_ns"])
    assert tr.trailer["records"] == {"request": 14, "fsync": 5}
    assert len(tr.column("fsync", "ret")) == 5
    # a single chunk is a zero-copy view of the file
    assert tr.column("fsync", "ret").base is not None


def test_summary_properties(tmp_path):
    lay = standard(tmp_path / "t.iowt")
    tr = read_trace(lay.path)
    assert tr.meta == META and tr.recorder == RECORDER
    assert tr.start_ns == START_NS and tr.end_ns == END_NS
    assert tr.duration_ns == END_NS - START_NS
    assert tr.trailer["stop_reason"] == "workload-exit"
    assert tr.progress["end_ns"] == START_NS + 2_000_000_000
    assert tr.chunk_count == len(lay.ends) == 7
    assert os.path.getsize(lay.path) == lay.ends[-1] == tr.file_bytes


def test_file_mode_0600(tmp_path):
    p = tmp_path / "t.iowt"
    TraceWriter(str(p)).close({})
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600


def test_chunk_layout_on_disk(tmp_path):
    """Header sizes, magics, 8-byte padding and the CRC as docs/trace-format.md says."""
    import zlib
    p = str(tmp_path / "t.iowt")
    w = TraceWriter(p)
    w.write_json(abi.CHUNK_RECORDER, {"a": 1})  # 8 bytes of JSON text + 0 pad
    w.write_json(abi.CHUNK_META, {"ab": 1})  # 9 bytes of JSON text + 7 pad
    w.close(None)
    data = open(p, "rb").read()
    hdr = np.frombuffer(data, dtype=abi.FILE_HDR_DTYPE, count=1)[0]
    assert hdr["magic"] == abi.FILE_MAGIC and hdr["endian_tag"] == 0x01020304
    assert hdr["hdr_bytes"] == HDR_SIZE == 64 and hdr["chunk_hdr_bytes"] == CHDR_SIZE == 32
    off = HDR_SIZE
    for seq, text in enumerate([b'{"a": 1}', b'{"ab": 1}']):
        ch = np.frombuffer(data, dtype=abi.CHUNK_HDR_DTYPE, count=1, offset=off)[0]
        payload = data[off + CHDR_SIZE:off + CHDR_SIZE + int(ch["payload_bytes"])]
        assert ch["magic"] == abi.CHUNK_MAGIC and ch["seq"] == seq
        assert ch["count"] == 1 and ch["rec_size_bytes"] == 0
        assert ch["data_bytes"] == len(text) and ch["payload_bytes"] % 8 == 0
        assert payload == text + b"\0" * (-len(text) % 8)
        assert ch["crc32"] == zlib.crc32(payload)
        off += CHDR_SIZE + int(ch["payload_bytes"])
    assert off == len(data)


# -- damaged and cut files --------------------------------------------------------------

def test_cut_at_every_offset_of_last_two_chunks(tmp_path):
    lay = standard(tmp_path / "full.iowt")
    size = lay.ends[-1]
    first = lay.start(len(lay.ends) - 2)
    dst = tmp_path / "cut.iowt"
    for cut in range(first, size):
        tr = read_trace(cut_copy(lay.path, dst, cut))
        complete = [e for e in lay.ends if e <= cut]
        assert tr.chunk_count == len(complete), cut
        assert tr.truncated, cut
        assert tr.trailer is None
        assert tr.missing_bytes == cut - complete[-1], cut
        assert tr.bad_regions == 0 and tr.unknown_chunks == 0, cut
        assert tr.count("request") == 3 and tr.count("fsync") == 2
        assert tr.count("journal") == (4 if len(complete) == len(lay.ends) - 1 else 0), cut
        assert tr.meta == META and tr.recorder == RECORDER
        # the last progress chunk stands in for the trailer
        assert tr.end_ns == START_NS + 2_000_000_000
        assert tr.counters == ZERO_COUNTERS
        assert any("truncated" in p for p in tr.problems())


def test_cut_inside_first_chunks(tmp_path):
    """Cut before any complete chunk: not a trace one can read; after one: readable."""
    lay = standard(tmp_path / "full.iowt")
    for cut in (HDR_SIZE, HDR_SIZE + 1, HDR_SIZE + CHDR_SIZE, lay.ends[0] - 1):
        with pytest.raises(TraceError) as ei:
            read_trace(cut_copy(lay.path, tmp_path / "cut.iowt", cut))
        assert "no readable chunk" in str(ei.value) and ei.value.hint
    tr = read_trace(cut_copy(lay.path, tmp_path / "cut.iowt", lay.ends[0]))
    assert tr.chunk_count == 1 and tr.truncated and tr.recorder == RECORDER
    assert tr.counters == {} and tr.lost_events == 0


def test_truncated_counters_from_last_progress(tmp_path):
    counters = dict(ZERO_COUNTERS, lost_ringbuf_offcpu=9)
    lay = standard(tmp_path / "full.iowt", progress_counters=counters)
    tr = read_trace(cut_copy(lay.path, tmp_path / "cut.iowt", lay.ends[-2]))
    assert tr.truncated and tr.missing_bytes == 0
    assert tr.counters["lost_ringbuf_offcpu"] == 9 and tr.lost_events == 9
    probs = tr.problems()
    assert probs[0].startswith("trace is truncated")
    assert any("9 events lost" in p and "ringbuf offcpu" in p for p in probs)


def test_corrupted_payload_byte_in_middle_chunk(tmp_path):
    lay = standard(tmp_path / "t.iowt")
    i = lay.names.index("fsync")
    start = lay.start(i)
    patch(lay.path, start + CHDR_SIZE + 17, b"\xa5")
    tr = read_trace(lay.path)
    assert tr.bad_regions == 1
    assert tr.missing_bytes == lay.ends[i] - start
    assert tr.count("fsync") == 0
    assert tr.count("request") == 3 and tr.count("journal") == 4
    assert tr.progress is not None and tr.trailer is not None and not tr.truncated
    assert tr.chunk_count == len(lay.ends) - 1
    assert any("damaged region" in p for p in tr.problems())


def test_corrupted_chunk_magic_and_length(tmp_path):
    lay = standard(tmp_path / "t.iowt")
    i = lay.names.index("request")
    patch(lay.path, lay.start(i), b"X")  # magic
    j = lay.names.index("journal")
    patch(lay.path, lay.start(j) + 12, (10**6).to_bytes(4, "little"))  # payload_bytes
    tr = read_trace(lay.path)
    assert tr.bad_regions == 2
    assert tr.count("request") == 0 and tr.count("journal") == 0 and tr.count("fsync") == 2
    assert tr.trailer is not None and not tr.truncated


def test_record_count_disagreeing_with_data_bytes_is_not_read(tmp_path):
    """The chunk header is outside the CRC: a damaged count must not slice records."""
    lay = standard(tmp_path / "t.iowt")
    i = lay.names.index("journal")
    for count in (3, 5):
        patch(lay.path, lay.start(i) + 8, count.to_bytes(4, "little"))
        tr = read_trace(lay.path)
        assert tr.count("journal") == 0, count
        assert tr.unknown_chunks == 1
        assert tr.count("request") == 3 and tr.trailer is not None


def test_unknown_chunks_are_counted_and_skipped(tmp_path):
    p = str(tmp_path / "t.iowt")
    w = TraceWriter(p)
    w.write_json(abi.CHUNK_RECORDER, RECORDER)
    w._chunk(0x7777, 0, 1, b'{"from": "the future"}')  # unknown type
    w.write_records(requests(2))
    w._chunk(abi.REC_REQUEST, abi.REQUEST_DTYPE.itemsize + 8, 1,
             b"\0" * (abi.REQUEST_DTYPE.itemsize + 8))  # known type, other record size
    w._chunk(abi.CHUNK_PROGRESS, 0, 1, b"{not json")  # JSON chunk that is not JSON
    w._chunk(abi.CHUNK_META, 0, 1, b"[1, 2]")  # JSON but not an object
    w.close({"end_ns": END_NS})
    tr = read_trace(p)
    assert tr.unknown_chunks == 4
    assert tr.chunk_count == 7
    assert tr.bad_regions == 0 and tr.missing_bytes == 0 and not tr.truncated
    assert tr.count("request") == 2 and tr.progress is None and tr.meta == {}
    assert any("unknown type" in p for p in tr.problems())


# -- files that are not traces ----------------------------------------------------------

def _one_line_error(path: str, *words: str) -> TraceError:
    with pytest.raises(TraceError) as ei:
        read_trace(path)
    e = ei.value
    assert "\n" not in str(e) and str(e)
    assert e.hint and "\n" not in e.hint
    for w in words:
        assert w in str(e)
    return e


def test_empty_file(tmp_path):
    p = tmp_path / "empty.iowt"
    p.write_bytes(b"")
    _one_line_error(str(p), "empty")


def test_foreign_files(tmp_path):
    elf = sys.executable if os.path.exists(sys.executable) else "/bin/true"
    _one_line_error(os.path.realpath(elf), "not an iowhy trace")
    txt = tmp_path / "notes.txt"
    txt.write_text("IOWHY is a tool\nthat is not this file\n" * 10)
    _one_line_error(str(txt), "not an iowhy trace")
    short = tmp_path / "short.iowt"
    short.write_bytes(abi.FILE_MAGIC)  # the magic, but not a whole header
    _one_line_error(str(short))


def test_missing_file(tmp_path):
    _one_line_error(str(tmp_path / "nope.iowt"), "cannot open")


def test_wrong_version(tmp_path):
    lay = standard(tmp_path / "t.iowt")
    patch(lay.path, 8, (abi.FORMAT_VERSION + 1).to_bytes(4, "little"))
    e = _one_line_error(lay.path, f"version {abi.FORMAT_VERSION + 1}",
                        f"reads version {abi.FORMAT_VERSION}")
    assert "release" in e.hint


def test_big_endian_tag(tmp_path):
    lay = standard(tmp_path / "t.iowt")
    patch(lay.path, 20, (0x01020304).to_bytes(4, "big"))
    _one_line_error(lay.path, "big-endian")


# -- problems ---------------------------------------------------------------------------

def test_problems_in_words(tmp_path):
    counters = dict(ZERO_COUNTERS, lost_ringbuf_request=5, lost_rqmap_full=2,
                    unmatched_completion=3, request_without_origin=4, bio_walk_capped=1,
                    requests_merged=100)
    lay = standard(tmp_path / "t.iowt", trailer={"end_ns": END_NS, "counters": counters,
                                                 "stop_reason": "signal", "exit_status": None})
    tr = read_trace(lay.path)
    assert not tr.truncated and tr.lost_events == 7
    probs = tr.problems()
    lost = [p for p in probs if "lost" in p]
    assert len(lost) == 1
    assert lost[0].startswith("7 events lost") and "5 ringbuf request" in lost[0]
    assert "2 rqmap full" in lost[0]
    assert any(p.startswith("3 completions") for p in probs)
    assert any(p.startswith("4 requests whose submitting task is unknown") for p in probs)
    assert any(p.startswith("1 requests with more bios") for p in probs)
    assert not any("merged" in p for p in probs)  # merges lose nothing
    assert all("\n" not in p for p in probs)


# -- iowhy info -------------------------------------------------------------------------

def test_info_json(tmp_path, capsys):
    lay = standard(tmp_path / "t.iowt")
    assert cli.main(["info", "--json", lay.path]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format_version"] == abi.BASE_VERSION
    assert d["duration_ns"] == END_NS - START_NS
    assert d["records"]["request"] == 3 and d["records"]["fsync"] == 2
    assert set(d["records"]) == set(abi.RECORD_NAMES)
    assert d["lost_events"] == 0 and d["truncated"] is False
    assert d["stop_reason"] == "workload-exit" and d["exit_status"] == 0
    assert d["probes"] == RECORDER["probes"] and d["chunks"] == 7
    assert d["devices"][0]["name"] == "loop0" and d["filesystems"][0]["fstype"] == "ext4"
    for k in ("path", "iowhy_version", "host", "kernel", "command", "start_ns", "end_ns",
              "counters", "missing_bytes", "bad_regions", "unknown_chunks"):
        assert k in d


def test_info_json_truncated(tmp_path, capsys):
    lay = standard(tmp_path / "full.iowt")
    cut = cut_copy(lay.path, tmp_path / "cut.iowt", lay.ends[-1] - 5)
    assert cli.main(["info", "--json", cut]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["truncated"] is True and d["stop_reason"] is None
    assert d["missing_bytes"] == lay.ends[-1] - 5 - lay.ends[-2]


def test_info_human(tmp_path, capsys):
    counters = dict(ZERO_COUNTERS, lost_ringbuf_offcpu=9)
    lay = standard(tmp_path / "full.iowt", progress_counters=counters)
    cut = cut_copy(lay.path, tmp_path / "cut.iowt", lay.ends[-1] - 5)
    assert cli.main(["info", cut]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("WARNING: trace is truncated")
    assert any(ln.startswith("WARNING: 9 events lost") for ln in lines)
    assert all(len(ln) <= 100 for ln in lines)
    assert "duration (s):" in out and "2.000" in out
    assert "lost_ringbuf_offcpu" in out
    assert "3 attached, 1 skipped" in out and "xfs not loaded" in out
    assert "loop0" in out and "7:0" in out and "0.50" in out  # GiB
    assert "jbd2" in out and "16.0" in out  # MiB
    assert "fio --name=x --fsync=1" in out


def test_render_info_is_pure_and_narrow():
    d = {"path": "/very/" + "long/" * 40 + "t.iowt", "format_version": 1,
         "command": ["x" * 300], "records": {n: 10**12 for n in abi.RECORD_NAMES},
         "counters": {"lost_ringbuf_request": 1}, "lost_events": 1, "duration_ns": 1_234_567,
         "probes": {f"p{i}": "skipped: " + "why " * 40 for i in range(3)},
         "devices": [{"name": "n" * 80, "major": 259, "minor": 0, "size_bytes": 2**40,
                      "rotational": True, "write_cache": "write through", "fua": True,
                      "scheduler": "mq-deadline"}],
         "filesystems": [{"source": "/dev/" + "d" * 90, "mountpoint": "/m" * 60,
                          "fstype": "xfs", "log": {"kind": "xfs-internal",
                                                   "ranges": [[0, 2048]]}}]}
    text = render_info(d, ["a problem " * 30, "short one"])
    lines = text.splitlines()
    assert all(len(ln) <= 100 for ln in lines), max(lines, key=len)
    assert lines[0].startswith("WARNING: a problem")
    assert sum(ln.startswith("WARNING: ") for ln in lines) == 2
    assert "duration (s):" in text and "0.001" in text
    assert "0 attached, 3 skipped" in text
    assert "1.0" in text  # 2048 sectors of log = 1.0 MiB
    assert render_info({}, []) is not None  # no key is required


@pytest.mark.parametrize("kind", ["empty", "foreign", "text", "missing", "version"])
def test_info_errors_one_line(tmp_path, capsys, kind):
    p = tmp_path / "t.iowt"
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "foreign":
        p.write_bytes(open(os.path.realpath(sys.executable), "rb").read(65536))
    elif kind == "text":
        p.write_text("hello\n")
    elif kind == "version":
        standard(p)
        patch(str(p), 8, (99).to_bytes(4, "little"))
    for argv in (["info", str(p)], ["info", "--json", str(p)]):
        rc = cli.main(argv)
        cap = capsys.readouterr()
        assert rc != 0
        assert cap.out == ""
        err = cap.err.splitlines()
        assert len(err) == 1, cap.err
        assert err[0].startswith("iowhy: ")
        assert "Traceback" not in cap.err


def test_info_on_directory_one_line(tmp_path, capsys):
    rc = cli.main(["info", str(tmp_path)])
    err = capsys.readouterr().err.splitlines()
    assert rc != 0 and len(err) == 1 and err[0].startswith("iowhy: ")


def test_format_doc_covers_every_name(tmp_path):
    """docs/trace-format.md names every record field, counter and `info --json` key."""
    from conftest import REPO
    doc = (REPO / "docs" / "trace-format.md").read_text()
    names = set(abi.COUNTER_NAMES) | set(abi.RECORD_NAMES)
    for dt in abi.C_STRUCTS.values():
        names |= set(dt.names)
    lay = standard(tmp_path / "t.iowt")
    names |= set(cli.info_dict(read_trace(lay.path)))
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert not missing, f"not in docs/trace-format.md: {missing}"
