"""`iowhy attach` stops when its target exits, not a poll timeout later: the window
ends within a few ms of the exit, so the end of an attached run is not left as time
with no workload thread alive. The exit time is the target's own clock reading, written
just before it exits."""

from __future__ import annotations

import subprocess

import pytest

from conftest import run  # noqa: F401  (the tier's fixtures)
from recording import attach_running, release_until_exit

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"
TARGET = r"""
import os, sys, time
go, stamp = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.01)
time.sleep(0.05)
fd = os.open(stamp, os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, str(time.monotonic_ns()).encode())
os.close(fd)
os._exit(0)
"""
MAX_LAG_NS = 20_000_000  # the recorder's poll period was 100 ms


def _attach_once(tmp_path, iowhy_bin, request, i: int) -> int:
    go, stamp = tmp_path / f"go{i}", tmp_path / f"stamp{i}"
    target = subprocess.Popen([PY, "-c", TARGET, str(go), str(stamp)])
    request.addfinalizer(lambda: (target.poll() is None and target.kill(), target.wait()))
    out = tmp_path / f"attach{i}.iowt"
    rec = attach_running(
        request, [*iowhy_bin, "attach", "-q", "-p", str(target.pid), "-o", str(out)], out)
    tr = release_until_exit(rec, target, go, out)
    exited = int(stamp.read_text())
    assert tr.end_ns >= exited
    return tr.end_ns - exited


def test_attach_window_ends_at_the_target_exit(bpf, tmp_path, iowhy_bin, request):
    lags = [_attach_once(tmp_path, iowhy_bin, request, i) for i in range(3)]
    assert max(lags) <= MAX_LAG_NS, [f"{x / 1e6:.1f} ms" for x in lags]
