#!/usr/bin/env python3
"""How well `iowhy whatif` predicts the lab's scenarios (printed, never asserted).

    .venv/bin/python bench/bench_whatif.py                     # every scenario, as root
    .venv/bin/python bench/bench_whatif.py --only wc-barrier --only fsync-tar --fs xfs
    .venv/bin/python bench/bench_whatif.py --reuse             # predict from the runs kept

Every lab scenario (lab/scenarios.py) is run on each of its filesystems on the emulated
hdd-7200 and on the emulated ssd (`iowhy lab run`, in-process: scenarios.run), --runs
times each, and kept in --out (default /var/tmp/iowhy-bench-whatif, run k in
run<k>/); --reuse predicts from what is there and runs only what is missing. Then each
hdd-7200 recording is replayed (whatif.predict) and the prediction compared with the
elapsed time of the real run of the same round:

  * --disk ssd, against the scenario run on the emulated ssd;
  * the write cache's settings the lab has as scenarios, on hdd-7200: wc-barrier
    --nobarrier against wc-nobarrier, wc-barrier --write-cache off against wc-off,
    wc-off --write-cache on against wc-barrier, fsync-tar --write-cache off against
    fsync-tar-wc-off, fsync-tar-wc-off --write-cache on against fsync-tar,
    fsync-bench --write-cache off against fsync-bench-off.

Printed per comparison: the recorded elapsed time, the replay of the recording against
its own fitted device (the model's error on the recording itself), the prediction, the
real run, the error, and the 1-minute load average when each of the two was recorded.
Then, per comparison, the median over the rounds (prediction against real run). The
machine is shared: every run's load average is printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# (recorded scenario, its disk, what if: (nobarrier, write cache, disk), real scenario,
#  real disk); "{same}" is the recorded scenario itself
SETTINGS = (
    ("wc-barrier", "--nobarrier", (True, None, None), "wc-nobarrier"),
    ("wc-barrier", "--write-cache off", (False, "off", None), "wc-off"),
    ("wc-off", "--write-cache on", (False, "on", None), "wc-barrier"),
    ("fsync-tar", "--write-cache off", (False, "off", None), "fsync-tar-wc-off"),
    ("fsync-tar-wc-off", "--write-cache on", (False, "on", None), "fsync-tar"),
    ("fsync-bench", "--write-cache off", (False, "off", None), "fsync-bench-off"),
)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_id(name: str, fs: str, disk: str) -> str:
    return f"{name}-{fs}-{disk}"


def ensure_run(out: Path, name: str, fs: str, disk: str, reuse: bool) -> dict[str, Any] | None:
    """The run's .run.json (made now unless --reuse finds it), with the load average
    before it started; None when it failed."""
    from iowhy.lab import scenarios
    rj = out / f"{run_id(name, fs, disk)}.run.json"
    if reuse and rj.exists():
        return json.loads(rj.read_text())
    la = load()
    t0 = time.monotonic()
    try:
        r = scenarios.run(name, fs, disk, out_dir=out, workdir="/var/tmp/iowhy-bench-whatif-work")
    except (scenarios.LabError, OSError, RuntimeError) as e:
        # (an emulated disk that could not be torn down is an EmulatedDiskError, a
        # RuntimeError: the run's own cleanup has undone the rest)
        print(f"  {run_id(name, fs, disk)}: FAILED: {e}", flush=True)
        return None
    r["bench_load"] = la
    rj.write_text(json.dumps(r, indent=2) + "\n")
    print(f"  {run_id(name, fs, disk)}: {r['elapsed_ns'] / 1e6:,.0f} ms "
          f"(load {la:.2f}, {time.monotonic() - t0:.0f} s)", flush=True)
    return r


Comparison = tuple[str, str, str, tuple, str, str]


def comparisons(names: list[str], fs_only: str | None) -> list[Comparison]:
    """(recorded, fs, what-if words, (nobarrier, cache, disk), real, real disk)"""
    from iowhy.lab import scenarios
    out = []
    for name in names:
        s = scenarios.SCENARIOS[name]
        for fs in s.filesystems:
            if fs_only and fs != fs_only:
                continue
            out.append((name, fs, "--disk ssd", (False, None, "ssd"), name, "ssd"))
            for src, words, sc, dst in SETTINGS:
                if src == name and fs in scenarios.SCENARIOS[dst].filesystems:
                    out.append((name, fs, words, sc, dst, "hdd-7200"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/var/tmp/iowhy-bench-whatif")
    ap.add_argument("--runs", type=int, default=1, help="rounds of every run (default 1)")
    ap.add_argument("--only", action="append", help="a scenario (repeatable; default all)")
    ap.add_argument("--fs", choices=("ext4", "xfs", "btrfs"))
    ap.add_argument("--reuse", action="store_true", help="predict from the runs kept in --out")
    args = ap.parse_args()
    # the installed iowhy (`make all`'s .venv): iowhy.lab is installed from lab/
    from iowhy.lab import scenarios
    from iowhy.traceformat import read_trace
    from iowhy.whatif.predict import Scenario, WhatifError, predict, prepare
    names = args.only or list(scenarios.SCENARIOS)
    for n in names:
        if n not in scenarios.SCENARIOS:
            ap.error(f"unknown scenario {n}")
    git = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h %s"],
                         capture_output=True, text=True).stdout.strip()
    print(f"# bench_whatif.py: {git}; Linux {platform.release()}, "
          f"{os.cpu_count()} CPUs; load {Path('/proc/loadavg').read_text().strip()}")
    comps = comparisons(names, args.fs)
    needed = sorted({(c[0], c[1], "hdd-7200") for c in comps}
                    | {(c[4], c[1], c[5]) for c in comps})
    t_start = time.monotonic()
    for k in range(1, args.runs + 1):
        out = Path(args.out) / f"run{k}"
        out.mkdir(parents=True, exist_ok=True)
        print(f"# round {k}: {len(needed)} runs into {out}", flush=True)
        for name, fs, disk in needed:
            ensure_run(out, name, fs, disk, args.reuse)
    print(f"# runs done in {time.monotonic() - t_start:.0f} s; load "
          f"{Path('/proc/loadavg').read_text().strip()}", flush=True)
    hdr = (f"{'scenario':<17}{'fs':<6}{'what if':<19}{'real run':<27}{'round':>5}"
           f"{'recorded ms':>12}{'replayed ms':>12}{'predicted ms':>13}{'real ms':>10}"
           f"{'error':>9}{'load':>11}")
    print(hdr)
    per: dict[tuple, list[tuple[int, int]]] = {}
    cache: dict[str, Any] = {}
    for src, fs, words, sc, dst, ddisk in comps:
        for k in range(1, args.runs + 1):
            out = Path(args.out) / f"run{k}"
            a = out / f"{run_id(src, fs, 'hdd-7200')}.run.json"
            b = out / f"{run_id(dst, fs, ddisk)}.run.json"
            if not (a.exists() and b.exists()):
                continue
            ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
            trace = ra["files"]["trace"]
            try:
                if trace not in cache:
                    tr = read_trace(trace)
                    cache.clear()
                    cache[trace] = (tr, prepare(tr))
                tr, prep = cache[trace]
                res = predict(tr, Scenario(nobarrier=sc[0], write_cache=sc[1], disk=sc[2]),
                              prep)
            except WhatifError as e:
                print(f"{src:<17}{fs:<6}{words:<19}{run_id(dst, fs, ddisk):<27}{k:>5}  "
                      f"not predicted: {e}")
                continue
            p, m = res["predicted_elapsed_ns"], rb["elapsed_ns"]
            per.setdefault((src, fs, words, dst, ddisk), []).append((p, m))
            print(f"{src:<17}{fs:<6}{words:<19}{run_id(dst, fs, ddisk):<27}{k:>5}"
                  f"{res['measured_elapsed_ns'] / 1e6:>12,.0f}"
                  f"{res['baseline_elapsed_ns'] / 1e6:>12,.0f}{p / 1e6:>13,.0f}"
                  f"{m / 1e6:>10,.0f}{100 * (p - m) / m:>+8.1f}%"
                  f"{ra.get('bench_load', 0):>5.1f}/{rb.get('bench_load', 0):<5.1f}",
                  flush=True)
    if args.runs > 1:
        print("\n# medians over the rounds")
        for (src, fs, words, dst, ddisk), v in per.items():
            p = statistics.median(x for x, _ in v)
            m = statistics.median(y for _, y in v)
            print(f"{src:<17}{fs:<6}{words:<19}{run_id(dst, fs, ddisk):<27}{len(v):>5}"
                  f"{'':>24}{p / 1e6:>13,.0f}{m / 1e6:>10,.0f}{100 * (p - m) / m:>+8.1f}%")
    print("\n# as a table (medians over the rounds; each round's error)\n")
    print("| scenario | fs | what if | against | predicted ms | real ms | error | "
          "each round |")
    print("|---|---|---|---|---|---|---|---|")
    for (src, fs, words, dst, ddisk), v in per.items():
        p = statistics.median(x for x, _ in v)
        m = statistics.median(y for _, y in v)
        rounds = ", ".join(f"{100 * (x - y) / y:+.0f}%" for x, y in v)
        print(f"| {src} | {fs} | `{words}` | {dst} on {ddisk} | {p / 1e6:,.0f} | "
              f"{m / 1e6:,.0f} | {100 * (p - m) / m:+.0f}% | {rounds} |")
    errs = [abs(p - m) / m for v in per.values() for p, m in v]
    if errs:
        print(f"\n# {len(errs)} comparisons: median |error| "
              f"{100 * statistics.median(errs):.1f}%, within 25%: "
              f"{sum(e <= 0.25 for e in errs)}")
    print(f"# load at the end {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
