#!/usr/bin/env python3
"""Workloads whose cause of waiting is known by construction (the causal scenarios of
lab/scenarios.py), runnable by name:

    python3 lab/workloads_causal.py NAME [ARGS...]

    fsync-bench DIR --threads N --seconds T    N threads, each write+fdatasync of its
                                               own file in a loop for T seconds (--stats:
                                               their own time in fdatasync, as JSON)
    idle-thread DIR --pidfile P                one thread blocked on a pipe read for
                                               ever, one thread alternating a fixed CPU
                                               spin with a write+fsync, the main thread
                                               joining it; until SIGTERM or --seconds
    write-fsync-loop DIR --seconds T           background writer: 64 KiB write + fsync
                                               in a loop (the I/O no workload waits on)

Each prints nothing on success and exits 0. Standard library only (runs with the system
python3, outside the venv).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def fsync_bench(a: argparse.Namespace) -> int:
    """pgbench-like: THREADS threads, each appending BYTES and fdatasyncing its own file
    in a loop until SECONDS have passed since the start."""
    end = time.monotonic() + a.seconds
    errors: list[BaseException] = []
    stats = {"threads": a.threads, "calls": 0, "fdatasync_ns": 0, "write_ns": 0,
             "thread_ns": 0}
    lock = threading.Lock()

    def worker(t: int) -> None:
        calls = f_ns = w_ns = 0
        t0 = time.monotonic_ns()
        try:
            fd = os.open(f"{a.dir}/bench{t}", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
            buf = b"b" * a.bytes
            while time.monotonic() < end:
                t1 = time.monotonic_ns()
                os.write(fd, buf)
                t2 = time.monotonic_ns()
                os.fdatasync(fd)
                t3 = time.monotonic_ns()
                calls += 1
                w_ns += t2 - t1
                f_ns += t3 - t2
            os.close(fd)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        with lock:
            stats["calls"] += calls
            stats["fdatasync_ns"] += f_ns
            stats["write_ns"] += w_ns
            stats["thread_ns"] += time.monotonic_ns() - t0

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(a.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        print(f"fsync-bench: {errors[0]}", file=sys.stderr)
        return 1
    if a.stats:
        Path(a.stats).write_text(json.dumps(stats) + "\n")
    return 0


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1


def idle_thread(a: argparse.Namespace) -> int:
    """Three threads: the main one joins the worker (futex); an idle one reads a pipe
    nobody writes to (blocked for ever); the worker spins SPIN seconds of its own CPU
    time, then writes 4 KiB and fsyncs, over and over, until SIGTERM or SECONDS. Its CPU
    share is the same over any window of a few cycles, so the CPU time the kernel
    charges the process around a recording window gives the share inside it."""
    rfd, wfd = os.pipe()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def idle() -> None:
        os.read(rfd, 1)       # never returns: nothing is ever written to wfd

    def worker() -> None:
        fd = os.open(f"{a.dir}/idle-worker", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        end = time.monotonic() + a.seconds
        while not stop.is_set() and time.monotonic() < end:
            _spin(a.spin)
            os.write(fd, b"w" * 4096)
            os.fsync(fd)
        os.close(fd)

    threading.Thread(target=idle, daemon=True).start()
    w = threading.Thread(target=worker)
    w.start()
    if a.pidfile:
        tmp = f"{a.pidfile}.tmp"
        Path(tmp).write_text(f"{os.getpid()}\n")
        os.rename(tmp, a.pidfile)
    w.join()
    return 0


def write_fsync_loop(a: argparse.Namespace) -> int:
    """Background I/O: BYTES written and fsynced in a loop until SIGTERM or SECONDS."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if a.pidfile:
        Path(a.pidfile).write_text(f"{os.getpid()}\n")
    fd = os.open(f"{a.dir}/background", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    end = time.monotonic() + a.seconds
    buf = b"g" * a.bytes
    i = 0
    while not stop.is_set() and time.monotonic() < end:
        # rewrite a 4 MiB region: steady writes, journal commits and cache flushes
        os.pwrite(fd, buf, (i * a.bytes) % (4 << 20))
        os.fsync(fd)
        i += 1
    os.close(fd)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="name", required=True)
    s = sub.add_parser("fsync-bench", help=fsync_bench.__doc__)
    s.add_argument("dir")
    s.add_argument("--threads", type=int, default=4)
    s.add_argument("--seconds", type=float, default=2.0)
    s.add_argument("--bytes", type=int, default=8192)
    s.add_argument("--stats", help="write the threads' own time in write and fdatasync "
                   "(monotonic clock, summed) here, as JSON")
    s.set_defaults(func=fsync_bench)
    s = sub.add_parser("idle-thread", help=idle_thread.__doc__)
    s.add_argument("dir")
    s.add_argument("--pidfile")
    s.add_argument("--spin", type=float, default=0.02)
    s.add_argument("--seconds", type=float, default=60.0)
    s.set_defaults(func=idle_thread)
    s = sub.add_parser("write-fsync-loop", help=write_fsync_loop.__doc__)
    s.add_argument("dir")
    s.add_argument("--pidfile")
    s.add_argument("--seconds", type=float, default=60.0)
    s.add_argument("--bytes", type=int, default=64 << 10)
    s.set_defaults(func=write_fsync_loop)
    a = p.parse_args(argv)
    return int(a.func(a))


if __name__ == "__main__":
    sys.exit(main())
