"""The recorder at stop on the emulated disk (root, BPF and FUSE): a request the disk is
still serving, and an fsync still blocked, are written as they stand, flagged incomplete
and counted, not lost."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from iowhy import abi
from iowhy.traceformat import read_trace
from recording import assert_nothing_dropped, emulated_disk, record

pytestmark = pytest.mark.bpf


def _slow_disk_and_dd(tmp_path, request):
    """An emulated disk whose media take about 1 s for 256 KiB, and the file the test's
    background dd writes its PID to: a finalizer waits (by that PID, up to 10 s) until
    the dd, asleep until its data is on the media, is gone."""
    d = emulated_disk(tmp_path, request, 64 << 20, cache=False,
                      extra_args=["--media-rate", str(256 << 10)])
    pidfile = tmp_path / "dd.pid"

    def _wait_dd():
        if pidfile.exists() and pidfile.read_text().strip():
            proc = Path(f"/proc/{int(pidfile.read_text())}")
            for _ in range(200):
                if not proc.exists():
                    break
                time.sleep(0.05)
    request.addfinalizer(_wait_dd)
    return d, pidfile


@pytest.mark.lab
def test_request_in_flight_at_stop_is_written_as_it_stands(bpf, tmp_path, iowhy_bin, request):
    """A write the disk is still serving when recording stops is written out by the
    recorder, flagged incomplete and counted, with its op, sector and length: not as a
    0-byte read at sector 0. (A completion the kernel never delivers leaves a request in
    this state too.) The emulated disk's slow media hold a 256 KiB direct write about
    1 s; the workload, a shell, starts it in the background and exits after 0.3 s."""
    d, pidfile = _slow_disk_and_dd(tmp_path, request)
    out = tmp_path / "t.iowt"
    sector = 2048
    record(iowhy_bin, out, ["sh", "-c",
                            f"dd if=/dev/zero of={d.dev} bs=256k count=1 seek={sector // 512} "
                            f"oflag=direct status=none & echo $! > {pidfile}; sleep 0.3"],
           "--dev", d.dev)
    tr = read_trace(str(out))
    r = tr.records("request")
    r = r[(r["dev_major"] == d.major) & (r["dev_minor"] == d.minor)]
    inc = r[(r["flags_u16"] & abi.RQ_INCOMPLETE) != 0]
    assert len(inc) >= 1, r
    assert tr.trailer["in_flight_at_stop"] == len(inc)
    assert (inc["op"] == abi.OP_WRITE).all(), inc["op"]
    assert (inc["issue_ns"] > 0).all() and (inc["done_ns"] == 0).all()
    # the write may be split, but its pieces cover exactly the 256 KiB written
    assert int(inc["start_sector"].min()) == sector
    assert int(inc["len_bytes"].sum()) == 256 << 10


@pytest.mark.lab
def test_fsync_still_running_at_stop_is_written_incomplete(bpf, tmp_path, iowhy_bin, request):
    """An fsync still blocked when recording stops is written, flagged incomplete and
    counted in the trailer, with its thread, fd and entry time: not lost. The workload, a
    shell, starts dd in the background and exits after 0.5 s; dd writes 256 KiB through
    the page cache of the emulated disk, whose slow media need about 1 s for it, and
    then fsyncs its output (fd 1)."""
    d, pidfile = _slow_disk_and_dd(tmp_path, request)
    out = tmp_path / "t.iowt"
    t0 = time.monotonic_ns()
    record(iowhy_bin, out, ["sh", "-c",
                            f"dd if=/dev/zero of={d.dev} bs=256k count=1 conv=fsync "
                            f"status=none & echo $! > {pidfile}; sleep 0.5"],
           "--dev", d.dev)
    dd_pid = int(pidfile.read_text())
    assert Path(f"/proc/{dd_pid}").exists(), "dd ended before the stop: the test proves nothing"
    tr = read_trace(str(out))
    f = tr.records("fsync")
    inc = f[(f["flags_u16"] & abi.FS_F_INCOMPLETE) != 0]
    assert len(inc) == 1, f
    assert tr.trailer["calls_open_at_stop"] == 1
    e = inc[0]
    assert int(e["call_u16"]) == abi.CALL_FSYNC
    assert int(e["tid"]) == int(e["tgid"]) == dd_pid
    assert int(e["fd"]) == 1 and int(e["ret"]) == 0
    assert e["comm"].decode() == "dd"
    assert t0 < int(e["enter_ns"]) < int(e["exit_ns"]) == int(e["ts_ns"]) == tr.end_ns
    assert_nothing_dropped(tr)
