"""`iowhy attach --flight SECONDS`, the flight recorder, with real BPF: the window it
writes on SIGUSR1 is SECONDS long (+-10%), ends within 1 s of the signal and holds every
fsync the workload made in it (the workload's own clock readings around each call are
the independent count); a trigger on a slow fsync (the emulated disk with a slow cache
flush) fires once, and its dump holds that fsync. Every reading command reads a dump."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import run
from iowhy import abi
from iowhy.traceformat import read_trace
from recording import (FSYNC_LOOP, attach_flight, fsync_calls, interrupt, slow_flush_fs,
                       wait_for_file)

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"
WINDOW_S = 5


def _attach_flight(iowhy_bin, request, pid, out, *extra):
    """`iowhy attach --flight`, once it says it is recording."""
    return attach_flight(iowhy_bin, request, ["-p", str(pid)], out, *extra)


def _stop(rec, stopfile: Path, worker) -> str:
    """Ctrl-C to the flight recorder (it writes nothing more, unless a dump is pending or
    --dump-on-exit), then the workload ends."""
    err = interrupt(rec)
    stopfile.touch()
    assert worker.wait(timeout=60) == 0
    return err


def _reads(iowhy_bin, path: Path, tmp_path: Path) -> None:
    """Every reading command reads the dump and says first that it is one."""
    for cmd in (["info"], ["info", "--json"], ["report"], ["report", "--json"],
                ["hist", "--metric", "fsync"], ["requests"], ["requests", "--json"],
                ["export", "--format", "chrome-json", "-o", str(tmp_path / "x.json")]):
        p = run([*iowhy_bin, cmd[0], str(path), *cmd[1:]], check=False)
        assert p.returncode == 0, (cmd, p.stderr)
        if cmd[-1] != "--json" or cmd[0] == "report":
            assert "flight recorder dump" in p.stdout + p.stderr, (cmd, p.stdout[:300])


def test_sigusr1_writes_the_last_seconds(bpf, make_fs, tmp_path, iowhy_bin, request):
    _, mnt = make_fs("ext4", 256)
    stop, log = tmp_path / "stop", tmp_path / "calls"
    w = subprocess.Popen([PY, "-c", FSYNC_LOOP, str(mnt / "f"), str(stop), str(log), "0.01"])
    request.addfinalizer(lambda: (stop.touch(), w.poll() is None and w.kill(), w.wait()))
    out = tmp_path / "fl.iowt"
    rec = _attach_flight(iowhy_bin, request, w.pid, out, "--flight", str(WINDOW_S),
                         "--after", "0")
    time.sleep(WINDOW_S + 2)
    t_sig = time.monotonic_ns()
    rec.send_signal(signal.SIGUSR1)  # to iowhy, which passes it on
    wait_for_file(out)
    err = _stop(rec, stop, w)
    assert not (tmp_path / "fl.1.iowt").exists(), err

    tr = read_trace(str(out))
    assert not tr.damage.damaged, tr.damage.summary()
    fl = tr.trailer["flight"]
    assert fl["trigger"] == "SIGUSR1" and fl["window_ns"] == WINDOW_S * 10**9, fl
    assert fl["dropped_chunks"] == 0 and fl["dump"] == 1
    assert 0 <= fl["trigger_ns"] - t_sig < 10**9
    span = tr.end_ns - tr.start_ns
    assert abs(span - WINDOW_S * 10**9) <= WINDOW_S * 10**8, span  # +-10%
    assert 0 <= tr.end_ns - t_sig <= 10**9, tr.end_ns - t_sig
    # every fsync the workload made inside the window is in it, as its own clock says
    calls = fsync_calls(log)
    inside = calls[(calls[:, 0] >= tr.start_ns) & (calls[:, 1] <= tr.end_ns - 200_000_000)]
    assert len(inside) >= 50, len(inside)
    fs = tr.records("fsync")
    fs = fs[(fs["tgid"] == w.pid) & (fs["call_u16"] == abi.CALL_FSYNC)]
    enter, exit_ = fs["enter_ns"].astype(np.int64), fs["exit_ns"].astype(np.int64)
    missing = [(a, b) for a, b in inside
               if not np.any((enter >= a) & (enter <= b) & (exit_ <= b) & (exit_ >= enter))]
    assert not missing, f"{len(missing)} of {len(inside)} fsyncs not in the window"
    # and nothing that ended long before the window (chunks are kept whole: <= ~1 s)
    assert int(fs["exit_ns"].min()) >= tr.start_ns - 2 * 10**9
    _reads(iowhy_bin, out, tmp_path)
    info = json.loads(run([*iowhy_bin, "info", "--json", str(out)]).stdout)
    assert info["flight"] == fl and info["stop_reason"] == "flight-dump"


def test_sigint_with_dump_on_exit_writes_the_last_seconds(bpf, make_fs, tmp_path, iowhy_bin,
                                                          request):
    """--dump-on-exit: Ctrl-C writes the window up to the stop (SECONDS +-10%, ending
    within 1 s of the signal) with every fsync the workload made in it, then exits."""
    _, mnt = make_fs("ext4", 256)
    stop, log = tmp_path / "stop", tmp_path / "calls"
    w = subprocess.Popen([PY, "-c", FSYNC_LOOP, str(mnt / "f"), str(stop), str(log), "0.01"])
    request.addfinalizer(lambda: (stop.touch(), w.poll() is None and w.kill(), w.wait()))
    out = tmp_path / "ex.iowt"
    rec = _attach_flight(iowhy_bin, request, w.pid, out, "--flight", str(WINDOW_S),
                         "--dump-on-exit")
    time.sleep(WINDOW_S + 2)
    assert not out.exists()  # nothing fired
    t_sig = time.monotonic_ns()
    err = _stop(rec, stop, w)
    assert "flight: wrote" in err and "1 dump(s) written, 0 trigger(s) fired" in err, err
    assert not (tmp_path / "ex.1.iowt").exists(), err

    tr = read_trace(str(out))
    assert not tr.damage.damaged, tr.damage.summary()
    fl = tr.trailer["flight"]
    assert fl["trigger"] == "stop (SIGINT)" and fl["dump"] == 1, fl
    assert 0 <= fl["trigger_ns"] - t_sig < 10**9
    assert abs(tr.end_ns - tr.start_ns - WINDOW_S * 10**9) <= WINDOW_S * 10**8  # +-10%
    assert 0 <= tr.end_ns - t_sig <= 10**9, tr.end_ns - t_sig
    # every fsync the workload made in the window, up to the signal, is in it
    calls = fsync_calls(log)
    inside = calls[(calls[:, 0] >= tr.start_ns) & (calls[:, 1] <= t_sig)]
    assert len(inside) >= 50, len(inside)
    fs = tr.records("fsync")
    fs = fs[(fs["tgid"] == w.pid) & (fs["call_u16"] == abi.CALL_FSYNC)]
    enter, exit_ = fs["enter_ns"].astype(np.int64), fs["exit_ns"].astype(np.int64)
    missing = [(a, b) for a, b in inside
               if not np.any((enter >= a) & (enter <= b) & (exit_ <= b) & (exit_ >= enter))]
    assert not missing, (f"{len(missing)} of {len(inside)} fsyncs not in the window: "
                         f"(from its start, before the signal) ns "
                         f"{[(int(a - tr.start_ns), int(t_sig - b)) for a, b in missing]}")
    _reads(iowhy_bin, out, tmp_path)


def test_a_dump_pending_at_stop_is_written(bpf, make_fs, tmp_path, iowhy_bin, request):
    """SIGUSR1 with --after 30, then Ctrl-C a second later: the dump is written at the
    stop (its --after cut short), not lost; without --dump-on-exit, nothing more."""
    _, mnt = make_fs("ext4", 256)
    stop, log = tmp_path / "stop", tmp_path / "calls"
    w = subprocess.Popen([PY, "-c", FSYNC_LOOP, str(mnt / "f"), str(stop), str(log), "0.01"])
    request.addfinalizer(lambda: (stop.touch(), w.poll() is None and w.kill(), w.wait()))
    out = tmp_path / "pe.iowt"
    rec = _attach_flight(iowhy_bin, request, w.pid, out, "--flight", "3", "--after", "30")
    time.sleep(4)
    t_usr1 = time.monotonic_ns()
    rec.send_signal(signal.SIGUSR1)
    time.sleep(1)
    assert not out.exists()
    t_sig = time.monotonic_ns()
    err = _stop(rec, stop, w)
    assert "writing it now" in err and "1 dump(s) written" in err, err
    assert not (tmp_path / "pe.1.iowt").exists(), err
    tr = read_trace(str(out))
    assert not tr.damage.damaged, tr.damage.summary()
    fl = tr.trailer["flight"]
    assert fl["trigger"] == "SIGUSR1" and 0 <= fl["trigger_ns"] - t_usr1 < 10**9, fl
    assert 0 <= tr.end_ns - t_sig <= 10**9, tr.end_ns - t_sig
    assert int(tr.records("fsync")["exit_ns"].max()) > fl["trigger_ns"]  # the second after


@pytest.mark.lab
def test_a_slow_fsync_fires_once_and_is_in_the_dump(bpf, tmp_path, iowhy_bin, request):
    """The emulated disk charges 400 ms for every cache flush: the workload's fsyncs on
    ext4 take longer than the trigger's 200 ms; it makes fast writes for 2 s, one fsync,
    and then only fast writes again. The trigger fires once (no second dump, nothing
    pending joined it), and the dump holds that fsync."""
    _, mnt = slow_flush_fs(tmp_path, request, 400_000_000)
    go, stop, log = tmp_path / "go", tmp_path / "stop", tmp_path / "calls"
    one = r"""
