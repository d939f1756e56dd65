#!/usr/bin/env python3
"""What `iowhy top` costs beside a 4 KiB append+fsync loop, in CPU (target: at most 2% of
one CPU) and in the loop's own rate; with --flight SEC, what the flight recorder
(`iowhy attach --flight SEC`) costs the same way, and the recorder's memory.

    .venv/bin/python bench/bench_top.py [--pairs 3] [--seconds 10] [--flight SEC]  # as root

Each pair runs the loop --seconds on a fresh ext4 on a loop device over a sparse file in
--workdir twice, once alone and once with `iowhy top -p LOOP -i 1 --json` beside it, in
an order drawn per pair (--seed); top is measured from its first snapshot on (its startup,
loading the probes, is a one-off). The loop counts its own fsyncs. For the run with top:

  * top's processes: the on-CPU time (/proc/PID/task/*/schedstat, ns) of the recorder
    and of the Python `iowhy top` that renders, over the loop's wall time;
  * the probes: the run time the kernel measured for every BPF program of that recorder
    (`bpftool prog show`, run_time_ns, with kernel.bpf_stats_enabled=1 for the run; the
    statistics' own two clock reads per run are in it), over the same wall time. That
    time is spent in the context of the tasks that hit the tracepoints: the loop, its
    kworkers, interrupts, and every other task on the machine (each context switch and
    block request runs a program): an upper bound on a busy machine. So the same is
    measured again for --seconds once the loop is over (top still attached, its target
    asleep): the machine's own share, printed beside, and the difference.

Their sum over the wall time is the share of one CPU top costs, printed split into the
probes, the recorder and the Python process, with the probes' run time per fsync and
the load average at the start of each pair; --programs adds each program's runs per
fsync and time per run. The loop's fsync rate with top over its rate alone (paired) is
printed too. --workdir /dev/shm puts the loop device's file in memory: the loop then
runs several times faster; --rate N paces it to at most N fsyncs a second, so that runs
compare at one rate. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IOWHY = [str(REPO / ".venv" / "bin" / "iowhy")]
LOOP = r"""
import os, sys, time
path, seconds, rate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
n, end = 0, time.monotonic() + seconds
t0 = time.monotonic()
while time.monotonic() < end:
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    n += 1
    if rate:  # at most `rate` fsyncs a second: sleep once 1 ms ahead
        ahead = t0 + n / rate - time.monotonic()
        if ahead > 0.001:
            time.sleep(ahead)
