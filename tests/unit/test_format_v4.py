"""Format version 4: the off-CPU record's waker context and request link, the THREAD
record, and version 3 traces still read (their off-CPU records widened)."""

from __future__ import annotations

import numpy as np

from iowhy import abi
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter


def _set_version(path: str, version: int) -> None:
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(version.to_bytes(4, "little"))


def _v3_offcpu(n: int) -> np.ndarray:
    a = np.zeros(n, dtype=abi.OFFCPU_V3_DTYPE)
    a["type"] = abi.REC_OFFCPU
    a["size_bytes"] = abi.OFFCPU_V3_DTYPE.itemsize
    a["ts_ns"] = np.arange(n) + 1000
    a["start_ns"] = np.arange(n) + 10
    a["waking_ns"] = np.arange(n) + 500
    a["end_ns"] = np.arange(n) + 1000
    a["tid"] = 7
    a["syscall_nr"] = -1
    a["flags_u16"] = abi.OFF_D
    a["waker_comm"] = b"ksoftirqd/0"
    return a


def test_v3_offcpu_records_are_widened(tmp_path):
    p = str(tmp_path / "v3.iowt")
    w = TraceWriter(p)
    old = _v3_offcpu(5)
    w._chunk(abi.REC_OFFCPU, old.itemsize, len(old), old.tobytes())
    w.close({"end_ns": 2000})
    _set_version(p, 3)
    tr = read_trace(p)
    assert tr.version == 3 and tr.unknown_chunks == 0
    o = tr.records("offcpu")
    assert o.dtype == abi.OFFCPU_DTYPE and len(o) == 5
    for f in ("ts_ns", "start_ns", "waking_ns", "end_ns", "tid", "syscall_nr", "flags_u16",
              "waker_comm"):
        assert (o[f] == old[f]).all(), f
    assert (o["waker_ctx_u16"] == abi.WCTX_UNKNOWN).all()
    assert (o["waker_rq_seq"] == 0).all() and (o["waker_rq_depth"] == 0).all()
    assert (o["size_bytes"] == abi.OFFCPU_DTYPE.itemsize).all()


def test_v4_refuses_a_v3_sized_offcpu_chunk(tmp_path):
    p = str(tmp_path / "bad.iowt")
    w = TraceWriter(p)
    old = _v3_offcpu(2)
    w._chunk(abi.REC_OFFCPU, old.itemsize, len(old), old.tobytes())
    w.close({"end_ns": 2000})
    tr = read_trace(p)
    assert tr.version == abi.BASE_VERSION >= 4
    assert tr.unknown_chunks == 1 and tr.count("offcpu") == 0


def test_new_fields_round_trip(tmp_path):
    p = str(tmp_path / "v4.iowt")
    w = TraceWriter(p)
    o = np.zeros(2, dtype=abi.OFFCPU_DTYPE)
    o["flags_u16"] = [abi.OFF_D | abi.OFF_WAKER_RQ, abi.OFF_FROM_START]
    o["waker_ctx_u16"] = [abi.WCTX_SOFTIRQ, abi.WCTX_TASK]
    o["waker_preempt_count"] = [0x80000102, 0x80000001]
    o["waker_rq_seq"] = [12345, 0]
    o["waker_rq_depth"] = [2, 0]
    t = np.zeros(1, dtype=abi.THREAD_DTYPE)
    t["tid"] = 42
    t["state_u8"] = ord("S")
    t["syscall_nr"] = 0
    t["arg0"] = 3
    t["wchan"] = b"anon_pipe_read"
    w.write_records(o)
    w.write_records(t)
    w.close({"end_ns": 1})
    tr = read_trace(p)
    back = tr.records("offcpu")
    for f in ("flags_u16", "waker_ctx_u16", "waker_preempt_count", "waker_rq_seq",
              "waker_rq_depth"):
        assert (back[f] == o[f]).all(), f
    th = tr.records("thread")
    assert th["type"][0] == abi.REC_THREAD and th["size_bytes"][0] == abi.THREAD_DTYPE.itemsize
    assert chr(th["state_u8"][0]) == "S" and th["wchan"][0] == b"anon_pipe_read"
    assert tr.count("thread") == 1 and "thread" in abi.RECORD_NAMES


def test_unknown_version_names_what_is_read(tmp_path):
    p = str(tmp_path / "v2.iowt")
    TraceWriter(p).close({"end_ns": 1})
    _set_version(p, 2)
    try:
        read_trace(p)
    except Exception as e:  # TraceError
        msg = str(e)
    else:
        raise AssertionError("version 2 was read")
    assert "version 2" in msg and "reads version 10 (and 3, 4, 5, 6, 7, 8, 9)" in msg