import os, sys, time
path, go, stop, log = sys.argv[1:5]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
while not os.path.exists(go):
    os.write(fd, b"x" * 4096); time.sleep(0.01)
t0 = time.monotonic_ns(); os.fsync(fd); t1 = time.monotonic_ns()
while not os.path.exists(stop):
    os.write(fd, b"x" * 4096); time.sleep(0.01)
open(log, "w").write(f"{t0} {t1}\n")
"""
    w = subprocess.Popen([PY, "-c", one, str(mnt / "f"), str(go), str(stop), str(log)])
    request.addfinalizer(lambda: (stop.touch(), w.poll() is None and w.kill(), w.wait()))
    out = tmp_path / "tr.iowt"
    rec = _attach_flight(iowhy_bin, request, w.pid, out, "--flight", "3", "--after", "0.5",
                         "--trigger", "fsync>200ms")
    time.sleep(2)
    go.touch()
    wait_for_file(out)
    time.sleep(3)  # another dump would be written by now
    err = _stop(rec, stop, w)
    assert not (tmp_path / "tr.1.iowt").exists(), err
    (t0, t1), = fsync_calls(log)
    assert t1 - t0 > 200_000_000, (t1 - t0) / 1e6  # by the workload's clock

    tr = read_trace(str(out))
    assert not tr.damage.damaged, tr.damage.summary()
    fl = tr.trailer["flight"]
    assert fl["trigger"] == "fsync>200ms" and fl["triggers_during"] == 0, fl
    fs = tr.records("fsync")
    slow = fs[(fs["tgid"] == w.pid) & (fs["enter_ns"] >= t0) & (fs["exit_ns"] <= t1)]
    assert len(slow) == 1, fs
    assert int(slow["exit_ns"][0] - slow["enter_ns"][0]) > 200_000_000
    assert fl["trigger_ns"] == int(slow["exit_ns"][0])
    assert tr.start_ns <= int(slow["enter_ns"][0]) and int(slow["exit_ns"][0]) <= tr.end_ns
    assert "1 trigger(s) fired" in err, err
    _reads(iowhy_bin, out, tmp_path)


def test_chunks_dropped_for_the_bound_are_counted_first(bpf, make_fs, tmp_path, iowhy_bin,
                                                        request, monkeypatch):
    """With the bound lowered to 1 MiB (IOWHY_FLIGHT_MAX_MIB, for tests), 4 KiB direct
    writes fill it within the window: the dump counts the chunks dropped, says so on the
    first line of every output, and starts after them."""
    _, mnt = make_fs("ext4", 256)
    monkeypatch.setenv("IOWHY_FLIGHT_MAX_MIB", "1")
    dd = subprocess.Popen(["sh", "-c", f"while :; do dd if=/dev/zero of={mnt / 'f'} bs=4k "
                           "count=4096 oflag=direct conv=notrunc status=none; done"])
    request.addfinalizer(lambda: (dd.poll() is None and dd.kill(), dd.wait()))
    out = tmp_path / "b.iowt"
    rec = _attach_flight(iowhy_bin, request, dd.pid, out, "--flight", "20", "--after", "0")
    time.sleep(12)
    rec.send_signal(signal.SIGUSR1)
    wait_for_file(out)
    rec.send_signal(signal.SIGINT)
    rec.communicate(timeout=60)
    tr = read_trace(str(out))
    fl = tr.trailer["flight"]
    assert fl["bound_bytes"] == 1 << 20 and fl["dropped_chunks"] > 0, fl
    assert tr.start_ns > fl["trigger_ns"] - fl["window_ns"], (tr.start_ns, fl)
    assert tr.count("request") > 1000
    for cmd in (["hist", "--metric", "device"], ["requests"]):
        first = run([*iowhy_bin, cmd[0], str(out), *cmd[1:]]).stdout.splitlines()[0]
        assert "flight recorder dump 1" in first and "dropped" in first, first