print(n, time.monotonic() - t0)
"""


def cpu_s(pid: int) -> float:
    """On-CPU time of every thread of a process, in seconds (/proc/PID/task/*/schedstat,
    ns; 0 once it is gone)."""
    total = 0
    for t in Path(f"/proc/{pid}/task").glob("*") if Path(f"/proc/{pid}/task").exists() else []:
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def prog_ids(pid: int) -> set[int]:
    """The BPF programs a process holds open (fdinfo's prog_id)."""
    ids = set()
    d = Path(f"/proc/{pid}/fdinfo")
    for f in d.iterdir() if d.exists() else []:
        try:
            for line in f.read_text().splitlines():
                if line.startswith("prog_id:"):
                    ids.add(int(line.split()[1]))
        except (OSError, ValueError):
            continue
    return ids


def bpf_runs(ids: set[int]) -> dict[str, tuple[int, int]]:
    """Per program of those (by name): (runs, run time in ns) so far
    (kernel.bpf_stats_enabled)."""
    p = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    out: dict[str, tuple[int, int]] = {}
    for prog in json.loads(p.stdout or "[]"):
        if int(prog.get("id", -1)) in ids:
            name = f"{prog.get('name', '?')}#{prog['id']}"
            out[name] = (int(prog.get("run_cnt", 0)), int(prog.get("run_time_ns", 0)))
    return out


def runs_delta(a: dict[str, tuple[int, int]],
               b: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {k: (v[0] - a.get(k, (0, 0))[0], v[1] - a.get(k, (0, 0))[1]) for k, v in b.items()}


def bpf_run_ns(runs: dict[str, tuple[int, int]]) -> int:
    return sum(ns for _, ns in runs.values())


class Fs:
    def __init__(self, workdir: Path):
        self.dir = Path(tempfile.mkdtemp(dir=workdir, prefix="bench-top-"))
        img = self.dir / "img"
        with open(img, "wb") as f:
            f.truncate(512 << 20)
        self.dev = subprocess.run(["losetup", "-f", "--show", str(img)], check=True,
                                  capture_output=True, text=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                        self.dev], check=True)
        self.mnt = self.dir / "mnt"
        self.mnt.mkdir()
        subprocess.run(["mount", self.dev, str(self.mnt)], check=True)

    def close(self) -> None:
        subprocess.run(["umount", str(self.mnt)], check=False)
        subprocess.run(["losetup", "-d", self.dev], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def vm_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def one(workdir: Path, seconds: float, with_top: bool, flight: float = 0,
        rate: float = 0) -> dict:
    """The loop alone, or beside top (or, with `flight`, beside `iowhy attach --flight`):
    it is started first on a process that then runs the loop (a shell that waits for a go
    file), and measured once it is ready (its first snapshot; the flight recorder's line
    saying it records): its startup, loading the probes, is not what it costs while it
    runs."""
    fs = Fs(workdir)
    go = fs.dir / "go"
    try:
        subprocess.run(["sync"], check=True)
        done, result = fs.dir / "done", fs.dir / "result"
        # the shell outlives the loop, so that what follows it is still attached when the
        # loop ends and is measured then
        loop = subprocess.Popen(["sh", "-c", f'while [ ! -e "{go}" ]; do sleep 0.05; done; '
                                 f'{sys.executable} -c \'{LOOP}\' {fs.mnt / "f"} {seconds} {rate} '
                                 f'> {result}; touch {done}; exec sleep 600'])
        out: dict = {}
        if with_top and flight:
            top = subprocess.Popen([*IOWHY, "attach", "-p", str(loop.pid), "--flight",
                                    str(flight), "-o", str(fs.dir / "fl.iowt")],
                                   stderr=subprocess.PIPE, text=True)
            assert top.stderr is not None
            while "flight: recording" not in top.stderr.readline():
                pass
            rec = children(top.pid)[0]
        elif with_top:
            top = subprocess.Popen([*IOWHY, "top", "-p", str(loop.pid), "-i", "1", "--json"],
                                   stdout=subprocess.PIPE, text=True)
            assert top.stdout is not None
            top.stdout.readline()  # the first snapshot: every probe attached
            rec = children(top.pid)[0]
        if with_top:
            ids = prog_ids(rec)
            py0, rec0, runs0 = cpu_s(top.pid), cpu_s(rec), bpf_runs(ids)
        go.touch()
        while not done.exists():
            time.sleep(0.02)
        n_wall = result.read_text().split()
        if with_top:
            out["py_cpu_s"], out["rec_cpu_s"] = cpu_s(top.pid) - py0, cpu_s(rec) - rec0
            out["top_cpu_s"] = out["py_cpu_s"] + out["rec_cpu_s"]
            out["runs"] = runs_delta(runs0, bpf_runs(ids))
            out["bpf_s"] = bpf_run_ns(out["runs"]) / 1e9
            out["programs"] = len(ids)
            out["rss_kib"], out["hwm_kib"] = vm_kib(rec, "VmRSS"), vm_kib(rec, "VmHWM")
            # the same span again with the loop over (its shell asleep, still followed):
            # what the probes cost for the rest of the machine
            cpu1, runs1, t1 = cpu_s(top.pid) + cpu_s(rec), bpf_runs(ids), time.monotonic()
            time.sleep(seconds)
            out["idle_s"] = time.monotonic() - t1
            out["idle_cpu_s"] = (cpu_s(top.pid) + cpu_s(rec) - cpu1
                                 + bpf_run_ns(runs_delta(runs1, bpf_runs(ids))) / 1e9)
            top.send_signal(2)
            top.communicate()
        loop.kill()
        loop.wait()
        out["fsyncs"], out["wall_s"] = int(n_wall[0]), float(n_wall[1])
        return out
    finally:
        fs.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default="/var/tmp")
    ap.add_argument("--flight", type=float, default=0, metavar="SEC",
                    help="measure `iowhy attach --flight SEC` instead of top")
    ap.add_argument("--rate", type=float, default=0, metavar="N",
                    help="pace the loop to at most N fsyncs a second (0: as fast as it goes)")
    ap.add_argument("--programs", action="store_true",
                    help="print each BPF program's runs per fsync and time per run")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_top: needs root", file=sys.stderr)
        return 1
    stats = Path("/proc/sys/kernel/bpf_stats_enabled")
    before = stats.read_text().strip()
    stats.write_text("1")
    what = f"attach --flight {args.flight:g}" if args.flight else "top"
    rng = random.Random(args.seed)
    rows = []
    try:
        for i in range(args.pairs):
            order = [False, True]
            rng.shuffle(order)
            load = Path("/proc/loadavg").read_text().split()[0]
            res = {w: one(Path(args.workdir), args.seconds, w, args.flight, args.rate)
                   for w in order}
            alone, top = res[False], res[True]
            wall = top["wall_s"]
            share = (top["top_cpu_s"] + top["bpf_s"]) / wall
            idle = top["idle_cpu_s"] / top["idle_s"]
            ratio = (top["fsyncs"] / wall) / (alone["fsyncs"] / alone["wall_s"])
            split = (top["bpf_s"] / wall, top["rec_cpu_s"] / wall, top["py_cpu_s"] / wall)
            rows.append((share, ratio, share - idle, *split, top["fsyncs"] / wall))
            print(f"pair {i + 1} (load average {load}): alone "
                  f"{alone['fsyncs'] / alone['wall_s']:.0f} fsync/s, "
                  f"with {what} {top['fsyncs'] / wall:.0f} fsync/s "
                  f"(ratio {ratio:.3f}); probes {top['bpf_s'] * 1e3:.0f} ms, recorder "
                  f"{top['rec_cpu_s'] * 1e3:.1f} ms, python "
                  f"{top['py_cpu_s'] * 1e3:.1f} ms CPU over {wall:.1f} s: "
                  f"{100 * share:.2f}% of one CPU (probes {100 * split[0]:.2f}%, recorder "
                  f"{100 * split[1]:.2f}%, python {100 * split[2]:.2f}%; "
                  f"{top['programs']} programs, "
                  f"{top['bpf_s'] * 1e6 / max(top['fsyncs'], 1):.1f} us of probes per fsync), "
                  f"{100 * idle:.2f}% once the loop is over; "
                  f"recorder RSS {top['rss_kib'] >> 10} MiB, "
                  f"peak {top['hwm_kib'] >> 10} MiB", flush=True)
            if args.programs:
                for name, (n, ns) in sorted(top["runs"].items(), key=lambda kv: -kv[1][1]):
                    if n:
                        print(f"    {name:<24} {n / max(top['fsyncs'], 1):8.2f} runs/fsync "
                              f"{ns / max(n, 1):7.0f} ns/run  {ns / 1e6:8.1f} ms")
    finally:
        stats.write_text(before)

    def med(k: int) -> str:
        v = sorted(r[k] for r in rows)
        return (f"median {100 * v[len(v) // 2]:.2f}% (min {100 * v[0]:.2f}%, "
                f"max {100 * v[-1]:.2f}%)")

    rates = sorted(r[6] for r in rows)
    print(f"{what}: share of one CPU: {med(0)}, target <= 2%, at {rates[0]:.0f}-{rates[-1]:.0f} "
          f"fsync/s")
    print(f"  probes {med(3)}; recorder {med(4)}; python {med(5)}")
    print(f"{what}: the same minus its share once the loop is over (the rest of the "
          f"machine's events): {med(2)}")
    ratios = sorted(r[1] for r in rows)
    print(f"loop rate with {what} / alone: median {ratios[len(ratios) // 2]:.3f} "
          f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
