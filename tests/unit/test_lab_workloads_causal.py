"""iowhy.lab.workloads_causal without a disk or a real sync: the command line (every
workload's arguments and defaults, every command the causal scenarios give it), the
benchmark's own accounting of its calls, the background writer stopping on SIGTERM, and
the CPU spin. fsync and fdatasync are replaced (each a short sleep, counted), and the
SIGTERM handler is called directly, not installed."""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import pytest

from clirun import Parsed

from iowhy.lab import scenarios, workloads_causal as wc

FUNCS = ("fsync_bench", "idle_thread", "write_fsync_loop")


@pytest.fixture
def parsed(monkeypatch) -> Parsed:
    """main() with every workload replaced by one that notes its arguments."""
    return Parsed(monkeypatch, wc, FUNCS)


def test_every_workload_and_its_defaults(parsed):
    assert parsed(["fsync-bench", "/d"]) == ("fsync_bench", {
        "name": "fsync-bench", "dir": "/d", "threads": 4, "seconds": 2.0, "bytes": 8192,
        "stats": None})
    assert parsed(["idle-thread", "/d", "--pidfile", "/p"]) == ("idle_thread", {
        "name": "idle-thread", "dir": "/d", "pidfile": "/p", "spin": 0.02, "seconds": 60.0})
    assert parsed(["write-fsync-loop", "/d", "--seconds", "0.5"]) == (
        "write_fsync_loop", {"name": "write-fsync-loop", "dir": "/d", "pidfile": None,
                             "seconds": 0.5, "bytes": 64 << 10})


@pytest.mark.parametrize("argv", [
    [], ["fsync-bench"], ["fsync-bench", "/d", "--threads", "x"], ["sleep", "/d"]])
def test_bad_arguments_exit_2_before_any_workload_runs(parsed, argv, capsys):
    with pytest.raises(SystemExit) as e:
        wc.main(argv)
    assert e.value.code == 2 and parsed.got == []
    assert capsys.readouterr().err.startswith("usage: ")


def test_every_command_the_causal_scenarios_give_it_parses(parsed):
    ctx = {"mnt": "/m", "tree": "/m/tree", "pidfile": "/p", "stats": "/s", "mnt_b": "/b",
           "upper": "/u"}
    seen = {}
    for s in scenarios.SCENARIOS.values():
        for tpl in (*s.setup, *s.measure, s.background):
            if tpl and tpl[0] == "workload-causal":
                argv = [a.format(**ctx, **s.params) for a in tpl[1:]]
                seen[s.name] = parsed(argv)[1]
    assert set(seen) == {"sleep-bg", "idle-thread", "fsync-bench", "fsync-bench-off"}
    bench = seen["fsync-bench"]
    assert (bench["threads"], bench["seconds"], bench["stats"]) == (
        scenarios.BENCH_THREADS, scenarios.BENCH_SECONDS, "/s")
    assert seen["idle-thread"]["pidfile"] == "/p"


class _Syncs:
    """A stand-in for fsync / fdatasync: sleeps 1 ms (no CPU), counts its calls."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()
        self.hook: Any = None

    def __call__(self, fd: int) -> None:
        time.sleep(0.001)
        with self.lock:
            self.n += 1
        if self.hook is not None:
            self.hook(self.n)


def test_fsync_bench_counts_its_own_calls(monkeypatch, tmp_path):
    syncs = _Syncs()
    monkeypatch.setattr(wc.os, "fdatasync", syncs)
    stats = tmp_path / "stats.json"
    a = argparse.Namespace(dir=str(tmp_path), threads=3, seconds=0.1, bytes=16,
                           stats=str(stats))
    assert wc.fsync_bench(a) == 0
    st = json.loads(stats.read_text())
    assert st["threads"] == 3 and st["calls"] == syncs.n > 0
    assert st["fdatasync_ns"] >= syncs.n * 1_000_000  # each call slept 1 ms
    assert st["thread_ns"] >= st["fdatasync_ns"] + st["write_ns"]
    sizes = sorted((tmp_path / f"bench{t}").stat().st_size for t in range(3))
    assert sum(sizes) == 16 * syncs.n  # one write of BYTES per call, each its own file


def test_fsync_bench_reports_a_thread_that_failed(monkeypatch, tmp_path, capsys):
    stats = tmp_path / "stats.json"
    a = argparse.Namespace(dir=str(tmp_path / "missing"), threads=2, seconds=0.0, bytes=16,
                           stats=str(stats))
    assert wc.fsync_bench(a) == 1
    assert capsys.readouterr().err.startswith("fsync-bench: [Errno 2]")
    assert not stats.exists()


def test_write_fsync_loop_stops_on_sigterm(monkeypatch, tmp_path):
    handlers: list[Any] = []
    monkeypatch.setattr(wc.signal, "signal", lambda sig, h: handlers.append((sig, h)))
    offsets: list[int] = []
    real_pwrite = wc.os.pwrite
    monkeypatch.setattr(wc.os, "pwrite",
                        lambda fd, b, off: offsets.append(off) or real_pwrite(fd, b, off))
    syncs = _Syncs()

    def sigterm_during_the_third(n: int) -> None:
        """What the signal would run; a fourth call means it was not heeded."""
        assert n <= 3, "kept writing after SIGTERM"
        if n == 3:
            handlers[0][1](wc.signal.SIGTERM, None)
    syncs.hook = sigterm_during_the_third
    monkeypatch.setattr(wc.os, "fsync", syncs)
    pid = tmp_path / "pid"
    a = argparse.Namespace(dir=str(tmp_path), pidfile=str(pid), seconds=600.0,
                           bytes=3 << 20)
    assert wc.write_fsync_loop(a) == 0
    assert [sig for sig, _ in handlers] == [wc.signal.SIGTERM]
    assert syncs.n == 3
    # 3 MiB at a time round a 4 MiB region: 0, 3 MiB, then 6 MiB wraps to 2 MiB
    assert offsets == [0, 3 << 20, 2 << 20]
    assert pid.read_text().strip().isdigit()


def test_spin_burns_its_own_cpu_time():
    t0 = time.thread_time()
    wc._spin(0.005)
    assert time.thread_time() - t0 >= 0.005
